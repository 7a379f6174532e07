"""Camera fleets over Ray (emopipe.cluster_cameras): the command with three real HTTP MJPEG streams (Debian's ffmpeg on
127.0.0.1) over two CPU workers of a real local Ray; a worker killed mid-run, its cameras going on on a new worker in
the same rows files. Every wait is a poll against a generous deadline: nothing depends on how fast this machine is."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import cv2
import pytest

from emopipe.io.records import open_writer, rows_so_far
from emopipe.pipeline.archive import SourceResult
from tests.support import synth
from tests.support.ports import free_ports
from tests.support.processes import interruptible
from tests.support.processes import wait_for as wait_for_process
from tests.support.streams import MjpegServer

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'emopipe[ray]')")

REPO = Path(__file__).resolve().parents[1]
LABELS = ("neutral", "happy")


# -- the driver's record: a camera's result and its manifest line, not cut apart --------------------------------

@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_ctrl_c_as_a_camera_ends_comes_after_its_manifest_line(tmp_path, signum, python_signal_handlers):
    """A real signal to this process lands between the driver taking a camera's result and writing its line (sent
    as the line is made): it is taken after the line, so the camera is never left ended with no line."""
    from types import SimpleNamespace

    from emopipe.cluster_cameras import _CameraRun
    from emopipe.pipeline.archive import Manifest, PlannedSource

    planned = PlannedSource(position=0, uri="rtsp://cam/a", rows=tmp_path / "a.csv", summary=tmp_path / "a.json")
    manifest = Manifest(tmp_path)
    run = _CameraRun(None, None, [planned], tmp_path, SimpleNamespace(manifest=manifest), None, None, None, None)

    class Ending(SourceResult):
        def as_dict(self):
            os.kill(os.getpid(), signum)
            return super().as_dict()

    with pytest.raises(KeyboardInterrupt):
        run.record(0, Ending(source="rtsp://cam/a", status="ok", frames=30, faces=30, rows=30), None)
    assert run.cameras[0].result is not None and run.cameras[0].result.status == "ok"
    lines = [json.loads(line) for line in manifest.path.read_text().splitlines()]
    assert [(line["source"], line["status"]) for line in lines] == [("rtsp://cam/a", "ok")]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # the process's handler given back


def test_statements_held_inside_a_runs_own_hold_leave_that_hold_to_take_the_signal(python_signal_handlers):
    from emopipe.pipeline.drivers import HeldSignals, signals_held

    run = HeldSignals()
    run.hold()  # a run starting: its signals held until it takes them
    try:
        with signals_held():
            os.kill(os.getpid(), signal.SIGINT)
        assert run.signum == signal.SIGINT  # still the run's, not raised at the end of the block
        with pytest.raises(KeyboardInterrupt):
            run.take()
    finally:
        run.release()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


# -- a moved camera's rows file: gone on, not rewritten ---------------------------------------------------------

@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_a_rows_file_goes_on_after_the_rows_a_killed_writer_left_its_cut_row_removed(tmp_path, suffix):
    from emopipe.types import FaceRecord

    def record(frame: int) -> FaceRecord:
        import numpy as np

        return FaceRecord(source="rtsp://cam,1/x", frame=frame, timestamp_s=1.7e9 + frame, track_id=1,
                          box=(1.0, 2.0, 3.0, 4.0), score=0.9, label="happy",
                          probabilities=np.array([0.25, 0.75], np.float32), valence=0.1, arousal=0.2)

    path = tmp_path / f"cam.emotions{suffix}"
    assert rows_so_far(path) == (0, None)
    with open_writer(path, labels=LABELS, in_place=True) as writer:
        writer.write([record(0), record(3)])
    whole = path.read_bytes()
    path.write_bytes(whole + whole.splitlines(keepends=True)[-1][:9])  # a killed writer's row, cut short
    assert rows_so_far(path) == (2, 3)  # (the cut row is no row)
    with open_writer(path, labels=LABELS, in_place=True, append=True) as writer:
        writer.write([record(7)])
    assert rows_so_far(path) == (3, 7)
    again = path.read_bytes()
    assert again.startswith(whole) and again.count(b"\n") == whole.count(b"\n") + 1  # no second header, no cut row
    with open_writer(path, labels=LABELS, in_place=True) as writer:  # (not appending: a new file, as before)
        pass
    assert rows_so_far(path) == (0, None)


# -- refused before Ray starts -------------------------------------------------------------------------------------

@pytest.mark.parametrize(("extra", "message"), [
    (["--serve", "127.0.0.1:{busy}"], r"cannot serve the live page on 127\.0\.0\.1:\d+: .*choose another --serve"),
    (["--ray-keep-warm", "60"], r"--ray-keep-warm: not for cameras over Ray"),
    (["--ray-retries", "-1"], r"--ray-retries must be ≥ 0"),
])
def test_the_command_refuses_cameras_over_ray_options_it_cannot_honour_before_ray_starts(extra, message, tmp_path,
                                                                                       capsys, monkeypatch):
    import logging

    from emopipe.cli import app as cli

    monkeypatch.setattr("emopipe.cluster_cameras.connect_ray", lambda address: pytest.fail("Ray was joined"))
    logger = logging.getLogger("emopipe")
    saved = logger.handlers[:], logger.level, logger.propagate  # (the command sets its own: to this test's stderr)
    with socket.socket() as busy:  # (a port another program serves on: the driver's page cannot take it)
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        extra = [a.format(busy=busy.getsockname()[1]) for a in extra]
        try:
            got = cli.main(["rtsp://cam/a", "rtsp://cam/b", "--ray", "local", "-o", str(tmp_path / "out"), *extra])
        finally:
            logger.handlers[:], logger.level, logger.propagate = saved
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("emopipe: error")]
    assert got == 2 and len(lines) == 1 and re.search(message, lines[0]), lines
    assert not (tmp_path / "out" / "manifest.jsonl").exists()


def test_each_camera_worker_serves_its_page_on_the_port_after_the_drivers_numbered_as_its_metrics():
    from emopipe.cluster_cameras import worker_serve_address
    from emopipe.errors import UsageError

    assert worker_serve_address(None, 0) is None
    assert [worker_serve_address("0.0.0.0:8080", n) for n in (0, 1, 5)] == ["0.0.0.0:8081", "0.0.0.0:8082",
                                                                              "0.0.0.0:8086"]
    assert worker_serve_address(":9000", 0) == "127.0.0.1:9001"  # (as one process: no host is this machine only)
    assert worker_serve_address("[::1]:81", 1) == "[::1]:83"
    assert worker_serve_address("127.0.0.1:0", 7) == "127.0.0.1:0"  # each a free port of its own
    with pytest.raises(UsageError, match=r"^--serve 127\.0\.0\.1:65534: worker 1 would serve on 65536, past 65535"):
        worker_serve_address("127.0.0.1:65534", 1)


def test_pages_and_metrics_of_camera_workers_whose_ports_would_meet_are_refused():
    from emopipe.cluster_cameras import _ports_apart
    from emopipe.config import RunConfig
    from emopipe.errors import UsageError

    _ports_apart(RunConfig(serve="127.0.0.1:8080", metrics_port=9478), 8)  # far apart
    _ports_apart(RunConfig(serve="127.0.0.1:0", metrics_port=9478), 8)  # (free ports: nothing to meet)
    _ports_apart(RunConfig(serve="127.0.0.1:8080", metrics_port=8084), 4)  # pages 8080…8084, metrics 8085…8088
    with pytest.raises(UsageError, match=r"^--serve 127\.0\.0\.1:8080 and --metrics-port 8083: with 4 workers their "
                                         r"ports meet at 8084 \(the pages on 8080…8084, the metrics on 8084…8087\)"):
        _ports_apart(RunConfig(serve="127.0.0.1:8080", metrics_port=8083), 4)


def test_one_process_refuses_ray_for_cameras_and_says_where_it_is():
    from emopipe.api import Analyzer
    from emopipe.errors import UsageError

    with pytest.raises(UsageError, match="--ray: cameras over Ray"):
        Analyzer(sources=("rtsp://cam/a", "rtsp://cam/b"), device="cpu").run_fleet(ray="local")


# -- the command: three streams over two workers, one worker killed ----------------------------------------------

def _rows(path: Path) -> list[dict]:
    """The complete rows of a live JSONL file so far (a last line still being written is left out)."""
    if not path.exists():
        return []
    text = path.read_text()
    return [json.loads(line) for line in text.splitlines(keepends=True) if line.endswith("\n")]


@pytest.fixture(scope="module")
def local_ray():
    if ray.is_initialized():
        pytest.skip("a Ray is already connected in this process")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray.get_runtime_context().gcs_address
    ray.shutdown()


def _serving(page: str, *names: str) -> dict[str, dict] | None:
    """The driver's --serve page's word on the workers (``/workers.json``) once each of ``names`` has its page there;
    None until then."""
    try:
        with urllib.request.urlopen(page + "workers.json", timeout=10) as reply:
            workers = json.loads(reply.read())
    except OSError:
        return None
    return workers if all(workers.get(name, {}).get("page") for name in names) else None


def _plays(path: Path) -> bool:
    """Whether a video (maybe still being written) has a first frame to show."""
    if not path.exists():
        return False
    video = cv2.VideoCapture(str(path))
    try:
        return video.isOpened() and video.read()[0]
    finally:
        video.release()


def _fetched(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as reply:
        assert reply.status == 200
        return reply.read().decode()


def _actor(name: str):
    """A named actor of the driver's (another process, its own namespace), or None while it has none of that name."""
    found = [a for a in ray.util.list_named_actors(all_namespaces=True) if a["name"] == name]
    return ray.get_actor(name, namespace=found[0]["namespace"]) if found else None


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_three_streams_over_two_workers_a_dead_workers_cameras_go_on_on_a_new_one(tmp_path, local_ray, shared_dir,
                                                                                   checkpoints):
    """Worker 0 killed: its cameras go on on a new worker, in the same files; that one killed too (--ray-retries 1):
    its cameras are failed, their rows kept, and the third camera goes on all the while. Then Ctrl-C. With --serve:
    the driver's page shows each worker's live page of its cameras, the new worker's once it replaced a dead one.
    With --record mp4: each worker records its part of a camera, every part plays and is in the camera's line."""
    clip = synth.moving_face_video(tmp_path / "clip.mp4", frames=40, size=(160, 120), fps=10.0, empty=None)
    models = tmp_path / "models"  # (the workers are other processes: given as an option, not in the environment)
    models.mkdir()
    for f in (shared_dir / "models" / "blazeface").iterdir():
        if f.suffix in (".pth", ".npy"):
            shutil.copy(f, models / f.name)
    out, log = tmp_path / "out", tmp_path / "emopipe.log"
    servers = [MjpegServer(clip.path) for _ in range(3)]
    for server in servers:
        server.start()
    serve = free_ports(4)  # the driver's page, then worker N's on serve+1+N (three workers in all)
    page = f"http://127.0.0.1:{serve}/"
    proc: subprocess.Popen | None = None
    try:
        with open(log, "w") as log_file:
            proc = subprocess.Popen(
                [sys.executable, "-m", "emopipe", *(s.url for s in servers), "--ray", local_ray, "--ray-workers", "2",
                 "--ray-retries", "1", "--weights", str(checkpoints[8]), "--models-dir", str(models), "--device",
                 "cpu", "-o", str(out), "--format", "jsonl", "--read-timeout", "5", "--reconnect-timeout", "120",
                 "--no-progress", "--serve", f"127.0.0.1:{serve}", "--record", "mp4"],
                cwd=REPO, stdout=log_file, stderr=subprocess.STDOUT, preexec_fn=interruptible)

        files = [out / f"127.0.0.1_{s.port}_stream.mjpg.emotions.jsonl" for s in servers]
        videos = [[out / f"127.0.0.1_{s.port}_stream.mjpg.annotated{part}.mp4" for part in ("", ".2")] for s in servers]

        def wait_for(predicate, what: str):
            return wait_for_process(predicate, 180, proc, log, what)

        def lines() -> list[dict]:
            manifest = out / "manifest.jsonl"
            return [json.loads(line) for line in manifest.read_text().splitlines()] if manifest.exists() else []

        # round-robin: worker 0 has cameras 0 and 2, worker 1 camera 1; every camera's rows come
        wait_for(lambda: all(len(_rows(f)) >= 2 for f in files), "not every camera's rows came")
        before = [len(_rows(f)) for f in files]
        served = wait_for(lambda: _serving(page, "emopipe-cameras-0", "emopipe-cameras-1"), "no worker page served")
        for n, cameras in ((0, (0, 2)), (1, (1,))):
            worker = served[f"emopipe-cameras-{n}"]
            assert worker["page"] == f"http://127.0.0.1:{serve + 1 + n}/"
            grid = _fetched(worker["page"])  # the worker's grid: a cell for each of its cameras, as one process's
            assert grid.count('class="cell"') == len(cameras)
            assert all(f"127.0.0.1:{servers[k].port}" in grid for k in cameras)
        index = _fetched(page)
        assert all(f'<iframe src="http://127.0.0.1:{serve + 1 + n}/"' in index for n in (0, 1)), index
        wait_for(lambda: all(_plays(v[0]) for v in videos), "not every camera's recording has its first frames")
        ray.kill(wait_for(lambda: _actor("emopipe-cameras-0"), "worker 0 not found"), no_restart=True)
        # its cameras go on on a new worker, in the same files; camera 1 never stopped
        wait_for(lambda: all(len(_rows(f)) >= n + 3 for f, n in zip(files, before)),
                 "the moved cameras' rows did not go on (or camera 1's stopped)")
        moved = [len(_rows(f)) for f in files]
        served = wait_for(lambda: _serving(page, "emopipe-cameras-2"), "the new worker's page is not on the driver's")
        assert served["emopipe-cameras-0"]["died"] is True and served["emopipe-cameras-2"]["page"] == \
            f"http://127.0.0.1:{serve + 3}/"
        assert f'<iframe src="http://127.0.0.1:{serve + 1}/"' not in _fetched(page)  # (the dead one's gone)
        wait_for(lambda: all(_plays(videos[k][1]) for k in (0, 2)), "the moved cameras record no second part")
        assert not videos[1][1].exists()  # (camera 1 never moved)
        ray.kill(wait_for(lambda: _actor("emopipe-cameras-2"), "no new worker"), no_restart=True)
        wait_for(lambda: len(lines()) == 2, "the cameras of a worker that died twice have no line")
        wait_for(lambda: len(_rows(files[1])) >= moved[1] + 3, "camera 1 did not go on")
        proc.send_signal(signal.SIGINT)  # Ctrl-C: every worker stops its fleet, files complete, exit 130
        assert proc.wait(timeout=120) == 130, log.read_text()[-4000:]
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        for server in servers:
            server.kill()

    said = log.read_text()
    assert re.search(r"emopipe-cameras-0 died \(\w+\); its camera\(s\) .* start on a new worker in 1 s", said), said
    assert re.search(r"emopipe-cameras-2 died \(\w+\); .* moved --ray-retries times already: failed", said), said
    by_source = {e["source"]: e for e in lines()}  # a line each, none twice
    assert len(lines()) == 3 and set(by_source) == {s.url for s in servers}
    for k in (0, 2):
        line = by_source[servers[k].url]
        assert (line["status"], line["kind"], line["exit_code"]) == ("failed", "WorkerDied", 1)
        assert re.fullmatch(r"its worker died 2 time\(s\): \w+", line["error"]) and line["rows"] == len(_rows(files[k]))
        # each dead worker's FFmpeg finished its part (its own session: not killed with the worker)
        assert (line["outputs"]["annotated_video"], line["outputs"]["annotated_video_2"]) == tuple(map(str, videos[k]))
        assert all(_plays(video) for video in videos[k])
    assert by_source[servers[1].url]["status"] == "interrupted"
    assert by_source[servers[1].url]["outputs"]["annotated_video"] == str(videos[1][0]) and _plays(videos[1][0])
    summary = json.loads((out / "summary.json").read_text())
    assert summary["ray"]["worker_failures"] == 2 and summary["run_interrupted"] is True
    assert summary["failed"] == 2 and summary["interrupted"] == 1
    cameras = {c["source"]: c for c in summary["cameras"]}
    for k, (server, path) in enumerate(zip(servers, files)):
        rows = _rows(path)
        assert path.read_text().endswith("\n")  # (no cut row)
        frames = [r["frame"] for r in rows]
        assert frames == sorted(set(frames)), frames  # one face a frame: no row twice, numbered on after the move
        assert {r["source"] for r in rows} == {server.url}
        camera = cameras[server.url]
        assert camera["faces"] == len(rows)
        assert (camera.get("moves", 0), camera["worker"]) == ((1, "emopipe-cameras-2") if k != 1 else
                                                               (0, "emopipe-cameras-1"))
        if k == 1:  # its summary, written as its worker stopped
            assert camera["frames"] >= len(rows)
            assert json.loads(path.with_name(path.name.replace(".jsonl", ".summary.json")).read_text())[
                "faces"] == len(rows)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_cameras_that_end_as_asked_over_ray_are_ok_and_the_run_ends_on_its_own(tmp_path, local_ray, shared_dir,
                                                                                 checkpoints):
    from emopipe.cluster import RayOptions
    from emopipe.cluster_cameras import run_cameras_on_ray
    from emopipe.config import RunConfig

    clip = synth.moving_face_video(tmp_path / "clip.mp4", frames=40, size=(160, 120), fps=10.0, empty=None)
    with MjpegServer(clip.path) as one, MjpegServer(clip.path) as two:
        base = free_ports(3)
        config = RunConfig(sources=(one.url, two.url), weights=str(checkpoints[8]), device="cpu", no_progress=True,
                           models_dir=str(shared_dir / "models" / "blazeface"), max_frames=3, format="jsonl",
                           metrics_port=base)
        seen: list[str] = []
        outcome = run_cameras_on_ray(config, RayOptions(workers=2), output_dir=tmp_path / "out",
                                     on_result=lambda result: seen.append(result.status))
    assert outcome.exit_code == 0 and not outcome.interrupted
    assert [r.status for r in outcome.results] == seen == ["ok", "ok"]
    lines = [json.loads(line) for line in (tmp_path / "out" / "manifest.jsonl").read_text().splitlines()]
    assert sorted(e["source"] for e in lines) == sorted([one.url, two.url])
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["ok"] == 2 and summary["ray"]["workers"] == 2 and summary["ray"]["worker_failures"] == 0
    assert sorted(c["worker"] for c in summary["cameras"]) == ["emopipe-cameras-0", "emopipe-cameras-1"]
    assert {name: worker["metrics"] for name, worker in summary["ray"]["per_worker"].items()} == {
        f"emopipe-cameras-{n}": f"http://127.0.0.1:{base + 1 + n}/metrics" for n in (0, 1)}  # worker N on P+1+N
    for camera in summary["cameras"]:  # (three frames taken from each; dropped ones count)
        assert 1 <= camera["frames"] <= 3 and camera["faces"] == len(_rows(Path(camera["rows_file"])))
