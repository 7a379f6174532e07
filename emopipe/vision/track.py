"""Stable face ids across frames, and optional per-track smoothing of EmoNet's outputs.

EmoNet looks at one crop at a time, so the same face gets a fresh, somewhat noisy answer every
frame. Tracking gives each face an id that survives across frames (what a CSV reader groups by);
smoothing averages a face's answers over its own recent frames — never over other faces, which is
what the reference demo's batch-sized smoothing state did.

The tracker matches boxes by IoU with an optimal (Hungarian) assignment, against where each track is
predicted to be (its last box moved by its recent per-frame motion), so two faces that cross keep
their ids. It needs boxes only, not EmoNet's results (about 20 µs a frame with one face, 50 with four, on
the 2-core CI machine).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from emopipe.errors import UsageError


def best_pairs(worth: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The rows and columns of the pairs with positive worth in the assignment that maximises the summed worth
    (``worth`` ≥ 0; SciPy's ``linear_sum_assignment``, its zero-worth pairs left out). When no row and no column
    has two positive entries — faces apart from each other, the usual frame — those entries are the assignment,
    and SciPy is not needed: its import costs about half a second of every command's start."""
    positive = worth > 0
    if (positive.sum(axis=0) <= 1).all() and (positive.sum(axis=1) <= 1).all():
        rows, cols = np.nonzero(positive)
        return rows, cols
    from scipy.optimize import linear_sum_assignment

    rows, cols = linear_sum_assignment(worth, maximize=True)
    kept = worth[rows, cols] > 0
    return rows[kept], cols[kept]


