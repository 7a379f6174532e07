"""Prometheus metrics of a run: first frame against steady state, time per stage, throughput, drops.

Every metric is created against a registry passed in (the command line makes its own, tests make
a fresh one per test), in the ``emopipe_`` namespace, in base units. Histogram buckets cover
0.5 ms – 10 min: a warm GPU stage takes a few milliseconds, a cold first frame seconds, a CPU frame more.

The pipeline's threads call the ``observe_*`` methods concurrently; each prometheus_client metric
is thread-safe on its own, and the few decisions that span calls (which frame was the first,
the running fill ratio) are made under one lock.

How they are served, kept up after a run and pushed: :mod:`emopipe.observe.exposition`.
docs/metrics.md lists every metric and dashboard panel.
"""

from __future__ import annotations

import logging
import math
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info

from emopipe.io.uris import redact_uri

logger = logging.getLogger(__name__)

NAMESPACE = "emopipe"
STAGES = ("decode", "detect", "nms", "crop", "infer", "write")
PHASES = ("first", "steady")
# Error kinds exposed at 0 from the start, so increase() and alerts see the first error.
ERROR_KINDS = ("source", "decode", "detect", "crop", "infer", "write")
# 0.5 ms … 10 min; denser between 5 and 100 ms, where a GPU's steady frames and batches fall, and up to
# minutes for CPU runs (a CPU frame waits tens of seconds behind its batch: a 10 s top bucket showed 10 s)
LATENCY_BUCKETS = (0.0005, 0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.03, 0.05, 0.075,
                   0.1, 0.15, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0)
# What a run is doing, so alerts tell a finished run from a crashed or stuck one: a target that stops answering
# while "running" crashed; one whose last state was "finished" ended as it should.
RUN_STATES = ("starting", "running", "finished", "failed", "interrupted")
# What a source is doing, so alerts tell a lost source from one that ended as asked: up (its frames arrive), lost
# (a live source's stream stopped and emopipe reopens it), failed (lost for good, could not be opened, or its run
# failed while reading it), ended (read to its end, or ended as asked: --end, --max-frames, the run stopped).
SOURCE_STATES = ("up", "lost", "failed", "ended")
# A file run's frames queue behind the reader by design; only a live run's latency is a promise to keep.
RUN_MODES = ("file", "live")
# Build-info labels always present (value "unknown"/"none" when a fact is missing), so the
# dashboard's table keeps its columns whatever engine produced the facts.
# Per-source series get a `source` label for this many sources; later ones share source="other", so a fleet
# of thousands of cameras (or a folder of thousands of files) cannot grow the series without bound.
DEFAULT_MAX_SOURCES = 64
OTHER_SOURCE = "other"
BUILD_INFO_LABELS = ("version", "torch_version", "cuda_version", "cudnn_version", "gpu", "model",
                     "precision", "backend", "cudnn_benchmark")


