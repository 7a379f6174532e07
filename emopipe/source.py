"""Frame sources: a video file, one image or a folder of images, read as a stream of :class:`Frame`.

A source is an iterator with an ``info`` record. Videos are decoded one frame at a time with
OpenCV's FFmpeg backend, so memory does not grow with the video's length. Every frame carries its
0-based position in the source, its timestamp in seconds and the time it was read (for latency
metrics).

Timestamps come from the container (``CAP_PROP_POS_MSEC``, the decoded frame's own presentation
time, so variable-frame-rate videos keep their real times). Where the container gives none, or a
timestamp does not increase, the frame gets ``index / fps`` instead (kept increasing).

Damaged videos are read as far as they decode. A video stops being readable in three ways:

* it does not open or no frame decodes (a text file, an empty file, an MP4 whose index — the
  ``moov`` atom at the end of the file — was cut off): :class:`~emopipe.errors.InputUnreadableError`;
* it decodes, but stops before the frame count its container declares (a cut download or
  recording), or frames in the middle fail to decode: the frames that decode are yielded and
  then ``source.ended_early`` says what happened, e.g. ``"decoding stopped at frame 57 of 120
  (00:02.28): the file is truncated or corrupt"``. The pipeline writes its
  results and exits with :class:`~emopipe.errors.InputTruncatedError`'s code.
  MP4/MOV and AVI files store their frame count, so any shortfall is reported; other containers
  (Matroska, WebM, MPEG-TS…) only let OpenCV estimate it from the duration, so a shortfall of up
  to one second is tolerated there, a file decoded to its end whose timestamps jump all over (more
  than one frame in ten: a variable frame rate, as screen recorders write) is not reported, and a
  truncated MPEG-TS (no duration header) goes unnoticed;
* a read fails before the declared end: reading is retried a few times first, because FFmpeg
  can often resume after a damaged stretch.

FFmpeg prints a line for every damaged packet. The first video opened in a process sets
``OPENCV_FFMPEG_LOGLEVEL`` to fatal-only unless the user has set it (``16`` shows FFmpeg's errors
again — note that OpenCV then prints them on *stdout*); the problems themselves are reported
through ``ended_early`` and the exceptions above, so nothing is hidden.

Live sources (cameras, network streams) plug in through :func:`register_source`.
"""

from __future__ import annotations

import logging
import math
import os
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import cv2
import numpy as np

from .errors import InputNotFoundError, InputUnreadableError, UsageError

logger = logging.getLogger(__name__)

SOURCE_KINDS = {"video", "image", "images"}  # live sources add theirs when they register
IMAGE_SUFFIXES = frozenset({
    ".bmp", ".dib", ".jpg", ".jpeg", ".jpe", ".jp2", ".png", ".webp", ".avif", ".tif", ".tiff",
    ".pbm", ".pgm", ".ppm", ".pnm", ".pxm", ".sr", ".ras", ".exr", ".hdr", ".pic",
})
_MAX_FPS = 1000.0  # above this a container's rate is a time base, not a frame rate
_READ_RETRIES = 8  # consecutive failed reads before the declared end that end the stream
_ESTIMATED_COUNT_SLACK_S = 1.0  # tolerated shortfall where the frame count is estimated from the duration


def format_time(seconds: float) -> str:
    """``mm:ss.ff`` (``h:mm:ss.ff`` from one hour on), for messages a user reads."""
    centis = round(max(0.0, seconds) * 100)
    hours, rest = divmod(centis, 360_000)
    minutes, rest = divmod(rest, 6000)
    secs, hundredths = divmod(rest, 100)
    clock = f"{minutes:02d}:{secs:02d}.{hundredths:02d}"
    return f"{hours}:{clock}" if hours else clock


