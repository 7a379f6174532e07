"""One image, or a folder of images read in natural order, as a source of frames."""

from __future__ import annotations

import logging
import os
import re
import time
from collections import deque
from collections.abc import Iterator
from pathlib import Path

import cv2
import numpy as np

from emopipe.errors import InputNotFoundError, InputUnreadableError, UsageError
from emopipe.io.inputs import VIDEO_FILE_SUFFIXES
from emopipe.io.records import text_name
from emopipe.io.sources import Source, _as_bgr, _check_arguments, _check_file, _SourceBase
from emopipe.io.uris import IMAGE_SUFFIXES
from emopipe.types import Frame, HostFrame, SourceInfo

logger = logging.getLogger(__name__)


def read_image(path: Path) -> np.ndarray | None:
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
        image = read_image(self.path)
        if image is None:
            raise InputUnreadableError(f"cannot read {self.path}: not an image OpenCV can decode")
        self._image: np.ndarray | None = image
        self.info = SourceInfo(uri=text_name(path), kind="image", fps=None, frame_count=1,
                               width=image.shape[1], height=image.shape[0])

    @property
    def expected_frames(self) -> int:
        return 1

    def _frames(self) -> Iterator[Frame]:
        if self._image is not None:
            yield HostFrame(index=0, timestamp_s=0.0, bgr=self._image, read_time=time.perf_counter())
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
            videos = sum(f.suffix.lower() in VIDEO_FILE_SUFFIXES for f in self.path.iterdir())
            if videos:  # (the command line makes such a folder several sources; one source is one video here)
                raise UsageError(f"{self.path} is a folder of videos ({videos}): each video is a source of its own; "
                                 "run them with Analyzer.run_many, or the command (emopipe FOLDER -o DIR)")
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
        self.info = SourceInfo(uri=text_name(path), kind="images", fps=None, frame_count=len(self.paths),
                               width=first.width, height=first.height)

    @property
    def skipped_files(self) -> list[Path]:
        """Files that did not decode so far (for the run summary)."""
        return list(self.skipped)

    @property
    def expected_frames(self) -> int:
        n = len(self.paths)
        return min(n, self.max_frames) if self.max_frames is not None else n

    def _read_next(self) -> Frame | None:
        while self._next < len(self.paths):
            index, file = self._next, self.paths[self._next]
            self._next += 1
            image = read_image(file)
            if image is not None:
                return HostFrame(index=index, timestamp_s=float(index), bgr=image, read_time=time.perf_counter(),
                                 file=text_name(file.name))  # (as valid UTF-8: it is written in the rows)
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


def open_folder(uri: str, *, start_s: float | None, end_s: float | None, max_frames: int | None) -> Source:
    _images_only("a folder of images", start_s, end_s)
    return FolderSource(uri, max_frames=max_frames)


def open_image(uri: str, *, start_s: float | None, end_s: float | None, max_frames: int | None) -> Source:
    _images_only("an image", start_s, end_s)
    return ImageSource(uri, max_frames=max_frames)
