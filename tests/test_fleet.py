"""Camera fleets: several cameras and streams in one process (issue 21 items 6 and 7).

Model-free parts (the per-camera inbox, the label bound, file names, the grid page, the fleet's source with
in-process cameras) run at once. Two end-to-end runs use the real BlazeFace weights and a random EmoNet on the
CPU: in process, three cameras of which one is lost for good while the others go on; and the command with three
real HTTP MJPEG streams (Debian's ffmpeg on 127.0.0.1), one killed and restarted while the others keep flowing.
Every wait is a poll against a generous deadline: nothing depends on how fast this machine is.
"""

from __future__ import annotations

import csv
import fcntl
import json
import os
import queue
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from contextlib import ExitStack
from pathlib import Path

import cv2
import numpy as np
import pytest
from prometheus_client import CollectorRegistry

from emopipe.cli.run import build_parser, config_from_args
from emopipe.config import RunConfig
from emopipe.errors import OutputError, SourceUnavailableError, UsageError
from emopipe.io.encode import find_ffmpeg
from emopipe.io.live import LiveOptions, LiveSource
from emopipe.io.records import FOLDER_LOCK
from emopipe.io.uris import CAPTURES
from emopipe.observe.livepage import FrameHub, LiveServer, tile
from emopipe.observe.metrics import OTHER_SOURCE, PipelineMetrics
from emopipe.pipeline.fleet import Camera, FleetSource
from emopipe.pipeline.live import LiveStats
from emopipe.pipeline.many import plan_fleet
from emopipe.pipeline.runner import NewestPerStream
from emopipe.vision.annotate import PALETTE
from tests.support import synth
from tests.support.folders import held
from tests.support.processes import interruptible, wait_for
from tests.support.prometheus_helpers import scrape
from tests.support.streams import MjpegServer, chromium, free_port

REPO = Path(__file__).resolve().parents[1]