@dataclass(frozen=True)
class SourceInfo:
    """What is known about a source before reading it."""

    uri: str
    kind: str  # "video", "image" or "images" (a folder)
    fps: float | None  # None for images
    frame_count: int | None  # as declared by the container (or counted, for images); None when unknown
    width: int  # of the first frame; frames of a folder may differ
    height: int

    def __post_init__(self) -> None:
        if self.kind not in SOURCE_KINDS:
            raise ValueError(f"SourceInfo.kind must be one of {sorted(SOURCE_KINDS)}, got {self.kind!r}")
        if self.fps is not None and not (math.isfinite(self.fps) and self.fps > 0):
            raise ValueError(f"SourceInfo.fps must be a positive number or None, got {self.fps!r}")
        if self.frame_count is not None and self.frame_count < 0:
            raise ValueError(f"SourceInfo.frame_count must be ≥ 0 or None, got {self.frame_count}")
        if self.width <= 0 or self.height <= 0:
            raise ValueError(f"SourceInfo size must be positive, got {self.width}×{self.height}")

    @property
    def duration_s(self) -> float | None:
        if self.fps is None or self.frame_count is None:
            return None
        return self.frame_count / self.fps


@dataclass(frozen=True)
class Frame:
    """One decoded frame: BGR uint8 pixels as OpenCV decodes them."""

    index: int  # 0-based position in the source
    timestamp: float  # seconds from the start of the source
    bgr: np.ndarray  # H×W×3 uint8
    read_time: float  # time.perf_counter() when it was read

    def __post_init__(self) -> None:
        b = self.bgr
        if not isinstance(b, np.ndarray) or b.ndim != 3 or b.shape[2] != 3 or b.dtype != np.uint8:
            got = f"{type(b).__name__} {getattr(b, 'shape', '')} {getattr(b, 'dtype', '')}".strip()
            raise ValueError(f"Frame.bgr must be an H×W×3 uint8 array, got {got}")
        if b.shape[0] == 0 or b.shape[1] == 0:
            raise ValueError(f"Frame.bgr must not be empty, got shape {b.shape}")
        if self.index < 0:
            raise ValueError(f"Frame.index must be ≥ 0, got {self.index}")
        if not (math.isfinite(self.timestamp) and self.timestamp >= 0):
            raise ValueError(f"Frame.timestamp must be a finite number ≥ 0, got {self.timestamp}")

    @property
    def height(self) -> int:
        return int(self.bgr.shape[0])

    @property
    def width(self) -> int:
        return int(self.bgr.shape[1])


@runtime_checkable
class Source(Protocol):
    """What the pipeline reads from: an iterator of frames with an info record.

    ``ended_early`` is None while reading and after a complete read; a one-line description when
    the source stopped before its declared end (truncated or corrupt input).
    """

    info: SourceInfo
    ended_early: str | None

    @property
    def expected_frames(self) -> int | None:
        """How many frames iteration should yield (for progress), when known."""
        ...

    def __iter__(self) -> Iterator[Frame]: ...

    def close(self) -> None: ...

    def __enter__(self) -> Source: ...

    def __exit__(self, *exc: object) -> None: ...


class _SourceBase:
    """Context manager and the single-pass iteration rule shared by the sources."""

    info: SourceInfo
    ended_early: str | None = None
    decoder = "opencv"  # what decodes the frames, for the run summary (emopipe.nvdec: "nvdec")

    def __init__(self) -> None:
        self._iterated = False
        self.ended_early = None

    def __iter__(self) -> Iterator[Frame]:
        if self._iterated:
            raise RuntimeError(f"{type(self).__name__} can be iterated once; open the source again to re-read it")
        self._iterated = True
        return self._frames()

    def _frames(self) -> Iterator[Frame]:  # pragma: no cover - each source defines it
        raise NotImplementedError

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _check_arguments(start_s: float | None, end_s: float | None, max_frames: int | None) -> None:
    if start_s is not None and not (math.isfinite(start_s) and start_s >= 0):
        raise UsageError(f"start time must be ≥ 0 s, got {start_s}")
    if end_s is not None and not (math.isfinite(end_s) and end_s > (start_s or 0)):
        raise UsageError(f"end time must be after the start time ({start_s or 0} s), got {end_s}")
    if max_frames is not None and max_frames < 1:
        raise UsageError(f"maximum frame count must be at least 1, got {max_frames}")


def _check_file(path: Path) -> None:
    if not path.exists():
        raise InputNotFoundError(f"input not found: {path}")
    if not path.is_file():
        raise InputUnreadableError(f"{path} is not a regular file")
    if not os.access(path, os.R_OK):
        raise InputUnreadableError(f"no permission to read {path}")
    if path.stat().st_size == 0:
        raise InputUnreadableError(f"{path} is empty (0 bytes)")


