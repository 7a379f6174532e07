"""The command keeps Python's compiled modules in its cache where the environment keeps none (emopipe.cli.bytecode)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from emopipe.cli import bytecode

REPO = Path(__file__).resolve().parents[1]


def _package(root: Path, name: str = "probepkg") -> Path:
    """A package with no compiled bytecode beside it."""
    package = root / name
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("VALUE = 41 + 1\n")
    return package / "__init__.py"


@pytest.fixture
def interpreter(monkeypatch: pytest.MonkeyPatch) -> None:
    """keep_bytecode changes the interpreter's settings and the environment: each test gets them back."""
    monkeypatch.setattr(sys, "pycache_prefix", None)
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    monkeypatch.delenv("PYTHONPYCACHEPREFIX", raising=False)
    monkeypatch.delenv("EMOPIPE_BYTECODE_CACHE", raising=False)


def test_kept_in_the_cache_where_the_probe_has_none(tmp_path, monkeypatch, interpreter):
    _package(tmp_path / "site")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.setattr(bytecode, "PROBE", "probepkg")
    said = bytecode.keep_bytecode(tmp_path / "cache" / "python")
    assert said.startswith(f"kept in {tmp_path / 'cache' / 'python'}")
    assert sys.pycache_prefix == str(tmp_path / "cache" / "python") and sys.dont_write_bytecode is False
    # the processes it starts (--processes workers, a local Ray's) are told through their environment
    assert os.environ["PYTHONPYCACHEPREFIX"] == str(tmp_path / "cache" / "python")
    assert "PYTHONDONTWRITEBYTECODE" not in os.environ


def test_nothing_done_where_the_bytecode_was_compiled_at_install(tmp_path, monkeypatch, interpreter):
    source = _package(tmp_path / "site")
    compiled = Path(importlib.util.cache_from_source(str(source)))
    compiled.parent.mkdir()
    compiled.write_bytes(b"")  # (only its presence is looked at)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.setattr(bytecode, "PROBE", "probepkg")
    said = bytecode.keep_bytecode(tmp_path / "cache")
    assert "beside the sources" in said
    assert sys.pycache_prefix is None and sys.dont_write_bytecode is True
    assert os.environ["PYTHONDONTWRITEBYTECODE"] == "1" and not (tmp_path / "cache").exists()


@pytest.mark.parametrize("case", ["off", "own prefix", "imported already", "cannot be made"])
def test_left_alone(case, tmp_path, monkeypatch, interpreter):
    _package(tmp_path / "site")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.setattr(bytecode, "PROBE", "probepkg")
    directory = tmp_path / "cache"
    if case == "off":
        monkeypatch.setenv("EMOPIPE_BYTECODE_CACHE", "0")
    elif case == "own prefix":
        monkeypatch.setattr(sys, "pycache_prefix", str(tmp_path / "yours"))
    elif case == "imported already":
        monkeypatch.setitem(sys.modules, "probepkg", object())
    else:
        (tmp_path / "a-file").write_text("")
        directory = tmp_path / "a-file" / "cache"  # (a folder under a file: even root cannot make it)
    said = bytecode.keep_bytecode(directory)
    expected = {"off": "EMOPIPE_BYTECODE_CACHE", "own prefix": "PYTHONPYCACHEPREFIX", "imported already": "imported",
                "cannot be made": "cannot be made"}[case]
    assert expected in said
    assert sys.dont_write_bytecode is True and os.environ["PYTHONDONTWRITEBYTECODE"] == "1"
    assert sys.pycache_prefix == (str(tmp_path / "yours") if case == "own prefix" else None)
    assert not directory.exists()


def _python(code: str, site: Path, cache: Path) -> str:
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "EMOPIPE_CACHE": str(cache),
           "PYTHONPATH": os.pathsep.join([str(site), str(REPO)])}
    env.pop("PYTHONPYCACHEPREFIX", None)
    env.pop("EMOPIPE_BYTECODE_CACHE", None)
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True,
                          timeout=120).stdout


def test_the_command_compiles_once_and_its_next_start_reads_it(tmp_path):
    """Through the command's own entry (run_and_exit), in fresh interpreters that write no bytecode by default: the
    first start writes the probe's compiled module into <cache>/python (nothing beside the source), the next reads it
    (Python would write it again had it compiled the source again)."""
    source = _package(tmp_path / "site")
    code = ("import atexit, emopipe.cli.bytecode as b; b.PROBE = 'probepkg'\n"
            "atexit.register(lambda: print(__import__('probepkg').__cached__, __import__('probepkg').VALUE))\n"
            "from emopipe.cli.app import run_and_exit; run_and_exit(['--version'])")
    first = _python(code, tmp_path / "site", tmp_path / "cache").split()
    compiled = Path(first[-2])
    assert first[-1] == "42" and compiled.is_file()
    assert compiled.is_relative_to(tmp_path / "cache" / "python")
    assert not (source.parent / "__pycache__").exists()
    written = compiled.stat().st_mtime_ns
    os.utime(compiled, ns=(written - 10**9, written - 10**9))  # (so a second write could not share its time)
    second = _python(code, tmp_path / "site", tmp_path / "cache").split()
    assert second[-2:] == first[-2:]
    assert compiled.stat().st_mtime_ns == written - 10**9  # read, not written again


def test_a_function_call_leaves_your_interpreter_alone(tmp_path):
    """main() called in a process of yours does not change where that process keeps bytecode."""
    _package(tmp_path / "site")
    code = ("import sys, emopipe.cli.bytecode as b; b.PROBE = 'probepkg'\n"
            "from emopipe.cli.app import main; main(['--version'])\n"
            "print(sys.pycache_prefix, sys.dont_write_bytecode)")
    assert _python(code, tmp_path / "site", tmp_path / "cache").split()[-2:] == ["None", "True"]
