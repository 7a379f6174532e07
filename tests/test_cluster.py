"""The many-source run on a real local Ray (two CPU workers): same rows as one process, a killed worker's
sources redone, --resume; the driver's progress bar and each worker's metrics endpoint."""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import types
import uuid
from dataclasses import replace
from pathlib import Path

import cv2
import pytest

from emopipe.api import Analyzer
from emopipe.config import RunConfig
from emopipe.errors import OutputError, UsageError
from emopipe.io.records import FOLDER_LOCK, hold_folder, hold_outputs, lock_path, partial_path
from emopipe.pipeline.archive import Manifest, PlannedSource, SourceResult, expected_frames, frame_size_of, publish
from emopipe.pipeline.many import plan_sources
from tests.support.folders import held, held_output
from tests.support.ports import free_ports
from tests.support.processes import end_processes_in, interruptible, stderr_until
from tests.support.prometheus_helpers import scrape
from tests.support.rows import all_rows, rows, same_as_whole, same_rows
from tests.support.synth import many_clips_run, moving_face_video, two_small_clips

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'emopipe[ray]')")

from emopipe.cluster import (  # noqa: E402
    LOCAL,
    WARM_NAMESPACE,
    WORKER_NAME,
    ProgressBoard,
    RayOptions,
    Worker,
    _cluster_is_this_machine,
    _Progress,
    keep_latest_summary,
    run_on_ray,
    worker_sizing,
)
from emopipe.model.cuda_context import mps_running  # noqa: E402
from emopipe.pipeline.drivers import as_left  # noqa: E402

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


@pytest.fixture
def five_clips(tmp_path, shared_dir, checkpoints):
    return many_clips_run(tmp_path, shared_dir, checkpoints[8], 5)


def both_warm_at_first_result(then=None):
    """An ``on_result`` for run_on_ray that, at the first result, waits until both workers are warm. A run gives
    sources to each worker once it is warm, so on a busy machine one worker could take every source before the
    other is; the driver, held in this call, hands the rest to both."""
    waited: list[bool] = []

    def on_result(result) -> None:
        if not waited:
            waited.append(True)
            ray.get([ray.get_actor(WORKER_NAME.format(i)).ready.remote() for i in range(2)], timeout=300)
        if then is not None:
            then(result)

    return on_result


def test_two_workers_write_the_rows_one_process_writes(tmp_path, local_ray, five_clips):
    _, config = five_clips
    config = replace(config, annotate="mp4")  # each source's annotated video too: renamed by the driver with its rows
    with Analyzer(config) as analyzer:
        alone = analyzer.run_many(output_dir=tmp_path / "one")
    assert [r.status for r in alone.results] == ["ok"] * 5
    holding: list[bool] = []
    page = tmp_path / "page.html"  # (and the report: each source's section playing the video the driver renamed)
    outcome = run_on_ray(replace(config, report=str(page)), RayOptions(workers=2), output_dir=tmp_path / "ray",
                         on_result=both_warm_at_first_result(lambda result: holding.append(held(tmp_path / "ray"))))
    assert sorted(r.status for r in outcome.results) == ["ok"] * 5
    assert holding == [True] * 5 and not held(tmp_path / "ray")  # the driver held the folder until the run ended
    assert outcome.run["ray"]["workers"] == 2 and outcome.run["ray"]["worker_failures"] == 0
    assert len({s["worker"] for s in outcome.run["ray"]["worker_summaries"]}) == 2  # both took a share
    ray_facts = outcome.run["ray"]
    timeline = ray_facts["timeline"]  # where the run's time went: Ray up, planned, workers warm, last reply
    assert 0 <= timeline["plan_s"] <= timeline["connect_s"] <= timeline["done_s"]  # planned before Ray
    assert timeline["first_ready_s"] <= timeline["ready_s"] <= timeline["done_s"] <= outcome.run["wall_s"]
    # the first row: after a worker was warm (shares go only to warm workers), before the last reply (one clock here)
    assert timeline["first_ready_s"] - 0.05 <= timeline["first_row_s"] <= timeline["done_s"] + 0.05
    assert ray_facts["shares"] >= len(ray_facts["worker_summaries"]) == 2  # one pipeline summary per worker
    assert sum(s["frames"] for s in ray_facts["worker_summaries"]) == FRAMES
    for start in (s["start"] for s in ray_facts["worker_summaries"]):  # each worker's start: the actor to warm
        assert start["ready_s"] > 0 and start["process_age_s"] >= 0 and isinstance(start["torch_imported"], bool)
        assert start["plan_builders"] == 1  # (cuDNN plan builders a fresh machine's warm-up may start: its one core)
    assert all(w["busy_s"] > 0 and w["sources"] >= 1 for w in ray_facts["per_worker"].values())
    assert sum(w["sources"] for w in ray_facts["per_worker"].values()) == 5
    assert same_rows(all_rows(tmp_path / "ray"), all_rows(tmp_path / "one"))
    assert len(all_rows(tmp_path / "one")) == 5
    lines = Manifest(tmp_path / "ray").previous()
    assert sorted(lines) == sorted(r.source for r in alone.results)
    assert not list((tmp_path / "ray").rglob("*.partial")) and not list((tmp_path / "ray").rglob("*.partial.mp4"))
    for line in lines.values():
        video = tmp_path / "ray" / line["files"]["annotated_video"]
        capture = cv2.VideoCapture(str(video))
        assert sum(1 for _ in iter(capture.grab, False)) == line["frames"] > 0, video
        capture.release()
        assert (tmp_path / "one" / line["files"]["annotated_video"]).exists()
    videos = re.findall(r"<video [^>]*src='([^']*)'", page.read_text())
    assert sorted(videos) == sorted(f"ray/{line['files']['annotated_video']}" for line in lines.values())


def test_the_driver_refuses_a_folder_another_run_is_writing_before_ray_starts(tmp_path, monkeypatch):
    import emopipe.cluster

    for name in ("a.mp4", "b.mp4"):
        (tmp_path / name).write_bytes(b"x")
    connected: list[str] = []

    def connect(address: str) -> bool:
        connected.append(address)
        raise AssertionError("Ray was started for a run whose folder is in use")

    monkeypatch.setattr(emopipe.cluster, "connect_ray", connect)
    out = tmp_path / "out"
    out.mkdir()
    config = RunConfig(sources=(str(tmp_path / "a.mp4"), str(tmp_path / "b.mp4")), device="cpu")
    with hold_folder(out), pytest.raises(OutputError, match="out is in use by another emopipe run") as refused:
        run_on_ray(config, RayOptions(address=LOCAL), output_dir=out)
    assert refused.value.exit_code == 5 and connected == []
    assert sorted(p.name for p in out.iterdir()) == [FOLDER_LOCK]  # nothing of the refused run's


def test_one_file_with_ray_is_a_run_of_one_source_into_the_output_folder(tmp_path, monkeypatch):
    """`emopipe clip.mp4 --ray` failed with "no source given": a single file was a one-source run's, which the
    driver never reads. It is now the many-source command's one source; -o is its folder (a rows name is refused)."""
    import emopipe.cluster
    from emopipe.cli.run import build_parser, config_from_args

    clip = tmp_path / "clip.mp4"
    clip.write_bytes(b"x")
    config = config_from_args(build_parser().parse_args([str(clip), "--ray", "local", "-o", str(tmp_path / "out"),
                                                         "--device", "cpu"]))
    assert config.sources == (str(clip),) and config.source is None
    for camera in (["rtsp://127.0.0.1:9/one"], ["--webcam", "0"]):  # one camera: a fleet of one, over Ray too
        one = config_from_args(build_parser().parse_args([*camera, "--ray", "local"]))
        assert one.fleet and len(one.sources) == 1
    planned: list[str] = []

    def connect(address: str) -> bool:  # (the run is planned by then: stop it there)
        raise UsageError("test: planned")

    monkeypatch.setattr(emopipe.cluster, "connect_ray", connect)
    def plan(*args, **kwargs):
        made = plan_sources(*args, **kwargs)
        planned.extend(p.uri for p in made.todo)
        return made

    monkeypatch.setattr(emopipe.cluster, "plan_sources", plan)
    with pytest.raises(UsageError, match="test: planned"):
        run_on_ray(config, RayOptions(address=LOCAL))
    assert planned == [str(clip)]
    refused = config_from_args(build_parser().parse_args([str(clip), "--ray", "local", "-o", "rows.csv"]))
    with pytest.raises(UsageError, match=r"^-o rows.csv: with several sources \(or --ray\) the output is a folder"):
        run_on_ray(refused, RayOptions(address=LOCAL))


def test_the_driver_refuses_a_report_page_another_run_is_writing_before_ray_starts(tmp_path, monkeypatch):
    connected = never_connect(monkeypatch)
    for name in ("a.mp4", "b.mp4"):
        (tmp_path / name).write_bytes(b"x")
    page = tmp_path / "page.html"
    config = RunConfig(sources=(str(tmp_path / "a.mp4"), str(tmp_path / "b.mp4")), device="cpu", report=str(page))
    with hold_outputs([page]):  # another run, into another folder, will write the same page
        with pytest.raises(OutputError, match=r"page\.html is in use by another emopipe run \(it holds "
                                              r"\.page\.html\.lock\)") as refused:
            run_on_ray(config, RayOptions(address=LOCAL), output_dir=tmp_path / "out")
        assert held_output(page)  # still the other run's
    assert refused.value.exit_code == 5 and connected == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.mp4", "b.mp4"]  # no folder, no page, no lock file


def test_a_run_that_fails_once_planned_lets_its_report_page_go_at_once(tmp_path, monkeypatch):
    # (was: the plan's hold on the page went only when the plan was collected: a caller that kept the error, and
    # so the driver's frame, held the page, and its own next run was refused as "in use by another emopipe run")
    import emopipe.cluster

    def connect(address: str) -> bool:
        raise UsageError(f"no Ray cluster answers at {address}")

    monkeypatch.setattr(emopipe.cluster, "connect_ray", connect)
    for name in ("a.mp4", "b.mp4"):
        (tmp_path / name).write_bytes(b"x")
    page = tmp_path / "page.html"
    config = RunConfig(sources=(str(tmp_path / "a.mp4"), str(tmp_path / "b.mp4")), device="cpu", report=str(page))
    with pytest.raises(UsageError, match="no Ray cluster answers") as failed:
        run_on_ray(config, RayOptions(address="ray://nowhere:10001"), output_dir=tmp_path / "out")
    assert failed.tb is not None  # (kept: the driver's frame with it)
    assert not held_output(page) and not held(tmp_path / "out")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.mp4", "b.mp4"]


def test_the_driver_holds_its_report_page_until_the_run_ends(tmp_path, local_ray, five_clips):
    # (was: not at all, so a second run with the same --report wrote the page over this one's)
    _, config = five_clips
    page = tmp_path / "page.html"
    holding: list[bool] = []
    outcome = run_on_ray(replace(config, report=str(page)), RayOptions(workers=2), output_dir=tmp_path / "ray",
                         on_result=lambda result: holding.append(held_output(page)))
    assert sorted(r.status for r in outcome.results) == ["ok"] * 5 and holding == [True] * 5
    assert page.read_text().startswith("<!DOCTYPE html>")
    assert not held_output(page) and not lock_path(page).exists()  # let go when the run ended, lock file removed



def never_connect(monkeypatch) -> list[str]:
    import emopipe.cluster

    connected: list[str] = []

    def connect(address: str) -> bool:
        connected.append(address)
        raise AssertionError("Ray was started")

    monkeypatch.setattr(emopipe.cluster, "connect_ray", connect)
    return connected


def test_an_option_error_is_said_before_ray_starts(tmp_path, monkeypatch):
    connected = never_connect(monkeypatch)
    for name in ("a.mp4", "b.mp4"):
        (tmp_path / name).write_bytes(b"x")
    config = RunConfig(sources=(str(tmp_path / "a.mp4"), str(tmp_path / "b.mp4")), device="cpu",
                       report=str(tmp_path / "report.txt"))
    with pytest.raises(UsageError, match=r"--report .*report\.txt: the report is a web page"):
        run_on_ray(config, RayOptions(address=LOCAL), output_dir=tmp_path / "out")
    assert connected == [] and not (tmp_path / "out").exists()