# -- videos ------------------------------------------------------------------------------------

_ffmpeg_logs_set = False


def _quiet_ffmpeg_logs() -> None:
    """Fatal-only FFmpeg logging, unless the user chose a level; read when FFmpeg first starts."""
    global _ffmpeg_logs_set
    if not _ffmpeg_logs_set:
        os.environ.setdefault("OPENCV_FFMPEG_LOGLEVEL", "8")  # AV_LOG_FATAL
        _ffmpeg_logs_set = True


def _container(path: Path) -> str:
    """The container family from the file's first bytes: "mp4", "avi", "matroska" or "other"."""
    with open(path, "rb") as f:
        head = f.read(12)
    if head[4:8] in (b"ftyp", b"moov", b"mdat", b"wide", b"free", b"skip"):
        return "mp4"
    if head[:4] == b"RIFF" and head[8:12] == b"AVI ":
        return "avi"
    if head[:4] == b"\x1a\x45\xdf\xa3":
        return "matroska"
    return "other"


def _open_capture(path: Path) -> cv2.VideoCapture:
    _quiet_ffmpeg_logs()
    quiet_opencv = "OPENCV_LOG_LEVEL" not in os.environ
    if quiet_opencv:  # OpenCV warns "can't be used to capture by name" on failure; we raise our own error
        previous = cv2.utils.logging.getLogLevel()
        cv2.utils.logging.setLogLevel(cv2.utils.logging.LOG_LEVEL_ERROR)
    try:
        cap = cv2.VideoCapture(str(path), cv2.CAP_FFMPEG)
    finally:
        if quiet_opencv:
            cv2.utils.logging.setLogLevel(previous)
    if cap.isOpened():
        return cap
    cap.release()
    if _container(path) == "mp4":
        raise InputUnreadableError(
            f"cannot read {path}: it looks like an MP4/MOV file but its index (the 'moov' atom) is missing — "
            "the file is probably truncated (an incomplete download or an interrupted recording)"
        )
    raise InputUnreadableError(f"cannot read {path}: not a video or image file OpenCV/FFmpeg can decode")