class PipelineMetrics:
    """The metrics a pipeline run reports; observe_* methods may be called from any thread.

    Units are seconds. What each call means:

    - :meth:`observe_startup` once, after the engine is loaded and warmed up;
    - :meth:`observe_stage` per call of a stage: ``decode`` and ``write`` per frame, ``detect``
      (the device part: upload, network, decoding), ``nms`` (the host part: thresholds, NMS, boxes
      back to frame pixels) and ``crop`` per detector call. ``infer`` is recorded by
      :meth:`observe_batch` (passing it here would count each batch twice, so it is refused);
    - :meth:`observe_batch` per inference batch: its static size, how many slots were real faces,
      and how long it took; the first batch of each size is phase ``first``;
    - :meth:`observe_frame` per frame, once its results are written: latency from the frame being
      read to its results written, and its number of faces; the first frame is phase ``first``;
    - live mode: :meth:`frames_dropped`, :meth:`reconnect`, :meth:`observe_capture_latency`
      (capture timestamp → result written);
    - per source (``source`` label, credentials removed; the first ``max_sources`` sources by name, the
      rest as ``other``): :meth:`observe_source_frame`, :meth:`source_frames_dropped`,
      :meth:`source_reconnect`, :meth:`set_source_state`. The run-level series above count every source.
    """

    def __init__(self, registry: CollectorRegistry, *, info: Mapping[str, str] | None = None,
                 queues: Sequence[str] = (), batch_sizes: Sequence[int] = (), mode: str = "file",
                 max_sources: int = DEFAULT_MAX_SOURCES) -> None:
        """``info`` are the build-info labels (default: :func:`build_info` without an engine);
        ``queues`` are queue names to expose at depth 0 before their first :meth:`set_queue_depth`;
        ``batch_sizes`` the engine's static batch sizes, exposed at zero count before their first batch;
        ``mode`` is ``file`` or ``live`` (the ``mode`` label of ``emopipe_run_state``); ``max_sources`` bounds
        the ``source`` label's values (later sources are counted as ``other``)."""
        if mode not in RUN_MODES:
            raise ValueError(f"mode must be one of {', '.join(RUN_MODES)}, got {mode!r}")
        if max_sources < 0:
            raise ValueError(f"max_sources must be ≥ 0, got {max_sources}")
        self.max_sources = max_sources
        self.registry = registry
        common: dict[str, Any] = {"namespace": NAMESPACE, "registry": registry}
        latency: dict[str, Any] = {**common, "buckets": LATENCY_BUCKETS}
        self.frame_latency = Histogram(
            "frame_latency_seconds", "End-to-end latency of a frame: read → its results written; "
            "phase=first for the first frame of the run", ["phase"], **latency)
        self.frame_queue = Histogram(
            "frame_queue_seconds", "Part of a frame's latency spent waiting to be processed: read → taken by the "
            "GPU thread (a file run's reader works ahead by design, so there it is queueing, not slowness)", **latency)
        self.frame_processing = Histogram(
            "frame_processing_seconds", "Part of a frame's latency spent being processed: taken by the GPU thread → "
            "its results written (detection, crops, its inference batch, writing)", **latency)
        self.first_frame_latency = Gauge(
            "first_frame_latency_seconds", "End-to-end latency of the run's first frame (NaN until it is written)",
            **common)
        self.batch_latency = Histogram(
            "inference_batch_seconds", "Latency of one inference batch (results on the host); "
            "phase=first for the first batch of each static size", ["batch_size", "phase"], **latency)
        self.startup = Gauge("startup_seconds", "Start-up time by step: load (model build and weights) "
                             "and warmup (autotuning every static shape)", ["step"], **common)
        self.stage_latency = Histogram("stage_seconds", "Latency of one call of a pipeline stage", ["stage"],
                                       **latency)
        self.frames = Counter("frames", "Frames processed (results written)", **common)
        self.faces = Counter("faces", "Faces whose results were written", **common)
        self.frames_detected = Counter("frames_detected", "Frames whose boxes the detector found (all frames "
                                       "unless --detect-every K > 1 gives the others interpolated boxes)", **common)
        self.dropped = Counter("frames_dropped", "Frames dropped because the pipeline could not keep up (live)",
                               **common)
        self.errors = Counter("errors", "Errors by kind (the pipeline stage or source that failed)", ["kind"],
                              **common)
        self.queue_depth = Gauge("queue_depth", "Items waiting in a queue between pipeline threads", ["queue"],
                                 **common)
        self.batch_slots = Counter("batch_slots", "Inference batch slots run, padding included", **common)
        self.batch_faces = Counter("batch_faces", "Inference batch slots holding a real face", **common)
        self.batch_fill = Gauge("batch_fill_ratio", "Real faces / batch slots over the run so far "
                                "(NaN before the first batch)", **common)
        self.reconnects = Counter("stream_reconnects", "Times a live stream was reopened", **common)
        self.reopen_failures = Counter("stream_reopen_failures", "Attempts to reopen a lost live stream that "
                                       "failed (refused, unreachable, or no frame)", **common)
        self.source_up = Gauge("source_up", "1 while a source's frames arrive, else 0 (emopipe_source_state says "
                               "why: lost, failed or ended); for source=\"other\", how many of those sources are up",
                               ["source"], **common)
        self.source_state = Gauge("source_state", "1 for what a source is doing: up (its frames arrive), lost (a "
                                  "live source reconnecting), failed (lost for good, not opened, or its run failed), "
                                  "ended (read to its end, or ended as asked); 0 for the other states; for "
                                  "source=\"other\", how many of those sources are in each state",
                                  ["source", "state"], **common)
        self.source_frames = Counter("source_frames", "Frames processed (results written), by source", ["source"],
                                     **common)
        self.source_faces = Counter("source_faces", "Faces whose results were written, by source", ["source"],
                                    **common)
        self.source_dropped = Counter("source_frames_dropped", "Frames of a live source dropped because the "
                                      "pipeline could not keep up, by source", ["source"], **common)
        self.source_reconnects = Counter("source_reconnects", "Times a live source was reopened, by source",
                                         ["source"], **common)
        self.source_latency = Histogram("source_frame_latency_seconds", "A frame read (live: captured) → its "
                                        "results written, by source", ["source"], **latency)
        self.capture_latency = Histogram("capture_latency_seconds",
                                         "Live mode: capture timestamp of a frame → its results written", **latency)
        self.run_state = Gauge("run_state", "1 for what the run is doing: starting (engines loading and warming), "
                               "running, or how it ended (finished, failed, interrupted); 0 for the other states",
                               ["mode", "state"], **common)
        self.build = Info("build", "emopipe build and engine: versions, GPU, model, precision, backend", **common)

        # Children made once: label lookups stay off the hot path, and every series exists
        # (at zero) from the first scrape, so rate() and increase() see the first event.
        self._frame_phase = {phase: self.frame_latency.labels(phase=phase) for phase in PHASES}
        self._stages = {stage: self.stage_latency.labels(stage=stage) for stage in STAGES}
        for kind in ERROR_KINDS:
            self.errors.labels(kind=kind)
        for queue in queues:
            self.queue_depth.labels(queue=queue).set(0)
        for size in batch_sizes:
            for phase in PHASES:
                self.batch_latency.labels(batch_size=str(size), phase=phase)
        self.first_frame_latency.set(math.nan)
        self.batch_fill.set(math.nan)
        self._run_states = {state: self.run_state.labels(mode=mode, state=state) for state in RUN_STATES}
        self.state = ""  # the run state last set (what emopipe_run_state shows)
        self.set_run_state("starting")

        self._lock = threading.Lock()
        self._labels: dict[str, str] = {}  # source (redacted) → its label: itself, or "other" past max_sources
        self._named = 0
        self._source_states: dict[str, str] = {}  # source (redacted) → its state
        self._in_state: dict[str, dict[str, int]] = {}  # label → state → how many of its sources are in it
        self._frames_seen = 0
        self._steady_batches: dict[int, Any] = {}  # batch size → its steady-phase histogram child
        self._slots = 0
        self._real = 0
        self.set_info(build_info() if info is None else info)

    def set_info(self, info: Mapping[str, str]) -> None:
        """Replace the build-info labels (e.g. once the engine exists: ``build_info(engine.info())``)."""
        labels = {label: "unknown" for label in BUILD_INFO_LABELS}
        labels.update({_label_name(k): str(v) for k, v in info.items()})
        self.build.info(labels)

    def set_run_state(self, state: str) -> None:
        """One of RUN_STATES: ``running`` once the engines are warm, then how the run ended."""
        if state not in RUN_STATES:
            raise ValueError(f"a run state is one of {', '.join(RUN_STATES)}, got {state!r}")
        for name, child in self._run_states.items():  # the others to 0 first: a scrape never sees two states
            if name != state:
                child.set(0)
        self._run_states[state].set(1)
        self.state = state

    def observe_startup(self, load_s: float, warmup_s: float) -> None:
        _check_seconds(load_s, "load time")
        _check_seconds(warmup_s, "warmup time")
        self.startup.labels(step="load").set(load_s)
        self.startup.labels(step="warmup").set(warmup_s)

    def observe_stage(self, stage: str, seconds: float) -> None:
        child = self._stages.get(stage)
        if child is None or stage == "infer":
            raise ValueError(f"stage must be one of {', '.join(s for s in STAGES if s != 'infer')} "
                             f"(infer is recorded by observe_batch), got {stage!r}")
        _check_seconds(seconds, f"{stage} time")
        child.observe(seconds)

    @contextmanager
    def time_stage(self, stage: str, synchronize: Callable[[], None] | None = None) -> Iterator[None]:
        """Time a block as one call of ``stage`` on the host clock (only if it succeeds).

        For asynchronous GPU work pass ``synchronize`` (e.g. ``torch.cuda.synchronize``) so the
        time covers the work, not its launch — or use :class:`GpuTimer`, which never stalls.
        """
        start = time.perf_counter()
        yield
        if synchronize is not None:
            synchronize()
        self.observe_stage(stage, time.perf_counter() - start)

    def observe_batch(self, size: int, real: int, seconds: float) -> None:
        if size < 1 or not 0 <= real <= size:
            raise ValueError(f"a batch has size ≥ 1 and 0..size real faces, got size={size}, real={real}")
        _check_seconds(seconds, "batch time")
        with self._lock:
            steady = self._steady_batches.get(size)
            if steady is None:
                # the steady series of this size exists from now on, at zero, so rate() sees its first batch
                self._steady_batches[size] = self.batch_latency.labels(batch_size=str(size), phase="steady")
            self._slots += size
            self._real += real
            self.batch_fill.set(self._real / self._slots)  # under the lock: matches the counters' totals
        child = steady if steady is not None else self.batch_latency.labels(batch_size=str(size), phase="first")
        child.observe(seconds)
        self._stages["infer"].observe(seconds)
        self.batch_slots.inc(size)
        self.batch_faces.inc(real)

    def observe_frame(self, latency_s: float, faces: int, detected: bool = True) -> None:
        if faces < 0:
            raise ValueError(f"a frame has ≥ 0 faces, got {faces}")
        _check_seconds(latency_s, "frame latency")
        with self._lock:
            first = self._frames_seen == 0
            self._frames_seen += 1
        if first:
            self.first_frame_latency.set(latency_s)
        self._frame_phase["first" if first else "steady"].observe(latency_s)
        self.frames.inc()
        if detected:
            self.frames_detected.inc()
        if faces:
            self.faces.inc(faces)

    def observe_frame_split(self, queued_s: float, processing_s: float) -> None:
        """A frame's latency in its two parts: waiting to be taken by the GPU thread, then being processed."""
        _check_seconds(queued_s, "frame queueing time")
        _check_seconds(processing_s, "frame processing time")
        self.frame_queue.observe(queued_s)
        self.frame_processing.observe(processing_s)

    def frames_dropped(self, n: int = 1) -> None:
        if n < 0:
            raise ValueError(f"dropped frames must be ≥ 0, got {n}")
        self.dropped.inc(n)

    def error(self, kind: str) -> None:
        """Count one error; ``kind`` should come from a small fixed set (ERROR_KINDS or similar)."""
        if not kind:
            raise ValueError("an error kind must be a non-empty string")
        self.errors.labels(kind=kind).inc()

    def set_queue_depth(self, queue: str, depth: int) -> None:
        self.queue_depth.labels(queue=queue).set(depth)

    def reconnect(self) -> None:
        self.reconnects.inc()

    def reopen_failed(self) -> None:
        self.reopen_failures.inc()

    def source_label(self, source: str) -> str:
        """The ``source`` label of ``source``: its URI without credentials, or ``other`` once ``max_sources``
        sources have their own. A source's series all exist (at zero) from its first mention."""
        name = redact_uri(source)
        with self._lock:
            label = self._labels.get(name)
            if label is not None:
                return label
            if self._named < self.max_sources:
                label = name
                self._named += 1
            else:
                label = OTHER_SOURCE
            self._labels[name] = label
        for counter in (self.source_frames, self.source_faces, self.source_dropped, self.source_reconnects):
            counter.labels(source=label)  # (once per source name: later calls find the label above)
        self.source_latency.labels(source=label)
        return label

    def set_source_state(self, source: str, state: str) -> None:
        """One of SOURCE_STATES for ``source`` (``emopipe_source_state``, and ``emopipe_source_up`` 1 for ``up``);
        the sources past the bound are counted together: ``other``'s series say how many are in each state."""
        if state not in SOURCE_STATES:
            raise ValueError(f"a source state is one of {', '.join(SOURCE_STATES)}, got {state!r}")
        label = self.source_label(source)
        name = redact_uri(source)
        with self._lock:  # (the sources' threads report at once; "other" counts several of them)
            counts = self._in_state.setdefault(label, dict.fromkeys(SOURCE_STATES, 0))
            before = self._source_states.get(name)
            if before is not None:
                counts[before] -= 1
            counts[state] += 1
            self._source_states[name] = state
            for other in SOURCE_STATES:  # the others first: a scrape never sees a source in two states
                if other != state:
                    self.source_state.labels(source=label, state=other).set(counts[other])
            self.source_state.labels(source=label, state=state).set(counts[state])
            self.source_up.labels(source=label).set(counts["up"])

    def source_state_of(self, source: str) -> str | None:
        """The state last set for ``source`` (None before any)."""
        with self._lock:
            return self._source_states.get(redact_uri(source))

    def observe_source_frame(self, source: str, latency_s: float, faces: int) -> None:
        """One frame of ``source`` written (the run-level series are fed by :meth:`observe_frame`)."""
        _check_seconds(latency_s, "frame latency")
        label = self.source_label(source)
        self.source_latency.labels(source=label).observe(latency_s)
        self.source_frames.labels(source=label).inc()
        if faces:
            self.source_faces.labels(source=label).inc(faces)

    def source_frames_dropped(self, source: str, n: int = 1) -> None:
        if n < 0:
            raise ValueError(f"dropped frames must be ≥ 0, got {n}")
        self.source_dropped.labels(source=self.source_label(source)).inc(n)

    def source_reconnect(self, source: str) -> None:
        self.source_reconnects.labels(source=self.source_label(source)).inc()

    def observe_capture_latency(self, seconds: float) -> None:
        _check_seconds(seconds, "capture latency")
        self.capture_latency.observe(seconds)


