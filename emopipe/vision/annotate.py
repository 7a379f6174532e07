"""Frames annotated with what EmoNet saw, and the writer that turns them into a video.

For every face: its box and track id in the track's colour, the label with its probability, and
valence/arousal as a point in a small circumplex inset (valence left to right, arousal bottom to
top, both clamped to [-1, 1] for display) placed beside the box and always inside the frame.
Sizes follow the frame, so a 320×240 and a 1920×1080 frame read the same. Drawing costs a frame
copy plus a few primitives per face (about a millisecond at 1280×720), cheap enough for live view.
"""

from __future__ import annotations

import logging
import math
import numbers
import os
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import cv2
import numpy as np

from emopipe.errors import OutputError, UsageError
from emopipe.io.encode import FfmpegVideo, choose_ffmpeg
from emopipe.io.records import ensure_writable, partial_path
from emopipe.types import FaceRecord

# Distinct, saturated BGR colours; a track keeps its colour for its whole life.
PALETTE: tuple[tuple[int, int, int], ...] = (
    (75, 25, 230), (75, 180, 60), (25, 225, 255), (200, 130, 0), (48, 130, 245), (180, 30, 145),
    (240, 240, 70), (230, 50, 240), (60, 245, 210), (212, 190, 250), (128, 128, 0), (40, 110, 170),
)
FONT = cv2.FONT_HERSHEY_SIMPLEX
logger = logging.getLogger(__name__)
# OpenCV's codecs (--video-writer opencv, or no FFmpeg): its .mkv and .avi stay readable up to their last frames
# when the writer is killed, its .mp4 only once closed (emopipe.io.encode says how FFmpeg's differ)
CODECS = {".mp4": "mp4v", ".mkv": "mp4v", ".avi": "MJPG"}


@lru_cache(maxsize=8)
def _say_encoder(how: str) -> None:
    """Which encoder writes the videos, said once a process (an archive opens one per source)."""
    logger.info("annotated video: %s", how)


def track_colour(track: int) -> tuple[int, int, int]:
    return PALETTE[(track - 1) % len(PALETTE)]


@dataclass(frozen=True)
class _Style:
    """Line widths and sizes for one frame size (computed once per size)."""

    line: int  # box and axis thickness, px
    font_scale: float
    text_thickness: int
    text_height: int  # px above the baseline
    text_baseline: int
    pad: int  # around text and between box and inset
    inset: int  # side of the valence/arousal square, px
    dot: int  # radius of the valence/arousal point
    landmark: int  # radius of a landmark point


@lru_cache(maxsize=16)
def _style(width: int, height: int) -> _Style:
    short = min(width, height)
    font_scale = min(max(short / 600, 0.4), 1.6)
    text_thickness = max(1, round(font_scale * 1.4))
    (_, text_height), baseline = cv2.getTextSize("Ag", FONT, font_scale, text_thickness)
    return _Style(
        line=max(1, round(short / 360)),
        font_scale=font_scale,
        text_thickness=text_thickness,
        text_height=text_height,
        text_baseline=baseline,
        pad=max(2, round(short / 200)),
        inset=min(max(round(short * 0.12), 40), 180),
        dot=max(2, round(short / 160)),
        landmark=max(1, round(short / 500)),
    )


def _check_frame(frame: np.ndarray) -> None:
    if not isinstance(frame, np.ndarray) or frame.dtype != np.uint8 or frame.ndim != 3 or frame.shape[2] != 3:
        shape = getattr(frame, "shape", None)
        dtype = getattr(frame, "dtype", type(frame).__name__)
        raise ValueError(f"expected a BGR uint8 H×W×3 frame, got {dtype} of shape {shape}")


def draw(frame_bgr: np.ndarray, records: Sequence[FaceRecord]) -> np.ndarray:
    """A copy of ``frame_bgr`` with every record drawn on it; the input is left untouched.

    With no records the copy is pixel-identical to the input.
    """
    _check_frame(frame_bgr)
    out = frame_bgr.copy()
    height, width = out.shape[:2]
    style = _style(width, height)
    for record in records:
        _draw_face(out, record, style)
    return out


