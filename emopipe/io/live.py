"""Live sources: webcams and network streams, read so that results are about *now*.

A camera or stream delivers frames at its own pace whether or not anyone keeps up. A capture
thread reads them as they come and keeps only the newest one; a frame that is replaced before the
pipeline has taken it is dropped and counted. Latency therefore never accumulates behind a slow
consumer: a frame waits at most for the frame before it to finish.

URIs: ``webcam:N`` (camera index N, as OpenCV numbers them; ``emopipe --webcam N``) and network
streams ``rtsp://``, ``rtmp://``, ``http(s)://`` (MJPEG, HLS…), ``udp://``, ``srt://`` as OpenCV's
FFmpeg backend reads them. FFmpeg options (e.g. ``rtsp_transport;tcp``) go in
``OPENCV_FFMPEG_CAPTURE_OPTIONS`` as OpenCV documents.

Frames carry wall-clock capture times: ``Frame.timestamp_s`` is the Unix time (seconds, UTC) at which
the frame was read from the camera or stream, ``Frame.read_time`` the same moment on the
``time.perf_counter`` clock, so the pipeline's frame latency is capture → result. ``Frame.index``
counts every frame captured, dropped ones included, across reconnections (gaps show drops).

Faults: a camera that is absent or busy, or a stream that cannot be reached, raises
:class:`~emopipe.errors.SourceUnavailableError` when the source opens. A stream that stops or stalls
(no frame for ``read_timeout_s``) mid-run is reopened with exponential backoff; each successful
reopening is counted. Only when no frame has come for ``reconnect_timeout_s`` does iteration raise
:class:`~emopipe.errors.SourceUnavailableError`. A stream that declares a length (a remote file,
HLS video on demand) ends normally once that many frames were read.
"""

from __future__ import annotations

import glob
import logging
import math
import os
import re
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Protocol
from urllib.parse import urlsplit

import cv2
import numpy as np

from emopipe.errors import SourceUnavailableError, UsageError
from emopipe.io.sources import _as_bgr, _SourceBase
from emopipe.io.uris import CAPTURES, STREAM_SCHEMES, redact_uri, scheme, webcam_index
from emopipe.types import Frame, HostFrame, SourceInfo

logger = logging.getLogger(__name__)

_FPS_WINDOW = 64  # capture times kept to measure the current frame rate
_INFINITE_READ_CLOSE_WAIT_S = 5.0  # how long closing waits for a capture thread whose read may never time out


@dataclass(frozen=True)
class LiveClock:
    """The clocks a live source reads and how its capture thread waits between reopening attempts: the
    process's own by default; a test passes a controlled one (rates, backoffs and give-ups then exact)."""

    now: Callable[[], float] = time.perf_counter  # capture instants: latencies, rates, silences
    wall: Callable[[], float] = time.time  # the Unix time of a capture (Frame.timestamp_s)
    wait: Callable[[threading.Event, float], bool] = threading.Event.wait  # up to the seconds; True once set


class Capture(Protocol):
    """What a live source reads from: the part of ``cv2.VideoCapture`` it uses."""

    def read(self) -> tuple[bool, np.ndarray | None]: ...

    def get(self, prop: int) -> float: ...

    def release(self) -> None: ...


@dataclass(frozen=True)
class LiveOptions:
    """How a live source opens, waits and gives up (seconds)."""

    open_timeout_s: float = 10.0  # to connect and get the first frame
    read_timeout_s: float = 5.0  # a stream silent this long has stalled: reopen it
    reconnect_timeout_s: float = 60.0  # no frame for this long (reconnecting all the while): give up; inf: never
    backoff_s: tuple[float, float] = (0.25, 5.0)  # first and longest wait between reopening attempts
    max_frames: int | None = None  # stop after yielding this many frames
    duration_s: float | None = None  # stop once a frame was captured this long after the first one yielded
    first_index: int = 0  # the first frame's number (a camera moved to another Ray worker numbers on)

    def __post_init__(self) -> None:
        for name in ("open_timeout_s", "read_timeout_s", "reconnect_timeout_s"):
            value = getattr(self, name)
            if not value > 0:
                raise UsageError(f"{name.removesuffix('_s').replace('_', ' ')} must be > 0 s, got {value}")
        first, longest = self.backoff_s
        if not 0 <= first <= longest:
            raise UsageError(f"reconnect backoff must be 0 ≤ first ≤ longest, got {self.backoff_s}")
        if self.max_frames is not None and self.max_frames < 1:
            raise UsageError(f"maximum frame count must be at least 1, got {self.max_frames}")
        if self.duration_s is not None and not (math.isfinite(self.duration_s) and self.duration_s > 0):
            raise UsageError(f"live duration must be > 0 s, got {self.duration_s}")

    def backoff(self, attempt: int) -> float:
        """Wait before reopening attempt ``attempt`` (0: at once, then first, 2×first… up to longest)."""
        first, longest = self.backoff_s
        # (the doubling capped: a camera down for hours with no reconnect timeout makes thousands of attempts)
        return 0.0 if attempt == 0 else min(longest, first * 2 ** min(attempt - 1, 60))


