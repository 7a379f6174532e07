"""What happens to each finished frame on the writer thread: faces tracked, rows written, frames drawn."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from emopipe.errors import WeightsError
from emopipe.io.records import RecordWriter, landmarks_to_frame
from emopipe.report.thumbnails import ThumbnailPicker
from emopipe.report.tracks import TrackCollector
from emopipe.types import FaceRecord, FrameResult
from emopipe.vision.annotate import AnnotatedVideoWriter
from emopipe.vision.track import IouTracker, TrackSmoother


class FaceRecorder:
    """Turns frame results into tracked :class:`FaceRecord` rows, in frame order.

    Tracking and smoothing keep per-track state, so one recorder serves one source, and every frame
    (also faceless ones, so tracks age) must pass through :meth:`records` in order.
    """

    def __init__(self, source: str, labels: Sequence[str], *, tracker: IouTracker | None = None,
                 smoothing: float | None = None, precision: str | None = None) -> None:
        self.source = source
        self.precision = precision  # the engine's (fp32, fp16, bf16), for the advice on outputs that are not numbers
        self.labels = tuple(labels)
        self.tracker = tracker or IouTracker()
        self.smoother = TrackSmoother(smoothing)

    def records(self, result: FrameResult) -> list[FaceRecord]:
        boxes = result.detections.boxes
        ids = self.tracker.update(boxes)
        if not result.faces:
            self.smoother.forget(self.tracker.expired)
            return []
        probabilities = np.stack([f.probabilities for f in result.faces])
        valence = np.array([f.valence for f in result.faces])
        arousal = np.array([f.arousal for f in result.faces])
        if not (np.isfinite(probabilities).all() and np.isfinite(valence).all() and np.isfinite(arousal).all()):
            cause = ("the weights are damaged" if self.precision == "fp32" else  # (fp32 does not overflow here)
                     f"the weights are damaged, or their outputs overflow at {self.precision or 'this precision'} "
                     "(try --precision fp32)")
            raise WeightsError(f"EmoNet gave a value that is not a number (NaN or infinity) for a face in frame "
                               f"{result.frame.index} of {self.source}: {cause}")
        probabilities, valence, arousal = self.smoother.smooth(ids, probabilities, valence, arousal)
        self.smoother.forget(self.tracker.expired)
        landmarks = None
        if result.faces[0].landmarks is not None:
            landmarks = landmarks_to_frame(np.stack([f.landmarks for f in result.faces if f.landmarks is not None]),
                                           result.crop_boxes)
        frame = result.frame
        k = len(result.faces)
        return FaceRecord.for_frame(
            source=self.source, frame=frame.index, timestamp_s=frame.timestamp_s, labels=self.labels,
            track_ids=ids[:k], boxes=boxes[:k], scores=result.detections.scores[:k], probabilities=probabilities,
            valence=valence, arousal=arousal, landmarks=landmarks, detected=result.detected, file=frame.file)


RecordWatcher = Callable[[FrameResult, list[FaceRecord]], None]
HOLD_ROWS = 256  # rows a RecordSink holding them back writes at the latest


class RecordSink:
    """Writes every frame's rows (and, if asked, the annotated frame) as soon as it is done; ``watchers``
    see each frame with its records after they are written (track summaries, thumbnails).

    ``hold_rows``: rows wait for :meth:`flush` (or up to HOLD_ROWS of them), so that a writer that falls behind
    encodes and writes several frames' rows in one go; the pipeline flushes whenever nothing else is waiting.
    """

    def __init__(self, recorder: FaceRecorder, writer: RecordWriter,
                 video: AnnotatedVideoWriter | None = None, watchers: Sequence[RecordWatcher] = (),
                 hold_rows: bool = False) -> None:
        self.recorder = recorder
        self.writer = writer
        self.video = video
        self.watchers = list(watchers)
        self.last_records: list[FaceRecord] = []
        self.hold_rows = hold_rows
        self._held: list[FaceRecord] = []

    def write(self, result: FrameResult) -> None:
        records = self.recorder.records(result)
        if records:
            self._held.extend(records)
            if not self.hold_rows or len(self._held) >= HOLD_ROWS:
                self.flush()
        if self.video is not None:
            self.video.write(result.frame.bgr, records)
        for watch in self.watchers:
            watch(result, records)
        self.last_records = records

    def flush(self) -> None:
        """Write the rows held back, in one go (one encoding and one write to the OS for several frames)."""
        if self._held:
            rows, self._held = self._held, []
            self.writer.write(rows)

    def close(self) -> None:
        try:
            try:
                self.flush()
            finally:
                self.writer.close()
        finally:
            if self.video is not None:
                self.video.close()


class TrackWatcher:
    """Keeps what the track summaries need (a few numbers per face and frame) and, for a report, each
    track's best face crop so far (one per track)."""

    def __init__(self, thumbnails: bool) -> None:
        self.collector = TrackCollector()
        self.picker = ThumbnailPicker() if thumbnails else None

    def __call__(self, result: FrameResult, records: list[FaceRecord]) -> None:
        if not records:
            return
        self.collector.add(records)
        if self.picker is not None:
            self.picker.offer(result.frame.index, lambda: result.frame.bgr, records)
