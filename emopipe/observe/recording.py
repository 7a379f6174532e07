"""``--record``: the annotated live stream written to a video file at the measured frame rate."""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Callable
from pathlib import Path

import numpy as np

from emopipe.vision.annotate import AnnotatedVideoWriter

logger = logging.getLogger(__name__)


class TimedVideoWriter:
    """``--record``: the annotated stream at the measured capture rate, playing in real time.

    Each processed frame goes to the position its capture time gives (``(t - t0) × fps``); the
    positions in between — frames that were dropped, or a reconnection — repeat the frame before,
    so the file's clock matches the wall clock. The rate is measured from the capture times (read
    at the first frame, by which time the capture has run through start-up); the codec follows
    the extension as for ``--annotate``, each frame leaving the encoder as it comes (FFmpeg's: ultrafast, no
    look-ahead).
    """

    def __init__(self, path: str | os.PathLike[str], fps: Callable[[], float | None], *, writer: str = "auto") -> None:
        """``writer``: what encodes it (``--video-writer``; :class:`AnnotatedVideoWriter`)."""
        self.path = Path(path)
        self.writer = writer
        self._fps = fps
        self._video: AnnotatedVideoWriter | None = None
        self._start: float | None = None
        self._last: tuple[int, np.ndarray] | None = None  # position and image of the last frame written
        self._waiting: tuple[np.ndarray, float] | None = None  # the first frame, until the rate is known
        self.frames_written = 0  # positions filled, repeats included
        self.frames_recorded = 0  # processed frames

    @property
    def fps(self) -> float | None:
        return self._video.fps if self._video is not None else None

    def write(self, image: np.ndarray, timestamp: float) -> None:
        if self._video is None:
            fps = self._fps()
            if fps is None or not math.isfinite(fps) or fps <= 0:  # a single frame captured so far
                if self._waiting is None:
                    self._waiting = (image, timestamp)
                    return
                fps = 1.0 / max(timestamp - self._waiting[1], 1e-3)
            self._open(fps, *(self._waiting or (image, timestamp)))
            if self._waiting is not None:
                waiting, self._waiting = self._waiting, None
                self.write(*waiting)
        self._place(image, timestamp)

    def _open(self, fps: float, image: np.ndarray, timestamp: float) -> None:
        height, width = image.shape[:2]
        self._video = AnnotatedVideoWriter(self.path, round(fps, 3), (width, height), writer=self.writer, live=True)
        self._start = timestamp
        logger.info("recording %s at the measured %.2f frames/s", self.path, self._video.fps)

    def _place(self, image: np.ndarray, timestamp: float) -> None:
        assert self._video is not None and self._start is not None
        position = round((timestamp - self._start) * self._video.fps)
        if self._last is not None:
            last_position, last_image = self._last
            position = max(position, last_position + 1)  # jitter: never two frames in one position
            for _ in range(position - last_position - 1):
                self._video.write(last_image, ())
                self.frames_written += 1
        self._video.write(image, ())
        self.frames_written += 1
        self.frames_recorded += 1
        self._last = (position, image)

    def close(self) -> None:
        if self._video is None and self._waiting is not None:  # the run ended after one frame
            self._open(1.0, *self._waiting)
            self._place(*self._waiting)
        self._waiting = None
        if self._video is not None:
            self._video.close()
        self._last = None