def test_a_resumed_run_with_every_source_done_starts_no_ray(tmp_path, monkeypatch):
    connected = never_connect(monkeypatch)
    (tmp_path / "a.mp4").write_bytes(b"x")
    out = tmp_path / "out"
    out.mkdir()
    for name in ("a.emotions.csv", "a.emotions.summary.json"):
        (out / name).write_text("an earlier run's\n")
    Manifest(out, files=True).append({"source": str(tmp_path / "a.mp4"), "status": "ok", "outputs": {
        "rows": str(out / "a.emotions.csv"), "summary": str(out / "a.emotions.summary.json")}})
    config = RunConfig(sources=(str(tmp_path / "a.mp4"),), device="cpu", resume=True)
    outcome = run_on_ray(config, RayOptions(address=LOCAL), output_dir=out)
    assert connected == [] and [r.status for r in outcome.results] == ["skipped"]
    assert json.loads((out / "summary.json").read_text())["skipped"] == 1 and not held(out)


def test_a_run_refused_once_ray_is_up_leaves_no_output_folder(tmp_path, local_ray):
    # (was: the driver took the new folder before Ray started, planning then refused: the folder held only its lock)
    for name in ("a.mp4", "b.mp4"):
        (tmp_path / name).write_bytes(b"x")
    config = RunConfig(sources=(str(tmp_path / "a.mp4"), str(tmp_path / "b.mp4")), device="cpu",
                       annotate=str(tmp_path / "annotated.mp4"))
    with pytest.raises(UsageError, match=r"--annotate .*annotated\.mp4: with several sources, give the videos' "
                                         r"container"):
        run_on_ray(config, RayOptions(workers=1), output_dir=tmp_path / "new" / "out")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.mp4", "b.mp4"]

def kill_a_worker_mid_share(deadline: float) -> None:
    """Kill the first of two workers seen with a share mid-way (a frame written, the share not done): its share in
    flight is lost. A worker still starting holds none and answers no call yet."""
    victim = None
    while victim is None and time.monotonic() < deadline:
        for name in (WORKER_NAME.format(0), WORKER_NAME.format(1)):
            with contextlib.suppress(ValueError):  # (not created yet)
                actor = ray.get_actor(name)
                asked = actor.progress.remote()
                if ray.wait([asked], timeout=0.2)[0] and ray.get(asked):
                    victim = actor
                    break
    assert victim is not None, "no worker was seen mid-share"
    ray.kill(victim, no_restart=True)


def test_a_killed_worker_has_its_sources_redone_with_no_row_lost_or_doubled(tmp_path, local_ray, five_clips,
                                                                            capsys):
    _, config = five_clips
    with Analyzer(config) as analyzer:
        analyzer.run_many(output_dir=tmp_path / "one")
    outcome: list = []
    capsys.readouterr()
    run = threading.Thread(target=lambda: outcome.append(
        run_on_ray(config, RayOptions(workers=2, chunk=1), output_dir=tmp_path / "ray", progress=True)))
    run.start()
    manifest = tmp_path / "ray" / "manifest.jsonl"
    deadline = time.monotonic() + 300  # (bounds a hang only)
    while time.monotonic() < deadline and not (manifest.exists() and manifest.read_text().strip()):
        time.sleep(0.05)
    kill_a_worker_mid_share(deadline)
    run.join(timeout=600)
    assert outcome, "the run did not finish"
    result = outcome[0]
    assert sorted(r.status for r in result.results) == ["ok"] * 5
    assert result.run["ray"]["worker_failures"] >= 1
    assert same_rows(all_rows(tmp_path / "ray"), all_rows(tmp_path / "one"))
    statuses = [line for line in manifest.read_text().splitlines()]
    assert len(statuses) == 5  # one line per source: none lost, none twice
    last = [line for line in re.split(r"[\r\n]", capsys.readouterr().err) if "frame" in line][-1]
    assert f"{FRAMES}/{FRAMES}" in last, last  # the bar ends on every frame once, the redone sources included


def test_workers_the_cluster_has_no_room_for_hold_no_sources_and_the_run_finishes(tmp_path, local_ray, five_clips,
                                                                                 caplog):
    """Three one-CPU workers on a two-CPU Ray: the third is never placed (a cluster that does not grow). The run
    gives sources only to warm workers, so it finishes on the two (it used to wait for all three forever)."""
    _, config = five_clips
    with caplog.at_level("WARNING", logger="emopipe.cluster"):
        outcome = run_on_ray(config, RayOptions(workers=3), output_dir=tmp_path / "ray")
    assert "room for 2" in caplog.text and "join when it grows" in caplog.text
    assert sorted(r.status for r in outcome.results) == ["ok"] * 5
    facts = outcome.run["ray"]
    assert facts["workers"] == 3 and facts["worker_failures"] == 0
    assert "ready_s" not in facts["timeline"]  # one of the first crew never got warm ...
    assert facts["timeline"]["first_ready_s"] <= facts["timeline"]["done_s"]  # ... yet the work began and ended
    assert sum(w["sources"] for w in facts["per_worker"].values()) == 5
    assert facts["per_worker"][WORKER_NAME.format(2)]["sources"] == 0
    assert len(Manifest(tmp_path / "ray").previous()) == 5
    assert not list((tmp_path / "ray").rglob("*.partial"))



class DiesOnceStarting(Worker):
    """A worker whose process exits while it starts, the first time only (a marker file beside the models says
    it did): a worker lost before it was warm, as to a node lost or an out-of-memory kill at start-up."""

    def __init__(self, config: RunConfig, *args, **kwargs) -> None:
        marker = Path(config.models_dir or ".") / "died-starting"
        if not marker.exists():
            marker.write_text("x")
            os._exit(1)
        super().__init__(config, *args, **kwargs)


def test_a_worker_that_dies_starting_is_replaced_and_with_no_retries_left_its_sources_fail(
        tmp_path, local_ray, five_clips, monkeypatch):
    import emopipe.cluster

    _, config = five_clips
    monkeypatch.setattr(emopipe.cluster, "Worker", DiesOnceStarting)
    outcome = run_on_ray(config, RayOptions(workers=1, retries=1), output_dir=tmp_path / "again")
    assert sorted(r.status for r in outcome.results) == ["ok"] * 5  # on the replacement
    facts = outcome.run["ray"]
    assert facts["worker_failures"] == 1 and facts["per_worker"][WORKER_NAME.format(0)]["died"] is True
    assert facts["per_worker"][WORKER_NAME.format(1)]["sources"] == 5
    (Path(config.models_dir) / "died-starting").unlink()  # dies again; no retry this time
    outcome = run_on_ray(config, RayOptions(workers=1, retries=0), output_dir=tmp_path / "none")
    assert [r.status for r in outcome.results] == ["failed"] * 5
    assert all(r.error == "no worker started: 1 died while starting" for r in outcome.results)
    assert len(Manifest(tmp_path / "none").previous()) == 5 and len(outcome.failed) == 5

def test_a_run_the_cluster_has_no_room_for_says_what_it_waits_for_then_goes_on(tmp_path, local_ray, shared_dir,
                                                                             checkpoints, monkeypatch, caplog):
    """Every CPU of the cluster held by another job's actor: no worker can start. The run says so — which worker,
    what it needs, what is free — where it waited without a word (it looked hung), and goes on once room frees."""
    import logging

    import emopipe.cluster

    _, config = many_clips_run(tmp_path, shared_dir, checkpoints[8], 1)
    monkeypatch.setattr(emopipe.cluster, "NO_ROOM_S", 0.0)
    other_job = ray.remote(num_cpus=2)(ProgressBoard).remote()  # (any actor holding both CPUs)
    ray.get(other_job.read.remote())

    class FreeTheRoom(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if "no room" in record.getMessage():
                ray.kill(other_job, no_restart=True)

    said = FreeTheRoom()
    hang = threading.Timer(120, lambda: ray.kill(other_job, no_restart=True))  # (bounds a hang: fails below)
    logging.getLogger("emopipe.cluster").addHandler(said)
    hang.start()
    try:
        with caplog.at_level("WARNING", logger="emopipe.cluster"):
            outcome = run_on_ray(config, RayOptions(), output_dir=tmp_path / "out")
    finally:
        hang.cancel()
        logging.getLogger("emopipe.cluster").removeHandler(said)
    assert ("no worker has started yet: the cluster has no room for emopipe-worker-0 (each needs 1 CPU(s); free now "
            "0 of 2 CPU(s)); the run waits until other jobs free it or the cluster grows (Ctrl-C stops it)"
            in caplog.text)
    assert [r.status for r in outcome.results] == ["ok"]


class _HeadLostAtFirstResult:
    """emopipe.cluster._HeadWatch as a head stopped once the first source is recorded finds it: silent for good."""

    lost = False

    def silent_s(self, now: bool = False) -> float:
        import emopipe.cluster

        return emopipe.cluster.HEAD_LOST_S if self.lost else 0.0


@pytest.mark.parametrize(("failure", "answer"), [(TypeError("takes 1 positional argument"), None),
                                                  (RuntimeError("Timed out while waiting for GCS"), False)])
def test_the_head_check_takes_only_a_failed_call_for_a_silent_head(monkeypatch, failure, answer):
    # (a Ray whose check takes other arguments must not end every run 20 s in as if its head had stopped)
    import ray._private.worker

    from emopipe.cluster import _head_answers

    def check(node_ids, timeout=None):
        raise failure

    monkeypatch.setattr(ray._private.worker, "global_worker", types.SimpleNamespace(
        gcs_client=types.SimpleNamespace(check_alive=check)))
    assert _head_answers(1.0) is answer


def test_a_run_whose_cluster_head_stops_ends_with_the_rest_failed_and_resume_completes_it(
        tmp_path, local_ray, five_clips, monkeypatch):
    """The head stopped mid-run (ray stop): the workers die, no new one can start, and Ray ends the driver 60 s
    later (exit status 1, no summary.json; the driver hung in the replacement's start until then). The driver now
    ends the run first: what finished kept, the rest recorded failed (exit 9), and --resume completes it."""
    import emopipe.cluster
    from emopipe.cluster import _head_answers

    assert _head_answers(5.0) is True  # (this Ray answers the check: the watch is not off for a moved private API)
    _, config = five_clips
    monkeypatch.setattr(_HeadLostAtFirstResult, "lost", False)
    monkeypatch.setattr(emopipe.cluster, "_HeadWatch", _HeadLostAtFirstResult)
    out = tmp_path / "out"

    def first(result) -> None:
        _HeadLostAtFirstResult.lost = True

    outcome = run_on_ray(config, RayOptions(workers=1, chunk=1), output_dir=out, on_result=first)
    monkeypatch.undo()
    lines = Manifest(out).previous()
    assert len(lines) == 5 and (out / "summary.json").exists()  # a line for every source, and the summary
    assert [r.status for r in outcome.results].count("ok") >= 1 and len(outcome.failed) >= 2
    assert {(r.error, r.kind) for r in outcome.failed} == {
        ("the Ray cluster was lost: its head stopped answering", "ClusterLost")}
    deadline = time.monotonic() + 60  # (the killed worker gone, its name free: bounds a hang only)
    while any(a["name"] == WORKER_NAME.format(0) for a in ray.util.list_named_actors()):
        assert time.monotonic() < deadline
        time.sleep(0.1)
    resumed = run_on_ray(replace(config, resume=True), RayOptions(workers=1), output_dir=out)
    assert sorted(r.status for r in resumed.results if r.status != "skipped") == ["ok"] * len(outcome.failed)
    with Analyzer(config) as analyzer:
        analyzer.run_many(output_dir=tmp_path / "one")
    assert same_rows(all_rows(out), all_rows(tmp_path / "one"))
    assert not list(out.rglob("*.partial"))


def test_a_workers_cores_are_what_ray_assigned_it(local_ray):
    """What bounds a worker's cuDNN plan builders: its own cores, not the host's (the host's other workers start
    theirs too)."""
    import ray

    from emopipe.cluster import _cores_assigned

    assert ray.get(ray.remote(num_cpus=2)(_cores_assigned).remote()) == 2
    assert ray.get(ray.remote(num_cpus=1)(_cores_assigned).remote()) == 1
    assert _cores_assigned() == 1  # the driver: none assigned


def test_asked_outside_ray_a_workers_cores_start_no_ray():
    done = subprocess.run([sys.executable, "-c", "import ray\nfrom emopipe.cluster import _cores_assigned\n"
                           "print(_cores_assigned(), ray.is_initialized())"],
                          capture_output=True, text=True, timeout=120)
    assert done.stdout.split() == ["1", "False"], done.stderr


def test_a_local_ray_runs_no_more_workers_than_it_has_room_for(local_ray, caplog):
    """--ray local: nothing will add room to a Ray started for the run, so more workers than fit are not started
    (said in one line), and a count that fits is kept."""
    with caplog.at_level("WARNING", logger="emopipe.cluster"):
        assert worker_sizing(RayOptions(address=LOCAL, workers=5)) == (2, 0.0, 1.0)  # two CPUs, one a worker
    assert "--ray-workers 5: this machine has room for 2" in caplog.text
    caplog.clear()
    assert worker_sizing(RayOptions(address=LOCAL, workers=2))[0] == 2
    assert worker_sizing(RayOptions(address=LOCAL))[0] == 2  # the default: one per CPU without GPUs
    assert not caplog.text



def _mps_control(folder: Path, answers: bool) -> Path:
    """A stand-in for NVIDIA's ``nvidia-cuda-mps-control`` on PATH, answering a query as the daemon's client does:
    status 0 with the daemon up, 1 ("Cannot find MPS control daemon process") without it."""
    folder.mkdir(exist_ok=True)
    tool = folder / "nvidia-cuda-mps-control"
    tool.write_text("#!/bin/sh\nread query\n[ \"$query\" = get_server_list ] || exit 3\n"
                    + ("exit 0\n" if answers else "echo 'Cannot find MPS control daemon process'; exit 1\n"))
    tool.chmod(0o755)
    return folder


def test_mps_is_running_only_where_its_control_daemon_answers(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "none"))
    assert mps_running() is False  # no MPS tools at all
    monkeypatch.setenv("PATH", str(_mps_control(tmp_path / "down", answers=False)))
    assert mps_running() is False  # the tools, no daemon (or a socket left by one that stopped)
    monkeypatch.setenv("PATH", str(_mps_control(tmp_path / "up", answers=True)))
    assert mps_running() is True
    flaky = tmp_path / "flaky"  # a daemon that misses its first question (several workers asking it at once)
    flaky.mkdir()
    tool = flaky / "nvidia-cuda-mps-control"
    tool.write_text(f"#!/bin/sh\nread query\n[ -e {flaky}/asked ] && exit 0\n: > {flaky}/asked\nexit 1\n")
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", str(flaky))
    assert mps_running() is False  # asked once: no answer
    assert mps_running(tries=3) is True  # (a worker asks again before it says its GPU runs without MPS)


