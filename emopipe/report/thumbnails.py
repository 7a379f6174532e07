"""A representative face per track: the sharpest, most frontal, most confidently detected crop.

Quality of a candidate crop = sharpness × detector score × frontality, where sharpness is the
variance of the Laplacian of the crop scaled to ``THUMBNAIL_PX`` (so large and small faces compare
fairly), and frontality (from the landmarks, when the run has them) is how centred the nose tip is
between the outer eye corners, 1 for a frontal face, falling to 0.25 for a profile. During a run
:class:`ThumbnailPicker` keeps one crop per track (bounded memory: ``THUMBNAIL_PX``² × 3 bytes per
track); for rows files, :func:`thumbnails_from_source` reads a few candidate frames from the source
video, or the candidate images of a folder of images, when they are still there.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from emopipe.errors import InputUnreadableError
from emopipe.io.images import read_image
from emopipe.io.records import text_name
from emopipe.io.sources import _quiet_ffmpeg_logs
from emopipe.io.uris import IMAGE_SUFFIXES
from emopipe.io.video import native_name
from emopipe.report.tracks import TrackSeries
from emopipe.types import FaceRecord

logger = logging.getLogger(__name__)

THUMBNAIL_PX = 112
MARGIN = 0.2  # the crop is the face box widened by this fraction of its size on each side, made square
JPEG_QUALITY = 85
CANDIDATES_PER_TRACK = 6  # frames read from the video per track when reporting a rows file
_NOSE_TIP, _LEFT_EYE, _RIGHT_EYE = 30, 36, 45  # 68-point landmark indices (outer eye corners)


def cut_face(frame_bgr: np.ndarray, box: Sequence[float]) -> np.ndarray | None:
    """The face ``box`` (x1, y1, x2, y2) widened by ``MARGIN``, squared, clipped to the frame, scaled to
    ``THUMBNAIL_PX``²; None when nothing of it is inside the frame."""
    import cv2

    x1, y1, x2, y2 = (float(v) for v in box)
    side = max(x2 - x1, y2 - y1) * (1 + 2 * MARGIN)
    cx, cy = (x1 + x2) / 2, (y1 + y2) / 2
    h, w = frame_bgr.shape[:2]
    left, top = max(0, round(cx - side / 2)), max(0, round(cy - side / 2))
    right, bottom = min(w, round(cx + side / 2)), min(h, round(cy + side / 2))
    if right - left < 2 or bottom - top < 2:
        return None
    crop = frame_bgr[top:bottom, left:right]
    return cv2.resize(crop, (THUMBNAIL_PX, THUMBNAIL_PX), interpolation=cv2.INTER_AREA)  # type: ignore[no-any-return]


def frontality(landmarks: np.ndarray | None) -> float:
    """1 for a frontal face, down to 0.25 for a profile (1 when there are no landmarks to tell)."""
    if landmarks is None:
        return 1.0
    left, right, nose = landmarks[_LEFT_EYE], landmarks[_RIGHT_EYE], landmarks[_NOSE_TIP]
    half = abs(right[0] - left[0]) / 2
    if half < 1e-6:
        return 0.25
    offset = min(1.0, abs(nose[0] - (left[0] + right[0]) / 2) / half)
    return 0.25 + 0.75 * (1 - offset)


def quality(thumbnail: np.ndarray, score: float, landmarks: np.ndarray | None = None) -> float:
    import cv2

    grey = cv2.cvtColor(thumbnail, cv2.COLOR_BGR2GRAY)
    sharpness = float(cv2.Laplacian(grey, cv2.CV_64F).var())
    return sharpness * max(score, 0.0) * frontality(landmarks)


def jpeg(thumbnail: np.ndarray) -> bytes:
    import cv2

    ok, data = cv2.imencode(".jpg", thumbnail, [cv2.IMWRITE_JPEG_QUALITY, JPEG_QUALITY])
    if not ok:
        raise ValueError("cannot encode the thumbnail as JPEG")
    return data.tobytes()  # type: ignore[no-any-return]


class ThumbnailPicker:
    """Keeps the best crop seen so far for each (source, track). ``every``: look at every n-th frame only
    (cutting and scoring is cheap, but a frame decoded on the GPU is copied to the host to be cut)."""

    def __init__(self, every: int = 5) -> None:
        self.every = max(1, every)
        self.best: dict[tuple[str, int], tuple[float, np.ndarray]] = {}

    def offer(self, frame_index: int, frame_bgr: object, records: Sequence[FaceRecord]) -> None:
        """``frame_bgr``: the frame's pixels, or a callable giving them (called only when needed)."""
        if not records:
            return
        fresh = [r for r in records if (r.source, r.track_id) not in self.best]
        if frame_index % self.every and not fresh:
            return
        pixels = frame_bgr() if callable(frame_bgr) else frame_bgr
        for record in records if frame_index % self.every == 0 else fresh:
            crop = cut_face(pixels, record.box)  # type: ignore[arg-type]
            if crop is None:
                continue
            value = quality(crop, record.score, record.landmarks)
            key = (record.source, record.track_id)
            if key not in self.best or value > self.best[key][0]:
                self.best[key] = (value, crop)

    def thumbnails(self) -> dict[tuple[str, int], np.ndarray]:
        return {key: crop for key, (_, crop) in self.best.items()}


def _candidates(series: TrackSeries) -> list[int]:
    """Record indices worth reading: the most confident, largest face in each of a few equal stretches."""
    boxes = series.boxes
    areas = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
    value = series.scores * np.sqrt(np.maximum(areas, 0))
    chunks = np.array_split(np.arange(len(series)), min(CANDIDATES_PER_TRACK, len(series)))
    return [int(chunk[np.argmax(value[chunk])]) for chunk in chunks if len(chunk)]


