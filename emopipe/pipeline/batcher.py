"""Static batching: face crops from any number of frames packed into batches of one fixed shape.

cuDNN autotunes (and CUDA graphs are captured) per input shape, so the model must only ever see
the shape it was warmed up with. The batcher fills batches of exactly ``batch_size`` slots,
pads the last partial batch with blank crops that are marked as padding (their outputs are
discarded), and can flush a partial batch once its oldest face has waited ``max_wait_s``
(live use). :class:`FrameAssembler` turns per-slot results back into per-frame results, in
frame order.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

import torch

from emopipe.errors import UsageError

Key = TypeVar("Key", bound=Hashable)


@dataclass(frozen=True)
class Slot(Generic[Key]):
    """Where a real face in a batch came from: the item it was added with and its index there."""

    key: Key
    face: int


@dataclass(frozen=True)
class FaceBatch(Generic[Key]):
    """``crops`` always has ``batch_size`` rows; only the first ``len(slots)`` are real faces."""

    crops: torch.Tensor  # batch_size×3×H×W
    slots: tuple[Slot[Key], ...]

    def __post_init__(self) -> None:
        if self.crops.ndim != 4 or len(self.slots) > self.crops.shape[0]:
            raise ValueError(
                f"FaceBatch expects crops N×C×H×W with N ≥ {len(self.slots)} real slots, got {tuple(self.crops.shape)}"
            )

    @property
    def size(self) -> int:
        return int(self.crops.shape[0])

    @property
    def real(self) -> int:
        return len(self.slots)

    @property
    def fill_ratio(self) -> float:
        return self.real / self.size

    @property
    def mask(self) -> torch.Tensor:
        """True for real faces, False for padding."""
        m = torch.zeros(self.size, dtype=torch.bool)
        m[: self.real] = True
        return m


@dataclass
class _Pending(Generic[Key]):
    """One item's faces: rows ``begin + first_face`` to ``end`` of ``crops`` (a tensor several items may share)."""

    crops: torch.Tensor
    key: Key
    begin: int
    end: int
    since: float
    first_face: int = 0  # faces of this item already taken into batches