# -- opening cameras and streams -------------------------------------------------------------------

def _quietly(make: Callable[[], cv2.VideoCapture]) -> cv2.VideoCapture:
    """OpenCV and FFmpeg warn on stderr when a camera or stream does not open or times out; we report
    those ourselves (one clear line, reconnection logged), so their own messages are silenced unless the
    user set OPENCV_LOG_LEVEL / OPENCV_FFMPEG_LOGLEVEL."""
    os.environ.setdefault("OPENCV_FFMPEG_LOGLEVEL", "8")  # AV_LOG_FATAL, read when FFmpeg starts
    if "OPENCV_LOG_LEVEL" in os.environ:
        return make()
    cv2.utils.logging.setLogLevel(cv2.utils.logging.LOG_LEVEL_SILENT)
    try:
        return make()
    finally:
        # process-wide, and left at errors only: reads time out (a warning) long after opening
        cv2.utils.logging.setLogLevel(cv2.utils.logging.LOG_LEVEL_ERROR)


def _camera_devices() -> list[str]:
    return sorted(glob.glob("/dev/video*"), key=lambda p: int(re.sub(r"\D", "", p) or 0))


def open_webcam(uri: str, options: LiveOptions) -> Capture:
    index = webcam_index(uri)
    if index is None:
        raise UsageError(f"a webcam is written webcam:N (N = 0, 1, …), got {uri!r}")
    backend = cv2.CAP_V4L2 if sys.platform.startswith("linux") else cv2.CAP_ANY
    cap = _quietly(lambda: cv2.VideoCapture(index, backend))
    if not cap.isOpened():
        cap.release()
        found = ""
        if sys.platform.startswith("linux"):
            devices = _camera_devices()
            found = (f" (cameras here: {', '.join(devices)})" if devices else
                     " (no /dev/video* devices: is a camera connected, and may this process use it — the "
                     "'video' group, or docker run --device /dev/video0?)")
        raise SourceUnavailableError(f"camera {index} is not available: no such camera, or another program "
                                     f"is using it{found}")
    cap.set(cv2.CAP_PROP_BUFFERSIZE, 1)  # where the backend allows it: no stale frames queued in the driver
    return cap


def _why_unreachable(uri: str, timeout_s: float) -> str:
    """A reason a user can act on, found by connecting to the stream's host ourselves."""
    parts = urlsplit(uri)
    host = parts.hostname
    if not host:
        return "the URL has no host"
    defaults = {"http": 80, "https": 443, "rtsp": 554, "rtsps": 322, "rtmp": 1935, "rtmps": 443}
    try:
        port = parts.port or defaults.get(parts.scheme.lower())
    except ValueError:
        return "the URL's port is not a number"
    if port is None or parts.scheme.lower() in ("udp", "rtp", "srt"):
        return "no video arrived (is the sender running and sending to this address?)"
    try:
        socket.getaddrinfo(host, port)
    except socket.gaierror:
        return f"cannot resolve the host name {host!r}"
    try:
        with socket.create_connection((host, port), timeout=min(timeout_s, 5.0)):
            pass
    except ConnectionRefusedError:
        return f"nothing is listening at {host}:{port} (connection refused)"
    except TimeoutError:
        return f"{host}:{port} did not answer"
    except OSError as exc:
        return f"cannot connect to {host}:{port}: {exc.strerror or exc}"
    return (f"{host}:{port} answers, but OpenCV/FFmpeg found no video stream it can read there "
            "(check the path and any credentials)")