class VideoSource(_SourceBase):
    """A video file decoded frame by frame.

    ``start_s`` seeks (by timestamp, then verified: the frame landed on must not be past the start
    and the frames there must be spaced as the declared frame rate says; otherwise the video is
    decoded from its beginning up to the start). Indexes are positions in the whole video either
    way. ``end_s`` is exclusive. The first frame is decoded when the source opens, so an
    undecodable file fails here rather than in the middle of a pipeline.
    Iterate in one thread; :meth:`close` may be called from another.
    """

    def __init__(self, path: str | os.PathLike[str], *, start_s: float | None = None, end_s: float | None = None,
                 max_frames: int | None = None) -> None:
        super().__init__()
        _check_arguments(start_s, end_s, max_frames)
        self.path = Path(path)
        _check_file(self.path)
        self.start_s, self.end_s, self.max_frames = start_s, end_s, max_frames
        self._lock = threading.Lock()
        self._cap: Any = self._open_reader()
        fps, count = self._rate_and_count()
        self._fps = fps if math.isfinite(fps) and 0 < fps <= _MAX_FPS else None
        self._declared = round(count) if math.isfinite(count) and count > 0 else None
        self._container = _container(self.path)
        self._pending: deque[Frame] = deque()
        self._next_index = 0  # position of the next frame to decode
        self._last_timestamp: float | None = None
        self._decoded_any = False
        self._gap_frames = 0  # frames the timestamps say are missing
        self._gaps = 0  # places where the timestamps jump
        self._first_gap: float | None = None
        self._start_index = 0
        try:
            self._position(start_s)
        except BaseException:
            self.close()
            raise
        first = self._pending[0]
        self._start_index = first.index
        self.info = SourceInfo(uri=str(path), kind="video", fps=self._fps, frame_count=self._declared,
                               width=first.width, height=first.height)

    # -- the decoder: OpenCV here; emopipe.nvdec overrides these to decode on the GPU ----------------

    seeks = True  # False: a start time is reached by decoding from the beginning

    def _open_reader(self) -> Any:
        return _open_capture(self.path)

    def _rate_and_count(self) -> tuple[float, float]:
        """The container's frame rate and frame count (NaN or 0 where it gives none)."""
        return self._cap.get(cv2.CAP_PROP_FPS), self._cap.get(cv2.CAP_PROP_FRAME_COUNT)

    def _decode(self) -> float | None:
        """Decode the next frame without converting it; its timestamp in ms (NaN if none), None on failure.
        Called with the lock held and a reader open."""
        if not self._cap.grab():
            return None
        return self._cap.get(cv2.CAP_PROP_POS_MSEC)

    def _pixels(self) -> np.ndarray | None:
        """The frame last decoded, as pixels (lock held, reader open)."""
        ok, image = self._cap.retrieve()
        return _as_bgr(image) if ok and image is not None else None

    def _new_frame(self, index: int, timestamp: float, pixels: Any) -> Frame:
        return Frame(index=index, timestamp=timestamp, bgr=pixels, read_time=time.perf_counter())

    # -- reading ---------------------------------------------------------------------------------

    def _timestamp(self, msec: float, index: int) -> float:
        t = msec / 1000.0 if math.isfinite(msec) and msec >= 0 else None
        previous = self._last_timestamp
        if t is None or (previous is not None and t <= previous):
            # the container gave no usable time (OpenCV reports 0 then): derive it from the frame rate
            step = 1.0 / self._fps if self._fps else 1.0
            t = index * step
            if previous is not None and t <= previous:
                t = previous + step
        elif self._fps and previous is not None and t - previous > 1.5 / self._fps:
            # a jump in the container's clock: frames lost to damage, or a variable frame rate
            self._gap_frames += round((t - previous) * self._fps) - 1
            self._gaps += 1
            if self._first_gap is None:
                self._first_gap = previous
        self._last_timestamp = t
        return t

    def _grab_next(self) -> tuple[int, float] | None:
        """Decode the next frame (no colour conversion yet): its (index, timestamp), or None at the end.

        Before the declared end a failed read is retried: FFmpeg often resumes after a damaged stretch.
        """
        failures = 0
        while True:
            with self._lock:
                msec = self._decode() if self._cap is not None else None
            if msec is not None:
                index = self._next_index
                self._next_index += 1
                self._decoded_any = True
                return index, self._timestamp(msec, index)
            failures += 1
            more_declared = self._declared is not None and self._next_index < self._declared
            if not more_declared or failures >= _READ_RETRIES or self._cap is None:
                return None

    def _retrieve(self, index: int, timestamp: float) -> Frame | None:
        with self._lock:
            pixels = self._pixels() if self._cap is not None else None
        return None if pixels is None else self._new_frame(index, timestamp, pixels)

    def _read(self) -> Frame | None:
        """The next decodable frame, or None at the end."""
        while (grabbed := self._grab_next()) is not None:
            frame = self._retrieve(*grabbed)
            if frame is not None:
                return frame
        return None

    # -- positioning -----------------------------------------------------------------------------

    def _position(self, start_s: float | None) -> None:
        """Leave the first frame to yield (at or after ``start_s``) in ``_pending``."""
        if not start_s:
            frame = self._read()
            if frame is None:
                raise InputUnreadableError(f"cannot read {self.path}: the video has no decodable frame")
            self._pending.append(frame)
            return
        duration = self._declared / self._fps if self._declared and self._fps else None
        if duration is not None and start_s >= duration:
            raise UsageError(f"start time {start_s:g} s is at or after the end of {self.path.name} "
                             f"({format_time(duration)})")
        seekable = self._fps is not None and self.seeks
        if not (seekable and self._seek(start_s)):
            if seekable:
                self._reopen()  # the seek that did not check out moved the reader: decode from the start
            self._skip_to(start_s)
        if not self._pending:
            if not self._decoded_any:
                raise InputUnreadableError(f"cannot read {self.path}: the video has no decodable frame")
            raise UsageError(f"start time {start_s:g} s is after the last frame of {self.path.name} "
                             f"({format_time(self._last_timestamp or 0.0)})")

    def _seek(self, start_s: float) -> bool:
        """Seek by timestamp; True (frames queued) when the landing point checks out."""
        assert self._fps is not None
        interval = 1.0 / self._fps
        with self._lock:
            assert self._cap is not None
            self._cap.set(cv2.CAP_PROP_POS_MSEC, start_s * 1000.0)
            position = self._cap.get(cv2.CAP_PROP_POS_FRAMES)
        if not math.isfinite(position) or position < 0 or position > 1e12:
            return False
        first_index = round(position)
        # the timestamps of the frames landed on must not be past the start, and spaced by the
        # declared frame rate: that is what makes their frame numbers (derived by OpenCV from
        # timestamp × rate) true indexes; variable-frame-rate files fail it and are decoded instead
        a = self._read_at(first_index)
        b = self._read_at(first_index + 1) if a is not None else None
        if a is None or b is None:
            return False
        if a.timestamp > start_s + interval / 2 or abs((b.timestamp - a.timestamp) - interval) > interval / 4:
            logger.debug("seek to %.3f s landed at %.3f s / %.3f s: decoding from the start instead",
                         start_s, a.timestamp, b.timestamp)
            return False
        self._pending.extend((a, b))
        self._drop_before(start_s)
        return True

    def _read_at(self, index: int) -> Frame | None:
        self._next_index = index
        return self._read()

    def _drop_before(self, start_s: float) -> None:
        eps = 1e-6
        while True:
            while self._pending and self._pending[0].timestamp < start_s - eps:
                self._pending.popleft()
            if self._pending:
                return
            frame = self._read()
            if frame is None:
                return
            self._pending.append(frame)

    def _reopen(self) -> None:
        with self._lock:
            if self._cap is not None:
                self._cap.release()
            self._cap = self._open_reader()
        self._next_index = 0
        self._last_timestamp = None
        self._pending.clear()

    def _skip_to(self, start_s: float) -> None:
        """Decode from the start, converting no colours, up to the first frame at or after ``start_s``."""
        while (grabbed := self._grab_next()) is not None:
            index, timestamp = grabbed
            if timestamp >= start_s - 1e-6:
                frame = self._retrieve(index, timestamp)
                if frame is not None:
                    self._pending.append(frame)
                    return

    # -- iteration -------------------------------------------------------------------------------

    @property
    def expected_frames(self) -> int | None:
        """How many frames iteration should yield, when the container says enough to tell."""
        if self._declared is None:
            return self.max_frames
        stop = self._declared
        if self.end_s is not None and self._fps:
            stop = min(stop, math.ceil(self.end_s * self._fps - 1e-9))
        n = max(0, stop - self._start_index)
        return min(n, self.max_frames) if self.max_frames is not None else n

    def _frames(self) -> Iterator[Frame]:
        yielded = 0
        while self.max_frames is None or yielded < self.max_frames:
            frame = self._pending.popleft() if self._pending else self._read()
            if frame is None:
                self._check_complete()
                return
            if self.end_s is not None and frame.timestamp >= self.end_s:
                return
            yielded += 1
            yield frame

    def _check_complete(self) -> None:
        """After the last decodable frame: did the video end where its container said it would?"""
        if self._declared is None or self._cap is None:
            return
        missing = self._declared - self._next_index
        slack = 0
        if self._container not in ("mp4", "avi") and self._fps:
            slack = round(_ESTIMATED_COUNT_SLACK_S * self._fps)  # the count is an estimate from the duration
        if missing <= 0 or (missing <= slack and self._gap_frames == 0):
            return
        about = "" if slack == 0 else "about "
        last = self._last_timestamp or 0.0
        interval = 1.0 / self._fps if self._fps else 0.0
        expected_end = (self._declared - 1) * interval
        reached_the_end = bool(self._fps) and last >= expected_end - 1.5 * interval
        if reached_the_end and slack and self._gaps > max(3, self._next_index // 10):
            # Jumps all over a file whose count is only an estimate (duration × nominal rate): a variable
            # frame rate (screen recorders' MKV), not damage, which leaves a few jumps where it hit.
            logger.debug("%s: variable frame rate (%d timestamp jumps); decoded to the end", self.path.name,
                         self._gaps)
            return
        if reached_the_end:
            where = f" around {format_time(self._first_gap)}" if self._first_gap is not None else ""
            self.ended_early = (f"{missing} of {about}{self._declared} frames could not be decoded (corrupt data"
                                f"{where}); decoding went on to the end ({format_time(last)}), and frame indexes "
                                "after the damage count only the frames decoded")
        else:
            self.ended_early = (f"decoding stopped at frame {self._next_index} of {about}{self._declared} "
                                f"({format_time(last + interval)}): the file is truncated or corrupt")
        logger.debug("%s: %s", self.path.name, self.ended_early)

    def close(self) -> None:
        lock = getattr(self, "_lock", None)
        if lock is None:
            return
        with lock:
            if self._cap is not None:
                self._cap.release()
                self._cap = None


def _as_bgr(image: np.ndarray) -> np.ndarray:
    """OpenCV gives BGR uint8 for nearly everything; grey or 4-channel or 16-bit inputs are converted."""
    if image.dtype != np.uint8:
        image = cv2.convertScaleAbs(image, alpha=255.0 / 65535.0) if image.dtype == np.uint16 else \
            np.clip(image, 0, 255).astype(np.uint8)
    if image.ndim == 2:
        image = cv2.cvtColor(image, cv2.COLOR_GRAY2BGR)
    elif image.shape[2] == 4:
        image = cv2.cvtColor(image, cv2.COLOR_BGRA2BGR)
    elif image.shape[2] == 1:
        image = cv2.cvtColor(image, cv2.COLOR_GRAY2BGR)
    return np.ascontiguousarray(image)


# -- images ------------------------------------------------------------------------------------

def _read_image(path: Path) -> np.ndarray | None:
    """An image file as BGR uint8 (EXIF orientation applied), or None when it does not decode."""
    try:
        data = np.fromfile(path, dtype=np.uint8)  # unlike cv2.imread, fine with any path on any OS
    except OSError:
        return None
    image = cv2.imdecode(data, cv2.IMREAD_COLOR) if data.size else None
    return None if image is None else _as_bgr(image)


def _images_only(kind: str, start_s: float | None, end_s: float | None) -> None:
    if start_s is not None or end_s is not None:
        raise UsageError(f"start and end times apply to videos, not to {kind}")


class ImageSource(_SourceBase):
    """One image file: a single frame with index 0 and timestamp 0."""

    def __init__(self, path: str | os.PathLike[str], *, max_frames: int | None = None) -> None:
        super().__init__()
        _check_arguments(None, None, max_frames)
        self.path = Path(path)
        _check_file(self.path)
        image = _read_image(self.path)
        if image is None:
            raise InputUnreadableError(f"cannot read {self.path}: not an image OpenCV can decode")
        self._image: np.ndarray | None = image
        self.info = SourceInfo(uri=str(path), kind="image", fps=None, frame_count=1,
                               width=image.shape[1], height=image.shape[0])

    @property
    def expected_frames(self) -> int:
        return 1

    def _frames(self) -> Iterator[Frame]:
        if self._image is not None:
            yield Frame(index=0, timestamp=0.0, bgr=self._image, read_time=time.perf_counter())
        self._image = None

    def close(self) -> None:
        self._image = None


def natural_key(name: str) -> tuple:
    """Sort key that orders ``img2`` before ``img10`` (digit runs compare as numbers)."""
    parts = re.split(r"(\d+)", name.casefold())
    return tuple((0, int(p), p) if p.isdigit() else (1, 0, p) for p in parts)


class FolderSource(_SourceBase):
    """The images of a folder (not its subfolders), in natural order of their names.

    Files whose suffix is not an image format are skipped; an image that fails to decode is
    skipped with a warning (listed in ``skipped``). A frame's index is its file's position in
    ``paths`` and its timestamp is that index in seconds. Frames may differ in size: the pipeline
    batches frames of one size together and the detector letterboxes each into its fixed input.
    """

    def __init__(self, path: str | os.PathLike[str], *, max_frames: int | None = None) -> None:
        super().__init__()
        _check_arguments(None, None, max_frames)
        self.path = Path(path)
        if not self.path.exists():
            raise InputNotFoundError(f"input not found: {self.path}")
        if not self.path.is_dir():
            raise InputUnreadableError(f"{self.path} is not a folder")
        try:
            files = [f for f in self.path.iterdir()
                     if f.suffix.lower() in IMAGE_SUFFIXES and not f.name.startswith(".") and f.is_file()]
        except OSError as exc:
            raise InputUnreadableError(f"cannot list {self.path}: {exc.strerror or exc}") from None
        if not files:
            raise InputUnreadableError(f"no image files in folder {self.path} "
                                       f"(looked for {', '.join(sorted(IMAGE_SUFFIXES))})")
        self.paths: tuple[Path, ...] = tuple(sorted(files, key=lambda f: natural_key(f.name)))
        self.max_frames = max_frames
        self.skipped: list[Path] = []
        self._pending: deque[Frame] = deque()
        self._next = 0
        first = self._read_next()
        if first is None:
            raise InputUnreadableError(f"none of the {len(self.paths)} image files in {self.path} can be decoded")
        self._pending.append(first)
        self.info = SourceInfo(uri=str(path), kind="images", fps=None, frame_count=len(self.paths),
                               width=first.width, height=first.height)

    @property
    def expected_frames(self) -> int:
        n = len(self.paths)
        return min(n, self.max_frames) if self.max_frames is not None else n

    def _read_next(self) -> Frame | None:
        while self._next < len(self.paths):
            index, file = self._next, self.paths[self._next]
            self._next += 1
            image = _read_image(file)
            if image is not None:
                return Frame(index=index, timestamp=float(index), bgr=image, read_time=time.perf_counter())
            self.skipped.append(file)
            logger.warning("skipping %s: not an image OpenCV can decode", file)
        return None

    def _frames(self) -> Iterator[Frame]:
        yielded = 0
        while self.max_frames is None or yielded < self.max_frames:
            frame = self._pending.popleft() if self._pending else self._read_next()
            if frame is None:
                return
            yielded += 1
            yield frame


# -- choosing a source -------------------------------------------------------------------------

@dataclass(frozen=True)
class SourceOpener:
    """How one kind of source is recognised and opened; live sources register their own."""

    name: str
    matches: Callable[[str], bool]
    open: Callable[..., Source]  # (uri, *, start_s, end_s, max_frames) -> Source


def _is_url(uri: str) -> bool:
    return re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", uri) is not None


def _open_folder(uri: str, *, start_s: float | None, end_s: float | None, max_frames: int | None) -> Source:
    _images_only("a folder of images", start_s, end_s)
    return FolderSource(uri, max_frames=max_frames)


def _open_image(uri: str, *, start_s: float | None, end_s: float | None, max_frames: int | None) -> Source:
    _images_only("an image", start_s, end_s)
    return ImageSource(uri, max_frames=max_frames)


def _open_video(uri: str, *, start_s: float | None, end_s: float | None, max_frames: int | None) -> Source:
    return VideoSource(uri, start_s=start_s, end_s=end_s, max_frames=max_frames)


_OPENERS: list[SourceOpener] = [
    SourceOpener("folder", lambda uri: not _is_url(uri) and Path(uri).is_dir(), _open_folder),
    SourceOpener("image", lambda uri: not _is_url(uri) and Path(uri).suffix.lower() in IMAGE_SUFFIXES, _open_image),
    SourceOpener("video", lambda uri: not _is_url(uri), _open_video),
]


def register_source(opener: SourceOpener) -> None:
    """Add a kind of source; it is asked before the built-in ones (which claim any local path)."""
    unregister_source(opener.name)
    _OPENERS.insert(0, opener)


def unregister_source(name: str) -> None:
    _OPENERS[:] = [o for o in _OPENERS if o.name != name]


def source_kinds() -> list[str]:
    return [o.name for o in _OPENERS]


def source_kind(uri: str | os.PathLike[str]) -> str | None:
    """Which kind of source would open ``uri`` ("video", "image", "folder", or a registered kind); None if none."""
    text = os.fspath(uri)
    return next((opener.name for opener in _OPENERS if opener.matches(text)), None)


def open_source(uri: str | os.PathLike[str], *, start_s: float | None = None, end_s: float | None = None,
                max_frames: int | None = None) -> Source:
    """The source for ``uri``: a folder of images, an image file, a video file (or a registered kind)."""
    text = os.fspath(uri)
    for opener in _OPENERS:
        if opener.matches(text):
            return opener.open(text, start_s=start_s, end_s=end_s, max_frames=max_frames)
    raise UsageError(f"no source can open {text!r}: give a video file, an image, a folder of images, a camera "
                     "(webcam:N) or a network stream (rtsp://, http(s)://…)")