def _value(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(name, labels)


# -- the inbox: each camera's newest frame, the cameras in turn ------------------------------------------

def test_each_stream_keeps_only_its_newest_item_and_streams_are_served_in_turn():
    inbox = NewestPerStream()
    assert inbox.offer(0, "a0") is None
    assert inbox.offer(1, "b0") is None
    assert inbox.offer(0, "a1") == "a0"  # camera 0's newer frame replaces its waiting one (a drop) …
    assert inbox.offer(2, "c0") is None  # … and never another camera's
    inbox.put("END")
    assert inbox.qsize() == 4
    assert [inbox.get(timeout=1) for _ in range(4)] == ["a1", "b0", "c0", "END"]  # camera 0 kept its turn
    assert inbox.empty()
    with pytest.raises(queue.Empty):
        inbox.get(timeout=0.01)


# -- metrics per source, bounded ---------------------------------------------------------------------------

def test_per_source_series_have_a_redacted_source_label_up_to_the_bound_then_other():
    registry = CollectorRegistry()
    pm = PipelineMetrics(registry, mode="live", max_sources=2)
    first, second = "rtsp://admin:secret@cam1/stream", "http://cam2/feed?token=abc"
    third, fourth = "rtsp://cam3/stream", "webcam:0"
    for source in (first, second, third, fourth):
        pm.set_source_state(source, "up")
    assert [pm.source_label(s) for s in (first, second, third, fourth)] == [
        "rtsp://admin:***@cam1/stream", "http://cam2/feed?token=***", OTHER_SOURCE, OTHER_SOURCE]
    pm.observe_source_frame(first, 0.05, faces=2)
    pm.observe_source_frame(third, 0.07, faces=1)
    pm.observe_source_frame(fourth, 0.09, faces=0)
    pm.source_frames_dropped(third, 3)
    pm.source_reconnect(first)
    label = "rtsp://admin:***@cam1/stream"
    assert _value(registry, "emopipe_source_frames_total", source=label) == 1
    assert _value(registry, "emopipe_source_faces_total", source=label) == 2
    assert _value(registry, "emopipe_source_reconnects_total", source=label) == 1
    assert _value(registry, "emopipe_source_frame_latency_seconds_count", source=label) == 1
    assert _value(registry, "emopipe_source_frames_total", source=OTHER_SOURCE) == 2  # the sources past the bound
    assert _value(registry, "emopipe_source_frames_dropped_total", source=OTHER_SOURCE) == 3
    assert _value(registry, "emopipe_source_up", source=OTHER_SOURCE) == 2  # how many of them are up
    pm.set_source_state(third, "ended")
    pm.set_source_state(second, "lost")
    assert _value(registry, "emopipe_source_up", source=OTHER_SOURCE) == 1
    # each state of "other" counts its sources in it; a named source is in one state at a time
    assert [_value(registry, "emopipe_source_state", source=OTHER_SOURCE, state=state)
            for state in ("up", "lost", "failed", "ended")] == [1, 0, 0, 1]
    assert [_value(registry, "emopipe_source_state", source="http://cam2/feed?token=***", state=state)
            for state in ("up", "lost", "failed", "ended")] == [0, 1, 0, 0]
    assert _value(registry, "emopipe_source_up", source="http://cam2/feed?token=***") == 0
    pm.set_source_state(second, "up")
    assert _value(registry, "emopipe_source_state", source="http://cam2/feed?token=***", state="lost") == 0
    with pytest.raises(ValueError, match="a source state is one of"):
        pm.set_source_state(first, "down")
    # a named source's series exist at zero from its first mention, so rate() sees its first frame
    assert _value(registry, "emopipe_source_frames_total", source="http://cam2/feed?token=***") == 0
    labels = {s.labels.get("source") for family in registry.collect() for s in family.samples}
    assert labels - {None} == {label, "http://cam2/feed?token=***", OTHER_SOURCE}
    assert not any("secret" in str(s.labels) or "abc" in str(s.labels)
                   for family in registry.collect() for s in family.samples)
    # the run-level series are not per source
    assert _value(registry, "emopipe_frames_total") == 0


def test_the_source_bound_is_a_run_option_and_is_checked():
    assert RunConfig().metrics_max_sources == 64
    args = build_parser().parse_args(["rtsp://a/x", "rtsp://b/x", "--metrics-max-sources", "2"])
    assert config_from_args(args).metrics_max_sources == 2
    with pytest.raises(UsageError, match="--metrics-max-sources"):
        RunConfig(metrics_max_sources=-1)


# -- what a fleet is, and where its files go ---------------------------------------------------------------

def test_cameras_streams_webcams_and_list_files_make_one_fleet(tmp_path):
    cameras = tmp_path / "cameras.txt"
    cameras.write_text("# the shop floor\nrtsp://user:pw@10.0.0.5/main\n\nhttp://10.0.0.6/video.mjpg\n")
    config = config_from_args(build_parser().parse_args(["rtsp://a/x", "http://c/feed", "--webcam", "0"]))
    assert config.sources == ("rtsp://a/x", "http://c/feed", "webcam:0") and config.webcam is None and config.fleet
    config = config_from_args(build_parser().parse_args(["--list", str(cameras), "--webcam", "1"]))
    assert config.sources == ("rtsp://user:pw@10.0.0.5/main", "http://10.0.0.6/video.mjpg", "webcam:1")
    assert config.fleet
    assert not config_from_args(build_parser().parse_args(["a.mp4", "b.mp4"])).fleet
    mixed = config_from_args(build_parser().parse_args(["rtsp://a/x", str(tmp_path / "clip.mp4")]))
    with pytest.raises(UsageError, match="cannot share a run"):
        _ = mixed.fleet


def test_each_camera_gets_its_own_safely_named_files(tmp_path):
    sources = ["webcam:0", "webcam:1", "rtsp://admin:secret@cam.local/live", "rtsp://viewer:other@cam.local/live",
               "http://cam.local:8080/live?token=abc", "http://cam.local:8080/live?token=def"]
    config = RunConfig(format="jsonl")
    with ExitStack() as stack:
        planned, manifest = plan_fleet(config, sources, tmp_path / "out", stack)
        # an earlier run's folder (written while the plan holds it: a folder the plan made and left empty goes)
        manifest.append({"source": "webcam:0", "status": "ok"})
    names = [p.rows.name for p in planned]
    assert names == ["webcam0.emotions.jsonl", "webcam1.emotions.jsonl", "cam.local_live.emotions.jsonl",
                     "cam.local_live-2.emotions.jsonl", "cam.local_8080_live.emotions.jsonl",
                     "cam.local_8080_live-2.emotions.jsonl"]
    assert all(p.rows.parent == tmp_path / "out" for p in planned)
    assert len({p.summary for p in planned}) == len(sources)
    assert not any(secret in name for name in names for secret in ("secret", "other", "abc", "def", "admin"))
    assert manifest.path == tmp_path / "out" / "manifest.jsonl"
    # an earlier run's folder is not overwritten
    with ExitStack() as stack, pytest.raises(UsageError, match="earlier run"):
        plan_fleet(config, sources, tmp_path / "out", stack)
    for flags, message in (({"record": "x.mp4"}, "--record"), ({"resume": True}, "--resume")):
        with ExitStack() as stack, pytest.raises(UsageError, match=message):
            plan_fleet(RunConfig(**flags), sources, tmp_path / "other", stack)
    with ExitStack() as stack, pytest.raises(UsageError, match="the output is a folder"):
        plan_fleet(config, sources, tmp_path / "rows.csv", stack)



def test_a_rows_file_name_for_several_cameras_is_refused_as_no_folder_whatever_the_format(tmp_path, monkeypatch):
    # (was: "--format jsonl does not fit 'res.csv'", as if a rows file were wanted: -o is the cameras' folder)
    from emopipe.api import Analyzer

    monkeypatch.chdir(tmp_path)
    args = build_parser().parse_args(["rtsp://cam/a", "rtsp://cam/b", "--format", "jsonl", "-o", "res.csv"])
    with pytest.raises(UsageError, match=r"^-o res.csv: with several cameras the output is a folder"):
        Analyzer(config_from_args(args)).run_fleet()
    assert os.listdir(tmp_path) == []

def test_a_second_run_into_a_new_fleet_folder_in_use_is_refused_until_the_first_ends(tmp_path):
    sources, out = ["rtsp://cam/a", "rtsp://cam/b"], tmp_path / "new"
    with ExitStack() as first:
        plan_fleet(RunConfig(), sources, out, first)  # the first run holds the folder it made …
        assert held(out)
        with ExitStack() as second, pytest.raises(OutputError, match=r"new is in use by another emopipe") as refused:
            plan_fleet(RunConfig(), sources, out, second)  # … so a second started at the same time is refused
        assert refused.value.exit_code == 5
        assert held(out)  # the refused run neither took the folder nor released it
        assert sorted(p.name for p in out.iterdir()) == [FOLDER_LOCK]
    assert not held(out)  # the first run ended: free again
    with ExitStack() as later:
        plan_fleet(RunConfig(), sources, out, later)


def test_a_fleet_run_holds_its_folder_from_planning_until_it_ends(tmp_path):
    from emopipe.api import Analyzer

    out, holding = tmp_path / "out", []

    def refuse(uri: str, options: LiveOptions) -> ScriptedCamera:
        holding.append(held(out))  # while the run opens its cameras
        raise SourceUnavailableError(f"cannot open the stream {uri}: connection refused")

    CAPTURES.register("refused", refuse)
    try:
        with pytest.raises(SourceUnavailableError):  # (no camera opens: no model loads)
            Analyzer(sources=("refused://a", "refused://b"), device="cpu").run_fleet(output_dir=out)
    finally:
        CAPTURES.unregister("refused")
    assert holding == [True, True] and not held(out)


def test_the_command_refuses_a_fleet_folder_another_run_is_writing_with_one_line_and_exit_code_5(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    fd = os.open(out / FOLDER_LOCK, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # another process's run holds the folder, as a run does
        result = subprocess.run([sys.executable, "-m", "emopipe", "rtsp://cam/a", "rtsp://cam/b", "-o", str(out),
                                 "--metrics-port", "0"], cwd=REPO, capture_output=True, text=True, timeout=300)
    finally:
        os.close(fd)
    errors = [line for line in result.stderr.splitlines() if line.startswith("emopipe: error")]
    assert result.returncode == 5, result.stderr
    assert len(errors) == 1 and "in use by another emopipe run" in errors[0], result.stderr
    assert "Traceback" not in result.stderr
    assert sorted(p.name for p in out.iterdir()) == [FOLDER_LOCK]  # nothing of the refused run's



@pytest.mark.parametrize("name", ["cam_a.emotions.csv", "cam_b.emotions.summary.json",
                                  "cam_a.emotions.summary.json.partial", "manifest.jsonl", "summary.json",
                                  "summary.json.partial"])
def test_a_fleet_refuses_weights_at_a_name_it_writes_before_it_writes_anything(name, tmp_path):
    # (was: planned as any earlier file, or not at all: summary.json.partial was written over, then renamed)
    out = tmp_path / "out"
    out.mkdir()
    weights = out / name
    weights.write_bytes(b"the weights")
    described = "output" if "partial" not in name else "temporary name"
    with ExitStack() as stack, pytest.raises(UsageError, match=rf"^the [\w ']+ {described} {re.escape(str(weights))} "
                                                               r"is an input of this run: choose another output "
                                                               r"folder") as refused:
        plan_fleet(RunConfig(weights=str(weights)), ["rtsp://cam/a", "rtsp://cam/b"], out, stack)
    assert refused.value.exit_code == 2 and "\n" not in str(refused.value)
    assert os.listdir(out) == [name] and weights.read_bytes() == b"the weights"  # not even the folder's lock file


def test_the_command_refuses_weights_at_a_fleet_output_name_with_one_line_and_exit_code_2(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    weights = out / "cam_a.emotions.summary.json"
    weights.write_bytes(b"the weights")
    result = subprocess.run([sys.executable, "-m", "emopipe", "rtsp://cam/a", "rtsp://cam/b", "-o", str(out),
                             "--weights", str(weights), "--metrics-port", "0"], cwd=REPO, capture_output=True,
                            text=True, timeout=300)
    errors = [line for line in result.stderr.splitlines() if line.startswith("emopipe: error")]
    assert result.returncode == 2, result.stderr
    assert len(errors) == 1 and f"the summary output {weights} is an input of this run" in errors[0], result.stderr
    assert "Traceback" not in result.stderr
    assert os.listdir(out) == [weights.name] and weights.read_bytes() == b"the weights"


def test_a_fleet_refuses_a_folder_holding_an_earlier_summary_without_its_manifest(tmp_path):
    sources, out = ["rtsp://cam/a", "rtsp://cam/b"], tmp_path / "out"
    for name in ("summary.json", "cam_b.emotions.summary.json"):
        out.mkdir()
        (out / name).write_text('{"frames": 3}')
        with ExitStack() as stack, pytest.raises(UsageError, match=rf"{re.escape(name)} exists \(from an earlier run"):
            plan_fleet(RunConfig(), sources, out, stack)
        assert (out / name).read_text() == '{"frames": 3}'
        (out / name).unlink()
        (out / FOLDER_LOCK).unlink()
        out.rmdir()

# -- the page: a grid, a cell per stream ----------------------------------------------------------------

def _get(url: str, timeout: float = 5.0) -> tuple[int, str, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status, response.headers.get("Content-Type", ""), response.read()
    except urllib.error.HTTPError as error:
        return error.code, "", b""


def test_the_served_page_shows_every_stream_in_a_grid_with_its_own_numbers_and_frames():
    hubs = [FrameHub() for _ in range(3)]
    streams = [{"source": f"rtsp://cam{k}/x", "state": "live" if k != 1 else "reconnecting", "fps": 10.0 + k,
                "latency_p50_s": 0.02, "latency_p99_s": 0.05, "faces": k, "frames": 100 * k,
                "frames_dropped": k, "reconnects": 1 if k == 1 else 0, "outage_s": 3.0 if k == 1 else None}
               for k in range(3)]
    server = LiveServer("127.0.0.1", 0, hubs, lambda: {"streams": streams, "cameras": 3})
    try:
        for k, hub in enumerate(hubs):
            hub.publish(np.full((60, 80, 3), 60 * k, dtype=np.uint8))
        status, kind, body = _get(server.url)
        page = body.decode()
        assert status == 200 and kind.startswith("text/html")
        assert all(f'id="stream-{k}"' in page and f'src="frame/{k}.jpg"' in page for k in range(3))
        assert "rtsp://cam2/x" in page and 'id="fps-2">12.0<' in page and 'id="reconnects-1">1<' in page
        assert 'id="view-1" class="stale"' in page  # the lost stream's frame is marked stale
        stats = json.loads(_get(server.url + "stats.json")[2])
        assert [s["source"] for s in stats["streams"]] == ["rtsp://cam0/x", "rtsp://cam1/x", "rtsp://cam2/x"]
        for k in range(3):
            status, kind, jpeg = _get(f"{server.url}frame/{k}.jpg")
            image = cv2.imdecode(np.frombuffer(jpeg, np.uint8), cv2.IMREAD_COLOR)
            assert status == 200 and kind == "image/jpeg" and image.shape == (60, 80, 3)
            assert abs(float(image.mean()) - 60 * k) < 4  # its own stream's frame
        assert _get(f"{server.url}frame/3.jpg")[0] == 404
    finally:
        server.close()


def test_the_grid_page_says_why_a_camera_is_lost_and_when_emopipe_stops_answering(tmp_path):
    """Headless Chromium on the grid: the page's refresh shows a lost camera's reason, and once emopipe does not
    answer no cell goes on saying live (each answer is given by its number: no timing involved)."""
    cell = {"fps": 5.0, "latency_p50_s": 0.02, "latency_p99_s": 0.05, "faces": 1, "frames": 10, "frames_dropped": 0,
            "reconnects": 0, "outage_s": None}
    live = [{**cell, "source": f"http://cam{k}.example/{'x' * 60}", "state": "live"} for k in range(2)]
    why = "cannot open the stream http://u:***@cam1.example/x: <refused>"
    answers = [{"streams": live}, {"streams": [live[0], {**live[1], "state": "lost", "error": why}]}]
    calls = []

    def numbers() -> dict:
        calls.append(1)
        if len(calls) > len(answers):
            raise ConnectionError("emopipe has ended")  # (the server closes the connection: the fetch fails)
        return answers[len(calls) - 1]

    server = LiveServer("127.0.0.1", 0, [FrameHub(), FrameHub()], numbers)
    try:
        dom = chromium(tmp_path, "--virtual-time-budget=4000", "--dump-dom", server.url).stdout
    finally:
        server.close()
    assert len(calls) > len(answers), dom[-3000:]  # the page asked again after emopipe stopped answering
    assert 'id="error-1">cannot open the stream http://u:***@cam1.example/x: &lt;refused&gt;<' in dom
    assert 'id="error-0"></div>' in dom  # (a camera that is up has no reason shown)
    for k in range(2):
        assert f'id="state-{k}" class="bad">emopipe is not answering<' in dom


def test_tiles_put_every_stream_in_one_window():
    images = [np.full((120, 160, 3), 50, np.uint8), None, np.full((240, 320, 3), 200, np.uint8)]
    tiled = tile(images, width=640)
    assert tiled.shape == (2 * 180, 2 * 320, 3)  # a 2×2 grid of 16:9 cells
    assert tiled[90, 160].tolist() == [50, 50, 50] and tiled[270, 160].tolist() == [200, 200, 200]
    assert tiled[90, 480].tolist() == [40, 40, 40]  # no frame yet: grey


# -- the fleet's source, with in-process cameras ---------------------------------------------------------

class ScriptedCamera:
    """Frames of ``image`` at ``fps``; after ``frames`` reads the stream breaks."""

    def __init__(self, image: np.ndarray, fps: float, frames: int | None = None) -> None:
        self.image, self.interval, self.frames = image, 1.0 / fps, frames
        self.reads = 0
        self._next = time.perf_counter()

    def read(self) -> tuple[bool, np.ndarray | None]:
        if self.frames is not None and self.reads >= self.frames:
            return False, None
        self._next += self.interval
        time.sleep(max(0.0, self._next - time.perf_counter()))
        self.reads += 1
        return True, self.image.copy()

    def get(self, prop: int) -> float:
        return 0.0

    def release(self) -> None:
        pass


class Cameras:
    """The ``fleettest://NAME`` capture scheme: NAME's camera as a test scripts it; ``lost`` names never reopen."""

    def __init__(self) -> None:
        self.images: dict[str, np.ndarray] = {}
        self.breaks: dict[str, int] = {}
        self.opened: dict[str, int] = {}
        self.fps = 20.0

    def __call__(self, uri: str, options: LiveOptions) -> ScriptedCamera:
        name = uri.split("://", 1)[1]
        self.opened[name] = self.opened.get(name, 0) + 1
        if name in self.breaks and self.opened[name] > 1:
            raise SourceUnavailableError(f"cannot open the stream {uri}: connection refused")
        return ScriptedCamera(self.images.get(name, np.full((72, 96, 3), 90, np.uint8)), self.fps,
                              self.breaks.get(name))


@pytest.fixture
def cameras():
    scripted = Cameras()
    CAPTURES.register("fleettest", scripted)
    try:
        yield scripted
    finally:
        CAPTURES.unregister("fleettest")


def test_the_fleet_source_interleaves_cameras_and_a_lost_one_never_stops_the_others(cameras, tmp_path):
    cameras.breaks["b"] = 5
    options = LiveOptions(open_timeout_s=5, read_timeout_s=0.5, reconnect_timeout_s=0.5, backoff_s=(0.05, 0.1))
    with ExitStack() as stack:
        planned_cameras = plan_fleet(RunConfig(), [f"fleettest://{n}" for n in "abc"], tmp_path / "out", stack)[0]
    fleet = [Camera(planned, LiveStats(planned.uri), source=LiveSource(planned.uri, options=options))
             for planned in planned_cameras]
    source = FleetSource(fleet)
    seen: dict[int, int] = {0: 0, 1: 0, 2: 0}
    try:
        deadline = time.monotonic() + 60
        for frame in source:
            seen[frame.stream] += 1
            if (fleet[1].ended and min(seen[0], seen[2]) >= 40) or time.monotonic() > deadline:
                break
    finally:
        source.close()
    assert fleet[1].ended and "lost" in str(fleet[1].error)  # b gave up after its reconnect timeout …
    assert not fleet[0].ended or fleet[0].error is None
    assert seen[0] >= 40 and seen[2] >= 40  # … and a and c kept coming, each with its own frame numbers
    assert 1 <= seen[1] <= 5 and fleet[0].source is not None and fleet[0].source.reconnects == 0


def test_a_camera_back_at_another_size_says_so(caplog):
    """A camera reopened after a loss that now sends another resolution: its reconnection's line says the new size
    (the rows' boxes are in it; the recording scales it to its first size)."""
    opened = []

    def opener(uri: str, options: LiveOptions) -> ScriptedCamera:
        opened.append(uri)
        if len(opened) == 1:  # three frames at 96×72, then the stream stops
            return ScriptedCamera(np.full((72, 96, 3), 90, np.uint8), 20.0, frames=3)
        return ScriptedCamera(np.full((144, 192, 3), 90, np.uint8), 20.0)

    options = LiveOptions(open_timeout_s=5, read_timeout_s=5, reconnect_timeout_s=30, backoff_s=(0.01, 0.02))
    with caplog.at_level("WARNING", logger="emopipe"), \
            LiveSource("fleettest://resized", options=options, opener=opener) as source:
        sizes = []
        for frame in source:
            sizes.append((frame.width, frame.height))
            if frame.width == 192:
                break
    assert sizes[0] == (96, 72) and sizes[-1] == (192, 144) and source.reconnects == 1
    assert "reconnected after" in caplog.text and "its frames are now 192×144 (were 96×72)" in caplog.text


def test_a_camera_that_cannot_be_opened_is_recorded_and_the_others_run_but_none_is_an_error(cameras, tmp_path):
    from emopipe.pipeline.fleet import Fleet

    def refuse(uri: str, options: LiveOptions) -> ScriptedCamera:
        raise SourceUnavailableError(f"cannot open the stream {uri}: connection refused")

    CAPTURES.register("refused", refuse)
    try:
        config = RunConfig(open_timeout=2, read_timeout=0.5)
        with ExitStack() as stack:
            planned, manifest = plan_fleet(config, ["fleettest://a", "refused://b"], tmp_path / "one", stack)
            fleet = Fleet(config, planned, tmp_path / "one", manifest)
            source = fleet.open(stack)
            assert [c.source is not None for c in fleet.cameras] == [True, False]
            assert "connection refused" in str(fleet.cameras[1].error) and fleet.cameras[1].ended
            assert next(iter(source)).stream == 0  # the camera that opened runs
            assert fleet.numbers()["streams"][1]["state"] == "lost"
        with ExitStack() as stack, pytest.raises(SourceUnavailableError, match="refused://c") as raised:
            planned, manifest = plan_fleet(config, ["refused://c", "refused://d"], tmp_path / "none", stack)
            Fleet(config, planned, tmp_path / "none", manifest).open(stack)
        assert raised.value.exit_code == 7
        lines = [json.loads(line) for line in (tmp_path / "none" / "manifest.jsonl").read_text().splitlines()]
        assert [(e["source"], e["status"], e["exit_code"]) for e in lines] == [("refused://c", "failed", 7),
                                                                               ("refused://d", "failed", 7)]
        assert "refused://d" in lines[1]["error"]  # each camera's own reason, not only the first's
    finally:
        CAPTURES.unregister("refused")


def test_a_camera_that_ended_is_finished_while_no_frame_comes_and_stays_ok_when_the_run_is_interrupted(
        cameras, tmp_path):
    from emopipe.pipeline.fleet import Fleet

    def refuse(uri: str, options: LiveOptions) -> ScriptedCamera:
        raise SourceUnavailableError(f"cannot open the stream {uri}: connection refused")

    def lines(folder: Path) -> list[tuple[str, str]]:
        entries = map(json.loads, (folder / "manifest.jsonl").read_text().splitlines())
        return [(e["source"], e["status"]) for e in entries]

    CAPTURES.register("refused", refuse)
    try:
        config = RunConfig(open_timeout=2, read_timeout=0.5, max_frames=2)
        for out, written in ((tmp_path / "written", True), (tmp_path / "in-flight", False)):
            registry = CollectorRegistry()
            with ExitStack() as stack:
                planned, manifest = plan_fleet(config, ["fleettest://a", "refused://b"], out, stack)
                fleet = Fleet(config, planned, out, manifest)
                source = fleet.open(stack)
                assert lines(out) == [("refused://b", "failed")]  # at once, not when the run ends
                fleet.observers(PipelineMetrics(registry, mode="live"))
                assert _value(registry, "emopipe_errors_total", kind="source") == 1
                for frame in source:  # the pipeline's part: each frame written and seen by the observers
                    if written:
                        fleet.cameras[frame.stream].written += 1
                        fleet.cameras[frame.stream].observed += 1
                if written:  # a's two frames are out: it was finished while no frame came, as the run went on
                    assert lines(out) == [("refused://b", "failed"), ("fleettest://a", "ok")]
                else:  # its frames still in flight when Ctrl-C comes: it had ended as asked, so it is ok
                    assert lines(out) == [("refused://b", "failed")]
                    fleet.finish_all(interrupted=True)
                    assert lines(out) == [("refused://b", "failed"), ("fleettest://a", "ok")]
                assert fleet.cameras[0].source is not None and not fleet.cameras[0].source.up
                # a ended at --max-frames: ended, not down (EmopipeSourceDown fires for lost and failed only)
                states = {(name, state): _value(registry, "emopipe_source_state", source=name, state=state)
                          for name in ("fleettest://a", "refused://b") for state in ("up", "lost", "failed", "ended")}
                assert {key for key, value in states.items() if value == 1} == {("fleettest://a", "ended"),
                                                                                 ("refused://b", "failed")}
                assert not any(_value(registry, "emopipe_source_up", source=name)
                               for name in ("fleettest://a", "refused://b"))
    finally:
        CAPTURES.unregister("refused")


def test_cameras_of_an_interrupted_run_are_ended_in_the_metrics_it_leaves(cameras, tmp_path):
    """Ctrl-C / SIGTERM: the final scrape (and a push) sees every camera that was up as ended, not still up."""
    from emopipe.pipeline.fleet import Fleet

    config = RunConfig(open_timeout=2, read_timeout=0.5)
    registry = CollectorRegistry()
    with ExitStack() as stack:
        planned, manifest = plan_fleet(config, ["fleettest://a", "fleettest://b"], tmp_path / "out", stack)
        fleet = Fleet(config, planned, tmp_path / "out", manifest)
        source = fleet.open(stack)
        fleet.observers(PipelineMetrics(registry, mode="live"))
        next(iter(source))
        assert _value(registry, "emopipe_source_up", source="fleettest://a") == 1
        fleet.finish_all(interrupted=True)  # (as process_fleet does on Ctrl-C, before the exporter's last values)
        for name in ("fleettest://a", "fleettest://b"):
            states = {state: _value(registry, "emopipe_source_state", source=name, state=state)
                      for state in ("up", "lost", "failed", "ended")}
            assert states == {"up": 0, "lost": 0, "failed": 0, "ended": 1}, (name, states)
            assert _value(registry, "emopipe_source_up", source=name) == 0


def test_cameras_whose_urls_differ_only_in_a_secret_keep_their_own_metrics_and_names(cameras, tmp_path):
    """Two cloud cameras told apart only by their token redact to one URL: each is labelled with its rows file's name
    too, so their series are not added together (nor their tiles and log lines the same)."""
    from emopipe.pipeline.fleet import Fleet

    config = RunConfig(open_timeout=2, read_timeout=0.5)
    registry = CollectorRegistry()
    uris = ["fleettest://cam?token=first", "fleettest://cam?token=second", "fleettest://other"]
    with ExitStack() as stack:
        planned, manifest = plan_fleet(config, uris, tmp_path / "out", stack)
        fleet = Fleet(config, planned, tmp_path / "out", manifest)
        names = [camera.name for camera in fleet.cameras]
        assert names[0] != names[1] and names[2] == "fleettest://other"
        for name, camera in zip(names[:2], planned):
            assert name == f"{camera.rows.name}: fleettest://cam?token=***"
        source = fleet.open(stack)
        fleet.observers(PipelineMetrics(registry, mode="live"))
        next(iter(source))
        fleet.finish_all(interrupted=True)
        for name in names:  # (one label for both would count two cameras ended)
            assert _value(registry, "emopipe_source_state", source=name, state="ended") == 1, name


@pytest.mark.parametrize(("argv", "code", "message"), [
    (["http://127.0.0.1:{port}/a.mjpg", "http://127.0.0.1:{port}/b.mjpg", "-o", "{tmp}/out"], 7,
     r"cannot open the stream http://127\.0\.0\.1:\d+/a\.mjpg: nothing is listening"),
    (["rtsp://cam/a", "rtsp://cam/b", "--record", "{tmp}/x.mp4", "-o", "{tmp}/out"], 2,
     r"--record .*x\.mp4: with several cameras, give the videos' container \(mp4, mkv or avi\)"),
    (["rtsp://cam/a", "rtsp://cam/b", "--record", "mp4", "--video-writer", "opencv", "-o", "{tmp}/out"], 2,
     r"--record mp4: OpenCV's \.mp4 is unplayable until closed"),
    (["rtsp://cam/a", "{tmp}/clip.mp4"], 2, r"cannot share a run"),
    (["rtsp://cam/a", "rtsp://cam/b", "--metrics-max-sources", "-1"], 2, r"--metrics-max-sources"),
    # a password with an unencoded "/" or "#": said without any piece of it (was: "Port could not be cast to integer
    # value as 'pa'", the URL shown whole where it could not be parsed)
    (["rtsp://cam/a", "rtsp://admin:pa/SECRET@cam/b"], 2,
     r"^emopipe: error: rtsp://admin:\*\*\*@cam/b: its password holds a '/', '\?' or '#'.*%2F"),
    (["http://admin:pa#SECRET@cam:81/b", "rtsp://cam/a"], 2,
     r"^emopipe: error: http://admin:\*\*\*@cam:81/b: its pass"),
])
def test_the_command_refuses_a_fleet_with_one_line_and_its_exit_code(argv, code, message, tmp_path, capsys):
    import logging

    from emopipe.cli import app as cli

    port = free_port()
    argv = [a.format(tmp=tmp_path, port=port) for a in argv]
    logger = logging.getLogger("emopipe")
    saved = logger.handlers[:], logger.level, logger.propagate
    try:
        got = cli.main([*argv, "--metrics-port", "0", "--open-timeout", "2"])
    finally:
        logger.handlers[:], logger.level, logger.propagate = saved
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("emopipe: error")]
    assert got == code, err
    assert len(lines) == 1 and re.search(message, lines[0]), err
    assert "SECRET" not in err and "'pa'" not in err  # (no piece of a password either)


def test_a_fleet_refused_before_any_frame_leaves_no_manifest_to_block_the_run_put_right(cameras, tmp_path, capsys):
    """The page's address taken: one line, exit 2, and no manifest (was: a line per camera, 'interrupted' with exit
    code 130, and the corrected run into that folder refused as 'holds an earlier run')."""
    import logging
    import socket

    from emopipe.cli import app as cli

    out = tmp_path / "out"
    logger = logging.getLogger("emopipe")
    saved = logger.handlers[:], logger.level, logger.propagate
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        try:
            got = cli.main(["fleettest://a", "fleettest://b", "-o", str(out), "--serve",
                            f"127.0.0.1:{taken.getsockname()[1]}", "--metrics-port", "0"])
        finally:
            logger.handlers[:], logger.level, logger.propagate = saved
    err = capsys.readouterr().err
    assert got == 2 and re.search(r"emopipe: error: cannot serve the live page on 127\.0\.0\.1:\d+", err), err
    assert not (out / "manifest.jsonl").exists() and not (out / "summary.json").exists()


# -- in process: three cameras through one pipeline, one lost for good -------------------------------------

@pytest.mark.slow
def test_a_fleet_run_writes_each_cameras_files_and_finishes_a_lost_camera_while_the_others_go_on(
        cameras, tmp_path, models_home, checkpoints, shared_dir):
    from emopipe.api import Analyzer

    face = cv2.imread(str(shared_dir / "data" / "faces" / "1face.png"))
    cameras.images["a"] = cv2.resize(face, (96, 96))
    cameras.breaks["b"] = 6  # b breaks after 6 frames and is refused from then on: lost for good
    cameras.fps = 10.0
    registry = CollectorRegistry()
    metrics = PipelineMetrics(registry, mode="live", max_sources=2)
    out = tmp_path / "out"
    uris = ["fleettest://a", "fleettest://b", "fleettest://c"]
    with Analyzer(sources=tuple(uris), weights=str(checkpoints[8]), device="cpu", models_dir=str(models_home),
                  format="jsonl") as analyzer:
        outcome = analyzer.run_fleet(output_dir=out, metrics=metrics, end=6.0, read_timeout=0.5,
                                     reconnect_timeout=1.0, max_wait_ms=5.0, batch_size=1, record="mkv")
    assert outcome.exit_code == 9 and not outcome.interrupted  # one of several cameras lost: 9
    lines = [json.loads(line) for line in (out / "manifest.jsonl").read_text().splitlines()]
    # b was finished while a and c were still running: its line comes first (a and c end at --end, in any order)
    assert (lines[0]["source"], lines[0]["status"]) == ("fleettest://b", "failed")
    assert sorted((e["source"], e["status"]) for e in lines[1:]) == [("fleettest://a", "ok"), ("fleettest://c", "ok")]
    assert lines[0]["exit_code"] == 7 and "lost" in lines[0]["error"]
    rows = [json.loads(line) for line in (out / "a.emotions.jsonl").read_text().splitlines()]
    assert rows and {r["source"] for r in rows} == {"fleettest://a"}
    assert all(isinstance(r["timestamp_s"], float) and r["timestamp_s"] > 1e9 for r in rows)  # wall-clock
    for name in "bc":  # faceless cameras: header-free JSONL files, present
        assert (out / f"{name}.emotions.jsonl").exists()
    for line in lines:  # each camera's recording (--record mkv) beside its rows, its frames at the camera's size
        name = line["source"].removeprefix("fleettest://")
        assert line["outputs"]["annotated_video"] == str(out / f"{name}.annotated.mkv")
        capture = cv2.VideoCapture(line["outputs"]["annotated_video"])
        ok, first = capture.read()
        capture.release()
        assert ok and first.shape == ((96, 96, 3) if name == "a" else (72, 96, 3)), name
    summary = json.loads((out / "summary.json").read_text())
    by_source = {c["source"]: c for c in summary["cameras"]}
    assert set(by_source) == set(uris)
    # c went on after b died (frames read from the camera: how many were analysed depends on the CPU's speed)
    assert by_source["fleettest://b"]["frames_captured"] == 6 < by_source["fleettest://c"]["frames_captured"]
    assert by_source["fleettest://a"]["faces"] == len(rows) and by_source["fleettest://a"]["latency_p50_s"] > 0
    for camera in summary["cameras"]:  # every frame captured is accounted for, as one camera's summary does it
        assert camera["frames_captured"] == (camera["frames_skipped_at_start"] + camera["frames"]
                                             + camera["frames_dropped"] + camera["frames_unprocessed_at_end"]), camera
    assert all(c["latency_p99_s"] >= c["latency_p50_s"] for c in summary["cameras"] if c["frames"])
    assert summary["failed"] == 1 and summary["ok"] == 2 and summary["frames"] == sum(
        c["frames"] for c in summary["cameras"])
    each = json.loads((out / "c.emotions.summary.json").read_text())
    assert each["status"] == "ok" and each["frames"] == by_source["fleettest://c"]["frames"]
    # per-source metrics: a and b by name, c past the bound of 2 as "other"; the run-level series count all
    assert _value(registry, "emopipe_source_frames_total", source="fleettest://a") == by_source["fleettest://a"][
        "frames"]
    assert _value(registry, "emopipe_source_frames_total", source=OTHER_SOURCE) == by_source["fleettest://c"]["frames"]
    assert _value(registry, "emopipe_source_up", source="fleettest://b") == 0
    assert _value(registry, "emopipe_source_up", source="fleettest://a") == 0  # ended at --end: no longer up …
    # … but ended, not down as b is: lost for good while the others ran (the EmopipeSourceDown alert's series)
    assert _value(registry, "emopipe_source_state", source="fleettest://a", state="ended") == 1
    assert _value(registry, "emopipe_source_state", source="fleettest://a", state="lost") == 0
    assert _value(registry, "emopipe_source_state", source="fleettest://b", state="failed") == 1
    assert _value(registry, "emopipe_source_state", source="fleettest://b", state="ended") == 0
    assert _value(registry, "emopipe_source_state", source=OTHER_SOURCE, state="ended") == 1  # c, past the bound
    assert _value(registry, "emopipe_errors_total", kind="source") == 1  # b, lost for good (the alert's series)
    assert _value(registry, "emopipe_frames_total") == summary["frames"]


def test_a_recording_ffmpeg_cannot_write_fails_its_camera_not_the_run(cameras, tmp_path, models_home, checkpoints,
                                                                      monkeypatch):
    """A full disk under --record: each camera's recording stops with FFmpeg's line, its rows go on to its end, its
    line says failed (exit code 5); every camera's recording failed → the run exits 5, not 7 (no camera was lost)."""
    from emopipe.api import Analyzer

    fake = tmp_path / "ffmpeg"  # an FFmpeg that runs, then fails every file as a full disk would
    fake.write_text("#!/bin/sh\n[ \"$2\" = -encoders ] && echo ' V....D mpeg4  MPEG-4 part 2' && exit 0\n"
                    "echo 'Conversion failed: No space left on device' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("EMOPIPE_FFMPEG", str(fake))
    cameras.fps = 10.0
    out = tmp_path / "out"
    uris = ["fleettest://a", "fleettest://b"]
    with Analyzer(sources=tuple(uris), weights=str(checkpoints[8]), device="cpu", models_dir=str(models_home),
                  detector="blazeface") as analyzer:
        outcome = analyzer.run_fleet(output_dir=out, max_frames=6, max_wait_ms=5.0, batch_size=1, record="mp4")
    lines = [json.loads(line) for line in (out / "manifest.jsonl").read_text().splitlines()]
    assert sorted((e["source"], e["status"], e["exit_code"]) for e in lines) == [
        ("fleettest://a", "failed", 5), ("fleettest://b", "failed", 5)]
    assert all("No space left on device" in e["error"] and "annotated_video" not in e["outputs"] for e in lines)
    assert all((out / f"{name}.emotions.csv").exists() for name in "ab") and outcome.exit_code == 5


@pytest.mark.slow
def test_faces_of_different_cameras_share_an_emonet_batch(cameras, tmp_path, models_home, checkpoints, shared_dir,
                                                          monkeypatch):
    from emopipe.api import Analyzer
    from emopipe.pipeline.runner import Pipeline

    face = cv2.resize(cv2.imread(str(shared_dir / "data" / "faces" / "1face.png")), (96, 96))
    cameras.images.update(a=face, b=face)
    cameras.fps = 10.0
    batches: list[set[int]] = []  # the cameras (streams) of each EmoNet batch's real faces
    infer = Pipeline._infer

    def spy(self, found, assembler):  # type: ignore[no-untyped-def]
        batches.extend({slot.key[0] for slot in batch.slots} for batch in found)
        return infer(self, found, assembler)

    monkeypatch.setattr(Pipeline, "_infer", spy)
    with Analyzer(sources=("fleettest://a", "fleettest://b"), weights=str(checkpoints[8]), device="cpu",
                  models_dir=str(models_home), batch_size=2) as analyzer:
        # a partial batch waits up to 2 s for a face: long enough for the other camera's next frame
        outcome = analyzer.run_fleet(output_dir=tmp_path / "out", end=5.0, max_wait_ms=2000.0)
    assert outcome.exit_code == 0, outcome.run
    assert {1, 0} in batches, batches  # one static batch holding a face of each camera
    assert all(c["frames"] >= 2 and c["faces"] == c["frames"] for c in outcome.run["cameras"])



@pytest.mark.slow
def test_detect_every_gives_each_camera_its_own_key_frames(cameras, tmp_path, models_home, checkpoints, shared_dir):
    """--detect-every 2 with two cameras: each camera's frames alternate detected / carried in its own rows, the
    first a key frame (one schedule for the run would hand the key frames out across cameras)."""
    from emopipe.api import Analyzer

    face = cv2.resize(cv2.imread(str(shared_dir / "data" / "faces" / "1face.png")), (96, 96))
    cameras.images.update(a=face, b=face)
    cameras.fps = 10.0
    with Analyzer(sources=("fleettest://a", "fleettest://b"), weights=str(checkpoints[8]), device="cpu",
                  models_dir=str(models_home), detect_every=2) as analyzer:
        outcome = analyzer.run_fleet(output_dir=tmp_path / "out", end=5.0)
    assert outcome.exit_code == 0, outcome.run
    for name in ("a", "b"):
        with open(next((tmp_path / "out").glob(f"*{name}*.emotions.csv")), newline="") as file:
            detected = [row["detected"] for row in csv.DictReader(file)]
        # (how many of a camera's frames the pipeline takes depends on the machine's speed; the pattern does not)
        assert detected and detected == ["1", "0"] * (len(detected) // 2) + ["1"] * (len(detected) % 2), (
            name, detected)

# -- the command: three real streams, one killed and restarted -------------------------------------------

def _complete_rows(path: Path) -> list[dict]:
    """The rows of a live JSONL file so far; a last line still being written is left out."""
    text = path.read_text()
    lines = text.splitlines() if text.endswith("\n") else text.splitlines()[:-1]
    return [json.loads(line) for line in lines]


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_three_streams_in_one_process_one_killed_and_restarted_only_it_reconnects(
        tmp_path, models_home, checkpoints):
    clip = synth.moving_face_video(tmp_path / "clip.mp4", frames=40, size=(160, 120), fps=10.0, empty=None)
    page_port, metrics_port = free_port(), free_port()
    page = f"http://127.0.0.1:{page_port}/"
    out, log = tmp_path / "out", tmp_path / "emopipe.log"
    recording = "mp4" if find_ffmpeg() else "mkv"  # each camera's recording (FFmpeg's .mp4: fragmented)
    servers = [MjpegServer(clip.path) for _ in range(3)]
    listing = tmp_path / "cameras.txt"
    listing.write_text(f"# two cameras from a list, one on the command line\n{servers[1].url}\n{servers[2].url}\n")
    for server in servers:
        server.start()
    proc: subprocess.Popen | None = None
    try:
        with open(log, "w") as log_file:
            proc = subprocess.Popen(
                [sys.executable, "-m", "emopipe", servers[0].url, "--list", str(listing), "--weights",
                 str(checkpoints[8]), "-o", str(out), "--format", "jsonl", "--serve", f"127.0.0.1:{page_port}",
                 "--metrics-port", str(metrics_port), "--metrics-max-sources", "2", "--read-timeout", "5",
                 "--reconnect-timeout", "120", "--batch-size", "2", "--no-progress", "--record", recording],
                cwd=REPO, stdout=log_file, stderr=subprocess.STDOUT, preexec_fn=interruptible)

        def streams() -> list[dict]:
            """The page's numbers per stream, in the order of the servers (the list file's cameras come first
            in the run: the stats are matched by URL)."""
            try:
                found = {s["source"]: s for s in json.loads(_get(page + "stats.json", timeout=10)[2])["streams"]}
                return [found[server.url] for server in servers]
            except (OSError, ValueError, KeyError):
                return []

        def frames() -> list[int]:
            return [s["frames"] for s in streams()] or [0, 0, 0]

        def metrics() -> dict:
            """The metrics page, or none while it did not answer (a busy machine): predicates retry."""
            try:
                return scrape(f"http://127.0.0.1:{metrics_port}/metrics")
            except OSError:
                return {}

        def stream(k: int) -> dict:
            """Camera k's numbers, or none while the page did not answer (a busy machine): predicates retry."""
            found = streams()
            return found[k] if found else {}

        wait_for(lambda: min(frames()) >= 2, 120, proc, log, "not every camera's frames were processed")
        html_page = _get(page, timeout=5)[2].decode()
        assert all(f'id="stream-{k}"' in html_page for k in range(3))
        assert all(server.url in html_page for server in servers)

        # camera 1 dies: only it goes down and reconnects; cameras 0 and 2 keep flowing all the while
        servers[1].kill()
        wait_for(lambda: stream(1).get("state") == "reconnecting", 60, proc, log, "camera 1 not seen as lost")
        during = frames()
        wait_for(lambda: all(now >= before + 2 for k, (before, now) in enumerate(zip(during, frames())) if k != 1),
                  90, proc, log, "cameras 0 and 2 did not keep flowing while camera 1 was down")
        down = wait_for(streams, 30, proc, log, "the page did not answer")
        assert down[1]["state"] == "reconnecting" and not down[1]["up"]
        assert down[0]["state"] == down[2]["state"] == "live"
        scraped = wait_for(metrics, 30, proc, log, "the metrics page did not answer")
        up = {dict(labels)["source"]: v for (name, labels), v in scraped.items() if name == "emopipe_source_up"}
        assert sorted(up.values()) == [0, 1, 1]  # two by name (the bound is 2), the third as "other"
        assert up.get(servers[1].url, up.get(OTHER_SOURCE)) == 0
        servers[1].start()
        wait_for(lambda: stream(1).get("reconnects", 0) >= 1 and stream(1).get("state") == "live", 90, proc, log,
                  "camera 1 did not reconnect")
        back = frames()[1]
        wait_for(lambda: frames()[1] >= back + 2, 90, proc, log, "camera 1's frames did not resume")
        now = wait_for(streams, 30, proc, log, "the page did not answer")
        assert [s["reconnects"] for s in now] == [0, now[1]["reconnects"], 0]  # only camera 1 reconnected

        scraped = wait_for(metrics, 30, proc, log, "the metrics page did not answer")
        reconnects = {dict(labels)["source"]: v for (name, labels), v in scraped.items()
                      if name == "emopipe_source_reconnects_total"}
        assert len(reconnects) == 3 and OTHER_SOURCE in reconnects  # the third source past the bound: "other"
        assert sorted(reconnects.values()) == [0, 0, now[1]["reconnects"]]
        assert reconnects.get(servers[1].url, reconnects[OTHER_SOURCE]) == now[1]["reconnects"]
        frames_by_source = {dict(labels)["source"]: v for (name, labels), v in scraped.items()
                            if name == "emopipe_source_frames_total"}
        assert len(frames_by_source) == 3 and min(frames_by_source.values()) >= 2
        assert scraped[("emopipe_stream_reconnects_total", frozenset())] == now[1]["reconnects"]  # run-level

        proc.send_signal(signal.SIGINT)  # Ctrl-C: every camera's files complete, exit 130
        assert proc.wait(timeout=60) == 130, log.read_text()[-3000:]
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        for server in servers:
            server.kill()

    lines = [json.loads(line) for line in (out / "manifest.jsonl").read_text().splitlines()]
    assert sorted(e["source"] for e in lines) == sorted(s.url for s in servers)
    assert all(e["status"] == "interrupted" for e in lines)
    summary = json.loads((out / "summary.json").read_text())
    by_url = {c["source"]: c for c in summary["cameras"]}
    cameras_ = [by_url[server.url] for server in servers]
    assert [c["reconnects"] for c in cameras_] == [0, cameras_[1]["reconnects"], 0] and cameras_[1]["reconnects"] >= 1
    for camera, line in zip(cameras_, sorted(lines, key=lambda e: [s.url for s in servers].index(e["source"]))):
        rows = [json.loads(line) for line in Path(camera["rows_file"]).read_text().splitlines()]
        assert rows and {r["source"] for r in rows} == {camera["source"]}
        # its recording, closed whole on Ctrl-C: as long as its rows span (dropped frames and the reconnection
        # repeat the frame before), at the camera's size
        capture = cv2.VideoCapture(line["outputs"]["annotated_video"])
        count, fps = capture.get(cv2.CAP_PROP_FRAME_COUNT), capture.get(cv2.CAP_PROP_FPS)
        ok, first = capture.read()
        capture.release()
        assert ok and first.shape == (120, 160, 3) and fps > 0
        assert count >= (rows[-1]["timestamp_s"] - rows[0]["timestamp_s"]) * fps * 0.9, line
        assert camera["frames"] >= 4 and camera["faces"] == len(rows)
        assert camera["frames_dropped"] > 0 and 0 < camera["latency_p50_s"] <= camera["latency_p99_s"]
    assert summary["run_interrupted"] is True and summary["interrupted"] == 3  # (the count, by status)


@pytest.mark.slow
@pytest.mark.timeout(420)
def test_show_tiles_every_stream_in_one_window(tmp_path, models_home, checkpoints):
    from tests.support.streams import Xvfb, need

    need("xwininfo")
    clip = synth.moving_face_video(tmp_path / "clip.mp4", frames=40, size=(160, 120), fps=10.0, empty=None)
    out, log = tmp_path / "out", tmp_path / "emopipe.log"
    with Xvfb(size=(1280, 720)) as screen, MjpegServer(clip.path) as one, MjpegServer(clip.path) as two, \
            open(log, "w") as log_file:
        env = {**os.environ, "DISPLAY": screen.display}
        proc = subprocess.Popen([sys.executable, "-m", "emopipe", one.url, two.url, "--show", "--weights",
                                 str(checkpoints[8]), "-o", str(out), "--format", "jsonl", "--metrics-port", "0",
                                 "--no-progress"], cwd=REPO, env=env, stdout=log_file, stderr=subprocess.STDOUT)
        try:
            files = [out / f"127.0.0.1_{s.port}_stream.mjpg.emotions.jsonl" for s in (one, two)]
            wait_for(lambda: all(f.exists() and len(f.read_text().splitlines()) >= 2 for f in files), 120, proc,
                      log, "not both cameras' rows")
            def tiled_on_screen() -> bool:  # the window draws the newest tiles after their rows: look until it has
                tree = subprocess.run(["xwininfo", "-root", "-tree", "-display", screen.display],
                                      capture_output=True, text=True, timeout=30).stdout
                if "emopipe: 2 streams" not in tree:
                    last_look[0] = "no window named 'emopipe: 2 streams': " + tree[-2000:]
                    return False
                image = cv2.imread(str(screen.grab(tmp_path / "screen.png")))
                # two cells side by side in the window, each with its stream's face annotated in its track's
                # colour (read after the screenshot: a frame is drawn after its rows are written; a row being
                # written is left out)
                tracks = {row["track_id"] for f in files for row in _complete_rows(f)}
                colours = np.array([PALETTE[(t - 1) % len(PALETTE)] for t in tracks])
                near = (np.abs(image[:, :, None, :].astype(int) - colours[None, None]).max(axis=3) < 40).any(axis=2)
                # the window: the largest region that is not the black screen (the pointer is a small one)
                count, _, boxes, _ = cv2.connectedComponentsWithStats((image.max(axis=2) > 0).astype(np.uint8))
                if count < 2:
                    last_look[0] = "a black screen"
                    return False
                window = max(range(1, count), key=lambda i: boxes[i, cv2.CC_STAT_AREA])
                middle = boxes[window, cv2.CC_STAT_LEFT] + boxes[window, cv2.CC_STAT_WIDTH] // 2
                last_look[0] = f"annotation pixels left {near[:, :middle].sum()}, right {near[:, middle:].sum()}"
                return bool(near[:, :middle].sum() > 40 and near[:, middle:].sum() > 40)

            last_look = [""]
            try:
                # (a bound on a hang: on a loaded CI machine, 2026-11-29, no annotated tile was seen within 60 s)
                wait_for(tiled_on_screen, 240, proc, log, "not both streams tiled in the window")
            except AssertionError as failure:
                raise AssertionError(f"{failure}\nlast look: {last_look[0]}") from None
            proc.send_signal(signal.SIGTERM)  # as Ctrl-C: everything computed is written
            assert proc.wait(timeout=60) == 130, log.read_text()[-3000:]
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    lines = [json.loads(line) for line in (out / "manifest.jsonl").read_text().splitlines()]
    assert sorted(e["status"] for e in lines) == ["interrupted", "interrupted"]


# -- a camera moved to another Ray worker records on in a new part -------------------------------------------

def test_the_parts_a_moved_camera_may_record_are_checked_before_the_run_like_its_other_files(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    with ExitStack() as stack:
        planned = plan_fleet(RunConfig(record="mkv"), ["fleettest://a"], out, stack, video_parts=3)[0][0]
    assert [planned.video_part(k) for k in (1, 2, 3)] == [out / "a.annotated.mkv", out / "a.annotated.2.mkv",
                                                          out / "a.annotated.3.mkv"]
    assert [planned.video_role(k) for k in (1, 3)] == ["annotated_video", "annotated_video_3"]
    (out / "a.annotated.3.mkv").write_bytes(b"an earlier run's")
    with ExitStack() as stack, pytest.raises(UsageError, match=r"a\.annotated\.3\.mkv exists \(from an earlier run\)"):
        plan_fleet(RunConfig(record="mkv"), ["fleettest://a"], out, stack, video_parts=3)
    with ExitStack() as stack:  # (one process records one part: the third is not its name)
        plan_fleet(RunConfig(record="mkv"), ["fleettest://a"], out, stack)
    assert (out / "a.annotated.3.mkv").read_bytes() == b"an earlier run's"


@pytest.mark.slow
def test_a_camera_moved_from_a_dead_worker_records_a_second_part_and_lists_both(cameras, tmp_path, models_home,
                                                                               checkpoints):
    """What a Ray worker does with a camera moved to it (``CameraSoFar``): its rows go on in the same file, its
    recording in ``NAME.annotated.2.mkv`` beside the first worker's, and its line lists both parts."""
    from emopipe.api import Analyzer
    from emopipe.pipeline.fleet import Fleet
    from emopipe.pipeline.many import CameraSoFar

    cameras.fps = 10.0
    out = tmp_path / "out"
    config = RunConfig(sources=("fleettest://a",), weights=str(checkpoints[8]), device="cpu",
                       models_dir=str(models_home), record="mkv", max_frames=3, batch_size=1, max_wait_ms=5.0)
    with ExitStack() as stack:
        planned = plan_fleet(config, ["fleettest://a"], out, stack, video_parts=2)[0]
    out.mkdir(exist_ok=True)  # (a driver's folder: taken for its whole run)
    results = []
    with Analyzer(config) as analyzer:
        fleet_config = analyzer.source_config("fleettest://a", sources=config.sources, output=None, summary=None)
        for so_far in ({}, {0: CameraSoFar(frames=3, first_index=3, max_frames=3, moves=1)}):
            fleet = Fleet(fleet_config, planned, out, None, so_far=so_far)
            with ExitStack() as stack:
                results.append(analyzer.process_fleet(fleet, stack)[0][0])
    first, moved = (r.outputs for r in results)
    parts = [out / "a.annotated.mkv", out / "a.annotated.2.mkv"]
    assert first["annotated_video"] == str(parts[0]) and "annotated_video_2" not in first
    assert (moved["annotated_video"], moved["annotated_video_2"]) == tuple(map(str, parts))
    assert results[1].status == "ok" and moved["rows"] == first["rows"]
    summary = json.loads((out / "a.emotions.summary.json").read_text())  # (the moved worker's: both parts)
    assert summary["outputs"]["annotated_video_2"] == str(parts[1])
    for part in parts:
        video = cv2.VideoCapture(str(part))
        try:
            assert video.isOpened() and video.read()[0], part
        finally:
            video.release()
