"""--ray local: the Ray a run starts on this machine is stopped at its end, every process of it (its own file: the
other cluster tests share one Ray the module starts, and this one needs none running)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from emopipe.api import Analyzer
from emopipe.config import RunConfig
from tests.support.processes import stderr_until
from tests.support.synth import two_small_clips

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'emopipe[ray]')")

from emopipe.cluster import LOCAL, connect_ray, disconnect_ray  # noqa: E402

REPO = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow


def test_a_local_ray_the_run_started_stops_with_its_monitor_killed_first(monkeypatch):
    if ray.is_initialized():
        pytest.skip("a Ray is already connected in this process")
    assert connect_ray(LOCAL) is True
    from ray._private import worker

    started = {kind: [info.process for info in infos] for kind, infos in worker._global_node.all_processes.items()}
    (monitor,) = started["monitor"]
    seen: dict[str, int | None] = {}
    real_shutdown = ray.shutdown

    def shutdown(*args, **kwargs):
        # Left alone the monitor idles for ever; killed, it is gone long before this bound.
        seen["monitor"] = monitor.wait(timeout=60)
        return real_shutdown(*args, **kwargs)

    monkeypatch.setattr(ray, "shutdown", shutdown)
    try:
        disconnect_ray(LOCAL)
    finally:
        if ray.is_initialized():
            real_shutdown()
    assert seen["monitor"] == -signal.SIGKILL  # killed before Ray's own stop, not by it
    assert not ray.is_initialized()
    still_running = [kind for kind, processes in started.items() for p in processes if p.poll() is None]
    assert still_running == []


def _two_clips(tmp_path: Path) -> Path:
    """A folder of two 2-frame clips for a run that starts its own local Ray (skipped if one is connected here)."""
    if ray.is_initialized():
        pytest.skip("a Ray is already connected in this process")
    return two_small_clips(tmp_path)


# The command, with ray.init held where Ray's own SIGTERM handlers are already set (the local node started, the
# driver not yet connected): it says so on stderr and goes on once the test has sent its SIGTERM (a file appears).
# Linux hands a signal sent to a process to its main thread, which runs the handler as the signal lands (here: in
# the sleep), before it can see the file: no timing involved.
SIGTERM_WHILE_RAY_CONNECTS = """
import sys, time
from pathlib import Path
from ray._private import worker

connect, go = worker.connect, Path(sys.argv[1])

def held(*args, **kwargs):
    print("test: ray connecting", file=sys.stderr, flush=True)
    while not go.exists():
        time.sleep(0.01)
    return connect(*args, **kwargs)

