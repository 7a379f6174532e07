"""What the pipeline calls on the way: its observers' hooks and its sinks' shape.

Apart from the pipeline (:mod:`emopipe.pipeline.runner`, which loads PyTorch) so that what only watches or writes — a
progress bar, a Ray driver's planning and bookkeeping — loads no deep-learning framework.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from emopipe.types import FrameResult


class Observer:
    """Hooks the pipeline calls; the metrics and the progress bar implement the ones they need."""

    def stage(self, stage: str, seconds: float) -> None: ...

    def batch(self, size: int, real: int, seconds: float) -> None: ...

    def frame(self, result: FrameResult, latency_s: float) -> None: ...

    def frame_split(self, queued_s: float, processing_s: float) -> None:
        """A frame's latency in two parts: read → taken by the GPU thread, then taken → results written."""

    def queue_depth(self, name: str, depth: int) -> None: ...

    def dropped(self, n: int) -> None: ...

    def stream_dropped(self, stream: int, n: int) -> None:
        """The same drops, by the stream (camera) they came from: several cameras keep their own counts."""

    def error(self, kind: str) -> None:
        """A stage failed (``source``, ``decode``, ``detect``, ``crop``, ``infer``, ``write``); the run ends with it."""


class Sink(Protocol):
    """The writer thread's work for one frame (records, annotated video, live view…). A sink may also have
    ``flush()``: then it may hold what it writes until called (see :meth:`Pipeline._write`)."""

    def write(self, result: FrameResult) -> None: ...

    def close(self) -> None: ...