def _corners(image: np.ndarray, box: tuple[int, int, int, int], colour: tuple[int, int, int], line: int) -> None:
    x1, y1, x2, y2 = box
    dx, dy = max(1, (x2 - x1) // 4), max(1, (y2 - y1) // 4)
    for x, y, sx, sy in ((x1, y1, 1, 1), (x2, y1, -1, 1), (x1, y2, 1, -1), (x2, y2, -1, -1)):
        cv2.line(image, (x, y), (x + sx * dx, y), colour, line)
        cv2.line(image, (x, y), (x, y + sy * dy), colour, line)


def _draw_face(image: np.ndarray, record: FaceRecord, style: _Style) -> None:
    height, width = image.shape[:2]
    colour = track_colour(record.track_id)
    x1, y1, x2, y2 = (round(v) for v in record.box)
    if record.detected:
        cv2.rectangle(image, (x1, y1), (x2, y2), colour, style.line)  # crisp: anti-aliasing fades thin lines
    else:  # a box interpolated between key frames (--detect-every): its corners only
        _corners(image, (x1, y1, x2, y2), colour, style.line)

    if record.landmarks is not None:
        for x, y in np.round(record.landmarks).astype(int).tolist():
            cv2.circle(image, (x, y), style.landmark, colour, -1)

    probability = float(record.probabilities.max())
    _draw_caption(image, f"#{record.track_id} {record.label} {probability:.0%}", (x1, y1, x2, y2), colour, style)

    # Inset beside the box: right if it fits, else left, else wherever it stays inside the frame.
    side = min(style.inset, width, height)
    if x2 + style.pad + side <= width:
        ix = x2 + style.pad
    elif x1 - style.pad - side >= 0:
        ix = x1 - style.pad - side
    else:
        ix = x2 - side
    ix = min(max(ix, 0), width - side)  # boxes can reach past the frame edge
    iy = min(max(y1, 0), height - side)
    _draw_circumplex(image, ix, iy, side, record.valence, record.arousal, colour, style)


def _draw_caption(image: np.ndarray, text: str, box: tuple[int, int, int, int], colour: tuple[int, int, int],
                  style: _Style) -> None:
    """Text on a filled tab in the track colour, above the box (inside it when there is no room)."""
    height, width = image.shape[:2]
    x1, y1, _, _ = box
    (text_width, _), _ = cv2.getTextSize(text, FONT, style.font_scale, style.text_thickness)
    tab_w = text_width + 2 * style.pad
    tab_h = style.text_height + style.text_baseline + 2 * style.pad
    tx = min(max(x1, 0), max(width - tab_w, 0))
    ty = y1 - tab_h if y1 - tab_h >= 0 else min(max(y1, 0), max(height - tab_h, 0))
    cv2.rectangle(image, (tx, ty), (tx + tab_w, ty + tab_h), colour, -1)
    ink = (0, 0, 0) if sum(colour) > 380 else (255, 255, 255)  # dark text on light colours
    cv2.putText(image, text, (tx + style.pad, ty + style.pad + style.text_height), FONT, style.font_scale, ink,
                style.text_thickness, cv2.LINE_AA)


def _draw_circumplex(image: np.ndarray, x: int, y: int, side: int, valence: float, arousal: float,
                     colour: tuple[int, int, int], style: _Style) -> None:
    """A square with valence on x and arousal on y (up = aroused), and the face's point in it."""
    region = image[y:y + side, x:x + side]
    region[:] = region // 3  # darken behind the inset so it reads on any background
    last = side - 1
    centre = last // 2
    axis = (160, 160, 160)
    cv2.line(region, (0, centre), (last, centre), axis, 1)
    cv2.line(region, (centre, 0), (centre, last), axis, 1)
    cv2.rectangle(region, (0, 0), (last, last), colour, style.line)
    margin = style.line + style.dot  # keep the whole dot inside the border
    span = max(last / 2 - margin, 1)
    v = min(max(valence, -1.0), 1.0) if math.isfinite(valence) else 0.0
    a = min(max(arousal, -1.0), 1.0) if math.isfinite(arousal) else 0.0
    point = (round(last / 2 + v * span), round(last / 2 - a * span))
    cv2.circle(region, point, style.dot + 1, (255, 255, 255), -1, cv2.LINE_AA)
    cv2.circle(region, point, style.dot, colour, -1, cv2.LINE_AA)


def letterbox(image: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """``image`` scaled to fit ``size`` (width, height) keeping its aspect ratio, centred on black.

    Returned as is when it already has that size.
    """
    width, height = size
    h, w = image.shape[:2]
    if (w, h) == (width, height):
        return image
    scale = min(width / w, height / h)
    new_w, new_h = max(1, round(w * scale)), max(1, round(h * scale))
    interpolation = cv2.INTER_AREA if scale < 1 else cv2.INTER_LINEAR
    canvas = np.zeros((height, width, 3), dtype=np.uint8)
    x0, y0 = (width - new_w) // 2, (height - new_h) // 2
    canvas[y0:y0 + new_h, x0:x0 + new_w] = cv2.resize(image, (new_w, new_h), interpolation=interpolation)
    return canvas


class AnnotatedVideoWriter:
    """Writes annotated frames to a video at the source's frame rate; use as a context manager.

    ``writer`` (``--video-writer``): ``auto`` encodes with FFmpeg where it is found (:mod:`emopipe.io.encode`:
    ``.mp4`` H.264 in one-second fragments, ``.mkv`` H.264, ``.avi`` Motion JPEG), else with OpenCV (``.mp4``
    and ``.mkv`` MPEG-4 Part 2 ``mp4v``, ``.avi`` Motion JPEG); ``ffmpeg`` or ``opencv`` insist on one.
    ``live``: a recording, each frame leaving the encoder as it comes (no look-ahead).
    ``size`` is (width, height) and ``fps`` the source's frame rate (never a made-up default).
    Frames of another size than ``size`` (image folders) are drawn at their own size, then
    letterboxed into the video: scaled to fit without distortion and centred on black.
    """

    def __init__(self, path: str | os.PathLike[str], fps: float, size: tuple[int, int], *,
                 partial: bool = False, writer: str = "auto", live: bool = False) -> None:
        """``partial``: the video is written as ``NAME.partial.mp4`` and takes its name at :meth:`commit`, so a
        run that fails or is interrupted never replaces an earlier video."""
        self.path = Path(path)
        codec = CODECS.get(self.path.suffix.lower())
        if codec is None:
            *others, last = CODECS
            raise OutputError(f"cannot write annotated video {self.path}: unknown extension; use "
                              f"{', '.join(others)} or {last}")
        if not (isinstance(fps, numbers.Real) and math.isfinite(fps) and fps > 0):
            raise UsageError(f"annotated video needs the source's frame rate (a positive number), got {fps!r}")
        width, height = (int(v) for v in size)
        if width < 1 or height < 1:
            raise UsageError(f"annotated video size must be positive (width, height), got {size!r}")
        ensure_writable(self.path, "annotated video")
        ffmpeg = choose_ffmpeg(writer)
        self.fps = float(fps)
        self.size = (width, height)
        self.codec = codec
        self.frames_written = 0
        self.had_previous = self.path.exists()
        # (the suffix stays last: it names the container)
        self.writing: Path = partial_path(self.path, keep_suffix=True) if partial else self.path
        self._writer: cv2.VideoWriter | FfmpegVideo | None
        if ffmpeg is not None:
            self._writer = FfmpegVideo(self.writing, self.fps, self.size, ffmpeg, live=live)
            self.codec = self._writer.codec
            _say_encoder(f"{self.codec} by {ffmpeg}")
            return
        _say_encoder(f"{codec} by OpenCV")
        self._writer = cv2.VideoWriter(
            str(self.writing), cv2.VideoWriter_fourcc(*codec), self.fps, self.size)
        if not self._writer.isOpened():
            self._writer = None
            raise OutputError(f"cannot write annotated video {self.path}: OpenCV could not open it with codec {codec}")

    def render(self, frame_bgr: np.ndarray, records: Sequence[FaceRecord]) -> np.ndarray:
        """The exact image :meth:`write` encodes: the frame itself when there is nothing to draw."""
        _check_frame(frame_bgr)
        image = draw(frame_bgr, records) if records else frame_bgr
        return letterbox(image, self.size)

    def write(self, frame_bgr: np.ndarray, records: Sequence[FaceRecord]) -> None:
        if self._writer is None:
            raise ValueError(f"annotated video {self.path} is closed")
        image = self.render(frame_bgr, records)
        if isinstance(self._writer, FfmpegVideo):
            self._writer.write(image, owned=image is not frame_bgr)  # (drawn or letterboxed: a copy of our own)
        else:
            self._writer.write(np.ascontiguousarray(image))
        self.frames_written += 1

    def close(self) -> None:
        writer, self._writer = self._writer, None
        if isinstance(writer, FfmpegVideo):
            writer.close()  # (FFmpeg finishes the file; one that failed raises here)
        elif writer is not None:
            writer.release()

    def commit(self, complete: bool | None = True) -> Path:
        """Close, and give a partial video its final name when ``complete`` — or when there is no earlier video
        there to lose (``complete=None``); otherwise it stays beside it. Returns where the video is."""
        self.close()
        if self.writing == self.path or not self.writing.exists():
            return self.path
        if complete or (complete is None and not self.had_previous):
            try:
                os.replace(self.writing, self.path)
            except OSError as exc:
                raise OutputError(f"cannot write annotated video {self.path}: {exc.strerror or exc}") from None
            return self.path
        return self.writing

    def __enter__(self) -> AnnotatedVideoWriter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