worker.connect = held
from emopipe.cli.app import run_and_exit
run_and_exit(sys.argv[2:])
"""


@pytest.mark.timeout(300)
def test_sigterm_while_ray_connects_exits_130_and_leaves_no_line_for_the_sources_never_begun(
        tmp_path, checkpoints, models_home):
    """Ray's SIGTERM handler, set inside ray.init, ended the command at once (status 15 or 1, no manifest) when
    `docker stop` or Kubernetes sent SIGTERM while Ray started; now the run ends as at Ctrl-C: exit 130. No source
    was begun, so none gets a line, as in one process cut off while its models load (each got an `interrupted` line,
    and a summary.json without a manifest kept the folder from a rerun); the next run takes them as new."""
    clips = _two_clips(tmp_path)
    out, go = tmp_path / "out", tmp_path / "go"
    process = subprocess.Popen(
        [sys.executable, "-c", SIGTERM_WHILE_RAY_CONNECTS, str(go), str(clips), "-o", str(out), "--ray", LOCAL,
         "--ray-workers", "1", "--detector", "blazeface", "--weights", str(checkpoints[8]), "--device", "cpu",
         "--no-progress"], cwd=tmp_path, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        seen = stderr_until(process, "test: ray connecting")
        process.send_signal(signal.SIGTERM)
        go.touch()
        stderr = "".join(seen) + process.communicate(timeout=240)[1]
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130, stderr
    assert "Traceback" not in stderr and "emopipe: interrupted" in stderr
    # no line, no summary.json, no rows: nothing ran, and the folder the run made (to hold it before Ray started)
    # went with its lock, as nothing else was written there
    assert not out.exists()
    for resume in (True, False):  # the folder takes the next run, its sources as new ones
        with Analyzer(RunConfig(sources=(str(clips),), device="cpu")).plan_many(output_dir=out, resume=resume) as plan:
            assert [Path(p.uri).name for p in plan.todo] == ["a.mp4", "b.mp4"] and not plan.skipped


@pytest.mark.timeout(300)
@pytest.mark.parametrize("report", [False, True])
def test_a_signal_while_ray_stops_after_every_source_is_done_leaves_the_runs_exit_status(
        tmp_path, checkpoints, models_home, report):
    """Every source had its line and summary.json said the run was complete, yet a signal while the local Ray
    stopped cut the stop short (Ray's processes left running) and exited 130. Now the stop ends, the log says a
    signal came, and the exit status is the run's own — with --report, 130, for the page is not written; the same
    command with --resume writes it, running no source again. (tests/support/signal_at.py sends the signal as the
    stop begins.)"""
    clips = _two_clips(tmp_path)
    out, page = tmp_path / "out", tmp_path / "report.html"
    done = subprocess.run(
        [sys.executable, "-m", "tests.support.signal_at", "TERM" if report else "INT", "ray-stop", str(clips), "-o",
         str(out), "--ray", LOCAL, "--ray-workers", "1", "--detector", "blazeface", "--weights", str(checkpoints[8]),
         "--device", "cpu", "--no-progress", *(("--report", str(page)) if report else ())],
        cwd=tmp_path, capture_output=True, text=True, timeout=240, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert "signal_at: sent" in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert done.returncode == (130 if report else 0), done.stderr
    assert "Ray stopped in" in done.stderr  # the stop ran to its end
    assert "Token authentication" not in done.stderr  # (Ray's note on the cluster the run starts: not the user's)
    assert "interrupted while Ray stopped, every source done" in done.stderr
    lines = [json.loads(line) for line in (out / "manifest.jsonl").read_text().splitlines()]
    assert sorted((Path(e["source"]).name, e["status"]) for e in lines) == [("a.mp4", "ok"), ("b.mp4", "ok")]
    assert json.loads((out / "summary.json").read_text())["run_interrupted"] is False
    if report:
        assert "the report" in done.stderr and "--resume writes it" in done.stderr and not page.exists()
        config = RunConfig(sources=(str(clips),), device="cpu", resume=True, report=str(page))
        resumed = Analyzer(config).run_many(output_dir=out)  # (every source done: no model loads)
        assert [r.status for r in resumed.results] == ["skipped", "skipped"] and page.exists()


@pytest.mark.parametrize("cameras", [False, True])
def test_a_signal_while_ray_starts_then_an_error_ends_the_run_as_the_signal_asked(tmp_path, monkeypatch, caplog,
                                                                                  cameras, python_signal_handlers):
    """A Ctrl-C while a local Ray starts is held (stopping then would leave Ray half started); if an error then
    follows, the Ctrl-C came first: the run ends interrupted (KeyboardInterrupt: exit 130), the error in the log.
    The error here is the start's own (Ray's connection refused), raised after a real SIGINT to this process."""
    from emopipe import cluster, cluster_cameras
    from emopipe.errors import UsageError

    def connect_then_fail(address):
        os.kill(os.getpid(), signal.SIGINT)  # held: Ray is starting
        raise UsageError("Ray would not start here")

    monkeypatch.setattr(cluster_cameras if cameras else cluster, "connect_ray", connect_then_fail)
    options = cluster.RayOptions(address=LOCAL)
    with pytest.raises(KeyboardInterrupt):
        if cameras:
            cluster_cameras.run_cameras_on_ray(RunConfig(device="cpu"), options, sources=["rtsp://127.0.0.1:9/cam"],
                                               output_dir=tmp_path / "out")
        else:
            clips = two_small_clips(tmp_path)
            cluster.run_on_ray(RunConfig(sources=(str(clips),), device="cpu"), options, output_dir=tmp_path / "out")
    assert "Ray would not start here (after SIGINT had asked the run to stop)" in caplog.text
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # the process's own handler given back


def _descendants(pid: int) -> set[int]:
    """Every process below ``pid`` now (read from /proc: each process's parent)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        try:
            parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (ValueError, OSError, IndexError):
            continue
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


@pytest.mark.timeout(300)
@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads processes from /proc (Linux)")
def test_a_local_ray_ends_with_its_driver_killed_mid_run(tmp_path, checkpoints, models_home):
    """A `--ray local` driver SIGKILLed mid-run (its container killed, OOM) cannot stop its Ray: Ray's own fate
    sharing must, or the workers would hold their GPU for good. Every process the driver started ends (its workers
    with it; Ray's agents within a minute), within a bound only a process left running misses."""
    clips = _two_clips(tmp_path)
    process = subprocess.Popen(
        [sys.executable, "-m", "emopipe", str(clips), "-o", str(tmp_path / "out"), "--ray", LOCAL, "--ray-workers",
         "1", "--detector", "blazeface", "--weights", str(checkpoints[8]), "--device", "cpu", "--no-progress"],
        cwd=tmp_path, stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        stderr_until(process, "emopipe: ok ")  # the first source done: the worker is running
        started = _descendants(process.pid)
        assert started  # (Ray's GCS, raylet, agents, the worker)
    finally:
        process.kill()
        process.wait(timeout=60)
    deadline = time.monotonic() + 180
    while (left := {pid for pid in started if Path(f"/proc/{pid}").exists()}) and time.monotonic() < deadline:
        time.sleep(1)
    names = {pid: Path(f"/proc/{pid}/comm").read_text().strip() for pid in left if Path(f"/proc/{pid}").exists()}
    assert not names, f"left running: {names}"