_LONGEST_MSEC = 2**31 - 1  # OpenCV takes its timeouts as a C int of milliseconds: 24.8 days at most


def _msec(seconds: float) -> int:
    # never 0 ms, which OpenCV takes as no limit: a reopening cut to the little time left stays a time limit;
    # inf (wait for ever) and anything past a C int (OpenCV refuses it) become the longest OpenCV allows
    return max(1, round(seconds * 1000)) if seconds * 1000 < _LONGEST_MSEC else _LONGEST_MSEC


def _join_s(seconds: float) -> float | None:
    """A wait for threading: None (for ever) for inf, which its locks refuse (OverflowError)."""
    return seconds if math.isfinite(seconds) else None


def open_stream(uri: str, options: LiveOptions) -> Capture:
    params = [cv2.CAP_PROP_OPEN_TIMEOUT_MSEC, _msec(options.open_timeout_s),
              cv2.CAP_PROP_READ_TIMEOUT_MSEC, _msec(options.read_timeout_s)]
    cap = _quietly(lambda: cv2.VideoCapture(uri, cv2.CAP_FFMPEG, params))
    if not cap.isOpened():
        cap.release()
        raise SourceUnavailableError(f"cannot open the stream {redact_uri(uri)}: "
                                     f"{_why_unreachable(uri, options.open_timeout_s)}")
    return cap


def capture_opener(uri: str) -> Callable[[str, LiveOptions], Capture]:
    if webcam_index(uri) is not None:
        return open_webcam
    found = scheme(uri)
    if found is not None and found in CAPTURES:
        return CAPTURES.get(found)  # type: ignore[return-value]
    if found in STREAM_SCHEMES:
        return open_stream
    raise UsageError(f"{uri!r} is not a camera (webcam:N) or a network stream "
                     f"({', '.join(s + '://' for s in sorted(STREAM_SCHEMES))})")


# -- the newest frame ---------------------------------------------------------------------------