def test_under_mps_a_local_ray_shares_each_gpu_between_workers_as_its_cores_allow(tmp_path, monkeypatch, caplog):
    """Processes sharing a GPU without MPS take turns on it, so only a cluster on this machine with MPS running
    gets several workers a GPU by default (one a GPU's share Ray counts exactly); --ray-gpus-per-worker wins."""
    import emopipe.cluster

    resources = {"GPU": 1.0, "CPU": 16.0}
    monkeypatch.setattr(ray, "cluster_resources", lambda: resources)
    monkeypatch.setenv("PATH", str(_mps_control(tmp_path / "up", answers=True)))
    with caplog.at_level("INFO", logger="emopipe.cluster"):
        assert worker_sizing(RayOptions(address=LOCAL)) == (4, 0.25, 1.0)
    assert "NVIDIA MPS is running: 4 workers share each GPU" in caplog.text
    resources.update(CPU=12.0)  # room for three: two, a half each
    assert worker_sizing(RayOptions(address=LOCAL)) == (2, 0.5, 1.0)
    resources.update(CPU=16.0)
    smi = tmp_path / "up" / "nvidia-smi"  # (as the driver's, on PATH: MiB a GPU, one line each)
    smi.write_text("#!/bin/sh\necho 81559; echo 16384\n")
    smi.chmod(0o755)
    assert worker_sizing(RayOptions(address=LOCAL)) == (2, 0.5, 1.0)  # the smallest GPU has room for two
    smi.write_text("#!/bin/sh\necho 81559\n")
    assert worker_sizing(RayOptions(address=LOCAL)) == (4, 0.25, 1.0)
    # a camera fleet's workers: more and smaller (a worker per 2 cores, up to 8 a GPU)
    assert worker_sizing(RayOptions(address=LOCAL), cameras=True) == (8, 0.125, 1.0)
    resources.update(CPU=12.0)  # room for six: four, a quarter each
    assert worker_sizing(RayOptions(address=LOCAL), cameras=True) == (4, 0.25, 1.0)
    resources.update(GPU=2.0, CPU=16.0)
    assert worker_sizing(RayOptions(address=LOCAL)) == (4, 0.5, 1.0)
    assert worker_sizing(RayOptions(address=LOCAL, gpus_per_worker=1.0)) == (2, 1.0, 1.0)
    monkeypatch.setattr(emopipe.cluster, "_on_this_machine", lambda address: False)
    monkeypatch.setattr(ray, "nodes", lambda: [{"Alive": True, "NodeManagerAddress": "10.1.2.3"}])
    assert worker_sizing(RayOptions(address="10.1.2.3:6379")) == (2, 1.0, 1.0)  # another machine's MPS is unknown here
    monkeypatch.setenv("PATH", str(_mps_control(tmp_path / "down", answers=False)))
    resources.update(GPU=1.0)
    assert worker_sizing(RayOptions(address=LOCAL), cameras=True) == (1, 1.0, 1.0)  # no MPS: one a GPU, cameras too
    caplog.clear()
    with caplog.at_level("INFO", logger="emopipe.cluster"):
        assert worker_sizing(RayOptions(address=LOCAL)) == (1, 1.0, 1.0)
    assert "NVIDIA MPS is not running here (with it, 4 workers would share each GPU" in caplog.text


def test_a_cluster_is_this_machine_when_every_live_node_is(monkeypatch):
    nodes = [{"Alive": True, "NodeManagerAddress": "127.0.0.1"}, {"Alive": False, "NodeManagerAddress": "192.0.2.7"}]
    monkeypatch.setattr(ray, "nodes", lambda: nodes)
    assert _cluster_is_this_machine(LOCAL) and _cluster_is_this_machine("127.0.0.1:6379")
    nodes[1]["Alive"] = True  # (192.0.2.0/24 is documentation's: never an address of this machine)
    assert not _cluster_is_this_machine("127.0.0.1:6379")

@pytest.mark.timeout(300)
def test_a_worker_whose_every_source_fails_to_open_reports_them_and_the_run_ends(tmp_path, local_ray, five_clips):
    """Its pipeline used to wait for a source that opens before starting, and only a started pipeline reports
    failures: the driver, waiting for them, sent nothing more — the run hung."""
    _, config = five_clips
    (tmp_path / "not-a-video.mp4").write_text("plain text\n")
    sources = [str(tmp_path / "not-a-video.mp4"), str(tmp_path / "missing.mp4")]
    outcome = run_on_ray(config, RayOptions(workers=1), sources=sources, output_dir=tmp_path / "ray")
    assert sorted((Path(r.source).name, r.status) for r in outcome.results) == [
        ("missing.mp4", "failed"), ("not-a-video.mp4", "failed")]
    assert {r.kind for r in outcome.results} == {"InputNotFoundError", "InputUnreadableError"}
    assert len(Manifest(tmp_path / "ray").previous()) == 2


@pytest.mark.timeout(600)
def test_a_pipeline_failing_mid_share_fails_only_its_source(tmp_path, local_ray, five_clips):
    """One share of four: a good clip, one whose rows cannot be written (its folder in the output is a file: the
    worker's pipeline fails in it), another good clip and a corrupt file. The whole share was failed, the
    completed clip with it; now the sources done before keep their results, the one the pipeline failed in
    fails with its error, and those it never reached run on the worker's next pipeline."""
    _, config = five_clips
    clips = tmp_path / "in"
    (clips / "sub").mkdir(parents=True)
    good, blocked, later = clips / "good.mp4", clips / "sub" / "blocked.mp4", clips / "later.mp4"
    for path, frames in ((good, 4), (blocked, 3), (later, 2)):
        moving_face_video(path, frames=frames, empty=None)
    corrupt = clips / "corrupt.mp4"
    corrupt.write_text("not a video\n")
    order = [good, blocked, later, corrupt]
    assert sorted(order, key=lambda p: -p.stat().st_size) == order  # the order the driver hands them out in
    out = tmp_path / "out"
    out.mkdir()
    # a folder where blocked's rows are first written (out/sub/blocked.emotions.csv.partial): the pipeline fails there
    (out / "sub" / "blocked.emotions.csv.partial").mkdir(parents=True)
    outcome = run_on_ray(config, RayOptions(workers=1, chunk=4), sources=[str(p) for p in order], output_dir=out)
    got = {Path(r.source).name: r for r in outcome.results}
    assert {name: r.status for name, r in got.items()} == {"good.mp4": "ok", "blocked.mp4": "failed",
                                                            "later.mp4": "ok", "corrupt.mp4": "failed"}
    failed = got["blocked.mp4"]
    assert (failed.kind, failed.exit_code) == ("OutputError", 5)  # (an emopipe error keeps its kind and code)
    # (its own error, as one process records it: the sink that could not write it marks it failed)
    assert failed.error.startswith("cannot write output") and "blocked.emotions.csv" in failed.error, failed.error
    assert "\n" not in failed.error
    assert got["corrupt.mp4"].kind == "InputUnreadableError"
    for name, frames in (("good", 4), ("later", 2)):  # complete files, as the manifest says
        result = got[f"{name}.mp4"]
        assert result.frames == frames and len(rows(out / f"{name}.emotions.csv")) == result.rows > 0
    latest = Manifest(out).previous()
    assert {Path(k).name: e["status"] for k, e in latest.items()} == {n: r.status for n, r in got.items()}
    assert len((out / "manifest.jsonl").read_text().splitlines()) == 4  # one line each
    assert outcome.run["ray"]["shares"] == 2 and outcome.run["ray"]["worker_failures"] == 0


JOIN_THEN_SIGTERM = """
import os, signal, sys, time
from emopipe.cluster import connect_ray
heard = []
signal.signal(signal.SIGTERM, lambda signum, frame: heard.append(signum))  # as the command line's handler
connect_ray(sys.argv[1])
os.kill(os.getpid(), signal.SIGTERM)
time.sleep(0.2)
print("handled" if heard else "not handled", flush=True)
"""


def test_sigterm_stays_with_the_commands_handler_after_joining_ray(local_ray):
    """Ray's driver takes SIGTERM (exit 15 at once, no file closed); `docker stop` and Kubernetes send it, and the
    command must end as at Ctrl-C: files complete, exit 130. A second driver joins this test's Ray."""
    done = subprocess.run([sys.executable, "-c", JOIN_THEN_SIGTERM, ray.get_runtime_context().gcs_address],
                          capture_output=True, text=True, timeout=300)
    assert (done.returncode, done.stdout.strip()) == (0, "handled"), done.stderr[-2000:]


DRIVER_WITHOUT_TORCH = """
import json, sys
from emopipe.cluster import RayOptions, run_on_ray
from emopipe.config import RunConfig
options = json.loads(sys.argv[1])
config = RunConfig(**{**options, "sources": tuple(options["sources"])})
outcome = run_on_ray(config, RayOptions(address=sys.argv[2], workers=1), output_dir=sys.argv[3], progress=True)
print(json.dumps({"ok": outcome.run["ok"], "rows": outcome.run["rows"], "torch": "torch" in sys.modules}))
"""


