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
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol, runtime_checkable

import cv2
import numpy as np

from emopipe.errors import InputNotFoundError, InputUnreadableError, UsageError
from emopipe.io.uris import IMAGE_SUFFIXES, is_live, is_url, redact_uri
from emopipe.registry import Registry
from emopipe.types import Frame, SourceInfo

logger = logging.getLogger(__name__)



def format_time(seconds: float) -> str:
    """``mm:ss.ff`` (``h:mm:ss.ff`` from one hour on), for messages a user reads."""
    centis = round(max(0.0, seconds) * 100)
    hours, rest = divmod(centis, 360_000)
    minutes, rest = divmod(rest, 6000)
    secs, hundredths = divmod(rest, 100)
    clock = f"{minutes:02d}:{secs:02d}.{hundredths:02d}"
    return f"{hours}:{clock}" if hours else clock


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
    ended_early: str | None = None  # the end was lost (truncated, or damage past the skip limit): exit 8
    damaged: str | None = None  # damaged stretches were skipped and the end was reached: reported, exit 0
    frames_skipped: int = 0  # frames lost in those stretches
    decoder = "opencv"  # what decodes the frames, for the run summary (emopipe.io.nvdec: "nvdec")

    def __init__(self) -> None:
        self._iterated = False
        self.ended_early = None
        self.damaged = None
        self.frames_skipped = 0

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


# -- choosing a source -------------------------------------------------------------------------

class SourceOpener(Protocol):
    def __call__(self, uri: str, *, start_s: float | None, end_s: float | None, max_frames: int | None) -> Source: ...


SOURCES: Registry[SourceOpener] = Registry("source kind", {
    "live": "emopipe.io.live:open_live",
    "images": "emopipe.io.images:open_folder",
    "image": "emopipe.io.images:open_image",
    "video": "emopipe.io.video:open_video",
})


def source_kind(uri: str | os.PathLike[str]) -> str | None:
    """Which kind of source opens ``uri``: "live" (a camera or stream), "images" (a folder), "image", "video";
    None for a URL no reader knows."""
    text = os.fspath(uri)
    if is_live(text):
        return "live"
    if is_url(text):
        return None
    if Path(text).is_dir():
        return "images"
    return "image" if Path(text).suffix.lower() in IMAGE_SUFFIXES else "video"


def open_source(uri: str | os.PathLike[str], *, start_s: float | None = None, end_s: float | None = None,
                max_frames: int | None = None) -> Source:
    """The source for ``uri``: a folder of images, an image file, a video file, a camera or a stream."""
    text = os.fspath(uri)
    kind = source_kind(text)
    if kind is None:
        raise UsageError(f"no source can open {redact_uri(text)!r}: give a video file, an image, a folder of images, "
                         "a camera (webcam:N) or a network stream (rtsp://, http(s)://…)")
    return SOURCES.get(kind)(text, start_s=start_s, end_s=end_s, max_frames=max_frames)
