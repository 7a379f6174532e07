"""What every engine is: the protocol the pipeline calls, the options it is built with, and the
per-slot outputs shared by the backends (probabilities, valence, arousal, landmarks from heatmaps)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import torch
import torch.nn.functional as F

from emopipe.errors import UsageError
from emopipe.model import cudnn_epilogue
from emopipe.model.devices import PRECISIONS as PRECISIONS  # (re-exported: the engines' precisions)
from emopipe.types import HEATMAP_SIZE, INPUT_SIZE, EngineOutput, WarmupReport


@dataclass(frozen=True)
class EngineOptions:
    """How to run EmoNet. ``None`` means: the fast choice for the device (see :meth:`resolved`)."""

    device: str = "auto"
    precision: str | None = None  # fp32 | fp16 | bf16; fp16 on CUDA, fp32 on CPU
    batch_size: int = 32
    cudnn_benchmark: bool = True
    channels_last: bool | None = None  # on for CUDA, and for fp16/bf16 on the CPU
    cuda_graphs: bool | None = None  # on for CUDA
    warmup: bool = True
    landmarks: bool = False  # also return 68 landmark positions from the heatmaps
    fuse: bool = True  # exact eval-time rewrites (emopipe.fusion): fewer memory passes, same function
    fp32_head: bool = True  # fused network in fp16/bf16: its final linear layers stay float32 (exact logits)
    kernels: bool = True  # fused network on CUDA: Triton kernels for its blocks' glue (emopipe.model.kernels)
    branch_streams: bool = True  # fused network on CUDA: hourglass branches run concurrently (side streams)
    # fused network on CUDA in fp16/bf16, where nvidia-cudnn-frontend is installed: each ConvBlock convolution
    # writes its residual slice and the next activations itself (emopipe.cudnn_epilogue)
    cudnn_epilogue: bool = True
    compile: str | None = None  # a torch.compile mode ("default", "max-autotune-no-cudagraphs"), or None

    def resolved(self, device: torch.device) -> EngineOptions:
        cuda = device.type == "cuda"
        precision = self.precision or ("fp16" if cuda else "fp32")
        if precision not in PRECISIONS:
            raise UsageError(f"unknown precision {precision!r}; choose from {', '.join(PRECISIONS)}")
        if self.batch_size < 1:
            raise UsageError(f"batch size must be at least 1, got {self.batch_size}")
        if self.compile is not None:
            check_compile_mode(self.compile)
        graphs = cuda if self.cuda_graphs is None else self.cuda_graphs
        if graphs and not cuda:
            raise UsageError("CUDA graphs need a CUDA device")
        return EngineOptions(
            device=str(device),
            precision=precision,
            batch_size=self.batch_size,
            cudnn_benchmark=self.cudnn_benchmark,
            # on the CPU too for fp16/bf16: oneDNN's reduced-precision convolutions want NHWC; an NCHW
            # fp16 convolution falls back to a reference loop ~50× slower than fp32
            channels_last=(cuda or precision != "fp32") if self.channels_last is None else self.channels_last,
            cuda_graphs=graphs,
            warmup=self.warmup,
            landmarks=self.landmarks,
            fuse=self.fuse,
            fp32_head=self.fp32_head,
            kernels=self.kernels and cuda,  # (Triton kernels run on CUDA only: say so in reports)
            branch_streams=self.branch_streams and cuda,  # (streams are a CUDA notion, likewise)
            cudnn_epilogue=self.cudnn_epilogue and cuda and precision != "fp32" and cudnn_epilogue.installed(),
            compile=self.compile,
        )


def check_compile_mode(mode: str) -> None:
    """UsageError unless ``mode`` is a mode torch.compile knows."""
    from torch._inductor import list_mode_options

    try:
        list_mode_options(mode)
    except RuntimeError:
        raise UsageError(f"unknown compile mode {mode!r}: a torch.compile mode (default, "
                         "max-autotune-no-cudagraphs, …)") from None


class Engine(Protocol):
    """What the pipeline and the command line need from a backend."""

    backend: str  # its registry name: "torch", "onnxruntime"
    options: EngineOptions  # resolved for the device
    batch_size: int
    device: torch.device
    labels: tuple[str, ...]
    num_classes: int
    warmup_report: WarmupReport | None

    def warmup(self, batch_sizes: Sequence[int] | None = None) -> WarmupReport: ...

    def infer(self, crops: torch.Tensor) -> EngineOutput: ...

    def info(self) -> dict[str, str]: ...


class PendingOutput:
    """A batch handed to an engine: :meth:`collect` gives its outputs on the host, waiting for the GPU only
    then. The pipeline launches the next batch before collecting this one, so the host crops and detects
    while EmoNet runs. Collect every pending batch (once is enough: later calls return the same outputs)."""

    def __init__(self, collect: Callable[[], EngineOutput]) -> None:
        self._collect: Callable[[], EngineOutput] | None = collect
        self._output: EngineOutput | None = None

    @classmethod
    def done(cls, output: EngineOutput) -> PendingOutput:
        return cls(lambda: output)

    def collect(self) -> EngineOutput:
        if self._collect is not None:
            collect, self._collect = self._collect, None
            self._output = collect()
        assert self._output is not None
        return self._output


def launch(engine: Engine, crops: torch.Tensor) -> PendingOutput:
    """Start EmoNet on ``crops`` without waiting where the engine can (``launch``: the torch engine's CUDA
    graphs); any other engine computes here and the result is ready at once."""
    start: Callable[[torch.Tensor], PendingOutput] | None = getattr(engine, "launch", None)
    return start(crops) if start is not None else PendingOutput.done(engine.infer(crops))


def landmarks_from_heatmaps(heatmap: torch.Tensor) -> torch.Tensor:
    """N×68×64×64 heatmaps → N×68×2 (x, y) in 256×256 crop pixels.

    The argmax cell, moved a quarter cell towards the higher neighbour (the face-alignment
    convention), then scaled from heatmap cells to crop pixels (cell centres).
    """
    n, k, h, w = heatmap.shape
    flat = heatmap.float().reshape(n, k, h * w)
    index = flat.argmax(dim=-1)
    y, x = index // w, index % w
    hm = heatmap.float()

    def at(yy: torch.Tensor, xx: torch.Tensor) -> torch.Tensor:
        return hm.reshape(n, k, h * w).gather(-1, (yy.clamp(0, h - 1) * w + xx.clamp(0, w - 1)).unsqueeze(-1))[..., 0]

    dx = torch.sign(at(y, x + 1) - at(y, x - 1)) * ((x > 0) & (x < w - 1))
    dy = torch.sign(at(y + 1, x) - at(y - 1, x)) * ((y > 0) & (y < h - 1))
    scale = INPUT_SIZE / HEATMAP_SIZE
    xs = (x.float() + 0.25 * dx + 0.5) * scale
    ys = (y.float() + 0.25 * dy + 0.5) * scale
    return torch.stack((xs, ys), dim=-1)


def network_outputs(model: torch.nn.Module, x: torch.Tensor, landmarks: bool) -> tuple[torch.Tensor, ...]:
    """What an engine returns per slot: probabilities, valence, arousal (float32) and optional landmarks."""
    out = model(x)
    results = [F.softmax(out.expression.float(), dim=1), out.valence.float(), out.arousal.float()]
    if landmarks and out.heatmap is not None:
        results.append(landmarks_from_heatmaps(out.heatmap))
    return tuple(results)
