"""Detection on key frames only (``--detect-every K``): boxes for the frames in between.

Detection is the pipeline's largest per-frame cost (S3FD's network, then NMS on the host, for every
frame), while EmoNet's cost follows the faces. Running the detector on every K-th frame cuts that
cost about K times; the frames in between get boxes from the key frames around them:

* **files** (``interpolate=True``): a frame between two key frames waits for the later one, and
  each face found in both gets the box on the straight line between its two boxes (exact for a face
  moving at constant speed). A face found in only one of the two key frames is given to the frames
  nearer that key frame: one that left is kept up to half-way, one that arrived appears from
  half-way on. The frames after the last key frame keep its boxes.
* **live** (``interpolate=False``): no frame may wait for a later one, so each frame gets the last
  key frame's boxes as they are.

The first frame, and the first frame of a new size, are always key frames; with several sources in one run
(:class:`StreamKeyframes`) each source has its own schedule, so its first frame is a key frame and no boxes pass
from one source to another. The price is boxes that follow a face less closely when its motion is not steady;
``docs/benchmark-log.md`` measures it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

import numpy as np

from emopipe.errors import UsageError
from emopipe.types import Detections
from emopipe.vision.track import best_pairs, box_iou

# Two key frames K frames apart: a face matches itself when its boxes overlap at all; two faces
# side by side do not overlap. 0.1 keeps a face moving a box width in 10 frames matched at K = 5.
MATCH_IOU = 0.1

Item = TypeVar("Item")


@dataclass(frozen=True)
class Located(Generic[Item]):
    """A frame whose boxes are known, with what the caller attached to it."""

    item: Item
    detections: Detections
    detected: bool  # True: the detector's own boxes (a key frame); False: interpolated or carried


class Bridge:
    """The boxes between two key frames' detections ``before`` and ``after``: :meth:`at` a fraction t."""

    def __init__(self, before: Detections, after: Detections, match_iou: float = MATCH_IOU) -> None:
        self.before, self.after = before, after
        iou = box_iou(before.boxes, after.boxes)
        rows, cols = best_pairs(iou)
        matched = iou[rows, cols] >= match_iou
        self.pairs = (rows[matched], cols[matched])
        self.only_before = np.setdiff1d(np.arange(len(before)), self.pairs[0])
        self.only_after = np.setdiff1d(np.arange(len(after)), self.pairs[1])

    def at(self, t: float) -> Detections:
        """Boxes a fraction ``t`` (0 < t < 1) of the way from ``before`` to ``after``."""
        i, j = self.pairs
        boxes = [(1 - t) * self.before.boxes[i] + t * self.after.boxes[j]]
        scores = [(1 - t) * self.before.scores[i] + t * self.after.scores[j]]
        alone, index = (self.before, self.only_before) if t < 0.5 else (self.after, self.only_after)
        boxes.append(alone.boxes[index])
        scores.append(alone.scores[index])
        return Detections.largest_first(np.concatenate(boxes).reshape(-1, 4), np.concatenate(scores))


def _check_every(every: int) -> None:
    if every < 1:
        raise UsageError(f"detect every K frames needs K ≥ 1, got {every}")


@dataclass
class _Waiting(Generic[Item]):
    item: Item
    position: int  # frames since the start, to place it between its two key frames


