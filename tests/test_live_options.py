"""Live mode's options at their edges (QA pass): infinite and huge timeouts, the first connection's read timeout,
the page over IPv6, a malformed webcam, and the summary's frame counts adding up."""

from __future__ import annotations

import json
import math
import re
import signal
import socket
import subprocess
import sys
import urllib.request

import cv2
import numpy as np
import pytest

from emopipe.errors import SourceUnavailableError, UsageError
from emopipe.io import live as live_io
from emopipe.io.live import LiveOptions, LiveSource
from emopipe.io.uris import check_url, is_live
from emopipe.observe.livepage import FrameHub, LiveServer, parse_address
from tests.support import synth
from tests.support.processes import interruptible, wait_for
from tests.support.streams import MjpegServer, free_port
from tests.test_live import REPO, Gate, GatedCamera, PacedCamera, SteppedClock, run_cli

# -- timeouts: inf and beyond what OpenCV takes ---------------------------------------------------------


@pytest.mark.parametrize(("open_s", "read_s", "expected"), [
    (math.inf, math.inf, (2**31 - 1, 2**31 - 1)),  # wait for ever: as long as OpenCV's C int allows
    (3_000_000, 5, (2**31 - 1, 5000)),  # 3e9 ms: past a C int (OpenCV refused it, -5:Bad argument)
    (10, 1e-6, (10_000, 1)),  # never 0 ms, which OpenCV takes as no limit
])
def test_stream_timeouts_reach_opencv_as_milliseconds_it_takes(open_s, read_s, expected, monkeypatch):
    given = []

    class Refused:
        def isOpened(self) -> bool:  # (OpenCV's name)
            return False

        def release(self) -> None:
            pass

    def capture(uri, backend, params):  # type: ignore[no-untyped-def]
        given.append(params)
        return Refused()

    monkeypatch.setattr(live_io.cv2, "VideoCapture", capture)
    port = free_port()
    with pytest.raises(SourceUnavailableError, match="nothing is listening"):
        live_io.open_stream(f"http://127.0.0.1:{port}/x.mjpg", LiveOptions(open_timeout_s=open_s,
                                                                           read_timeout_s=read_s))
    params = dict(zip(given[0][::2], given[0][1::2], strict=True))
    assert (params[cv2.CAP_PROP_OPEN_TIMEOUT_MSEC], params[cv2.CAP_PROP_READ_TIMEOUT_MSEC]) == expected
    assert all(isinstance(v, int) for v in params.values())


def test_a_source_with_infinite_timeouts_opens_and_closes():
    """inf reaches the waits for the first frame and for the capture thread at close (threading refuses inf)."""
    options = LiveOptions(open_timeout_s=math.inf, read_timeout_s=math.inf, reconnect_timeout_s=math.inf,
                          max_frames=3)
    with LiveSource("paced://x", opener=lambda uri, o: PacedCamera(fps=500), options=options) as source:
        assert len(list(source)) == 3
    assert not source._thread.is_alive()


@pytest.mark.parametrize("option", ["--read-timeout", "--open-timeout"])
@pytest.mark.parametrize("value", ["inf", "3000000"])
def test_the_command_takes_an_infinite_or_huge_open_or_read_timeout(option, value, tmp_path, capsys):
    """Nothing listening: the one-line 'cannot open' (exit 7), not an internal OverflowError (exit 1) or OpenCV's
    Bad argument."""
    port = free_port()
    code, err = run_cli([f"http://127.0.0.1:{port}/x.mjpg", option, value, "-o", str(tmp_path / "x.csv"),
                         "--metrics-port", "0"], capsys)
    lines = [line for line in err.splitlines() if line.startswith("emopipe: error")]
    assert code == 7 and len(lines) == 1 and "nothing is listening" in lines[0], err


# -- the first connection gives up on time ---------------------------------------------------------------

