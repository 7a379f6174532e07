"""Inference engines: EmoNet on static batch shapes, tuned and warmed up before the first frame.

All tuning lives here and happens when an engine starts, never at import: the cuDNN flags,
precision, memory format, CUDA graph capture and the warmup over every static shape.
An engine takes a batch of crops of its static shape (N×3×256×256, uint8 0–255 or float 0–1,
on any device) and returns per-slot results on the CPU.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path

import torch

from emopipe.engines.base import PRECISIONS, EngineOptions, PendingOutput, network_outputs
from emopipe.model import cudnn_epilogue, kernels
from emopipe.model.devices import resolve_device
from emopipe.model.emonet import EmoNet
from emopipe.types import INPUT_SIZE, EngineOutput, WarmupReport

logger = logging.getLogger(__name__)


# cuDNN's runtime-fused epilogue kernels never finish when two engines run them at the same time (two
# engines' graphs replayed on two streams hung the GPU in every variant tried; docs/benchmark-log.md), so
# engines that use them take turns within a process: each holds this until its results are on the host.
_EPILOGUE_TURN = threading.RLock()


class TorchEngine:
    """EmoNet in PyTorch: cuDNN autotuning, reduced precision, channels_last, CUDA graphs."""

    backend = "torch"

    def __init__(self, model: EmoNet, options: EngineOptions = EngineOptions(),
                 cache_dir: str | Path | None = None, owns_model: bool = False) -> None:
        """``owns_model``: ``model`` was built for this engine alone, which may rewrite it in place (else it works
        on a copy and leaves the caller's model as it was)."""
        self.device = resolve_device(options.device)
        self.options = options.resolved(self.device)
        self.batch_size = self.options.batch_size
        self.labels = model.labels
        self.num_classes = model.num_classes
        self.dtype = PRECISIONS[self.options.precision or "fp32"]
        self.warmup_report: WarmupReport | None = None
        self._graphs: dict[int, _CapturedGraph] = {}
        self._compiled_ahead: set[int] = set()  # batch sizes whose plans and kernels were found and compiled
        self._apply_backend_flags()
        memory_format = torch.channels_last if self.options.channels_last else torch.contiguous_format
        if cache_dir:  # compiled kernels persist beside the weights (a container's models volume): restarts skip
            # compiling (Triton: the glue kernels, ~5 s the first time; Inductor: `--compile`, a minute)
            os.environ.setdefault("TRITON_CACHE_DIR", str(Path(cache_dir) / "triton"))
            os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(Path(cache_dir) / "inductor"))
            if self.options.cudnn_epilogue or self.device.type == "cuda":
                # cuDNN's plans with their compiled kernels: the epilogue's (~65 ms a shape to build) and the
                # detector's depthwise convolutions' (~40 ms a shape), read back by later processes in milliseconds
                cudnn_epilogue.use_plan_cache(Path(cache_dir) / "cudnn")
        fused = self.options.fuse and not self.options.compile
        if fused and self.options.kernels and self.device.type == "cuda":
            from emopipe.model.kernels import start_triton_key

            start_triton_key()
        if fused:
            # (Inductor fuses on its own, and Dynamo cannot trace the rewrite's writes into channel slices)
            from emopipe.model.fusion import fuse

            model = fuse(model, use_kernels=self.options.kernels, branch_streams=self.options.branch_streams,
                         use_cudnn_epilogue=self.options.cudnn_epilogue, in_place=owns_model)
        self.model: torch.nn.Module = model.eval().requires_grad_(False).to(
            self.device, dtype=self.dtype, memory_format=memory_format)
        if fused and self.options.fp32_head:
            from emopipe.model.fusion import keep_head_in_float32

            keep_head_in_float32(self.model)
        self._compute = self._network
        if self.options.compile:
            # Compiled kernels are specialised to the static shapes; graphs are captured around them.
            self._compute = torch.compile(self._network, mode=self.options.compile, fullgraph=True, dynamic=False)

    def _apply_backend_flags(self) -> None:
        if self.device.type == "cuda":
            torch.backends.cudnn.benchmark = self.options.cudnn_benchmark
            torch.cuda.set_device(self.device)

    def info(self) -> dict[str, str]:
        o = self.options
        return {
            "backend": self.backend,
            "device": str(self.device),
            "precision": str(o.precision),
            "batch_size": str(o.batch_size),
            "cudnn_benchmark": str(o.cudnn_benchmark).lower(),
            "channels_last": str(o.channels_last).lower(),
            "cuda_graphs": str(o.cuda_graphs).lower(),
            "fuse": str(o.fuse).lower(),
            "fp32_head": str(o.fp32_head).lower(),
            "kernels": str(o.kernels).lower(),
            "branch_streams": str(o.branch_streams).lower(),
            "cudnn_epilogue": str(o.cudnn_epilogue).lower(),
            "compile": str(o.compile or "off"),
            "classes": str(self.num_classes),
        }

    # -- the computation ---------------------------------------------------------------------

    def _prepare(self, crops: torch.Tensor) -> torch.Tensor:
        x = crops.to(self.device, non_blocking=True)
        x = x.to(self.dtype) / 255 if not x.is_floating_point() else x.to(self.dtype)
        if self.options.channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        return x

    def _network(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return network_outputs(self.model, x, bool(self.options.landmarks))

    @staticmethod
    def _output(tensors: Sequence[torch.Tensor]) -> EngineOutput:
        landmarks = tensors[3] if len(tensors) > 3 else None
        return EngineOutput(probabilities=tensors[0], valence=tensors[1], arousal=tensors[2], landmarks=landmarks)

    def _turn(self) -> contextlib.AbstractContextManager:
        """Held while this engine's GPU work runs: engines with the cuDNN epilogue take turns."""
        return _EPILOGUE_TURN if self.options.cudnn_epilogue else contextlib.nullcontext()

    @torch.inference_mode()
    def infer(self, crops: torch.Tensor) -> EngineOutput:
        return self.launch(crops).collect()

    @torch.inference_mode()
    def launch(self, crops: torch.Tensor) -> PendingOutput:
        """Queue EmoNet on ``crops``; with a CUDA graph for this batch size, return before it has run (the
        outputs come back by one copy into page-locked memory, waited for in ``collect``)."""
        n = int(crops.shape[0])
        if tuple(crops.shape[1:]) != (3, INPUT_SIZE, INPUT_SIZE):
            raise ValueError(f"crops must be N×3×{INPUT_SIZE}×{INPUT_SIZE}, got {tuple(crops.shape)}")
        graph = self._graphs.get(n)
        if graph is None:
            with self._turn():  # (waits for the GPU before returning)
                tensors = self._compute(self._prepare(crops))
                return PendingOutput.done(self._output([t.to("cpu", non_blocking=False) for t in tensors]))
        with contextlib.ExitStack() as launching:  # the turn is given back here only if the launch fails
            launching.enter_context(self._turn())
            host, copied = graph.launch(crops)
            turn = launching.pop_all()  # held until the results are on the host (same thread: an RLock)

        def collect() -> EngineOutput:
            with turn:
                copied.synchronize()
                return self._output(graph.unpack(host))

        return PendingOutput(collect)

    # -- warmup ------------------------------------------------------------------------------

    @torch.inference_mode()
    def warmup(self, batch_sizes: Sequence[int] | None = None) -> WarmupReport:
        """Run (and with CUDA graphs, capture) every static shape before the first real batch."""
        sizes = list(dict.fromkeys(batch_sizes or [self.batch_size]))
        report = WarmupReport(settings={k: v for k, v in asdict(self.options).items() if k != "device"})
        start = time.perf_counter()
        generator = torch.Generator(device=self.device).manual_seed(0)
        with self._turn():  # (each shape ends waiting for the GPU)
            for n in sizes:
                t0 = time.perf_counter()  # (drawn where it is used: on the CPU, 256 crops took 0.4 s of warmup)
                example = torch.rand((n, 3, INPUT_SIZE, INPUT_SIZE), generator=generator, device=self.device)
                if n not in self._compiled_ahead:
                    self._compile_ahead(example)
                if self.options.cuda_graphs:
                    self._graphs[n] = _CapturedGraph(self, example)
                # The exact path real batches take, with both input kinds: CUDA kernels are loaded lazily on
                # first launch (dtype conversions, host copies), which would otherwise land on the first real
                # batch. On the CPU one pass sets up the oneDNN primitives.
                examples = (example, (example * 255).to(torch.uint8)) * 2 if self.device.type == "cuda" else (example,)
                for crops in examples:
                    self.infer(crops)
                self._synchronize()
                report.shapes.append((n, 3, INPUT_SIZE, INPUT_SIZE))
                report.seconds_per_shape.append(time.perf_counter() - t0)
        report.seconds = time.perf_counter() - start
        self.warmup_report = report
        logger.info("%s", report.describe())
        return report

    @torch.inference_mode()
    def compile_ahead(self, batch_sizes: Sequence[int] | None = None,
                      beside: Callable[[], None] | None = None) -> None:
        """What :meth:`warmup` does first for each shape, alone: within an enclosing
        :func:`~emopipe.model.cudnn_epilogue.plans_built_ahead`, the plans these shapes lack are built with that
        window's (the detector's, on a machine that has neither: one wave of builder processes instead of two).
        ``beside``: another network's pass (the detector's), run after EmoNet's while Triton compiles EmoNet's
        kernels on its threads (on a fresh machine ~2 s: the two used to take turns)."""
        generator = torch.Generator(device=self.device).manual_seed(0)
        with contextlib.ExitStack() as compiling:
            if beside is not None and self.options.kernels and self.options.fuse and not self.options.compile:
                compiling.enter_context(kernels.compiling_ahead(self.device))
            for n in dict.fromkeys(batch_sizes or [self.batch_size]):
                with self._turn():  # (with its plans on disk, the pass computes: engines with the epilogue take turns)
                    self._compile_ahead(torch.rand((n, 3, INPUT_SIZE, INPUT_SIZE), generator=generator,
                                                   device=self.device))
                self._compiled_ahead.add(n)
            if beside is not None:
                beside()

    def _compile_ahead(self, example: torch.Tensor) -> None:
        """What this shape's first pass would compile one piece after another — the cuDNN epilogue's plans it
        lacks, Triton's kernels — found by one pass that computes nothing and compiled side by side (plans in
        builder processes, kernels on threads): on a fresh machine seconds instead of ~30 (docs/benchmarks.md,
        "Start-up"); with everything already on disk, the pass is the first of the warm-up's passes."""
        if not self.options.fuse or self.options.compile:
            return
        with contextlib.ExitStack() as ahead:
            plans = self.options.cudnn_epilogue and ahead.enter_context(
                cudnn_epilogue.plans_built_ahead(self.device))
            compiled = self.options.kernels and ahead.enter_context(kernels.compiling_ahead(self.device))
            if plans or compiled:
                self._compute(self._prepare(example))

    def _synchronize(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)


class _CapturedGraph:
    """One CUDA graph per static batch shape: input copy-in, replay, outputs read from fixed buffers.

    The graph also packs its outputs into one float32 matrix, so a replay costs one copy back to the
    host (one wait) instead of one per output; at batch 1 each wait is a visible share of the latency.
    """

    def __init__(self, engine: TorchEngine, example: torch.Tensor) -> None:
        self.engine = engine
        self.static_input = engine._prepare(example).clone()
        stream = torch.cuda.Stream(engine.device)
        stream.wait_stream(torch.cuda.current_stream(engine.device))
        with torch.cuda.stream(stream):
            for _ in range(3):  # autotune and settle allocations outside the capture
                engine._compute(self.static_input)
        torch.cuda.current_stream(engine.device).wait_stream(stream)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            outputs = engine._compute(self.static_input)
            n = self.static_input.shape[0]
            self.shapes = [tuple(t.shape) for t in outputs]
            self.packed = torch.cat([t.float().reshape(n, -1) for t in outputs], dim=1)

    def launch(self, crops: torch.Tensor) -> tuple[torch.Tensor, torch.cuda.Event]:
        """Replay on ``crops`` and queue the copy of the outputs to the host: (host buffer, its copy's event)."""
        x = crops.to(self.engine.device, non_blocking=True)
        if x.is_floating_point():
            self.static_input.copy_(x)
        else:  # uint8 0–255: one kernel converts, scales and lays out (float32 division, then rounded once)
            torch.div(x, 255, out=self.static_input)
        self.graph.replay()
        # A page-locked buffer per batch (PyTorch caches them): callers keep results across batches, and the
        # next replay may be queued before this copy is read.
        host = torch.empty(self.packed.shape, dtype=torch.float32, pin_memory=True)
        host.copy_(self.packed, non_blocking=True)
        copied = torch.cuda.Event()
        copied.record()
        return host, copied

    def unpack(self, host: torch.Tensor) -> list[torch.Tensor]:
        outputs, first = [], 0
        for shape in self.shapes:
            width = math.prod(shape[1:])
            outputs.append(host[:, first:first + width].reshape(shape))
            first += width
        return outputs




def create(model: EmoNet, options: EngineOptions, *, models_dir: str | Path | None = None,
           owns_model: bool = False, **_: object) -> TorchEngine:
    """The registry's factory: compiled kernels are cached under ``$EMOPIPE_CACHE`` or ``<models_dir>/cache``."""
    from emopipe.model.weights import cache_root

    return TorchEngine(model, options, cache_dir=cache_root(models_dir) if models_dir else None,
                       owns_model=owns_model)