class NewestFrame:
    """A one-frame hand-over: the producer replaces, the consumer takes each frame at most once.

    A frame replaced before it was taken is *dropped* once counting has started (the consumer is
    running) and *skipped* before (frames that arrived while the models were loading). ``accepted`` counts
    every frame put before the close; one put after it is refused (False), counted nowhere.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._frame: Frame | None = None
        self._counting = False
        self._closed = False
        self.error: BaseException | None = None
        self.dropped = 0
        self.skipped = 0
        self.accepted = 0

    def put(self, frame: Frame) -> bool:
        """Offer the newest frame; True when it replaced one that was never taken."""
        with self._cond:
            if self._closed:
                return False  # (the consumer has stopped: a frame read meanwhile is not the run's)
            self.accepted += 1
            replaced = self._frame is not None
            if replaced:
                if self._counting:
                    self.dropped += 1
                else:
                    self.skipped += 1
            self._frame = frame
            self._cond.notify_all()
        return replaced and self._counting

    def start_counting(self) -> None:
        with self._cond:
            self._counting = True

    def peek(self) -> Frame | None:
        with self._cond:
            return self._frame

    @property
    def waiting(self) -> int:
        """1 while a frame waits to be taken, else 0."""
        with self._cond:
            return int(self._frame is not None)

    def take(self, timeout: float) -> Frame | None:
        """The newest frame not taken yet, waiting up to ``timeout``; None if none came (or closed)."""
        with self._cond:
            if self._frame is None and not self._closed:
                self._cond.wait(timeout)
            frame, self._frame = self._frame, None
            return frame

    def close(self, error: BaseException | None = None) -> None:
        with self._cond:
            self._closed = True
            self.error = self.error or error
            self._cond.notify_all()

    @property
    def closed(self) -> bool:
        return self._closed

    def wait_until(self, ready: Callable[[], bool], timeout: float | None) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: ready() or self._closed, timeout)

    def notify(self) -> None:
        with self._cond:
            self._cond.notify_all()


# -- the source ----------------------------------------------------------------------------------

class LiveSource(_SourceBase):
    """A camera or network stream read by a capture thread that keeps only the newest frame.

    The thread starts when the source opens (so a stream stays drained while the models load) and
    the source is ready once the first frame has arrived. ``on_drop(n)``, ``on_reconnect()``,
    ``on_state(state)`` and ``on_reopen_failed()`` are called from the capture thread (``on_state`` also from a
    thread that stops the source; set them before iterating); ``captured``, ``dropped``, ``skipped``,
    ``reconnects``, ``reopen_failures``, ``state`` and ``up`` can be read at any time.

    ``state`` is ``up`` while frames arrive, ``lost`` while the stream is down and being reopened, then for good
    ``ended`` (stopped, ``--end``, ``--max-frames``, a finite stream's last frame) or ``failed`` (given up after
    ``--reconnect-timeout``, or the capture failed): the metrics tell an ended camera from a lost one by it.
    """

    def __init__(self, uri: str, *, options: LiveOptions | None = None,
                 opener: Callable[[str, LiveOptions], Capture] | None = None,
                 on_drop: Callable[[int], None] | None = None, on_reconnect: Callable[[], None] | None = None,
                 clock: LiveClock | None = None) -> None:
        super().__init__()
        self.uri = uri
        self.options = options or LiveOptions()
        self.clock = clock or LiveClock()
        self._opener = opener or capture_opener(uri)
        self.kind = "camera" if webcam_index(uri) is not None else "stream"
        self.on_drop = on_drop
        self.on_reconnect = on_reconnect
        self.on_state: Callable[[str], None] | None = None
        self.on_reopen_failed: Callable[[], None] | None = None
        self.yielded = 0  # frames iteration handed out
        self._past_end = 0  # taken, but captured after --end: not handed out
        self.reconnects = 0
        self.reopen_failures = 0  # attempts to reopen a lost stream that failed (refused, no frame)
        self.state = "opening"  # (up from the first frame, before the constructor returns)
        self._newest = NewestFrame()
        self._stopping = threading.Event()
        self._state_lock = threading.Lock()
        self._times: deque[float] = deque(maxlen=_FPS_WINDOW)
        self._last_capture: float | None = None
        self._size: tuple[int, ...] | None = None  # the last frame's (height, width)
        self._streaming_s = 0.0  # time between consecutive captures while the stream was up
        self._intervals = 0
        self._thread = threading.Thread(target=self._capture, name="emopipe-capture", daemon=True)
        self._thread.start()
        o = self.options
        self._newest.wait_until(lambda: self.captured > 0, _join_s(o.open_timeout_s + o.read_timeout_s + 2.0))
        first = self._newest.peek()
        if first is None:
            error = self._newest.error or SourceUnavailableError(
                f"{self._name()} gave no frame within {o.open_timeout_s + o.read_timeout_s:g} s")
            self.close()
            raise error
        self.info = SourceInfo(uri=redact_uri(uri), kind=self.kind, fps=None, frame_count=None,
                               width=first.width, height=first.height)

    def _name(self) -> str:
        index = webcam_index(self.uri)
        return f"camera {index}" if index is not None else f"the stream {redact_uri(self.uri)}"

    # -- the capture thread ----------------------------------------------------------------------

    def _capture(self) -> None:
        cap: Capture | None = None
        declared: int | None = None  # frames a finite stream says it has
        read_since_open = 0
        read_timeout = self.options.read_timeout_s  # the one the capture was opened with (set at each opening)
        attempt = 0
        reconnecting = False  # the stream was lost after giving frames
        last_problem = ""
        try:
            while not self._stopping.is_set():
                if cap is None:
                    if self.captured and self._given_up():
                        raise SourceUnavailableError(
                            f"lost {self._name()}: no frame for {self._silence():.0f} s although reconnecting "
                            f"all the while (last problem: {last_problem})")
                    wait = self.options.backoff(attempt)
                    if self.captured:  # give up on time, not a whole backoff later
                        wait = min(wait, max(0.0, self.options.reconnect_timeout_s - self._silence()) + 0.01)
                    if self.clock.wait(self._stopping, wait):
                        return
                    attempt += 1
                    options = self.options
                    if self.captured:  # a reopening: it may take only the time left before giving up
                        left = options.reconnect_timeout_s - self._silence()
                        if left <= 0:
                            continue  # (given up above)
                        # to open, and to wait for a frame: a capture's read timeout is set when it opens, so one
                        # cut short here stays short (a slow stream may then be taken for stalled once, and reopened)
                        options = replace(options, open_timeout_s=min(options.open_timeout_s, left),
                                          read_timeout_s=min(options.read_timeout_s, left))
                    else:  # the first connection's read timeout is fixed now too: one that stalls after its first
                        # frames is given up on after the reconnect timeout, not after a longer read timeout
                        options = replace(options,
                                          read_timeout_s=min(options.read_timeout_s, options.reconnect_timeout_s))
                    try:
                        cap = self._opener(self.uri, options)
                    except SourceUnavailableError as exc:
                        if not self.captured:
                            raise  # the first opening: the user gets this message at once
                        last_problem = str(exc)
                        self._reopen_failed()
                        continue
                    count = cap.get(cv2.CAP_PROP_FRAME_COUNT)
                    declared = round(count) if math.isfinite(count) and 0 < count < 1e9 else None
                    read_since_open = 0
                    read_timeout = options.read_timeout_s
                ok, image = cap.read()
                if not ok or image is None or image.size == 0:
                    cap.release()
                    cap = None
                    if not self.captured:
                        raise SourceUnavailableError(
                            f"{self._name()} opened but gave no frame"
                            + (": another program may be using the camera" if self.kind == "camera" else
                               f" within {read_timeout:g} s"))
                    if declared is not None and read_since_open >= declared - 1:
                        logger.info("%s ended after its %d frames", self._name(), declared)
                        self._set_state("ended")
                        return
                    last_problem = (f"no frame for {read_timeout:g} s or the connection closed"
                                    if read_since_open else "it opened but gave no frame")
                    if reconnecting and not read_since_open:
                        self._reopen_failed()  # reopened, but no frame came
                    if not reconnecting:
                        logger.warning("%s stopped (%s); reconnecting", self._name(), last_problem)
                        self._set_state("lost")
                    reconnecting = True
                    continue
                self._publish(image, reopened=reconnecting)
                reconnecting = False
                read_since_open += 1
                attempt = 0
        except BaseException as exc:  # handed to the consumer, which raises it
            self._set_state("failed")
            self._newest.close(exc)
        finally:
            if cap is not None:
                cap.release()
            self._newest.close()

    @property
    def up(self) -> bool:
        """Frames arriving: False before the first, while the stream is lost, and once it has ended or failed."""
        return self.state == "up"

    def _set_state(self, state: str) -> None:
        with self._state_lock:  # (the capture thread and a stopping consumer both set it)
            if state == self.state or self.state in ("ended", "failed"):
                return  # ended or failed is for good: a frame read while the source stopped does not make it up
            self.state = state
            if self.on_state is not None:
                self.on_state(state)

    def _reopen_failed(self) -> None:
        self.reopen_failures += 1
        if self.on_reopen_failed is not None:
            self.on_reopen_failed()

    def _publish(self, image: np.ndarray, *, reopened: bool) -> None:
        wall, now = self.clock.wall(), self.clock.now()
        frame = HostFrame(index=self.options.first_index + self.captured, timestamp_s=wall, bgr=_as_bgr(image),
                          read_time=now, reconnects=self.reconnects + reopened)
        if reopened:
            self._times.clear()  # a rate measured across the outage would not be the stream's
            self.reconnects += 1
            resized = "" if self._size in (None, image.shape[:2]) else \
                f"; its frames are now {image.shape[1]}×{image.shape[0]} (were {self._size[1]}×{self._size[0]})"
            logger.warning("%s reconnected after %.1f s%s", self._name(), self._silence(now), resized)
            if self.on_reconnect is not None:
                self.on_reconnect()
        self._set_state("up")  # (before the count: the constructor, waiting for a first frame, finds it up)
        if self._last_capture is not None and not reopened:
            self._streaming_s += now - self._last_capture
            self._intervals += 1
        self._times.append(now)
        self._last_capture = now
        self._size = image.shape[:2]  # (a camera may come back at another size: the rows' boxes are in it)
        if self._newest.put(frame) and self.on_drop is not None:
            self.on_drop(1)

    def _silence(self, now: float | None = None) -> float:
        if self._last_capture is None:
            return 0.0
        return (self.clock.now() if now is None else now) - self._last_capture

    def _given_up(self) -> bool:
        return self._silence() > self.options.reconnect_timeout_s

    # -- what the pipeline and the views read -----------------------------------------------------

    @property
    def captured(self) -> int:
        """Frames read from the camera before the source stopped (one read as it stopped is not the run's)."""
        return self._newest.accepted

    @property
    def left(self) -> int:
        """Frames captured that were neither handed out, skipped nor dropped: the one waiting now (once the source
        has stopped: never taken) and the one captured after ``--end``, which ended iteration. Once stopped,
        ``captured == skipped + dropped + yielded + left``."""
        return self._newest.waiting + self._past_end

    @property
    def dropped(self) -> int:
        return self._newest.dropped

    @property
    def skipped(self) -> int:
        """Frames replaced before iteration started (while the models loaded): not counted as drops."""
        return self._newest.skipped

    @property
    def seconds_since_frame(self) -> float | None:
        """How long ago the newest frame was captured (None before the first)."""
        return None if self._last_capture is None else self._silence()

    @property
    def measured_fps(self) -> float | None:
        """The capture rate over the last frames since the stream last (re)connected (None until two came)."""
        times = list(self._times)
        if len(times) < 2 or times[-1] <= times[0]:
            return None
        return (len(times) - 1) / (times[-1] - times[0])

    @property
    def run_fps(self) -> float | None:
        """The capture rate over the whole run, while the stream was up (outages are not counted)."""
        return self._intervals / self._streaming_s if self._intervals and self._streaming_s > 0 else None

    @property
    def expected_frames(self) -> int | None:
        return self.options.max_frames

    def _frames(self) -> Iterator[Frame]:
        self._newest.start_counting()
        yielded = 0
        first: float | None = None  # the first frame's capture time: --end counts from it
        started = self.clock.wall()
        limit, duration = self.options.max_frames, self.options.duration_s
        while limit is None or yielded < limit:
            closed = self._newest.closed  # (read first: a last frame put just before the close is still taken)
            frame = self._newest.take(timeout=0.1)
            if frame is None:
                if closed:
                    if self._newest.error is not None and not self._stopping.is_set():
                        raise self._newest.error
                    return
                # a camera that is down (reconnecting) still ends at --end
                if duration is not None and self.clock.wall() - (started if first is None else first) >= duration:
                    break
                continue
            first = frame.timestamp_s if first is None else first
            if duration is not None and frame.timestamp_s - first >= duration:
                self._past_end += 1
                break
            yielded += 1
            self.yielded += 1
            yield frame
        # ended as asked (--max-frames, --end): capture stops, so later frames are not counted as drops
        self.stop()

    def stop(self) -> None:
        """End iteration after the current frame (the window's q key); the capture thread stops, and the source
        is no longer up."""
        self._stopping.set()
        self._newest.close()
        self._set_state("ended")

    def close(self, wait_s: float | None = None) -> None:
        """Stop, and wait for the capture thread (by default as long as a blocked read may take; a thread still
        opening the stream after ``wait_s`` is left to end on its own: it is a daemon)."""
        self.stop()
        thread = getattr(self, "_thread", None)
        if thread is not None and thread is not threading.current_thread() and thread.is_alive():
            wait = self.options.read_timeout_s + 1.0 if wait_s is None else wait_s
            # (--read-timeout inf: a frozen stream's read may block for weeks; the thread is a daemon, not waited for
            # longer than a container's stop allows)
            thread.join(timeout=wait if math.isfinite(wait) else _INFINITE_READ_CLOSE_WAIT_S)


# -- registration with open_source ---------------------------------------------------------------

def open_live(uri: str, *, start_s: float | None = None, end_s: float | None = None,
              max_frames: int | None = None, options: LiveOptions | None = None) -> LiveSource:
    """A camera or stream; ``end_s`` is how long to run, ``start_s`` does not apply."""
    if start_s is not None:
        raise UsageError("a start time applies to files; a camera or stream starts now")
    base = options or LiveOptions()
    options = LiveOptions(open_timeout_s=base.open_timeout_s, read_timeout_s=base.read_timeout_s,
                          reconnect_timeout_s=base.reconnect_timeout_s, backoff_s=base.backoff_s,
                          max_frames=max_frames if max_frames is not None else base.max_frames,
                          duration_s=end_s if end_s is not None else base.duration_s)
    return LiveSource(uri, options=options)