class FreezingCamera(GatedCamera):
    """``frames`` frames, then silence: each read waits the read timeout the capture was opened with, and fails
    (a server stopped with SIGSTOP: the connection stays open)."""

    def __init__(self, clock: SteppedClock, gate: Gate, fps: float, frames: int, read_timeout_s: float) -> None:
        super().__init__(clock, gate, fps)
        self.last, self.read_timeout_s = frames, read_timeout_s

    def read(self) -> tuple[bool, np.ndarray | None]:
        if self.reads >= self.last:
            self.clock.advance(self.read_timeout_s)
            return False, None
        return super().read()


def test_a_stream_that_freezes_on_its_first_connection_is_given_up_after_the_reconnect_timeout():
    """--read-timeout 20 --reconnect-timeout 8: the first connection's read timeout is cut to 8 s as reopenings'
    are, so the run gives up 8 s after the last frame (it was 20 s)."""
    clock, gate = SteppedClock(), Gate(permits=3)
    given: list[float] = []

    def opener(uri: str, options: LiveOptions) -> FreezingCamera:
        given.append(options.read_timeout_s)
        if len(given) > 1:
            raise SourceUnavailableError("the server does not answer")
        return FreezingCamera(clock, gate, fps=128, frames=3, read_timeout_s=options.read_timeout_s)

    options = LiveOptions(read_timeout_s=20, reconnect_timeout_s=8, backoff_s=(1 / 16, 1 / 8))
    with LiveSource("http://127.0.0.1:8080/cam.mjpg", options=options, opener=opener,
                    clock=clock.live()) as source, pytest.raises(SourceUnavailableError, match="lost the stream"):
        list(source)
    last_frame = 1024.0 + 3 / 128
    assert given[0] == 8
    assert 8 < clock.now() - last_frame <= 8 + 0.01 + 1e-9


def test_a_first_connection_keeps_a_read_timeout_shorter_than_the_reconnect_timeout():
    clock, gate = SteppedClock(), Gate(permits=3)
    given: list[float] = []

    def opener(uri: str, options: LiveOptions) -> GatedCamera:
        given.append(options.read_timeout_s)
        return GatedCamera(clock, gate, fps=128)

    with LiveSource("paced://x", options=LiveOptions(read_timeout_s=2, reconnect_timeout_s=8, max_frames=1),
                    opener=opener, clock=clock.live()) as source:
        list(source)
        gate.allow(1000)
    assert given == [2]


# -- the page over IPv6 -----------------------------------------------------------------------------------

def _ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as probe:
            probe.bind(("::1", 0))
        return True
    except OSError:
        return False


@pytest.mark.skipif(not _ipv6_loopback(), reason="this machine has no IPv6 loopback (::1)")
def test_the_page_is_served_on_an_ipv6_address():
    hub = FrameHub()
    host, port = parse_address("[::1]:0")
    server = LiveServer(host, port, hub, lambda: {"state": "live"})
    try:
        assert server.url == f"http://[::1]:{server.port}/"
        with urllib.request.urlopen(server.url + "stats.json", timeout=30) as response:
            assert json.loads(response.read()) == {"state": "live"}
    finally:
        server.close()
        hub.close()


def test_the_page_on_an_ipv4_name_or_address_stays_ipv4():
    hub = FrameHub()
    server = LiveServer("127.0.0.1", 0, hub, lambda: {})
    try:
        assert server.httpd.address_family == socket.AF_INET
    finally:
        server.close()
        hub.close()
    with pytest.raises(UsageError, match=r"cannot serve the live page on no-such-host\.invalid:0"):
        LiveServer("no-such-host.invalid", 0, hub, lambda: {})


# -- a camera written wrong ---------------------------------------------------------------------------------

