"""The cycle collector is off while emopipe's processes import their libraries, and what they made is frozen after
(emopipe._heap). Each check runs in a fresh interpreter: the block acts once a process and freezes its heap."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _python(code: str, cwd: Path | None = None) -> dict:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300,
                          cwd=cwd or REPO)
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_off_while_importing_then_the_imports_frozen():
    seen = _python("""
import gc, json
from emopipe._heap import imports_uncollected
before = gc.get_freeze_count()
with imports_uncollected():
    inside = gc.isenabled()
    import fractions, decimal, email.parser  # (modules nothing here imported yet)
after = gc.get_freeze_count()
on_after = gc.isenabled()
with imports_uncollected():  # once a process: a second block changes nothing
    inside_again = gc.isenabled()
    import statistics
print(json.dumps({"before": before, "inside": inside, "after": after, "on_after": on_after,
                  "inside_again": inside_again, "after_again": gc.get_freeze_count()}))
""")
    # (before: what the interpreter's start froze, if anything — 375 objects on the GPU hosts, 0 here)
    assert seen["inside"] is False
    assert seen["after"] > seen["before"] + 1000 and seen["on_after"] is True  # (the interpreter's and the imports')
    assert seen["inside_again"] is True and seen["after_again"] == seen["after"]


def test_a_collector_switched_off_stays_off_and_nothing_is_frozen():
    seen = _python("""
import gc, json
gc.disable()
before = gc.get_freeze_count()
from emopipe._heap import imports_uncollected
with imports_uncollected():
    import fractions
print(json.dumps({"enabled": gc.isenabled(), "newly_frozen": gc.get_freeze_count() - before}))
""")
    assert seen == {"enabled": False, "newly_frozen": 0}


def test_the_command_imports_its_run_so(tmp_path):
    """``emopipe clip.mp4`` (here main() on a file that is no video: it fails once the run's modules are imported,
    as it opens the source): the collector is on again after, with PyTorch's objects frozen."""
    (tmp_path / "clip.mp4").write_bytes(b"not a video at all" * 100)
    seen = _python(f"""
import gc, json, sys
before = gc.get_freeze_count()
from emopipe.cli.app import main
code = main([{str(tmp_path / "clip.mp4")!r}, "--device", "cpu", "--no-progress", "-o", {str(tmp_path / "rows.csv")!r}])
print(json.dumps({{"code": code, "torch": "torch" in sys.modules, "enabled": gc.isenabled(),
                  "newly_frozen": gc.get_freeze_count() - before}}))
""", cwd=tmp_path)
    assert seen["code"] != 0 and seen["torch"] is True and seen["enabled"] is True
    assert seen["newly_frozen"] > 100_000  # PyTorch's modules, functions and classes among them