class StaticBatcher(Generic[Key]):
    """Packs k×C×H×W crop tensors into batches of exactly ``batch_size`` rows, in arrival order."""

    def __init__(self, batch_size: int, max_wait_s: float | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if batch_size < 1:
            raise UsageError(f"batch size must be at least 1, got {batch_size}")
        if max_wait_s is not None and max_wait_s < 0:
            raise UsageError(f"maximum wait must be ≥ 0 s, got {max_wait_s}")
        self.batch_size = batch_size
        self.max_wait_s = max_wait_s
        self._clock = clock
        self._pending: deque[_Pending[Key]] = deque()
        self._count = 0
        self._shape: tuple[int, ...] | None = None

    @property
    def pending(self) -> int:
        return self._count

    def add(self, crops: torch.Tensor, key: Key) -> list[FaceBatch[Key]]:
        """Queue a frame's crops (k may be 0); returns every batch that became full."""
        return self.add_many(crops, [(key, int(crops.shape[0]) if crops.ndim == 4 else 0)])

    def add_many(self, crops: torch.Tensor, counts: Sequence[tuple[Key, int]]) -> list[FaceBatch[Key]]:
        """Queue the crops of several frames at once: ``crops`` holds each frame's ``count`` crops, one frame
        after the other, in the order of ``counts``. Returns every batch that became full. Batches take
        consecutive rows of ``crops`` as one slice, not a slice per frame."""
        if crops.ndim != 4:
            raise ValueError(f"crops must be k×C×H×W, got shape {tuple(crops.shape)}")
        total = sum(count for _, count in counts)
        if total != crops.shape[0]:
            raise ValueError(f"the counts add up to {total} crops, got {crops.shape[0]}")
        if total == 0:
            return []
        if self._shape is None:
            self._shape = tuple(crops.shape[1:])
        elif tuple(crops.shape[1:]) != self._shape:
            raise ValueError(f"crops must all be {self._shape}, got {tuple(crops.shape[1:])}")
        since, begin = self._clock(), 0
        for key, count in counts:
            if count:
                self._pending.append(_Pending(crops, key, begin, begin + count, since))
                begin += count
        self._count += total
        batches = []
        while self._count >= self.batch_size:
            batches.append(self._take(self.batch_size))
        return batches

    def due(self) -> list[FaceBatch[Key]]:
        """The partial batch, padded, if its oldest face has waited ``max_wait_s``; else nothing."""
        if not self._pending or self.max_wait_s is None:
            return []
        if self._clock() - self._pending[0].since < self.max_wait_s:
            return []
        return self.flush()

    def seconds_until_due(self) -> float | None:
        """How long a consumer may block before :meth:`due` has something (None: nothing pending)."""
        if not self._pending or self.max_wait_s is None:
            return None
        return max(0.0, self._pending[0].since + self.max_wait_s - self._clock())

    def flush(self) -> list[FaceBatch[Key]]:
        """Everything pending, as batches of the static shape (the last one padded)."""
        batches = []
        while self._count:
            batches.append(self._take(min(self._count, self.batch_size)))
        return batches

    def _take(self, n: int) -> FaceBatch[Key]:
        runs: list[tuple[torch.Tensor, int, int]] = []  # (tensor, first row, end row): consecutive rows merged
        slots: list[Slot[Key]] = []
        while n:
            head = self._pending[0]
            start = head.begin + head.first_face
            used = min(head.end - start, n)
            if runs and runs[-1][0] is head.crops and runs[-1][2] == start:
                runs[-1] = (head.crops, runs[-1][1], start + used)
            else:
                runs.append((head.crops, start, start + used))
            slots.extend(Slot(head.key, head.first_face + i) for i in range(used))
            head.first_face += used
            n -= used
            self._count -= used
            if head.begin + head.first_face == head.end:
                self._pending.popleft()
        pieces = [crops[first:end] for crops, first, end in runs]
        padding = self.batch_size - len(slots)
        if padding:
            pieces.append(pieces[0].new_zeros((padding, *pieces[0].shape[1:])))
        crops = pieces[0] if len(pieces) == 1 else torch.cat(pieces)
        return FaceBatch(crops=crops, slots=tuple(slots))


Result = TypeVar("Result")
Frame = TypeVar("Frame")


@dataclass
class _Waiting(Generic[Frame, Result]):
    frame: Frame
    results: list[Result | None] = field(default_factory=list)
    missing: int = 0


class FrameAssembler(Generic[Key, Frame, Result]):
    """Collects per-face results into per-frame lists and releases frames in the order they came.

    A frame is released once all its faces have results; a frame without faces is released as
    soon as every frame before it has been.
    """

    def __init__(self) -> None:
        self._waiting: dict[Key, _Waiting[Frame, Result]] = {}
        self._order: deque[Key] = deque()

    def expect(self, key: Key, frame: Frame, faces: int) -> None:
        if key in self._waiting:
            raise ValueError(f"frame {key!r} is already expected")
        self._waiting[key] = _Waiting(frame, [None] * faces, faces)
        self._order.append(key)

    def deliver(self, slot: Slot[Key], result: Result) -> None:
        waiting = self._waiting[slot.key]
        if waiting.results[slot.face] is not None:
            raise ValueError(f"face {slot.face} of frame {slot.key!r} delivered twice")
        waiting.results[slot.face] = result
        waiting.missing -= 1

    def ready(self) -> Iterator[tuple[Frame, list[Result]]]:
        """Frames whose results are complete, oldest first, stopping at the first incomplete one."""
        while self._order and self._waiting[self._order[0]].missing == 0:
            done = self._waiting.pop(self._order.popleft())
            yield done.frame, [r for r in done.results if r is not None]

    def __len__(self) -> int:
        return len(self._order)