@pytest.mark.parametrize("uri", ["webcam:abc", "webcam:", "webcam:-1", "webcam:1.5"])
def test_a_webcam_not_written_webcam_n_is_a_usage_error(uri, tmp_path, capsys):
    assert is_live(uri)
    with pytest.raises(UsageError, match=r"a camera is written webcam:N"):
        check_url(uri)
    code, err = run_cli([uri, "-o", str(tmp_path / "x.csv"), "--metrics-port", "0"], capsys)
    lines = [line for line in err.splitlines() if line.startswith("emopipe: error")]
    assert code == 2 and len(lines) == 1 and "webcam:N" in lines[0] and "not found" not in lines[0], err


# -- the frame counts add up --------------------------------------------------------------------------------

def _adds_up(source: LiveSource) -> bool:
    return source.captured == source.skipped + source.dropped + source.yielded + source.left


def test_every_frame_captured_is_yielded_skipped_dropped_or_left_however_the_source_ends():
    # --end: the frame captured past the end ended iteration; it is left, not lost
    clock, gate = SteppedClock(), Gate()
    with LiveSource("paced://x", opener=lambda uri, o: GatedCamera(clock, gate, fps=128),
                    options=LiveOptions(duration_s=0.125), clock=clock.live()) as source:
        frames = []
        for frame in source:
            frames.append(frame)
            gate.allow(1)  # one frame at a time: none dropped
        gate.allow(1000)  # (read after the end: not the run's)
    assert len(frames) == 16 and source.left == 1 and source.dropped == 0 and _adds_up(source)

    # stopped (Ctrl-C) with frames waiting, some dropped, some skipped before iteration began
    clock, gate = SteppedClock(), Gate(permits=4)
    with LiveSource("paced://x", opener=lambda uri, o: GatedCamera(clock, gate, fps=128), clock=clock.live()) as source:
        gate.wait_until_waiting_after(4)  # four frames before anyone takes one: three skipped
        for frame in source:
            read = gate.reads
            gate.allow(3)  # three come while this one is analysed: two dropped, the newest waits
            gate.wait_until_waiting_after(read + 3)
            if frame.index >= 10:
                break
        source.stop()
        assert source._newest.waiting == 1  # the newest, never taken
        gate.allow(1)  # a frame read as the source stops is not the run's
        source._thread.join(timeout=60)
    assert source.skipped == 3 and source.dropped > 0 and source.left == 1 and _adds_up(source)
    assert source.captured == 4 + 3 * source.yielded


@pytest.mark.slow
def test_the_summary_of_a_live_run_ended_by_end_or_ctrl_c_counts_every_frame(tmp_path, models_home, checkpoints):
    """captured = skipped + processed + dropped + unprocessed at the end (two frames were counted nowhere)."""
    clip = synth.moving_face_video(tmp_path / "clip.mp4", frames=40, size=(160, 120), fps=10.0, empty=None)
    runs = {"end": ["--end", "3"], "ctrl-c": []}
    for name, options in runs.items():
        rows, log = tmp_path / f"{name}.csv", tmp_path / f"{name}.log"
        with MjpegServer(clip.path) as server, open(log, "w") as log_file:
            proc = subprocess.Popen(
                [sys.executable, "-m", "emopipe", server.url, "--weights", str(checkpoints[8]), "-o", str(rows),
                 "--metrics-port", "0", *options], cwd=REPO, stdout=log_file, stderr=subprocess.STDOUT,
                preexec_fn=interruptible)
            try:
                if name == "ctrl-c":
                    wait_for(lambda rows=rows: rows.exists() and len(rows.read_text().splitlines()) >= 4, 90, proc,
                             log, "no rows")
                    proc.send_signal(signal.SIGINT)
                assert proc.wait(timeout=120) == (130 if name == "ctrl-c" else 0), log.read_text()[-3000:]
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
        live = json.loads((tmp_path / f"{name}.summary.json").read_text())["live"]
        assert live["frames_processed"] > 0, live
        assert live["frames_captured"] == (live["frames_skipped_at_start"] + live["frames_processed"]
                                           + live["frames_dropped"] + live["frames_unprocessed_at_end"]), (name, live)
        assert re.search(rf"{live['frames_unprocessed_at_end']} unprocessed at the end", log.read_text())
