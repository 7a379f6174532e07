"""A many-source run killed (SIGKILL) at each instant of a source's finish: ``--resume`` completes it exactly; a
one-source run killed as its files take their names never leaves them beside an earlier run's.

Each run is the real command (real BlazeFace, random EmoNet) in a child process that kills itself at the chosen
instant (tests/support/kill_at.py): no sleeps, no timing — the instant is reached or the test fails. Under
``--ray local`` the instants are the driver's (it writes each line and then renames the files its worker left).
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from emopipe.pipeline.archive import Manifest
from tests.conftest import shared_assets
from tests.support.checkpoints import random_state
from tests.support.kill_at import NOT_REACHED
from tests.support.processes import end_processes_in
from tests.support.synth import moving_face_video

REPO = Path(__file__).resolve().parents[1]
NAMES = ("a", "b")
ENDINGS = ("emotions.csv", "emotions.tracks.csv", "emotions.segments.csv", "emotions.summary.json")

pytestmark = pytest.mark.slow


def csv_rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as file:
        return list(csv.DictReader(file))


def latest_status(out: Path) -> dict[str, str]:
    return {Path(e["source"]).stem: e["status"] for e in Manifest(out).previous().values()}


@pytest.fixture(scope="module")
def setup(tmp_path_factory) -> dict:
    """Two one-face clips, the models, and what a clean run writes for them."""
    import torch

    assets = shared_assets()
    if assets is None:
        pytest.skip("needs ../shared (or $EMOPIPE_TEST_ASSETS) with the BlazeFace weights")
    base = tmp_path_factory.mktemp("killed")
    home = base / "models"
    home.mkdir()
    for f in (assets / "models" / "blazeface").iterdir():
        if f.suffix in (".pth", ".npy"):
            shutil.copy(f, home / f.name)
    torch.save(random_state(8, seed=8), base / "emonet.pth")
    (base / "in").mkdir()
    for name in NAMES:
        moving_face_video(base / "in" / f"{name}.mp4", frames=1, empty=None)
    env = {**os.environ, "PYTHONPATH": str(REPO), "EMOPIPE_HOME": str(home)}
    args = ["--weights", str(base / "emonet.pth"), "--detector", "blazeface", "--device", "cpu", "--no-progress"]
    setup = {"base": base, "env": env, "args": args}
    clean = run(setup, base, "-m", "emopipe", "in", "-o", "clean")
    assert clean.returncode == 0, clean.stderr[-3000:]
    setup["clean"] = {(name, ending): (base / "clean" / f"{name}.{ending}") for name in NAMES for ending in ENDINGS}
    assert all(len(csv_rows(base / "clean" / f"{name}.emotions.csv")) == 1 for name in NAMES)
    return setup


def run(setup: dict, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args, *setup["args"]], cwd=cwd, env=setup["env"], capture_output=True,
                          text=True, timeout=600)


def workdir(setup: dict, tmp_path: Path) -> Path:
    (tmp_path / "in").symlink_to(setup["base"] / "in")  # (same source names as the clean run's)
    return tmp_path


def killed_at(setup: dict, cwd: Path, when: str, step: str, name: str, *args: str, command: tuple[str, ...] = (
        "in", "-o", "out")) -> None:
    done = run(setup, cwd, "-m", "tests.support.kill_at", when, step, name, *command, *args)
    assert done.returncode != NOT_REACHED, f"never reached {when} {step} of {name}: {done.stderr[-2000:]}"
    assert done.returncode == -signal.SIGKILL, done.stderr[-3000:]


def same_rows(a: list[dict[str, str]], b: list[dict[str, str]], close: bool) -> bool:
    """The same rows; with ``close``, numbers equal to 1e-5 (a Ray worker runs PyTorch on one thread, one process on
    several: float sums in another order may change the 6th decimal)."""
    if not close or len(a) != len(b):
        return a == b

    def same(x: str, y: str) -> bool:
        try:
            return x == y or abs(float(x) - float(y)) <= 1e-5
        except ValueError:
            return False

    return all(x.keys() == y.keys() and all(same(x[k], y[k]) for k in x) for x, y in zip(a, b))


def assert_complete_files_only(setup: dict, out: Path, close: bool = False) -> None:
    """A file under its final name is complete (the same as the clean run's, but for the summary's times)."""
    for (name, ending), clean in setup["clean"].items():
        path = out / f"{name}.{ending}"
        if not path.exists():
            continue
        if ending == "emotions.summary.json":
            assert json.loads(path.read_text())["frames"] == json.loads(clean.read_text())["frames"], path
        else:
            assert same_rows(csv_rows(path), csv_rows(clean), close), path


def assert_resume_completes(setup: dict, cwd: Path, *args: str, close: bool = False) -> None:
    out = cwd / "out"
    resumed = run(setup, cwd, "-m", "emopipe", "in", "-o", "out", "--resume", *args)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "Traceback" not in resumed.stderr
    for name, ending in setup["clean"]:  # every file there, as a clean run writes it
        assert (out / f"{name}.{ending}").exists(), f"{name}.{ending} missing"
    assert_complete_files_only(setup, out, close)
    latest = latest_status(out)
    assert set(latest) == set(NAMES) and set(latest.values()) <= {"ok", "skipped"}, latest
    assert not list(out.rglob("*.partial"))


# Each instant is a distinct state of the files and the manifest under one order of the steps or another (the rows
# renamed first and the line last, or the line first and the rows last); the second source's, with a manifest there.
INSTANTS = [("before", "manifest", "a"), ("after", "manifest", "a"), ("before", "emotions.csv", "a"),
            ("after", "emotions.csv", "a"), ("after", "emotions.tracks.csv", "a"), ("after", "emotions.csv", "b")]


@pytest.mark.parametrize(("when", "step", "name"), INSTANTS)
def test_resume_after_a_kill_at_any_instant_of_a_sources_finish_completes_exactly(setup, tmp_path, when, step, name):
    cwd = workdir(setup, tmp_path)
    killed_at(setup, cwd, when, step, name)
    assert_complete_files_only(setup, cwd / "out")
    assert_resume_completes(setup, cwd)


def test_a_source_redone_over_an_earlier_attempts_files_is_never_taken_as_done_by_them(setup, tmp_path):
    """An earlier attempt failed with its files under their final names (a truncated input's rows); the redo is
    killed right after its manifest line: those files, still there, must not pass for the redo's."""
    cwd = workdir(setup, tmp_path)
    out = cwd / "out"
    shutil.copytree(setup["base"] / "clean", out)
    rows = out / "a.emotions.csv"
    rows.write_text(rows.read_text().splitlines(keepends=True)[0])  # the header only: no row of its one
    manifest = Manifest(out, files=True)
    failed = next(e for e in manifest.previous().values() if Path(e["source"]).stem == "a")
    manifest.append({**failed, "status": "failed", "error": "input ended early", "exit_code": 8})
    killed_at(setup, cwd, "after", "manifest", "a", "--resume")
    assert_complete_files_only(setup, out)
    assert_resume_completes(setup, cwd)


RAY = ("--ray", "local", "--ray-workers", "1")


@pytest.mark.parametrize(("when", "step", "resume_with"), [("before", "manifest", RAY),
                                                           ("after", "emotions.tracks.csv", ())])
def test_resume_after_the_ray_driver_is_killed_between_a_reply_and_the_files_names_completes_exactly(
        setup, tmp_path, when, step, resume_with):
    """Under --ray the worker leaves a source's files under their partial names and the driver, once the reply is
    in, appends the line and then renames them. Killed before the line (the worker used to have renamed them: files
    no line owned, refused by --resume as a clash, exit 2) or between the renames, --resume — over Ray or in one
    process — completes every source exactly."""
    pytest.importorskip("ray", reason="Ray is not installed (pip install 'emopipe[ray]')")
    cwd = workdir(setup, tmp_path)
    try:
        killed_at(setup, cwd, when, step, "a", *RAY)
    finally:
        end_processes_in(cwd)  # (Ray's agents outlive the killed driver that started them; the rest die with it)
    out = cwd / "out"
    assert_complete_files_only(setup, out, close=True)
    if when == "before":  # the line never came: nothing of a's under a final name
        assert not [p.name for p in out.glob("a.*") if not p.name.endswith(".partial")]
    try:
        assert_resume_completes(setup, cwd, *resume_with, close=True)
    finally:
        end_processes_in(cwd)


ONE_SOURCE = ("csv", "tracks.csv", "segments.csv", "summary.json")  # one.csv and the files beside it


@pytest.fixture(scope="module")
def one_source_of_b(setup) -> Path:
    """A folder with what ``emopipe in/b.mp4 -o one.csv`` writes."""
    cwd = setup["base"]
    (cwd / "one-b").mkdir()
    earlier = run(setup, cwd, "-m", "emopipe", "in/b.mp4", "-o", "one-b/one.csv")
    assert earlier.returncode == 0, earlier.stderr[-3000:]
    return cwd / "one-b"


@pytest.mark.parametrize(("when", "step"), [("after", "csv"), ("after", "tracks.csv"), ("before", "summary.json")])
def test_a_one_source_run_killed_as_its_files_take_their_names_never_leaves_them_beside_an_earlier_runs(
        setup, one_source_of_b, tmp_path, when, step):
    """``emopipe in/a.mp4 -o one.csv`` over an earlier run's files (of in/b.mp4): killed right after its rows took
    their name, or later, every file under a final name is its own (the earlier tracks, segments and summary, each
    complete, stood beside the new rows); the same command again writes them all."""
    cwd = workdir(setup, tmp_path)
    for ending in ONE_SOURCE:
        shutil.copy(one_source_of_b / f"one.{ending}", cwd)
    killed_at(setup, cwd, when, step, "one", command=("in/a.mp4", "-o", "one.csv"))

    def sources() -> dict[str, set[str]]:
        """Whose each file under its final name is (the source its rows or summary name)."""
        found = {}
        for ending in ONE_SOURCE:
            path = cwd / f"one.{ending}"
            if path.exists():
                found[ending] = ({json.loads(path.read_text())["source"]} if ending.endswith(".json")
                                 else {row["source"] for row in csv_rows(path)})
        return found

    left = sources()
    assert left["csv"] == {"in/a.mp4"}  # the rows took their name
    assert all(found == {"in/a.mp4"} for found in left.values()), left
    again = run(setup, cwd, "-m", "emopipe", "in/a.mp4", "-o", "one.csv")
    assert again.returncode == 0, again.stderr[-3000:]
    assert sources() == {ending: {"in/a.mp4"} for ending in ONE_SOURCE}
    assert not list(cwd.glob("*.partial"))
