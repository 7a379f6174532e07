"""The package's shape, as docs/architecture.md draws it: layers without cycles, light imports."""

from __future__ import annotations

import subprocess
import sys
from collections import defaultdict

import grimp
import pytest

SUBPACKAGES = ("types", "errors", "_version", "_clock", "_heap", "registry", "io", "model", "vision", "engines",
               "observe", "report", "config", "pipeline", "api", "cluster", "cluster_cameras", "processes",
               "process_worker", "cli")


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph("emopipe")  # function-level imports included


def _cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the directed graph, or None."""
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt):], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state and (found := visit(node)):
            return found
    return None


def _top(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def test_every_module_belongs_to_a_named_layer(graph):
    tops = {_top(m) for m in graph.modules if m != "emopipe"}
    assert tops <= {*SUBPACKAGES, "__main__"}, tops - {*SUBPACKAGES, "__main__"}


def test_subpackages_import_each_other_without_cycles(graph):
    edges: dict[str, set[str]] = defaultdict(set)
    for module in graph.modules:
        for imported in graph.find_modules_directly_imported_by(module):
            outside = _top(module) not in ("__init__", "__main__")
            if imported.startswith("emopipe.") and _top(module) != _top(imported) and outside:
                edges[_top(module)].add(_top(imported))
    assert _cycle(edges) is None, " → ".join(_cycle(edges) or [])
    assert "cli" not in {target for targets in edges.values() for target in targets}  # nothing imports the CLI


def test_modules_import_each_other_without_cycles(graph):
    edges = {m: {i for i in graph.find_modules_directly_imported_by(m) if i.startswith("emopipe.")}
             for m in graph.modules if m.startswith("emopipe.")}
    assert _cycle(edges) is None, " → ".join(_cycle(edges) or [])


def test_the_cycle_finder_finds_a_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": {"c"}}) is None


@pytest.mark.parametrize("code", [
    "import emopipe; emopipe.__version__; emopipe.RunConfig(source='x.mp4'); emopipe.FaceRecord",
    "from emopipe.cli.app import main; import contextlib, io\n"
    "with contextlib.redirect_stdout(io.StringIO()): main(['--help'])",
    "from emopipe.cli.app import main; import contextlib, io\n"
    "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit): main(['models', '--help'])",
    "from emopipe.cli.app import main; import contextlib, io\n"
    "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit): main(['report', '--help'])",
    "import emopipe; emopipe.summarize; emopipe.read_records",
])
def test_importing_the_package_and_asking_for_help_load_no_torch(code):
    check = f"{code}\nimport sys\nassert 'torch' not in sys.modules, 'torch was imported'\n" \
            "assert 'cv2' not in sys.modules, 'cv2 was imported'"
    done = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_the_import_contracts_hold():
    done = subprocess.run(["lint-imports"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:]
    assert "0 broken" in done.stdout


def test_the_source_distribution_holds_the_guides_the_help_points_to_and_no_benchmark_records():
    # hatchling reads the sdist's include as gitignore patterns: an unanchored "README.md" took every README of the
    # tree (docs/results' session records), and docs/*.md, named by `emopipe --help` and the README, were left out
    import re
    from pathlib import Path

    pathspec = pytest.importorskip("pathspec")
    tomllib = pytest.importorskip("tomllib")
    repo = Path(__file__).resolve().parents[1]
    include = tomllib.loads((repo / "pyproject.toml").read_text())["tool"]["hatch"]["build"]["targets"]["sdist"]
    spec = pathspec.GitIgnoreSpec.from_lines(include["include"])  # (as hatchling matches them)
    files = subprocess.run(["git", "ls-files"], cwd=repo, capture_output=True, text=True, check=True).stdout.split()
    if not files:
        pytest.skip("not a git checkout")
    shipped = {f for f in files if spec.match_file(f)}
    named = {m for f in files if f.startswith("emopipe/") and f.endswith(".py")
             for m in re.findall(r"docs/[a-z-]+\.md", (repo / f).read_text())}
    assert named and named <= shipped, named - shipped
    assert {"README.md", "models/manifest.json", "models/README.md", "emopipe/__init__.py"} <= shipped
    assert not {f for f in shipped if f.startswith(("docs/results/", "benchmarks/", "tests/"))}