def _check_seconds(value: float, what: str) -> None:
    # NaN fails both comparisons, so it is refused too: it would poison the histogram's sum.
    if not value >= 0:
        raise ValueError(f"{what} must be ≥ 0 s, got {value}")


def _label_name(key: str) -> str:
    """A valid Prometheus label name for ``key`` (engines' info keys may be free-form)."""
    name = re.sub(r"[^a-zA-Z0-9_]", "_", key).lstrip("_")  # names starting "__" are reserved
    return name if name and not name[0].isdigit() else f"key_{name}"


def build_info(engine_info: Mapping[str, object] | None = None, *, model: str | None = None) -> dict[str, str]:
    """The ``emopipe_build`` labels: versions of emopipe, torch, CUDA and cuDNN, the GPU's name, the model,
    merged with an engine's :meth:`info` (backend, device, precision, batch_size, cudnn_benchmark, …)."""
    import torch  # the pipeline has it loaded already; metrics alone do not need it

    from emopipe._version import __version__

    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    facts = {
        "version": __version__,
        "torch_version": torch.__version__,
        "cuda_version": torch.version.cuda or "none",
        "cudnn_version": str(cudnn) if cudnn else "none",
        "gpu": "none",
        "model": model or "unknown",
    }
    engine = {_label_name(k): str(v) for k, v in (engine_info or {}).items()}
    device = engine.get("device", "")
    if device.startswith("cuda") and torch.cuda.is_available():
        facts["gpu"] = torch.cuda.get_device_name(torch.device(device))
    return {**facts, **engine}


# -- timing GPU work without stalling it ----------------------------------------------------------


# -- exposure: scrape, linger, push ----------------------------------------------------------------