class KeyframeSchedule(Generic[Item]):
    """Chooses the key frames and gives every frame its boxes, in frame order.

    For each frame, in order: :meth:`is_key` when it is launched (only key frames go to the
    detector), then :meth:`add` with the detector's result for a key frame or None, which returns
    the frames whose boxes are now known. :meth:`flush` at the end returns the frames still waiting.
    """

    def __init__(self, every: int, *, interpolate: bool = True, match_iou: float = MATCH_IOU) -> None:
        _check_every(every)
        self.every = every
        self.interpolate = interpolate
        self.match_iou = match_iou
        self._since_key: int | None = None  # frames planned since the last key frame (None: none yet)
        self._planned_size: tuple[int, int] | None = None
        self._reconnects = 0
        self._position = 0
        self._key: tuple[int, tuple[int, int], Detections] | None = None  # position, size, detections
        self._waiting: list[_Waiting[Item]] = []

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    def is_key(self, size: tuple[int, int], reconnects: int = 0) -> bool:
        """Whether the next frame (of this height, width) is a key frame; call once per frame, in order. The first
        frame taken after a live stream came back (``reconnects`` grew) is one: boxes from before would be stale,
        and the frame that came back first may have been dropped, so the count is compared, not a flag."""
        key = (self._since_key is None or self._since_key + 1 >= self.every or size != self._planned_size
               or reconnects != self._reconnects)
        self._reconnects = reconnects
        self._since_key = 0 if key else self._since_key + 1  # type: ignore[operator]
        self._planned_size = size
        return key

    def add(self, item: Item, size: tuple[int, int], detections: Detections | None) -> list[Located[Item]]:
        """The next frame, with its detections if it is a key frame; returns the frames now located."""
        position = self._position
        self._position += 1
        if detections is None:
            if self._key is None:
                raise ValueError("the first frame must be a key frame (is_key says which)")
            if self.interpolate and size == self._key[1]:
                self._waiting.append(_Waiting(item, position))
                return []
            return [Located(item, self._key[2], detected=False)]
        key = (position, size, detections)
        out = self._release(key)
        out.append(Located(item, detections, detected=True))
        self._key = key
        return out

    def flush(self) -> list[Located[Item]]:
        """The frames after the last key frame: they keep its boxes."""
        return self._release(None)

    def _release(self, next_key: tuple[int, tuple[int, int], Detections] | None) -> list[Located[Item]]:
        """The waiting frames, between the last key frame and ``next_key`` (None: there is none)."""
        waiting, self._waiting = self._waiting, []
        if not waiting:
            return []
        assert self._key is not None
        start, size, before = self._key
        if next_key is None or next_key[1] != size:  # nothing to interpolate towards: carried
            return [Located(w.item, before, detected=False) for w in waiting]
        end, _, after = next_key
        bridge = Bridge(before, after, self.match_iou)
        return [Located(w.item, bridge.at((w.position - start) / (end - start)), detected=False) for w in waiting]


class StreamKeyframes(Generic[Item]):
    """A :class:`KeyframeSchedule` for each stream (source) of a run, so each source gets the boxes it would get
    alone: its own first frame is a key frame, and no frame takes or interpolates another source's boxes.

    Files (``interpolate=True``) run their sources one after another: a frame of a source means the sources
    begun before it have ended, so their frames still waiting keep their last key frame's boxes (as at the end
    of a run) and come out first, in frame order. Cameras (``interpolate=False``) interleave; nothing waits.
    """

    def __init__(self, every: int, *, interpolate: bool = True) -> None:
        _check_every(every)
        self.every, self.interpolate = every, interpolate
        self._schedules: dict[int, KeyframeSchedule[Item]] = {}

    def is_key(self, stream: int, size: tuple[int, int], reconnects: int = 0) -> bool:
        """Whether the next frame of ``stream`` (of this height, width) is a key frame; once per frame, in order."""
        schedule = self._schedules.get(stream)
        if schedule is None:
            schedule = self._schedules[stream] = KeyframeSchedule(self.every, interpolate=self.interpolate)
        return schedule.is_key(size, reconnects)

    def add(self, stream: int, item: Item, size: tuple[int, int], detections: Detections | None
            ) -> list[Located[Item]]:
        """The next frame of ``stream``, with its detections if it is a key frame; returns the frames now located."""
        out: list[Located[Item]] = []
        if self.interpolate:  # the sources begun before this one have ended: their last frames keep their boxes
            for ended in list(self._schedules):  # (in the order they began; is_key may already know later ones)
                if ended == stream:
                    break
                out += self._schedules.pop(ended).flush()
        return out + self._schedules[stream].add(item, size, detections)

    def end(self, stream: int) -> list[Located[Item]]:
        """``stream`` was read to its end: its frames after its last key frame, located as at the end of a run."""
        schedule = self._schedules.pop(stream, None)
        return schedule.flush() if schedule is not None else []

    def flush(self) -> list[Located[Item]]:
        """Every stream's frames after its last key frame, stream by stream in the order they began."""
        out: list[Located[Item]] = []
        for schedule in self._schedules.values():
            out += schedule.flush()
        return out