def thumbnails_from_source(tracks: Sequence[TrackSeries], source: str) -> dict[tuple[str, int], np.ndarray]:
    """The best of a few candidate crops per track, cut from ``source`` (the rows' source): a video, one image, or
    a folder of images (each row names its image file); empty when it cannot be read (then no thumbnails)."""
    if any(series.files for series in tracks):
        return _thumbnails_from_images(tracks, Path(source))
    if Path(source).suffix.lower() in IMAGE_SUFFIXES:
        return _thumbnails_from_images(tracks, Path(source), single=True)
    return thumbnails_from_video(tracks, source)


def _keep_best(best: dict[tuple[str, int], tuple[float, np.ndarray]], series: TrackSeries, i: int,
               pixels: np.ndarray) -> None:
    crop = cut_face(pixels, series.boxes[i])
    if crop is None:
        return
    value = quality(crop, float(series.scores[i]))
    key = (series.source, series.track_id)
    if key not in best or value > best[key][0] or math.isnan(best[key][0]):
        best[key] = (value, crop)


def _thumbnails_from_images(tracks: Sequence[TrackSeries], source: Path,
                            single: bool = False) -> dict[tuple[str, int], np.ndarray]:
    """Thumbnails from the images the rows came from: ``source`` itself (``single``), else each row's file in
    the folder ``source``. Images are read as the run read them (EXIF orientation applied), so the boxes fit."""
    wanted: dict[Path, list[tuple[TrackSeries, int]]] = {}
    for series in tracks:
        for i in _candidates(series):
            if single:
                wanted.setdefault(source, []).append((series, i))
            elif i in series.files:
                wanted.setdefault(source / series.files[i], []).append((series, i))
    best: dict[tuple[str, int], tuple[float, np.ndarray]] = {}
    missing = 0
    for path, candidates in wanted.items():
        pixels = read_image(path)
        if pixels is None:
            missing += 1
            continue
        for series, i in candidates:
            _keep_best(best, series, i, pixels)
    if missing:
        logger.info("%s: %d of %d image(s) for thumbnails are not there or do not decode", source, missing,
                    len(wanted))
    return {key: crop for key, (_, crop) in best.items()}


def thumbnails_from_video(tracks: Sequence[TrackSeries], video: str) -> dict[tuple[str, int], np.ndarray]:
    """The best of a few candidate crops per track, cut from ``video`` (the rows' source); empty when the
    video cannot be read (the report then has no thumbnails)."""
    import cv2

    if not Path(video).is_file():
        logger.info("no thumbnails for %s: the source video is not there", text_name(video))
        return {}
    _quiet_ffmpeg_logs()  # (FFmpeg's decoder notes on a seek into the middle of a stream: not the user's)
    try:
        # (a name that is not UTF-8 — a Latin-1 one — crashed OpenCV: a segmentation fault)
        with native_name(Path(video)) as name:
            capture = cv2.VideoCapture(name)
    except InputUnreadableError as exc:
        logger.info("no thumbnails for %s: %s", text_name(video), exc)
        return {}
    try:
        if not capture.isOpened():
            logger.info("no thumbnails for %s: the source video cannot be read", text_name(video))
            return {}
        wanted: dict[int, list[tuple[TrackSeries, int]]] = {}
        for series in tracks:
            for i in _candidates(series):
                wanted.setdefault(int(series.frames[i]), []).append((series, i))
        best: dict[tuple[str, int], tuple[float, np.ndarray]] = {}
        times = {frame: float(candidates[0][0].times[candidates[0][1]]) for frame, candidates in wanted.items()}
        for frame_index, pixels in _frames_at(capture, Path(video), sorted(wanted), times):
            for series, i in wanted[frame_index]:
                _keep_best(best, series, i, pixels)
        return {key: crop for key, (_, crop) in best.items()}
    finally:
        capture.release()


def _frames_at(capture: Any, video: Path, indexes: Sequence[int],
               times: dict[int, float]) -> Iterator[tuple[int, Any]]:
    """The frames at ``indexes`` (ascending, counted as the run counted them: the n-th frame decoded), each checked
    against its time in the rows (``times``). A seek lands elsewhere in some containers (an MPEG transport stream,
    whose frame numbers OpenCV estimates): the first that does not land on its frame's time makes the rest be read
    on from the video's start instead (slower, exact)."""
    import cv2

    fps = capture.get(cv2.CAP_PROP_FPS)
    tolerance = 0.5 / fps if fps and math.isfinite(fps) and fps > 0 else 0.02
    seeks = True
    position = -1  # the frame last read
    for frame_index in indexes:
        if frame_index != position + 1 and seeks:  # seek only for jumps: reading on is exact and cheaper
            capture.set(cv2.CAP_PROP_POS_FRAMES, frame_index)
            ok, pixels = capture.read()
            if ok and abs(capture.get(cv2.CAP_PROP_POS_MSEC) / 1000 - times[frame_index]) <= tolerance:
                position = frame_index
                yield frame_index, pixels
                continue
            logger.debug("%s: a seek to frame %d did not land on its time: reading on from the start",
                         text_name(video), frame_index)
            seeks = False
            with native_name(video) as name:
                if not capture.open(name):
                    return
            position = -1
        while position + 1 < frame_index:
            if not capture.grab():
                return
            position += 1
        ok, pixels = capture.read()
        position = frame_index
        if ok:
            yield frame_index, pixels