def test_the_driver_plans_runs_and_finishes_without_loading_pytorch(tmp_path, local_ray, five_clips):
    """Only the workers build engines: the driver (here a second process joining this test's Ray) plans the run,
    draws its bar and writes the manifest and summary.json with no PyTorch loaded — seconds it would otherwise spend
    before it can hand out a source to a worker already warm (--ray-keep-warm)."""
    from dataclasses import asdict

    _, config = five_clips
    options = {k: v for k, v in asdict(config).items() if v != getattr(RunConfig, k, None)}
    done = subprocess.run([sys.executable, "-c", DRIVER_WITHOUT_TORCH, json.dumps(options),
                           ray.get_runtime_context().gcs_address, str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    said = json.loads(done.stdout.strip().splitlines()[-1])
    assert said["ok"] == 5 and said["rows"] == sum(len(r) for r in all_rows(tmp_path / "out").values()) > 0
    assert said["torch"] is False


def test_a_few_long_sources_are_not_all_queued_at_the_first_worker_warm():
    from emopipe.cluster import DEPTH, _takers

    live = {"a": object(), "b": object()}
    # a busy, b still warming, 1 source left: it waits for b (not queued behind a's running one)
    assert _takers({"a": 1}, live, pending=1, warming=1) == []
    assert _takers({"a": 1}, live, pending=2, warming=1) == ["a"]  # more than b can take: a queues one
    assert _takers({"a": 1, "b": 0}, live, pending=1, warming=0) == ["b"]  # an idle worker first
    assert _takers({"a": 1, "b": 1}, live, pending=3, warming=0) == ["a", "b"]  # none warming: queue as before
    assert _takers({"a": DEPTH, "b": DEPTH}, live, pending=3, warming=0) == []
    assert _takers({"a": 0, "gone": 0}, live, pending=1, warming=0) == ["a"]  # a dead worker takes nothing


def test_the_run_is_planned_for_the_workers_device_not_the_drivers():
    from emopipe.cluster import worker_device

    devices = ("auto", "cuda", "cuda:0", "cpu")
    assert [worker_device(RunConfig(device=d), 1.0) for d in devices] == ["cuda"] * 3 + ["cpu"]
    assert [worker_device(RunConfig(device=d), 0.0) for d in ("auto", "cpu")] == ["cpu", "cpu"]
    with pytest.raises(UsageError, match="--device cuda: the Ray cluster gives its workers no GPU"):
        worker_device(RunConfig(device="cuda"), 0.0)
    with pytest.raises(UsageError, match="unknown device 'tpu': use auto, cpu, cuda or cuda:N"):
        worker_device(RunConfig(device="tpu"), 1.0)


def test_an_option_a_worker_refuses_ends_the_run_with_its_one_line(tmp_path, local_ray, five_clips):
    # (the driver builds no Analyzer: the workers' is the one that refuses what only PyTorch can check)
    _, config = five_clips
    with pytest.raises(UsageError, match="unknown compile mode 'no-such-mode'"):
        run_on_ray(replace(config, compile="no-such-mode"), RayOptions(workers=1), output_dir=tmp_path / "out")
    assert not (tmp_path / "out" / "manifest.jsonl").exists() or \
        (tmp_path / "out" / "manifest.jsonl").read_text() == ""


def test_a_source_cut_off_by_ctrl_c_is_recorded_as_its_files_say(tmp_path):
    """The driver's line for each source of a share still running at Ctrl-C (the worker's own never comes)."""
    done, cut, unstarted = (PlannedSource(i, f"{n}.mp4", tmp_path / f"{n}.emotions.csv",
                                          tmp_path / f"{n}.emotions.summary.json")
                            for i, n in enumerate(("done", "cut", "unstarted")))
    sent = time.time() - 5  # the share went out before the files were written
    done.rows.write_text("source,frame\nx,0\nx,1\n")
    done.summary.write_text(json.dumps({"frames": 2, "faces": 2, "seconds": 0.5}))
    partial_path(cut.rows).write_text("source,frame\nx,0\nx,1\nx,1\nx,2\nx")  # four faces in three frames kept,
    results = [as_left(p, sent) for p in (done, cut)]  # and a row cut short
    # (was: the frames and faces 0 beside its rows; QA pass, session 39)
    assert [(r.status, r.frames, r.faces, r.rows) for r in results] == [("ok", 2, 2, 2), ("interrupted", 3, 4, 4)]
    assert results[1].outputs == {"rows": str(partial_path(cut.rows))}
    # one its worker had not begun has no line (was: interrupted), as in one process; nor one whose partial rows
    # are an earlier attempt's
    assert as_left(unstarted, sent) is None
    partial_path(unstarted.rows).write_text("source,frame\nx,0\n")
    os.utime(partial_path(unstarted.rows), (sent - 3600, sent - 3600))
    assert as_left(unstarted, sent) is None
    # … unless its worker said its pipeline was in it (begun, no frame written yet): interrupted with nothing kept,
    # as one process records the source it was in
    entered = as_left(unstarted, sent, entered=True)
    assert (entered.status, entered.frames, entered.rows, entered.exit_code, entered.outputs) == \
        ("interrupted", 0, 0, 130, {})
    # files older than the share are an earlier attempt's (a source that failed then, redone now): not this one's,
    # which had not begun
    for path in (done.rows, done.summary):
        os.utime(path, (sent - 3600, sent - 3600))
    assert as_left(done, sent) is None
    # fresh, but the input ended early: failed (exit 8), as the worker would have said
    done.summary.write_text(json.dumps({"frames": 2, "faces": 2, "ended_early": "stopped at frame 2"}))
    os.utime(done.rows)
    left = as_left(done, sent)
    assert (left.status, left.exit_code, left.kind) == ("failed", 8, "InputTruncatedError")


def test_resume_over_ray_finishes_an_interrupted_run(tmp_path, local_ray, five_clips):
    folder, config = five_clips
    with Analyzer(config) as analyzer:
        analyzer.run_many(output_dir=tmp_path / "one")
    out = tmp_path / "ray"
    # an interrupted run: two sources done, one cut off mid-way (its rows only under the partial name)
    first = run_on_ray(config, RayOptions(workers=2), sources=[str(folder / "clip0.mp4"), str(folder / "clip1.mp4")],
                       output_dir=out)
    assert [r.status for r in first.results] == ["ok", "ok"]
    Manifest(out).append({"source": str(folder / "clip2.mp4"), "status": "interrupted", "outputs": {}})
    partial_path(out / "clip2.emotions.csv").write_text("source,frame\ncut,0\n")
    resumed = run_on_ray(RunConfig.from_options(config, resume=True), RayOptions(workers=2), output_dir=out)
    status = {Path(r.source).name: r.status for r in resumed.results}
    assert status == {"clip0.mp4": "skipped", "clip1.mp4": "skipped", "clip2.mp4": "ok", "clip3.mp4": "ok",
                      "clip4.mp4": "ok"}
    assert same_rows(all_rows(out), all_rows(tmp_path / "one"))
    assert not list(out.rglob("*.partial"))


def test_ctrl_c_over_ray_stops_the_workers_before_the_manifest_says_what_was_left(tmp_path, local_ray, five_clips):
    _, config = five_clips

    results = []

    def ctrl_c_at_the_first_result(result) -> None:  # (the driver's main thread, as a real Ctrl-C would be)
        results.append(result)
        if len(results) == 1:
            raise KeyboardInterrupt

    out = tmp_path / "ray"
    outcome = run_on_ray(config, RayOptions(workers=2), output_dir=out, on_result=ctrl_c_at_the_first_result)
    assert outcome.interrupted
    time.sleep(3)  # a worker left running would finish its sources now, after the manifest was written
    latest = {Path(e["source"]).stem: e for e in map(json.loads, (out / "manifest.jsonl").open())}
    # (a source its worker had begun is interrupted; one not begun yet, as the workers were stopped, has no line)
    assert {e["status"] for e in latest.values()} <= {"ok", "interrupted"}
    for stem, entry in latest.items():  # each source is as its line says: none completed behind its back
        rows = out / f"{stem}.emotions.csv"
        assert rows.exists() == (entry["status"] == "ok"), entry  # (the rows take their name last)
    # at the first result at most 2 workers × 2 shares of 1 source had gone out: a source never handed out (or not
    # begun) has no line, as in one process, and no file either
    unstarted = {f"clip{i}" for i in range(5)} - latest.keys()
    assert unstarted and outcome.run["sources"] == 5 and len(outcome.results) == len(latest)
    assert not [p.name for p in out.rglob("*") if p.name.split(".")[0] in unstarted]
    # --resume finishes it: the interrupted sources are redone where their lines say, the others run as new
    resumed = run_on_ray(RunConfig.from_options(config, resume=True), RayOptions(workers=2), output_dir=out)
    assert {r.status for r in resumed.results} <= {"ok", "skipped"} and not list(out.rglob("*.partial"))
    assert {Path(r.source).stem for r in resumed.results if r.status == "ok"} >= unstarted
    assert {e["status"] for e in Manifest(out).previous().values()} == {"ok", "skipped"}


class HoldsAtItsSecondSource(Worker):
    """A worker whose pipeline, once it has written the first frame of the second source it was given, says so (a
    file beside the models) and holds until it is killed: the first source is finished by then (a source is
    finished before the next one's first frame is written) and the board has heard of it, and its share's reply
    never comes."""

    def __init__(self, config: RunConfig, *args, **kwargs) -> None:
        super().__init__(config, *args, **kwargs)
        held, count = Path(config.models_dir or ".") / "held", self.counter.frame

        def frame(result, latency_s) -> None:
            count(result, latency_s)
            if result.frame.stream == 1:
                # a board runs one process's calls in the order sent: once this read is answered, it holds the first
                # source (a worker killed before its word reached the board has that source redone: its files say so)
                if self.counter.board is not None:
                    ray.get(self.counter.board.read.remote())
                held.touch()
                threading.Event().wait(300)  # (until the driver kills this worker; bounds a hang only)

        self.counter.frame = frame  # type: ignore[method-assign]


def three_clips_largest_first(folder: Path) -> list[str]:
    sources = [str(folder / "clip3.mp4"), str(folder / "clip1.mp4"), str(folder / "clip0.mp4")]  # (handed out so)
    assert os.path.getsize(sources[0]) > os.path.getsize(sources[1]) > os.path.getsize(sources[2])
    return sources


def run_with_ctrl_c_once(held: Path, config: RunConfig, sources: list[str], out: Path):
    """The run over one worker, in one share of the three sources, cut off by a real Ctrl-C once the worker says it
    holds (the file ``held`` made): the run's outcome."""
    def ctrl_c_once_held() -> None:
        deadline = time.monotonic() + 300  # (bounds a hang only: the worker says when it holds)
        while not held.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        if held.exists():  # (never otherwise: the run ends without it, and the test fails on what it says)
            signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)  # (a real signal: wakes the driver)

    interrupter = threading.Thread(target=ctrl_c_once_held)
    interrupter.start()
    try:
        return run_on_ray(config, RayOptions(workers=1, chunk=3), sources=sources, output_dir=out)
    finally:
        interrupter.join()


def test_ctrl_c_keeps_a_source_its_worker_finished_in_a_share_whose_reply_never_came(tmp_path, local_ray,
                                                                                    five_clips, monkeypatch):
    """A share of three: the first source finished (files complete, under their partial names), the worker held in
    the second. The driver learnt of a source only from its share's reply, so Ctrl-C left the first one partial
    and `interrupted`, and --resume redid it (up to two shares of 16 sources a worker); the workers now tell the
    board of each source as it finishes. The board here withholds them until the driver stops its workers: what
    the driver reads after Ctrl-C keeps it, with its line and its files' final names. The third, which the worker
    never began, has no line (was: `interrupted`), as a source one process had not begun."""
    import emopipe.cluster

    folder, config = five_clips
    stopped, held = tmp_path / "workers-stopped", Path(config.models_dir) / "held"

    class WithholdingBoard(ProgressBoard):
        def finished_since(self, start):
            return ProgressBoard.finished_since(self, start) if stopped.exists() else []

    kill_all = emopipe.cluster._Crew.kill_all

    def stop_workers(crew) -> None:
        stopped.touch()
        kill_all(crew)

    monkeypatch.setattr(emopipe.cluster, "Worker", HoldsAtItsSecondSource)
    monkeypatch.setattr(emopipe.cluster, "ProgressBoard", WithholdingBoard)
    monkeypatch.setattr(emopipe.cluster._Crew, "kill_all", stop_workers)

    sources, out = three_clips_largest_first(folder), tmp_path / "ray"
    outcome = run_with_ctrl_c_once(held, config, sources, out)
    assert outcome.interrupted and outcome.run["ray"]["shares"] == 1
    got = {Path(r.source).name: r for r in outcome.results}
    assert {name: r.status for name, r in got.items()} == {"clip3.mp4": "ok", "clip1.mp4": "interrupted"}
    finished = got["clip3.mp4"]
    assert finished.frames == 3 and len(rows(out / "clip3.emotions.csv")) == finished.rows > 0
    assert all(p.exists() for p in (out / "clip3.emotions.summary.json", out / "clip3.emotions.tracks.csv"))
    assert not list(out.glob("clip3*.partial*")) and (out / "clip1.emotions.csv.partial").exists()
    assert outcome.run["ray"]["per_worker"][WORKER_NAME.format(0)]["sources"] == 1
    lines = [json.loads(line)["source"] for line in (out / "manifest.jsonl").read_text().splitlines()]
    assert sorted(Path(uri).name for uri in lines) == ["clip1.mp4", "clip3.mp4"]  # none for the one not begun
    assert not list(out.glob("clip0*")) and outcome.run["sources"] == 3 and outcome.run["interrupted"] == 1
    plan = Analyzer(RunConfig.from_options(config, resume=True)).plan_many(sources, out)  # --resume
    assert [Path(p.uri).name for p in plan.todo] == ["clip1.mp4", "clip0.mp4"]  # the finished one is not redone
    plan.close()


def test_ctrl_c_just_after_the_board_told_a_finished_source_keeps_it(tmp_path, local_ray, five_clips, monkeypatch):
    """The driver reads the board twice a second. A Ctrl-C after the board had answered with a finished source,
    before the driver recorded it, lost it: the board had given it away, so the source was left partial and
    `interrupted` (seen once in CI). The board now keeps what it was told, and the driver counts what it recorded:
    read again after the Ctrl-C, the source is kept. The Ctrl-C is raised right there, as the board's answer comes."""
    import ray

    import emopipe.cluster

    folder, config = five_clips
    real_get, cut = ray.get, []

    def get(refs, *args, **kwargs):
        got = real_get(refs, *args, **kwargs)
        told = isinstance(got, list) and got and all(isinstance(t, tuple) and len(t) == 3 and
                                                    isinstance(t[2], SourceResult) for t in got)
        if told and not cut:  # (the driver's first read of a finished source: on the main thread, as a signal)
            cut.append([Path(t[2].source).name for t in got])
            raise KeyboardInterrupt
        return got

    monkeypatch.setattr(emopipe.cluster, "Worker", HoldsAtItsSecondSource)
    monkeypatch.setattr(ray, "get", get)
    sources, out = three_clips_largest_first(folder), tmp_path / "ray"
    outcome = run_on_ray(config, RayOptions(workers=1, chunk=3), sources=sources, output_dir=out)
    assert cut == [["clip3.mp4"]] and outcome.interrupted
    assert {Path(r.source).name: r.status for r in outcome.results} == {"clip3.mp4": "ok", "clip1.mp4": "interrupted"}
    assert not list(out.glob("clip3*.partial*")) and (out / "clip3.emotions.csv").exists()


def test_ctrl_c_as_a_shares_reply_comes_keeps_the_sources_its_worker_finished(tmp_path, local_ray, five_clips,
                                                                              monkeypatch):
    """The driver took a share off those in flight as its reply came, before recording it: a Ctrl-C then had the
    board's word on the share's finished sources no longer read, and left them `interrupted` (redone by --resume).
    The share now stays in flight until recorded. The board here withholds the sources until the workers are
    stopped; the Ctrl-C is raised as the reply comes."""
    import ray

    import emopipe.cluster

    folder, config = five_clips
    stopped = tmp_path / "workers-stopped"

    class WithholdingBoard(ProgressBoard):
        def finished_since(self, start):
            return ProgressBoard.finished_since(self, start) if stopped.exists() else []

    kill_all, real_get, cut = emopipe.cluster._Crew.kill_all, ray.get, []

    def stop_workers(crew) -> None:
        stopped.touch()
        kill_all(crew)

    def get(refs, *args, **kwargs):
        got = real_get(refs, *args, **kwargs)
        if isinstance(got, dict) and "results" in got and "busy_s" in got and not cut:  # (a share's reply)
            cut.append(sorted(Path(r.source).name for r in got["results"]))
            raise KeyboardInterrupt
        return got

    monkeypatch.setattr(emopipe.cluster, "ProgressBoard", WithholdingBoard)
    monkeypatch.setattr(emopipe.cluster._Crew, "kill_all", stop_workers)
    monkeypatch.setattr(ray, "get", get)
    sources, out = three_clips_largest_first(folder), tmp_path / "ray"
    outcome = run_on_ray(config, RayOptions(workers=1, chunk=3), sources=sources, output_dir=out)
    assert cut == [["clip0.mp4", "clip1.mp4", "clip3.mp4"]] and outcome.interrupted
    assert sorted((Path(r.source).name, r.status) for r in outcome.results) == [
        ("clip0.mp4", "ok"), ("clip1.mp4", "ok"), ("clip3.mp4", "ok")]
    assert not list(out.glob("*.partial*")) and len(list(out.glob("clip*.emotions.csv"))) == 3


class HoldsOpeningItsSecondSource(Worker):
    """A worker whose pipeline, about to open the rows file of the second source it was given for its first frame,
    says so (a file beside the models) and holds until it is killed: the first source is finished (its word sent to
    the board), the second begun (read ahead) with none of its frames written and no file of its own, the third not
    entered."""

    def __init__(self, config: RunConfig, *args, **kwargs) -> None:
        super().__init__(config, *args, **kwargs)
        from emopipe.pipeline import archive

        held, board = Path(config.models_dir or ".") / "held", self.counter.board
        open_rows = archive.PerSourceSink._open

        def _open(sink, stream: int) -> None:  # (patched in this actor's own process only)
            if stream == 1:
                if board is not None:  # (a board runs one process's calls in the order sent)
                    ray.get(board.read.remote())
                held.touch()
                threading.Event().wait(300)  # (until the driver kills this worker; bounds a hang only)
            open_rows(sink, stream)

        archive.PerSourceSink._open = _open  # type: ignore[method-assign]


def test_ctrl_c_records_the_source_a_worker_had_begun_with_no_frame_written_as_interrupted(tmp_path, local_ray,
                                                                                       five_clips, monkeypatch):
    """One process cut off records the source it was in `interrupted`, even before any of its frames is written;
    over Ray the driver found no partial rows file for it and gave it no line (--resume redid it either way). The
    worker now tells the board which source its pipeline is in. The one after it, which the pipeline had not
    entered (only read ahead), still has no line, as in one process."""
    import emopipe.cluster

    folder, config = five_clips
    held = Path(config.models_dir) / "held"
    monkeypatch.setattr(emopipe.cluster, "Worker", HoldsOpeningItsSecondSource)

    sources, out = three_clips_largest_first(folder), tmp_path / "ray"
    outcome = run_with_ctrl_c_once(held, config, sources, out)
    assert outcome.interrupted and outcome.run["ray"]["shares"] == 1
    lines = [json.loads(line) for line in (out / "manifest.jsonl").read_text().splitlines()]
    assert {Path(e["source"]).name: e["status"] for e in lines} == {"clip3.mp4": "ok", "clip1.mp4": "interrupted"}
    begun = next(e for e in lines if e["source"] == sources[1])  # as one process writes it: nothing of it kept
    assert (begun["frames"], begun["rows"], begun["exit_code"], begun["outputs"]) == (0, 0, 130, {})
    assert not list(out.glob("clip1*")) and not list(out.glob("clip0*"))
    assert outcome.run["sources"] == 3 and outcome.run["interrupted"] == 1
    plan = Analyzer(RunConfig.from_options(config, resume=True)).plan_many(sources, out)  # --resume
    assert [Path(p.uri).name for p in plan.todo] == ["clip1.mp4", "clip0.mp4"]
    plan.close()


class ShownBar:
    """A progress bar that keeps what it was shown: (frames, faces, total) each time."""

    def __init__(self) -> None:
        self.shown: list[tuple[int, int, int | None]] = []

    def show(self, frames, faces, total, **extra) -> None:
        self.shown.append((frames, faces, total))

    def close(self) -> None: ...


def test_the_bar_counts_a_source_recorded_as_it_finished_once_while_its_share_runs():
    """A source recorded as its worker finished it is still in its running share's count (as the worker last told
    the board) until the share ends: the bar counts it once."""
    bar = ShownBar()
    seen = _Progress([], RunConfig(), bar)
    seen.running[0] = (5, 2)  # share 0: 5 frames written so far, 3 of them its first (finished) source's
    seen.finished(SourceResult(source="a.mp4", status="ok", frames=3, faces=1), 0)
    seen.draw()
    seen.running[0] = (7, 3)  # the worker tells the board of two more frames
    seen.draw()
    seen.ended(0)  # its reply: the rest of the share recorded
    seen.finished(SourceResult(source="b.mp4", status="ok", frames=4, faces=2), 0)
    seen.draw()
    assert [(frames, faces) for frames, faces, _ in bar.shown] == [(5, 2), (7, 3), (7, 3)]


def test_the_bar_counts_each_frame_of_a_video_run_as_parts_once():
    """A part's overlap (frames the part before has too) is not counted again; the video's line, joined, gives its
    real frame count for the total."""
    bar = ShownBar()
    seen = _Progress([], RunConfig(), bar)
    seen.uris, seen.expected = ["v.mp4"], {"v.mp4": 21}  # (as its container declares)
    seen.running[0] = (12, 4)
    seen.finished(SourceResult(source="v.mp4", status="ok", frames=12, faces=4, part="v.mp4#part2of2",
                               lead_frames=3), 0)
    seen.draw()  # (part 2's 9 frames of its own, its share running still)
    seen.ended(0)
    seen.finished(SourceResult(source="v.mp4", status="ok", frames=11, faces=4, part="v.mp4#part1of2"))
    seen.joined(SourceResult(source="v.mp4", status="ok", frames=20, faces=7))
    seen.draw()
    assert [(frames, total) for frames, _, total in bar.shown] == [(9, 21), (20, 20)]


@pytest.fixture(scope="module")
def talk_whole(tmp_path_factory, local_ray, shared_dir, checkpoints):
    """A 2.5-s clip of two faces (one frame without) standing for a long video, and its files as a worker writes them
    whole (``--no-split``; a worker's one CPU thread sums as the parts' workers do): (its run's options, the folder
    of that run)."""
    tmp_path = tmp_path_factory.mktemp("talk")
    folder, config = many_clips_run(tmp_path, shared_dir, checkpoints[8], 0)
    moving_face_video(folder / "talk.mp4", frames=20, fps=8.0, empty=(9, 11), two_faces=True)
    whole = run_on_ray(replace(config, split=False), RayOptions(workers=2), output_dir=tmp_path / "whole")
    assert [(r.status, r.frames) for r in whole.results] == [("ok", 20)] and whole.run["ray"]["shares"] == 1
    return config, tmp_path / "whole"


def test_a_warm_worker_serves_runs_that_cut_videos_and_runs_that_keep_them_whole():
    from emopipe.cluster import _worker_options

    assert _worker_options(RunConfig(split=False)) == _worker_options(RunConfig())  # (the driver's plan, not theirs)
    assert _worker_options(RunConfig(smooth=0.5)) != _worker_options(RunConfig())


def test_one_long_video_over_two_workers_is_cut_into_parts_and_joined_as_one_process_writes_it(
        tmp_path, local_ray, talk_whole, short_parts):
    config, whole = talk_whole
    outcome = run_on_ray(config, RayOptions(workers=2), output_dir=tmp_path / "ray")
    assert [(r.status, r.frames, r.part) for r in outcome.results] == [("ok", 20, None)]
    same_as_whole(tmp_path / "ray", whole)
    facts = outcome.run["ray"]
    assert facts["workers"] == 2 and facts["shares"] == 2  # a part each, handed out as sources
    assert sum(w["frames"] for w in facts["per_worker"].values()) > 20  # (the second part's overlap, read twice)
    assert sum(w["sources"] for w in facts["per_worker"].values()) == 0  # (parts: the video is the driver's)
    lines = (tmp_path / "ray" / "manifest.jsonl").read_text().splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["status"] == "ok" and "part" not in json.loads(lines[0])
    summary = json.loads((tmp_path / "ray" / "talk.emotions.summary.json").read_text())
    assert summary["parts"] == 2 and summary["frames"] == 20 and summary["faces"] == outcome.results[0].rows > 20


def test_a_part_whose_worker_was_killed_is_redone_and_the_video_joinedsame_as_whole(tmp_path, local_ray, talk_whole,
                                                                                short_parts, capsys):
    config, whole = talk_whole
    outcome: list = []
    capsys.readouterr()
    run = threading.Thread(target=lambda: outcome.append(
        run_on_ray(config, RayOptions(workers=2), output_dir=tmp_path / "ray", progress=True)))
    run.start()
    kill_a_worker_mid_share(time.monotonic() + 300)  # (bounds a hang only)
    run.join(timeout=600)
    assert outcome, "the run did not finish"
    result = outcome[0]
    assert [(r.status, r.frames) for r in result.results] == [("ok", 20)]
    assert result.run["ray"]["worker_failures"] == 1 and result.run["ray"]["shares"] == 3  # the lost part went again
    same_as_whole(tmp_path / "ray", whole)
    last = [line for line in re.split(r"[\r\n]", capsys.readouterr().err) if "frame" in line][-1]
    assert "20/20" in last, last  # the bar: each frame once (no overlap twice, nothing of the lost part)


def test_ctrl_c_with_a_video_s_parts_half_in_records_it_interrupted_and_resume_completes_it(
        tmp_path, local_ray, talk_whole, short_parts, monkeypatch):
    from emopipe.pipeline.parts import PartResults

    config, whole = talk_whole
    take = PartResults.take

    def cut_off(self, result, record):  # Ctrl-C once the first part is in, the other not
        monkeypatch.setattr(PartResults, "take", take)
        take(self, result, record)
        raise KeyboardInterrupt

    monkeypatch.setattr(PartResults, "take", cut_off)
    out = tmp_path / "ray"
    stopped = run_on_ray(config, RayOptions(workers=2), output_dir=out)
    assert stopped.interrupted and [(r.status, r.part) for r in stopped.results] == [("interrupted", None)]
    assert not (out / "talk.emotions.csv").exists()  # no file under a final name for a video not joined
    resumed = run_on_ray(replace(config, resume=True), RayOptions(workers=2), output_dir=out)
    assert [(r.status, r.frames) for r in resumed.results] == [("ok", 20)]
    for name in ("talk.emotions.csv", "talk.emotions.segments.csv"):
        assert (out / name).read_bytes() == (whole / name).read_bytes()
    assert not list(out.glob("*.part*"))  # the parts' files, the interrupted run's too, are gone


FRAMES = 2 + 3 + 2 + 3 + 2  # five_clips


def test_the_drivers_bar_reaches_every_frame_with_both_workers_alive(tmp_path, local_ray, five_clips, capsys):
    folder, config = five_clips
    assert expected_frames(str(folder / "clip1.mp4"), config) == 3  # what the bar's total is made of
    assert expected_frames(str(folder / "clip1.mp4"), RunConfig.from_options(config, max_frames=2)) == 2
    capsys.readouterr()
    outcome = run_on_ray(config, RayOptions(workers=2), output_dir=tmp_path / "ray", progress=True,
                         on_result=both_warm_at_first_result())
    err = capsys.readouterr().err
    assert err.endswith("\n")  # the bar is left on its own line
    last = [line for line in re.split(r"[\r\n]", err) if "frame" in line][-1]
    assert outcome.run["frames"] == FRAMES
    assert f"{FRAMES}/{FRAMES}" in last and "workers=2" in last, last
    assert f"faces={outcome.run['faces']}" in last and outcome.run["faces"] > 0, last


class GatedWorker(Worker):
    """A worker whose pipeline waits after each frame it writes until the test lets it go on (a file appears)."""

    def __init__(self, gate: str, config: RunConfig, board) -> None:
        super().__init__(config, name="gated", board=board)
        count = self.counter.frame

        def frame(result, latency_s) -> None:
            count(result, latency_s)
            while not Path(gate).exists():
                time.sleep(0.01)

        self.counter.frame = frame  # type: ignore[method-assign]


def test_a_worker_says_how_far_its_share_is_while_it_runs(tmp_path, local_ray, five_clips):
    folder, config = five_clips
    plan = Analyzer(config).plan_many([str(folder / "clip1.mp4")], tmp_path / "out")
    gate = tmp_path / "go"
    board = ray.remote(num_cpus=0)(ProgressBoard).remote()
    worker = ray.remote(max_concurrency=4)(GatedWorker).remote(str(gate), config, board)  # as the driver starts it

    def told(want: dict) -> dict | None:
        deadline = time.monotonic() + 300  # (only against a hang: the loop waits for the count to be told)
        while (now := ray.get(board.read.remote(), timeout=120).get("gated")) != want:
            if time.monotonic() > deadline:
                break
            time.sleep(0.05)
        return now

    try:
        running = worker.process.remote(plan.todo, 7)
        now = told({7: (1, 1)})
        assert now == {7: (1, 1)}  # share 7, one frame (one face) written: told while the share runs
        assert ray.wait([running], timeout=0)[0] == []  # (the gate holds it)
        assert ray.get(worker.progress.remote()) == {7: (1, 1)}  # (the worker answers while its share runs)
        gate.touch()
        reply = ray.get(running)
        assert [r.frames for r in reply["results"]] == [3]
        assert told({}) == {}  # the share's end is told: nothing of it is running any more
        assert reply["summary"]["frames"] == 3 and reply["summary"]["faces"] == reply["results"][0].faces
    finally:
        ray.kill(worker, no_restart=True)
        ray.kill(board, no_restart=True)


class BuggyWorker(Worker):
    """A worker whose every share meets a bug (not an emopipe error): the call itself fails."""

    def process(self, share, share_id=0):
        raise RuntimeError("a bug in the worker\nits second line")


def test_a_bug_in_a_worker_fails_its_shares_sources_with_the_error_itself(tmp_path, local_ray, five_clips,
                                                                           monkeypatch):
    """Each source of the share fails with the bug's one line (its class and message), not Ray's header line
    ("ray::emopipe-worker-0:Worker.process() (pid=…)") that its error's text starts with."""
    import emopipe.cluster

    _, config = five_clips
    monkeypatch.setattr(emopipe.cluster, "Worker", BuggyWorker)
    outcome = run_on_ray(config, RayOptions(workers=1), output_dir=tmp_path / "ray")
    assert [(r.status, r.error, r.kind, r.exit_code) for r in outcome.results] == [
        ("failed", "RuntimeError: a bug in the worker", "WorkerError", 1)] * 5
    lines = Manifest(tmp_path / "ray").previous().values()
    assert [e["error"] for e in lines] == ["RuntimeError: a bug in the worker"] * 5


class LateCountingWorker(Worker):
    """A worker whose counter hears of a source's last frame only once a share's summary was taken (or after
    ``hold_s``): the order that, unwaited for, left the last frames out of the reply (seen once in CI)."""

    def __init__(self, last_index: int, hold_s: float, config: RunConfig) -> None:
        super().__init__(config, name="late")
        self.summary_taken = threading.Event()
        count = self.counter.frame

        def frame(result, latency_s) -> None:
            if result.frame.index == last_index:
                self.summary_taken.wait(timeout=hold_s)
            count(result, latency_s)

        self.counter.frame = frame  # type: ignore[method-assign]

    def summary(self):
        taken = super().summary()
        self.summary_taken.set()
        return taken


def test_a_shares_reply_counts_its_last_frame_however_late_the_counter_hears_of_it(tmp_path, local_ray,
                                                                                  five_clips):
    folder, config = five_clips
    plan = Analyzer(config).plan_many([str(folder / "clip1.mp4")], tmp_path / "out")  # 3 frames
    worker = ray.remote(max_concurrency=4)(LateCountingWorker).remote(2, 2.0, config)
    try:
        reply = ray.get(worker.process.remote(plan.todo, 0))
        assert [r.frames for r in reply["results"]] == [3]
        assert reply["summary"]["frames"] == 3 and reply["summary"]["faces"] == reply["results"][0].faces
    finally:
        ray.kill(worker, no_restart=True)


class LateMetricsWorker(Worker):
    """A worker whose metrics count a share's last frame only once its push was sent (or after ``hold_s``):
    the order that, unwaited for, pushed a worker's totals without its last frames (seen once in CI)."""

    def __init__(self, last: int, hold_s: float, config: RunConfig) -> None:
        super().__init__(config, name="late-metrics")
        self.last, self.hold_s = last, hold_s
        self.pushed = threading.Event()
        self.counted = 0

    def process(self, share, share_id=0):
        self.ready()
        if not hasattr(self, "_late"):
            self._late = True
            observe, finish = self.metrics.observe_frame, self.exporter.finish

            def observe_frame(*args, **kwargs) -> None:
                self.counted += 1
                if self.counted == self.last:
                    self.pushed.wait(timeout=self.hold_s)
                observe(*args, **kwargs)

            def finish_then_say(*args, **kwargs) -> None:
                finish(*args, **kwargs)
                self.pushed.set()

            self.metrics.observe_frame = observe_frame
            self.exporter.finish = finish_then_say
        return super().process(share, share_id)


def test_a_workers_push_counts_the_last_frame_of_its_share(tmp_path, local_ray, five_clips):
    from prometheus_client.parser import text_string_to_metric_families

    folder, config = five_clips
    gateway = _Pushgateway()
    config = RunConfig.from_options(config, pushgateway=f"127.0.0.1:{gateway.server_port}")
    plan = Analyzer(config).plan_many([str(folder / "clip1.mp4")], tmp_path / "out")  # 3 frames
    worker = ray.remote(max_concurrency=4)(LateMetricsWorker).remote(3, 2.0, config)
    try:
        reply = ray.get(worker.process.remote(plan.todo, 0))
    finally:
        ray.kill(worker, no_restart=True)
        gateway.shutdown()
        gateway.server_close()
    assert reply["summary"]["frames"] == 3
    body = gateway.pushed["/metrics/job/emopipe-batch/instance/late-metrics"]
    frames = [s.value for f in text_string_to_metric_families(body) for s in f.samples
              if s.name == "emopipe_frames_total"]
    assert frames == [3]


def test_the_driver_keeps_each_workers_summary_taken_last_whatever_order_the_replies_come_in():
    def reply(snapshot: int, frames: int, where: str = "host:1") -> dict:
        return {"snapshot": snapshot, "summary": {"frames": frames}, "worker": where}

    kept: dict[str, dict] = {}
    keep_latest_summary(kept, "a", reply(2, 12))
    keep_latest_summary(kept, "a", reply(1, 7))  # taken first, arrived last: the older view
    keep_latest_summary(kept, "b", reply(1, 5, "host:2"))
    assert kept["a"] == {"frames": 12, "worker": "host:1", "name": "a", "snapshot": 2}
    assert kept["b"]["frames"] == 5 and kept["b"]["name"] == "b"
    keep_latest_summary(kept, "a", reply(3, 14))
    assert kept["a"]["frames"] == 14


def test_a_workers_replies_are_numbered_in_the_order_taken_and_the_last_counts_every_frame(tmp_path, local_ray,
                                                                                          five_clips):
    """Two shares side by side in one worker: the reply taken last (its number the highest) counts both shares'
    frames, whichever reply reaches the driver first."""
    _, config = five_clips
    plan = Analyzer(config).plan_many(None, tmp_path / "out")
    worker = ray.remote(max_concurrency=4)(Worker).remote(config, name="numbered")
    try:
        refs = [worker.process.remote(plan.todo[:2], 0), worker.process.remote(plan.todo[2:3], 1)]
        replies = ray.get(refs)
    finally:
        ray.kill(worker, no_restart=True)
    frames = sum(r.frames for reply in replies for r in reply["results"])
    assert sorted(reply["snapshot"] for reply in replies) == [1, 2]
    assert max(replies, key=lambda r: r["snapshot"])["summary"]["frames"] == frames
    for order in (replies, replies[::-1]):
        kept: dict[str, dict] = {}
        for reply in order:
            keep_latest_summary(kept, "numbered", reply)
        assert kept["numbered"]["frames"] == frames


def test_a_workers_shares_run_through_its_one_pipeline(tmp_path, local_ray, five_clips):
    """Shares sent one after another are added to the worker's running pipeline (it does not drain and start
    again): each share's results come back when its own sources are done, in order, rows as one process writes —
    under their partial names, each result saying the renames the driver is to do after its manifest line."""
    _, config = five_clips
    with Analyzer(config) as analyzer:
        analyzer.run_many(output_dir=tmp_path / "one")
    plan = Analyzer(config).plan_many(None, tmp_path / "out")
    worker = ray.remote(max_concurrency=4)(Worker).remote(config, name="fed")
    try:
        first = ray.get(worker.process.remote(plan.todo[:2], 0))
        second = ray.get(worker.process.remote(plan.todo[2:3], 1))
        assert [r.source for r in first["results"]] == [p.uri for p in plan.todo[:2]]
        assert [r.source for r in second["results"]] == [plan.todo[2].uri]
        third = ray.get(worker.process.remote(plan.todo[3:], 2))  # after the pipeline waited idle for it
        assert [r.source for r in third["results"]] == [p.uri for p in plan.todo[3:]]
        assert all(r.status == "ok" for r in third["results"])
        assert third["summary"]["sources"] == 5 and third["summary"]["frames"] == FRAMES
        assert third["summary"]["emonet_batches"] > 0
    finally:
        ray.kill(worker, no_restart=True)
    out = tmp_path / "out"
    assert not list(out.glob("*.emotions*.csv")) and not list(out.glob("*.json"))  # no final name taken yet
    results = [r for reply in (first, second, third) for r in reply["results"]]
    for result, planned in zip(results, plan.todo):
        finals = [final for _, final in result.renames]
        assert finals == [planned.tracks, planned.segments, planned.summary, planned.rows]  # the rows last
        assert "renames" not in result.as_dict()  # (not the manifest line's)
        publish(result.renames)
    assert same_rows(all_rows(out), all_rows(tmp_path / "one"))
    assert not list(out.rglob("*.partial"))


def test_a_worker_warms_its_detector_as_it_starts_for_the_frame_size_it_is_given(tmp_path, local_ray, five_clips):
    """The driver gives new workers its largest source's frame size: the detector is warmed for it with EmoNet as
    the worker starts; a source of another size warms it again at its first share, as without it."""
    _, config = five_clips
    plan = Analyzer(config).plan_many(None, tmp_path / "out")
    height, width = frame_size_of(plan.todo[0].uri)
    assert frame_size_of(str(tmp_path / "missing.mp4")) is None and frame_size_of(str(tmp_path)) is None
    replies = {}
    for name, size in (("told", (height, width)), ("told-another", (height // 2, width // 2))):
        worker = ray.remote(max_concurrency=4)(Worker).remote(config, name=name, frame_size=size)
        try:
            replies[name] = ray.get(worker.process.remote(plan.todo[:1], 0))
        finally:
            ray.kill(worker, no_restart=True)
    assert [r.status for reply in replies.values() for r in reply["results"]] == ["ok", "ok"]
    assert replies["told"]["summary"]["startup"]["detector_warmups"] == 1  # (at its start: none at the share)
    assert replies["told-another"]["summary"]["startup"]["detector_warmups"] == 2


class _Pushgateway(http.server.ThreadingHTTPServer):
    """Takes pushes as a Pushgateway does (PUT /metrics/job/J/instance/I) and keeps the last body per path."""

    def __init__(self) -> None:
        self.pushed: dict[str, str] = {}
        pushed = self.pushed

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_PUT(self) -> None:
                pushed[self.path] = self.rfile.read(int(self.headers["Content-Length"])).decode()
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        super().__init__(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()


def test_each_worker_serves_its_own_metrics_and_the_summary_says_where(tmp_path, local_ray, five_clips):
    from prometheus_client.parser import text_string_to_metric_families

    _, config = five_clips
    base = free_ports(3)
    gateway = _Pushgateway()
    config = RunConfig.from_options(config, metrics_port=base, pushgateway=f"127.0.0.1:{gateway.server_port}")
    scraped: dict[str, float] = {}
    finished: list = []

    def on_result(result) -> None:
        finished.append(result)
        if len(finished) == 5:  # every share is back and no worker is stopped yet: read both endpoints now
            for port in (base + 1, base + 2):
                url = f"http://127.0.0.1:{port}/metrics"
                scraped[url] = scrape(url)[("emopipe_frames_total", frozenset())]

    outcome = run_on_ray(config, RayOptions(workers=2), output_dir=tmp_path / "ray",
                         on_result=both_warm_at_first_result(on_result))
    section = outcome.run["ray"]
    assert sorted(section["metrics"].values()) == sorted(scraped)  # worker N on P+1+N
    per_worker = section["per_worker"]
    for name, url in section["metrics"].items():
        assert per_worker[name]["metrics"] == url
        assert scraped[url] == per_worker[name]["frames"] > 0  # each counted the frames it did, and only those
    assert sum(w["frames"] for w in per_worker.values()) == outcome.run["frames"] == FRAMES
    assert outcome.run["fps"] > 0 and outcome.run["faces"] == sum(w["faces"] for w in per_worker.values())
    gateway.shutdown()
    gateway.server_close()
    # --pushgateway: each worker pushed its own group, its name as the instance, with its own count
    assert set(gateway.pushed) == {f"/metrics/job/emopipe-batch/instance/{name}" for name in per_worker}
    for name, worker in per_worker.items():
        body = gateway.pushed[f"/metrics/job/emopipe-batch/instance/{name}"]
        frames = [s.value for f in text_string_to_metric_families(body) for s in f.samples
                  if s.name == "emopipe_frames_total"]
        assert frames == [worker["frames"]]


def test_a_worker_metrics_port_that_is_taken_or_out_of_range_is_a_usage_error(tmp_path, local_ray, five_clips):
    _, config = five_clips
    with pytest.raises(UsageError, match="past 65535"):  # worker 1 would be on 65536: refused before any starts
        run_on_ray(RunConfig.from_options(config, metrics_port=65534), RayOptions(workers=2),
                   output_dir=tmp_path / "far")
    base = free_ports(2)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", base + 1))
        taken.listen()
        with pytest.raises(UsageError, match=f"cannot serve metrics on 127.0.0.1:{base + 1}"):
            run_on_ray(RunConfig.from_options(config, metrics_port=base), RayOptions(workers=1),
                       output_dir=tmp_path / "taken")
    assert not Manifest(tmp_path / "taken").previous()  # stopped before any source ran


def test_the_kuberay_job_runs_the_command_on_gpu_workers_that_share_the_storage():
    import yaml

    job = yaml.safe_load((Path(__file__).resolve().parents[1] / "deploy" / "kuberay" / "rayjob.yaml").read_text())
    assert job["kind"] == "RayJob" and job["apiVersion"] == "ray.io/v1"
    entry = job["spec"]["entrypoint"].split()
    assert entry[0] == "emopipe" and "--ray" in entry and "--resume" in entry and "--models-dir" in entry
    cluster = job["spec"]["rayClusterSpec"]
    assert cluster["rayVersion"].startswith("2.") and cluster["headGroupSpec"]["rayStartParams"]["num-gpus"] == "0"
    pods = [cluster["headGroupSpec"]["template"]["spec"]] + [g["template"]["spec"] for g in cluster["workerGroupSpecs"]]
    for pod in pods:
        claims = {v["name"]: v["persistentVolumeClaim"]["claimName"] for v in pod["volumes"]}
        mounts = {m["name"]: m["mountPath"] for m in pod["containers"][0]["volumeMounts"]}
        assert mounts == {"data": "/data", "models": "/models"} and set(claims) == set(mounts)
    workers = cluster["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]
    assert workers["resources"]["limits"]["nvidia.com/gpu"] == "1"
    # four workers share each GPU under MPS, started in the pod (the head cannot tell the workers' nodes run it)
    share = float(entry[entry.index("--ray-gpus-per-worker") + 1])
    assert workers["lifecycle"]["postStart"]["exec"]["command"] == ["nvidia-cuda-mps-control", "-d"]
    assert int(workers["resources"]["limits"]["cpu"]) >= round(1 / share) * 4  # (CPUS_PER_SHARED_WORKER each)
    # the workers' models folder is writable: the compiled GPU code is cached there (read-only, each compiles)
    assert not next(m for m in workers["volumeMounts"] if m["name"] == "models").get("readOnly")


def _warm_workers() -> list[str]:
    actors = ray.util.list_named_actors(all_namespaces=True)
    return sorted(a["name"] for a in actors if a["namespace"] == WARM_NAMESPACE)


def _end_warm_workers() -> None:
    for name in _warm_workers():
        ray.kill(ray.get_actor(name, namespace=WARM_NAMESPACE), no_restart=True)


def test_workers_kept_warm_take_the_next_run_with_the_same_options(tmp_path, local_ray, five_clips):
    """--ray-keep-warm: the workers wait warm on the cluster after their run; the next run with the same options
    starts on them (no new process, no engines built again) and writes the same rows; one with other options that
    shape the pipeline cannot take them."""
    _, config = five_clips
    try:
        first = run_on_ray(config, RayOptions(workers=2, keep_warm_s=600), output_dir=tmp_path / "first")
        assert sorted(r.status for r in first.results) == ["ok"] * 5
        kept = sorted(first.run["ray"]["per_worker"])
        assert _warm_workers() == kept and all(name.startswith("emopipe-warm-") for name in kept)
        where = {name: w["where"] for name, w in first.run["ray"]["per_worker"].items()}
        assert not any(w["warm_from_an_earlier_run"] for w in first.run["ray"]["per_worker"].values())

        second = run_on_ray(config, RayOptions(workers=2, keep_warm_s=600), output_dir=tmp_path / "second")
        assert sorted(r.status for r in second.results) == ["ok"] * 5
        facts = second.run["ray"]["per_worker"]
        assert sorted(facts) == kept and all(facts[name]["warm_from_an_earlier_run"] for name in kept)
        assert {name: w["where"] for name, w in facts.items()} == where  # the same processes
        assert sum(w["sources"] for w in facts.values()) == 5  # this run's sources only, not the first run's too
        assert sum(s["frames"] for s in second.run["ray"]["worker_summaries"]) == FRAMES
        assert same_rows(all_rows(tmp_path / "second"), all_rows(tmp_path / "first"))
        assert _warm_workers() == kept  # left warm again

        other = RunConfig.from_options(config, threshold=0.9)  # (another detection threshold: other rows)
        for name in kept:
            actor = ray.get_actor(name, namespace=WARM_NAMESPACE)
            assert ray.get(actor.claim.remote(other, os.getcwd(), None, "another run"), timeout=60) is None
    finally:
        _end_warm_workers()


def test_with_keep_warm_a_worker_the_cluster_had_no_room_for_is_killed_at_once_not_kept(tmp_path, local_ray, five_clips,
                                                                                        monkeypatch):
    """Three one-CPU workers on a two-CPU Ray (others' warm workers may hold the room): the third is never placed.
    The two that ran are kept warm; the third is killed as the run ends, not asked to stay warm — which waited for it
    to start, 30 s on a standing cluster (session 37)."""
    from emopipe.cluster import _Crew

    _, config = five_clips
    dismissed: list[tuple[str, bool]] = []
    dismiss = _Crew.dismiss

    def noted(self, name, keep=False):
        dismissed.append((name, keep))
        dismiss(self, name, keep)

    monkeypatch.setattr(_Crew, "dismiss", noted)
    try:
        outcome = run_on_ray(config, RayOptions(workers=3, keep_warm_s=600), output_dir=tmp_path / "out")
        assert sorted(r.status for r in outcome.results) == ["ok"] * 5
        ran = sorted(n for n, w in outcome.run["ray"]["per_worker"].items() if w["where"])  # (it said it was warm)
        never = sorted(set(outcome.run["ray"]["per_worker"]) - set(ran))
        assert len(ran) == 2 and len(never) == 1
        assert sorted(dismissed) == sorted([(n, True) for n in ran] + [(never[0], False)])
        assert _warm_workers() == ran
    finally:
        _end_warm_workers()


@pytest.mark.timeout(600)  # (a bound on a loaded machine; without the room made, the second run waits 900 s)
def test_a_run_with_other_options_ends_idle_warm_workers_that_hold_the_room_it_needs(tmp_path, local_ray, five_clips,
                                                                                    caplog):
    """Two warm workers of one run fill a two-CPU Ray; a run with another threshold (which cannot take them) ends
    them for its own, rather than wait their keep time; the busy are never ended (a run holds them)."""
    _, config = five_clips
    try:
        first = run_on_ray(config, RayOptions(workers=2, keep_warm_s=900), output_dir=tmp_path / "first")
        kept = sorted(first.run["ray"]["per_worker"])
        assert _warm_workers() == kept
        other = RunConfig.from_options(config, threshold=0.9)
        with caplog.at_level("INFO", logger="emopipe.cluster"):
            second = run_on_ray(other, RayOptions(workers=2), output_dir=tmp_path / "second")
        assert sorted(r.status for r in second.results) == ["ok"] * 5
        assert not set(second.run["ray"]["per_worker"]) & set(kept)  # its own workers ...
        assert sum(f"{name}: ended, its room" in caplog.text for name in kept) == 2  # ... in the room of the kept
        assert _warm_workers() == []
    finally:
        _end_warm_workers()


def test_a_worker_kept_warm_ends_when_no_run_comes(tmp_path, local_ray, five_clips):
    _, config = five_clips
    try:
        run_on_ray(config, RayOptions(workers=1, keep_warm_s=1), output_dir=tmp_path / "out")
        deadline = time.monotonic() + 120  # (a bound for a loaded machine, not a speed: it ends after 1 s idle)
        while _warm_workers() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _warm_workers() == []
    finally:
        _end_warm_workers()


def test_a_worker_kept_warm_whose_run_is_gone_without_letting_it_go_ends_too(tmp_path, local_ray, five_clips):
    """A driver killed mid-run (SIGKILL, its pod lost) never releases its warm workers: each sees its run's board
    (an actor of that driver's) gone, and ends after its keep time as a released one does — never holding its GPU
    for good."""
    _, config = five_clips
    board = ray.remote(num_cpus=0)(ProgressBoard).remote()
    name = "emopipe-warm-abandoned"
    worker = ray.remote(num_cpus=1, max_concurrency=4)(Worker).options(
        name=name, namespace=WARM_NAMESPACE, lifetime="detached").remote(config, os.getcwd(), name, None, board,
                                                                         "a run", 1.0)
    try:
        assert ray.get(worker.ready.remote(), timeout=300)["error"] is None
        assert _warm_workers() == [name]
        ray.kill(board, no_restart=True)  # the run's driver is gone
        deadline = time.monotonic() + 120  # (a bound for a loaded machine: it checks every few seconds)
        while _warm_workers() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _warm_workers() == []
    finally:
        _end_warm_workers()


def test_keep_warm_is_refused_for_a_local_ray_that_stops_with_its_run(tmp_path, five_clips):
    _, config = five_clips
    with pytest.raises(UsageError, match="--ray-keep-warm: a local Ray stops with its run"):
        run_on_ray(config, RayOptions(address=LOCAL, keep_warm_s=60), output_dir=tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_an_address_where_no_cluster_answers_is_refused_at_once(monkeypatch):
    """Ray itself retries such an address for minutes, printing its own warnings; the run says so in one line."""
    from emopipe.cluster import _join

    port = free_ports(1)  # (nothing listens there)
    with pytest.raises(UsageError, match=rf"^--ray 127.0.0.1:{port}: no Ray cluster at 127.0.0.1:{port} \(connection "
                                         r"refused\); start one \(ray start --head\)"):
        _join(f"127.0.0.1:{port}")
    with pytest.raises(UsageError, match=rf"^--ray ray://127.0.0.1:{port}: no Ray cluster at"):
        _join(f"ray://127.0.0.1:{port}")
    monkeypatch.setenv("RAY_ADDRESS", f"127.0.0.1:{port}")
    with pytest.raises(UsageError, match=rf"^--ray \(RAY_ADDRESS\): no Ray cluster at 127.0.0.1:{port}"):
        _join("auto")


@pytest.fixture
def silent_port():
    """A port where something accepts connections and never says a word (another service, a firewall's tarpit): Ray,
    asked to join there, waits in its C++ client, ~40 s a try, 20 tries. On every interface: Ray joins 127.0.0.1 at
    this machine's own address."""
    server = socket.create_server(("", 0))
    accepted: list[socket.socket] = []

    def accept() -> None:
        with contextlib.suppress(OSError):
            while True:
                accepted.append(server.accept()[0])

    threading.Thread(target=accept, daemon=True).start()
    yield server.getsockname()[1]
    server.shutdown(socket.SHUT_RDWR)  # (wakes the accept)
    server.close()
    for connection in accepted:
        connection.close()


def test_a_ray_client_address_without_ray_client_installed_is_one_line_not_an_internal_error(silent_port,
                                                                                             monkeypatch):
    """--ray ray://HOST:10001 (docs/cluster.md's example) where Ray Client's packages are missing: Ray raises a
    ValueError, which the command called an internal error (exit 1); now a usage error saying what to install."""
    from ray._private import utils

    from emopipe.cluster import _join

    monkeypatch.setattr(utils, "get_ray_client_dependency_error", lambda: ImportError("No module named 'grpc'"))
    with pytest.raises(UsageError, match=rf"^--ray ray://127.0.0.1:{silent_port}: a ray:// address is joined through "
                                         r"Ray Client, which this Python lacks: pip install 'ray\[client\]'"):
        _join(f"ray://127.0.0.1:{silent_port}")


# The command, saying on stderr when it calls ray.init (Ray joining: the signal is sent then), with the wait for a
# cluster's answer cut to argv[1] seconds
JOIN_SAID = """
import sys
import types
import ray
import emopipe.cluster

init = ray.init

def said(*args, **kwargs):
    print("test: ray.init", file=sys.stderr, flush=True)
    return init(*args, **kwargs)

ray.init = said
emopipe.cluster.JOIN_TIMEOUT_S = float(sys.argv[1])
from emopipe.cli.app import run_and_exit
run_and_exit(sys.argv[2:])
"""


def _join_command(clips: Path, out: Path, port: int, join_timeout_s: float) -> list[str]:
    return [sys.executable, "-c", JOIN_SAID, str(join_timeout_s), str(clips), "-o", str(out), "--ray",
            f"127.0.0.1:{port}", "--no-progress"]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_or_sigterm_while_joining_a_cluster_that_never_answers_ends_the_command_at_once(
        tmp_path, silent_port, signum):
    """The signal was held until ray.init gave up (Ray retries such an address for ~14 minutes), and held in Ray's
    C++ client even after: the command could not be stopped. Now it exits 130 at once, one line; nothing was run, so
    nothing is written (the output folder made to hold it goes with its lock), and joining started no process here.
    The bound only fails where the signal is held."""
    clips, out = two_small_clips(tmp_path), tmp_path / "out"
    process = subprocess.Popen(_join_command(clips, out, silent_port, 600), cwd=tmp_path, stderr=subprocess.PIPE,
                               text=True, env={**os.environ, "PYTHONPATH": str(REPO)}, preexec_fn=interruptible)
    try:
        seen = stderr_until(process, "test: ray.init")
        process.send_signal(signum)
        stderr = "".join(seen) + process.communicate(timeout=30)[1]
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        left = end_processes_in(tmp_path)
    assert process.returncode == 130, stderr
    said = [line for line in stderr.splitlines()[len(seen):] if line.startswith("emopipe")]  # (not Ray's own log)
    assert said == ["emopipe: interrupted"] and "Traceback" not in stderr, stderr
    assert not out.exists() and left == []


@pytest.mark.timeout(120)
def test_a_cluster_address_where_no_ray_answers_is_given_up_after_the_join_timeout(tmp_path, silent_port):
    """Something accepts connections there (so the address probe passes) but no Ray answers: Ray waited ~14 minutes,
    printing its warnings, and then failed with an 'internal error'. Now the command gives up after JOIN_TIMEOUT_S
    (here cut to 2 s) with one line, exit 2, nothing written."""
    clips, out = two_small_clips(tmp_path), tmp_path / "out"
    done = subprocess.run(_join_command(clips, out, silent_port, 2), cwd=tmp_path, capture_output=True, text=True,
                          timeout=60, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 2, done.stderr
    said = [line for line in done.stderr.splitlines() if line.startswith("emopipe: error")]
    assert said == [f"emopipe: error: --ray 127.0.0.1:{silent_port}: no Ray cluster answered there within 2 s "
                    "(something accepts connections there, but no Ray replied); check the address and port (ray "
                    "start --head says it), or use --ray local"], done.stderr
    assert "Traceback" not in done.stderr and not out.exists() and end_processes_in(tmp_path) == []


def test_a_join_given_up_on_that_ray_answers_later_is_disconnected_and_blocks_no_later_join(monkeypatch):
    """A library caller whose join timed out goes on with Ray still waiting in a thread. Should Ray answer it later,
    this process was connected behind the caller's back (told there was no Ray); and a second join meanwhile ran two
    ray.init at once. Now the late join disconnects at once, and a join while it waits is refused in one line."""
    import emopipe.cluster as cluster

    answer = threading.Event()
    calls: list[str] = []

    def init(**kwargs):
        calls.append("init")
        if len(calls) == 1:
            assert answer.wait(60), "the test never let Ray answer"  # (the first join: Ray answers when told)

    monkeypatch.setattr(ray, "init", init)
    monkeypatch.setattr(ray, "shutdown", lambda: calls.append("shutdown"))
    monkeypatch.setattr(cluster, "JOIN_TIMEOUT_S", 0.05)  # (a bound the first join cannot meet: it waits for answer)
    try:
        with pytest.raises(UsageError, match=r"^--ray X: no Ray cluster answered there within 0 s"):
            cluster._init_meanwhile_free("--ray X", address="X")
        with pytest.raises(UsageError, match=r"^--ray Y: an earlier join of this process "
                                             r"\(emopipe-ray-join \(--ray X\)\) was given up on and still waits"):
            cluster._init_meanwhile_free("--ray Y", address="Y")
        assert calls == ["init"]  # no second ray.init beside the first
    finally:
        answer.set()  # Ray answers the first join after all
        for thread in threading.enumerate():
            if thread.name.startswith("emopipe-ray-join"):
                thread.join(60)
    assert calls == ["init", "shutdown"]  # connected late: disconnected at once
    monkeypatch.setattr(cluster, "JOIN_TIMEOUT_S", 60.0)
    cluster._init_meanwhile_free("--ray Y", address="Y")  # once it has ended, a join goes ahead
    assert calls == ["init", "shutdown", "init"]


def test_a_failed_join_of_a_cluster_elsewhere_says_it_may_want_a_token_and_sends_none_unasked(monkeypatch, tmp_path):
    """Ray sends its token to no address it is given unless RAY_AUTH_MODE=token; a cluster that uses token
    authentication then refuses the driver (after ~20 s of Ray's warnings) and the run said 'no Ray cluster'."""
    import emopipe.cluster as cluster

    monkeypatch.delenv("RAY_AUTH_MODE", raising=False)
    token = tmp_path / "token"
    token.write_text(uuid.uuid4().hex * 2)
    monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", str(token))
    monkeypatch.setattr(cluster, "_answers", lambda address, option: None)  # (as if a cluster listened there)

    def refused(**kwargs):
        raise ConnectionError("Failed to connect to Ray cluster at 203.0.113.7:6379")

    monkeypatch.setattr(ray, "init", refused)
    with pytest.raises(UsageError, match=r"^--ray 203\.0\.113\.7:6379: could not join a Ray cluster there \(Failed "
                                         r"to connect to Ray cluster at 203\.0\.113\.7:6379\); if it uses token "
                                         r"authentication, set RAY_AUTH_MODE=token and its token in RAY_AUTH_TOKEN, "
                                         r"RAY_AUTH_TOKEN_PATH or ~/\.ray/auth_token$"):
        cluster._join("203.0.113.7:6379")  # (TEST-NET-3: no interface here has it)
    assert "RAY_AUTH_MODE" not in os.environ  # this machine's token was not sent there


JOIN_AND_COUNT = """
import sys, ray
from emopipe.cluster import connect_ray, disconnect_ray
connect_ray(sys.argv[1])
print(ray.cluster_resources().get("CPU"), flush=True)
disconnect_ray(sys.argv[1])
"""


def test_a_cluster_started_here_with_token_authentication_is_joined_by_its_address(tmp_path):
    """`ray start --head` on a machine that holds a Ray token (~/.ray/auth_token, written by any local ray.init)
    starts with token authentication. Ray sends that token to a local cluster it finds itself (`--ray` alone) but
    not to `--ray 127.0.0.1:PORT`: the join failed after ~20 s, 'no Ray cluster there'. The head, started here, has
    a Ray (and a temp folder) of its own; a separate driver process joins it."""
    token = tmp_path / "token"
    token.write_text(uuid.uuid4().hex * 2)
    clean = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "RAY_AUTH_MODE", "RAY_AUTH_TOKEN")}
    port = free_ports(1)
    temp = tempfile.mkdtemp(prefix="emo", dir="/tmp")  # (a short path: Ray's unix sockets are made under it)
    head, said = None, tmp_path / "head.log"  # (a file: a pipe would stay open in the processes it leaves)
    try:
        # `ray start` returns once the head is up; its processes stay in the session it was started in, its own
        with said.open("w") as log:
            head = subprocess.Popen([sys.executable, "-m", "ray.scripts.scripts", "start", "--head",
                                     f"--port={port}", "--num-cpus=1", "--include-dashboard=false",
                                     "--disable-usage-stats", "--node-ip-address=127.0.0.1", f"--temp-dir={temp}"],
                                    env={**clean, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(token)},
                                    stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        assert head.wait(timeout=300) == 0, said.read_text()[-2000:]
        done = subprocess.run([sys.executable, "-c", JOIN_AND_COUNT, f"127.0.0.1:{port}"],
                              env={**clean, "RAY_AUTH_TOKEN_PATH": str(token)}, capture_output=True, text=True,
                              timeout=300)
        assert (done.returncode, done.stdout.strip()) == (0, "1.0"), done.stderr[-2000:]
    finally:
        if head is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(head.pid, signal.SIGKILL)  # the head's processes, no other Ray's
            head.wait()
        shutil.rmtree(temp, ignore_errors=True)


@pytest.mark.parametrize("moved", ["ray._private.utils", "ray._private.worker"])
def test_a_ray_whose_private_modules_moved_still_starts_and_stops_the_runs_way(moved, monkeypatch):
    """The two places emopipe reaches into ``ray._private`` (Ray's SIGTERM handler held off while Ray starts, its
    monitor killed first when a local Ray stops) degrade, as their docstrings say, when the module is gone."""
    import signal as signals

    from emopipe.cluster import LOCAL, _without_rays_sigterm_handler, disconnect_ray

    package, name = moved.rsplit(".", 1)
    monkeypatch.setitem(sys.modules, moved, None)  # (importing it now raises ImportError)
    monkeypatch.delattr(sys.modules[package], name, raising=False)
    before = signals.getsignal(signals.SIGTERM)
    with _without_rays_sigterm_handler():
        pass
    assert signals.getsignal(signals.SIGTERM) is before
    monkeypatch.setattr(ray, "shutdown", lambda: None)  # (nothing started: only the path to it is under test)
    disconnect_ray(LOCAL)