def box_iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Pairwise IoU of boxes ``a`` (n×4) and ``b`` (m×4), ``x1, y1, x2, y2``; returns n×m."""
    a = np.asarray(a, dtype=np.float64).reshape(-1, 4)
    b = np.asarray(b, dtype=np.float64).reshape(-1, 4)
    x1 = np.maximum(a[:, None, 0], b[None, :, 0])
    y1 = np.maximum(a[:, None, 1], b[None, :, 1])
    x2 = np.minimum(a[:, None, 2], b[None, :, 2])
    y2 = np.minimum(a[:, None, 3], b[None, :, 3])
    inter = np.maximum(x2 - x1, 0) * np.maximum(y2 - y1, 0)
    area_a = np.maximum(a[:, 2] - a[:, 0], 0) * np.maximum(a[:, 3] - a[:, 1], 0)
    area_b = np.maximum(b[:, 2] - b[:, 0], 0) * np.maximum(b[:, 3] - b[:, 1], 0)
    union = area_a[:, None] + area_b[None, :] - inter
    return np.divide(inter, union, out=np.zeros_like(inter), where=union > 0)


SMALL_FRAME_PAIRS = 16  # up to this many (track, box) pairs, the IoU is worked out in Python, not NumPy


def pair_iou(a: Sequence[float], b: Sequence[float]) -> float:
    """IoU of two boxes, in the operations and order of :func:`box_iou` (so the same float64 value)."""
    inter = max(min(a[2], b[2]) - max(a[0], b[0]), 0.0) * max(min(a[3], b[3]) - max(a[1], b[1]), 0.0)
    union = max(a[2] - a[0], 0.0) * max(a[3] - a[1], 0.0) + max(b[2] - b[0], 0.0) * max(b[3] - b[1], 0.0) - inter
    return inter / union if union > 0 else 0.0


@dataclass
class _Track:
    id: int
    box: list[float]  # last matched box
    velocity: list[float]  # box change per frame
    unseen: int = 0  # frames since the last match

    def predicted(self) -> list[float]:
        return [b + v * (self.unseen + 1) for b, v in zip(self.box, self.velocity)]


class IouTracker:
    """Assigns each detected box a track id that stays with the face from frame to frame.

    Call :meth:`update` once per frame, in frame order, also for frames with no face (so unseen
    tracks age). Ids are ints counting from 1 in order of first appearance and are never reused.
    A track survives up to ``max_age`` consecutive frames without a matching box and is dropped at
    the next unseen frame; a face that comes back after that gets a new id. The ids dropped by the
    last update are in :attr:`expired` (hand them to :meth:`TrackSmoother.forget`).

    The live tracks are plain Python floats: a frame has a few faces, and NumPy's cost per call on
    arrays of four numbers was most of the writer thread's tracking time; the IoU matrix of a crowded
    frame is still NumPy's.
    """

    def __init__(self, iou_threshold: float = 0.3, max_age: int = 30) -> None:
        if not 0.0 < iou_threshold <= 1.0:
            raise UsageError(f"track IoU threshold must be in (0, 1], got {iou_threshold}")
        if max_age < 0:
            raise UsageError(f"track max age must be 0 or more frames, got {max_age}")
        self.iou_threshold = float(iou_threshold)
        self.max_age = int(max_age)
        self._next_id = 1
        self._tracks: list[_Track] = []  # live tracks, oldest first
        self.expired: tuple[int, ...] = ()

    @property
    def active_ids(self) -> tuple[int, ...]:
        return tuple(t.id for t in self._tracks)

    def __len__(self) -> int:
        return len(self._tracks)

    def predicted_boxes(self) -> np.ndarray:
        """Where each live track is expected in the next frame: last box moved by its velocity."""
        return np.array([t.predicted() for t in self._tracks], dtype=np.float64).reshape(-1, 4)

    def update(self, boxes: np.ndarray) -> np.ndarray:
        """Track ids (k int64) for this frame's boxes (k×4 ``x1, y1, x2, y2``), in the boxes' order."""
        boxes = np.asarray(boxes, dtype=np.float64)
        if boxes.size == 0:
            boxes = boxes.reshape(0, 4)
        if boxes.ndim != 2 or boxes.shape[1] != 4:
            raise ValueError(f"boxes must be k×4 (x1, y1, x2, y2), got shape {boxes.shape}")
        if not np.isfinite(boxes).all():
            raise ValueError("boxes must be finite numbers")

        found: list[list[float]] = boxes.tolist()
        tracks = self._tracks
        track_of_box: list[_Track | None] = [None] * len(found)
        if found and tracks:
            predicted = [t.predicted() for t in tracks]
            if len(found) * len(tracks) <= SMALL_FRAME_PAIRS:
                iou = np.array([[pair_iou(p, b) for b in found] for p in predicted])
            else:
                iou = box_iou(np.array(predicted), boxes)
            # Pairs under the threshold are worth nothing, so the assignment maximises the summed IoU
            # of acceptable pairs only.
            worth = np.where(iou >= self.iou_threshold, iou, 0.0)
            rows, cols = best_pairs(worth)
            for row, col in zip(rows.tolist(), cols.tolist()):
                track_of_box[col] = tracks[row]

        for box, track in zip(found, track_of_box):
            if track is not None:
                # Velocity: half the newest per-frame displacement, half the previous estimate (damps jitter).
                steps = track.unseen + 1
                track.velocity = [0.5 * ((b - o) / steps) + 0.5 * v for b, o, v in zip(box, track.box, track.velocity)]
                track.box = box
                track.unseen = -1  # (0 after the ageing below)
        for track in tracks:
            track.unseen += 1
        self.expired = tuple(t.id for t in tracks if t.unseen > self.max_age)
        if self.expired:
            self._tracks = tracks = [t for t in tracks if t.unseen <= self.max_age]

        ids = []
        for box, track in zip(found, track_of_box):
            if track is None:
                track = _Track(self._next_id, box, [0.0, 0.0, 0.0, 0.0])
                self._next_id += 1
                tracks.append(track)
            ids.append(track.id)
        return np.array(ids, dtype=np.int64)


class TrackSmoother:
    """Exponential smoothing of probabilities, valence and arousal, separately for every track.

    ``alpha`` is the weight of the newest value: ``smoothed = alpha * new + (1 - alpha) * previous``,
    so 1 keeps the raw values and small values smooth more (about ``1 / alpha`` frames of memory).
    ``alpha`` of 0 or ``None`` turns smoothing off. A track's first value is taken as is. Smoothed
    probabilities are convex combinations of distributions, so they still sum to 1.

    Call :meth:`smooth` with each frame's results in frame order, and :meth:`forget` with the
    tracker's :attr:`IouTracker.expired` ids after every tracker update, in the same order, so the
    state of a face that left is dropped (ids are never reused, so nothing else can pick it up).
    """

    def __init__(self, alpha: float | None) -> None:
        if alpha is not None and not 0.0 <= alpha <= 1.0:
            raise UsageError(f"smoothing alpha must be in [0, 1] (weight of the newest value), got {alpha}")
        self.alpha = float(alpha) if alpha else None
        self._state: dict[int, tuple[np.ndarray, float, float]] = {}

    @property
    def enabled(self) -> bool:
        return self.alpha is not None

    def __len__(self) -> int:
        """Number of tracks holding smoothing state."""
        return len(self._state)

    def smooth(self, track_ids: Iterable[int], probabilities: np.ndarray, valence: np.ndarray,
               arousal: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Smoothed copies of one frame's k×C probabilities and k valence/arousal values."""
        ids = [int(i) for i in track_ids]
        probabilities = np.array(probabilities, dtype=np.float64, ndmin=2)
        valence = np.array(valence, dtype=np.float64).reshape(-1)
        arousal = np.array(arousal, dtype=np.float64).reshape(-1)
        k = len(ids)
        if len(set(ids)) != k:
            raise ValueError(f"track ids in one frame must be distinct, got {ids}")
        if k == 0:
            return probabilities.reshape(0, probabilities.shape[-1]), valence, arousal
        if probabilities.shape[0] != k or valence.shape[0] != k or arousal.shape[0] != k:
            raise ValueError(f"expected {k} rows for {k} track ids, got probabilities {probabilities.shape}, "
                             f"valence {valence.shape}, arousal {arousal.shape}")
        if self.alpha is None:
            return probabilities, valence, arousal
        a = self.alpha
        for row, track in enumerate(ids):
            previous = self._state.get(track)
            if previous is not None:
                p0, v0, a0 = previous
                if p0.shape != probabilities[row].shape:
                    raise ValueError(f"track {track} had {p0.shape[0]} classes, now {probabilities.shape[1]}")
                probabilities[row] = a * probabilities[row] + (1 - a) * p0
                valence[row] = a * valence[row] + (1 - a) * v0
                arousal[row] = a * arousal[row] + (1 - a) * a0
            self._state[track] = (probabilities[row].copy(), float(valence[row]), float(arousal[row]))
        return probabilities, valence, arousal

    def forget(self, track_ids: Iterable[int]) -> None:
        """Drop the state of tracks the tracker has dropped."""
        for track in track_ids:
            self._state.pop(int(track), None)
