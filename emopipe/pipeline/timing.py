"""Timing the stages: wall-clock sections, and GPU work timed with CUDA events without stalling it."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import numpy as np
    import torch


def percentile(ordered: Sequence[float] | np.ndarray, q: float) -> float | None:
    """The ``q``-quantile (0..1) of values sorted ascending, nearest rank; None for no values.

    The one percentile of the summaries, the live statistics and ``emopipe bench`` (a measured value,
    never an interpolation between two)."""
    if not len(ordered):
        return None
    return float(ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))])


class _Event(Protocol):
    def record(self) -> None: ...

    def query(self) -> bool: ...

    def synchronize(self) -> None: ...

    def elapsed_time(self, end: Any) -> float: ...  # milliseconds


class GpuTimer:
    """Times GPU work with CUDA events and records each time once the GPU has got past it.

    A host clock around asynchronous GPU calls measures only their launch; synchronising after
    every stage measures the work but stalls the pipeline. Events recorded on the stream cost
    nothing, and are read (:meth:`poll`, non-blocking) after a later step — copying results to
    the host, say — has waited for the GPU anyway. :meth:`drain` waits for what is left (end of run).
    """

    def __init__(self, event_factory: Callable[[], _Event] | None = None) -> None:
        if event_factory is None:
            import torch

            def event_factory() -> _Event:
                return torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]

        self._event = event_factory
        self._pending: deque[tuple[_Event, _Event, Callable[[float], None]]] = deque()
        self._spare: list[_Event] = []  # events already read, recorded again (a CUDA event is created on first use)
        self._lock = threading.Lock()

    def _take(self) -> _Event:
        with self._lock:
            return self._spare.pop() if self._spare else self._event()

    @contextmanager
    def measure(self, record: Callable[[float], None]) -> Iterator[None]:
        """Time the GPU work launched in the block; ``record(seconds)`` is called once it has run,
        e.g. ``functools.partial(metrics.observe_stage, "crop")``."""
        start = self._take()
        start.record()
        yield
        end = self._take()
        end.record()
        with self._lock:
            self._pending.append((start, end, record))
        self.poll()

    def poll(self) -> int:
        """Record every finished measurement (in launch order); never waits. Returns how many."""
        done = []
        with self._lock:
            while self._pending and self._pending[0][1].query():
                done.append(self._pending.popleft())
        for start, end, record in done:
            record(start.elapsed_time(end) / 1000)
        with self._lock:
            self._spare += [event for start, end, _ in done for event in (start, end)]
        return len(done)

    def drain(self) -> int:
        """Wait for the GPU to pass every pending measurement and record them all."""
        with self._lock:
            last = self._pending[-1][1] if self._pending else None
        if last is not None:
            last.synchronize()
        return self.poll()

    @property
    def pending(self) -> int:
        return len(self._pending)


class StageClock:
    """Times pipeline stages: GPU stages with CUDA events (read once the stream has passed them, at
    the next host copy that waits anyway), so timing adds no synchronisation; CPU stages by the clock."""

    def __init__(self, device: torch.device, observe: Callable[[str, float], None]) -> None:
        self.observe = observe
        self._gpu = GpuTimer() if device.type == "cuda" else None
        self.current: str | None = None  # the stage under way; left set when it raises, to name the failure

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        self.current = name
        if self._gpu is not None:
            with self._gpu.measure(partial(self.observe, name)):
                yield
            self.current = None
            return
        t = time.perf_counter()
        yield
        self.current = None
        self.observe(name, time.perf_counter() - t)

    def collect(self, wait: bool = False) -> None:
        if self._gpu is not None:
            self._gpu.drain() if wait else self._gpu.poll()
