"""ConvBlock convolutions that finish their block's glue in cuDNN's epilogue (CUDA, fp16/bf16, optional).

Each ConvBlock convolution's output y is only ever used three ways: added to a channel slice of the
residual into the block's output, passed through the next BatchNorm + ReLU as the next convolution's
input, and (for a block with a single consumer) through that consumer's first BatchNorm + ReLU.
Without this module a Triton kernel does that after the convolution (:func:`emopipe.model.kernels.add_residual_slice`),
so y is written once and read back once. Here the convolution does it itself: the cuDNN frontend's
graph API describes ``conv → add residual → out slice`` with the two activations as further outputs,
and cuDNN's runtime fusion engines run it as one kernel that never writes y. The sums are formed in
float32 and rounded once, where the two-pass path rounds y to fp16 first.

It needs the ``nvidia-cudnn-frontend`` package (the ``cudnn`` module, ``pip install emopipe[cudnn]``);
without it, or for a shape cuDNN has no engine for, the Triton kernels run as before. Plans are built
once per shape during the engine's warmup, before CUDA graph capture, and replayed inside the graphs;
with a cache folder set (:func:`use_plan_cache`; the engine uses ``<models>/cache/cudnn``) each built plan
is stored there and later processes read it back instead of compiling it again. Where plans are missing (a fresh
machine), a first pass finds them and builder processes build them side by side (:func:`plans_built_ahead`,
:mod:`emopipe.model.cudnn_plans`, which also describes and builds the graphs). ``docs/benchmarks.md`` has what it
gains on the whole engine.

The same plans on disk serve :func:`conv2d` (:func:`planned_conv` for a module): a convolution with its bias, a
residual and a ReLU as it writes, for the convolutions PyTorch would run — BlazeFace's depthwise and pointwise ones,
EmoNet's stem, downsampling and last convolutions. Through PyTorch, cuDNN sets up each new shape again in every
process (~40 ms a depthwise shape, 1.3 s of the detector's warm-up on an H100, session 22; ~0.1 s a shape with
autotuning); read back, a plan costs milliseconds.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import torch

from emopipe.model import cudnn_plans, early_plans
from emopipe.model.cudnn_plans import ConvSpec, EpilogueSpec, PlanSpec, TensorSpec, Unsupported

logger = logging.getLogger(__name__)

_DTYPES = (torch.float16, torch.bfloat16)
_DTYPE_NAMES = {torch.float16: "half", torch.bfloat16: "bfloat16", torch.float32: "float"}

__all__ = ["Unsupported", "applicable", "conv2d", "conv_add_slice", "conv_applicable", "installed",
           "planned_conv", "plans_built_ahead", "use_plan_cache"]


@functools.cache
def installed() -> bool:
    """Whether the cuDNN frontend imports here; a broken install is reported once and left out."""
    if importlib.util.find_spec("cudnn") is None:
        return False
    try:
        import cudnn  # noqa: F401
    except Exception as exc:  # e.g. a frontend that cannot load its cuDNN or CUDA bindings
        logger.warning("the cuDNN frontend is installed but does not load (%s); EmoNet's convolutions run without "
                       "its fused epilogue", exc)
        return False
    return True


def applicable(x: torch.Tensor, weight: torch.Tensor) -> bool:
    """Whether to try: CUDA, fp16/bf16, dense channels_last input, a 3×3 weight, the frontend installed."""
    return (x.is_cuda and x.dtype in _DTYPES and weight.dtype == x.dtype and x.dim() == 4
            and x.is_contiguous(memory_format=torch.channels_last) and tuple(weight.shape[2:]) == (3, 3)
            and not torch.compiler.is_compiling() and installed())


@functools.cache
def _handle(device: torch.device) -> Any:
    import cudnn

    with torch.cuda.device(device):
        return cudnn.create_handle()


def _signature(t: torch.Tensor) -> tuple:
    return tuple(t.shape), tuple(t.stride()), t.dtype


def _spec(t: torch.Tensor) -> TensorSpec:
    return TensorSpec(tuple(t.shape), tuple(t.stride()), _DTYPE_NAMES[t.dtype])


class _Plan:
    """One built (or read back) cuDNN graph and the UIDs its tensors bind to."""

    def __init__(self, graph: Any, handle: Any, uids: list[int]) -> None:
        self.graph, self.handle, self.uids = graph, handle, uids
        self.workspace_bytes = max(1, graph.get_workspace_size())

    def run(self, tensors: list[torch.Tensor], results: list[torch.Tensor]) -> None:
        import cudnn

        device = tensors[0].device
        cudnn.set_stream(self.handle, torch.cuda.current_stream(device).cuda_stream)
        workspace = torch.empty(self.workspace_bytes, dtype=torch.uint8, device=device)
        self.graph.execute(dict(zip(self.uids, tensors + results, strict=True)), workspace, handle=self.handle)


def _y_shape(x: torch.Tensor, weight: torch.Tensor) -> tuple[int, int, int, int]:
    return x.shape[0], weight.shape[0], x.shape[2], x.shape[3]


# -- plans on disk -------------------------------------------------------------------------------
# Building a plan compiles its fused kernel with NVRTC, every process: ~3 s of a warm start for EmoNet's
# 50 shapes at batch 1 + 256, seconds on a fresh machine (docs/benchmark-log.md). A serialized plan holds the
# compiled kernel, and reading one back takes milliseconds. Plans are only valid for the GPU model and the
# cuDNN they were built with, so those are part of each file's name.

_cache_dir: Path | None = None


def use_plan_cache(directory: str | Path | None) -> None:
    """Keep built plans in ``directory`` (created when first written) and read them back from there;
    ``None`` turns it off. The engine points it at ``<models>/cache/cudnn``."""
    global _cache_dir
    _cache_dir = Path(directory) if directory is not None else None


@functools.cache  # (asked once per plan: 50 at b1 + b256)
def _environment(device: torch.device) -> str:
    """What a serialized plan depends on besides its shapes: the GPU model and the cuDNN versions."""
    props = torch.cuda.get_device_properties(device)
    return cudnn_plans.environment(props.name, props.major, props.minor)


def _plan_path(signature: tuple, device: torch.device) -> Path | None:
    if _cache_dir is None:
        return None
    return cudnn_plans.plan_file(_cache_dir, _environment(device), repr(signature))


def plan_folder() -> Path | None:
    return _cache_dir


def plan_on_disk(signature: str, device: torch.device) -> bool:
    """Whether the plan of this signature's text is in the plan folder (built, where cuDNN has an engine for it)."""
    return _cache_dir is not None and cudnn_plans.plan_file(_cache_dir, _environment(device), signature).exists()


class _Noted(Exception):
    """Within :func:`plans_built_ahead`: a plan neither in this process nor on disk, noted to be built."""


# Within :func:`plans_built_ahead`, the thread's builders, where its missing plans go (another engine's thread
# meanwhile builds and runs its plans as always).
_pass = threading.local()


def _builders_here() -> cudnn_plans.PlanBuilders | None:
    return getattr(_pass, "builders", None)


def _plan(signature: tuple, device: torch.device, uids: list[int], spec: PlanSpec) -> _Plan:
    """The plan for ``signature``: read back from the plan folder, else built from ``spec`` and stored (within
    :func:`plans_built_ahead`: noted, :class:`_Noted`)."""
    handle = _handle(device)
    path = _plan_path(signature, device)
    graph = cudnn_plans.read(handle, path) if path is not None else None
    if graph is None and path is not None and _builders_here() is None and cudnn_plans.wait_for_early_build(
            path.parent):
        graph = cudnn_plans.read(handle, path)  # (built from the command's start: early_plans)
    if graph is None:
        builders = _builders_here()
        if builders is not None and path is not None:
            builders.add(path, spec)
            raise _Noted
        graph = cudnn_plans.build(handle, spec)
        if path is not None:
            cudnn_plans.write(graph, path)
    return _Plan(graph, handle, uids)


_plans: dict[tuple, _Plan | Unsupported] = {}
_recording: list[early_plans.Recipe] | None = None


@contextlib.contextmanager
def recorded_plans() -> Iterator[list[early_plans.Recipe]]:
    """Collect the plans this process's networks ask for, as recipes (``benchmarks/record_plan_recipes.py`` writes
    the ones a command builds from its start: :mod:`emopipe.model.early_plans`)."""
    global _recording
    _recording = recorded = []
    try:
        yield recorded
    finally:
        _recording = None


def _process_plan(signature: tuple, device: torch.device, uids: list[int], spec: PlanSpec,
                  unavailable: Callable[[Unsupported], None]) -> _Plan:
    """This process's plan for ``signature`` (:func:`_plan` at its first call). Where cuDNN has none (no engine for
    it here, or the frontend refused the graph), ``unavailable`` says so once, and every call raises
    :class:`Unsupported` for the caller's PyTorch path."""
    if _recording is not None:
        _recording.append(early_plans.Recipe(repr(signature), spec))
    key = (device, *signature)
    plan = _plans.get(key)
    if plan is None:
        try:
            plan = _plan(signature, device, uids, spec)
        except _Noted:
            raise
        except Exception as exc:
            plan = exc if isinstance(exc, Unsupported) else Unsupported(f"{type(exc).__name__}: {exc}")
            unavailable(plan)
        _plans[key] = plan
    if isinstance(plan, Unsupported):
        raise plan
    return plan


@contextlib.contextmanager
def plans_built_ahead(device: torch.device) -> Iterator[bool]:
    """Around one pass of a network, to build every plan it lacks at once before the warm-up runs it for real.

    Yields whether plans can be built ahead here (CUDA, the frontend installed, a plan folder: else the caller
    need not run the pass). Within, a plan neither in this process nor in the plan folder is handed to builder
    processes (:class:`cudnn_plans.PlanBuilders`, started as plans are found), and the call that needs it computes
    nothing (its results hold whatever memory held: the pass only finds the shapes); on leaving, the builders are
    waited for; they store their plans in the plan folder, from which the network's next pass reads them back
    (what a fresh machine gains: docs/benchmarks.md, "Start-up"). With every plan already on disk, the pass reads
    them back as the first pass would have, and nothing is built. Within another window on this thread, that one
    collects the plans found and waits for them as it ends (the networks' passes of one warm-up, built together)."""
    if _builders_here() is not None:
        yield True
        return
    if _cache_dir is None or device.type != "cuda" or not installed():
        yield False
        return
    _pass.builders = builders = cudnn_plans.PlanBuilders(device.index if device.index is not None else
                                                         torch.cuda.current_device())
    # (no plan at all: a fresh machine, every plan will be missing — unless they are being built since the start)
    if not any(_cache_dir.glob("*.plan")) and not cudnn_plans.early_build_underway(_cache_dir):
        builders.start()
    try:
        yield True
    except BaseException:
        builders.abandon()
        raise
    finally:
        _pass.builders = None
    builders.finish()


def conv_add_slice(x: torch.Tensor, weight: torch.Tensor, residual: torch.Tensor, out: torch.Tensor, first: int,
                   scale: torch.Tensor | None = None, shift: torch.Tensor | None = None,
                   next_act: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor | None:
    """y = conv3×3(x, weight) (padding 1, no bias), then what :func:`emopipe.model.kernels.add_residual_slice`
    does with y: out[:, first:first+C] = y + residual[:, first:first+C]; with scale and shift, returns
    relu(y · scale + shift); with ``next_act`` = (buffer, scale, shift), writes buffer[:, first:first+C] =
    relu(out · scale + shift) over those channels. Raises :class:`Unsupported` where cuDNN cannot."""
    channels = weight.shape[0]
    part = slice(first, first + channels)
    affine = (scale, shift) if scale is not None and shift is not None else None
    following = None
    if next_act is not None:
        following = (next_act[0][:, part], next_act[1][:, part], next_act[2][:, part])
    tensors = [x, weight, residual[:, part]]
    tensors += list(affine or ()) + list(following[1:] if following is not None else ())
    signature = (*(_signature(t) for t in tensors), _signature(out[:, part]),
                 following is not None and _signature(following[0]))
    spec = EpilogueSpec(
        *(_spec(t) for t in (x, weight, residual[:, part], out[:, part])),
        *((_spec(affine[0]), _spec(affine[1])) if affine is not None else (None, None)),
        *((_spec(following[0]), _spec(following[1]), _spec(following[2])) if following is not None else ()))
    act = torch.empty(_y_shape(x, weight), dtype=x.dtype, device=x.device,
                      memory_format=torch.channels_last) if affine is not None else None
    try:
        plan = _process_plan(
            signature, x.device, cudnn_plans.epilogue_uids(affine is not None, following is not None), spec,
            lambda why: logger.info("cuDNN epilogue fusion unavailable for %s → %s channels at %s×%s: %s; using the "
                                    "Triton kernels there", x.shape[1], channels, x.shape[2], x.shape[3], why))
    except _Noted:  # (a pass that finds the plans: nothing computed)
        return act
    results = [out[:, part]] + ([act] if act is not None else []) + ([following[0]] if following is not None else [])
    plan.run(tensors, results)
    return act


def conv_applicable(x: torch.Tensor, weight: torch.Tensor) -> bool:
    """Whether :func:`conv2d` may try: CUDA, fp16/bf16, dense channels_last input, the frontend installed."""
    return (x.is_cuda and x.dtype in _DTYPES and weight.dtype == x.dtype and x.dim() == 4 and weight.dim() == 4
            and x.is_contiguous(memory_format=torch.channels_last) and not torch.compiler.is_compiling()
            and installed())


def conv2d(x: torch.Tensor, weight: torch.Tensor, stride: Sequence[int], padding: Sequence[int],
           bias: torch.Tensor | None = None, residual: torch.Tensor | None = None,
           relu: bool = False) -> torch.Tensor:
    """``F.conv2d(x, weight, bias, stride, padding, groups=x.shape[1] // weight.shape[1])``, plus ``residual`` and
    a ReLU where given, through one cuDNN plan kept in the plan folder, the result dense channels_last (the bias and
    the residual added and the ReLU applied as the convolution writes). Raises :class:`Unsupported` where cuDNN
    cannot (the caller runs PyTorch's convolution)."""
    n, _, height, width = x.shape
    kernel_h, kernel_w = weight.shape[2:]
    steps, pads = [int(v) for v in stride], [int(v) for v in padding]
    shape = (n, weight.shape[0], (height + 2 * pads[0] - kernel_h) // steps[0] + 1,
             (width + 2 * pads[1] - kernel_w) // steps[1] + 1)
    if residual is not None and (tuple(residual.shape) != shape or residual.dtype != x.dtype
                                 or not residual.is_contiguous(memory_format=torch.channels_last)):
        raise Unsupported("the residual is not laid out as the result")
    if bias is not None and (bias.dtype != x.dtype or bias.numel() != shape[1]):
        raise Unsupported("the bias does not match the result")
    y = torch.empty(shape, dtype=x.dtype, device=x.device, memory_format=torch.channels_last)
    bias_4d = bias.view(1, -1, 1, 1) if bias is not None else None
    signature: tuple = ("conv2d", tuple(steps), tuple(pads), _signature(x), _signature(weight), _signature(y))
    signature += ((("bias", _signature(bias_4d)),) if bias_4d is not None else ())
    signature += ((("residual", _signature(residual)),) if residual is not None else ()) + (("relu",) if relu else ())
    spec = ConvSpec(_spec(x), _spec(weight), _spec(y), (steps[0], steps[1]), (pads[0], pads[1]),
                    _spec(bias_4d) if bias_4d is not None else None,
                    _spec(residual) if residual is not None else None, relu)
    try:
        plan = _process_plan(
            signature, x.device, cudnn_plans.conv_uids(bias is not None, residual is not None), spec,
            lambda why: logger.info("cuDNN plan unavailable for a %s×%s convolution of %s channels at %s×%s: %s; "
                                    "PyTorch's convolution runs there", kernel_h, kernel_w, x.shape[1], height, width,
                                    why))
    except _Noted:  # (a pass that finds the plans: nothing computed)
        return y
    inputs = [x, weight] + ([bias_4d] if bias_4d is not None else []) + ([residual] if residual is not None else [])
    plan.run(inputs, [y])
    return y


def planned_conv(conv: torch.nn.Conv2d, x: torch.Tensor, residual: torch.Tensor | None = None,
                 relu: bool = False) -> torch.Tensor | None:
    """``conv(x)`` [+ residual] [then ReLU] through :func:`conv2d`'s kept plan where it applies (CUDA, half
    precision, dense channels_last, zero padding given as numbers, no dilation); None where it does not, or where
    cuDNN has no plan: the caller runs PyTorch's convolution. Through PyTorch, cuDNN sets up and autotunes each new
    shape again in every process (0.47 s of EmoNet's first pass on an H200; BlazeFace's warm-up took 0.66–0.75 s
    against 0.39–0.45 s with its plans read back, session 30); a kept plan is read back in 1–15 ms (the first of an
    engine ~0.1 s while cuDNN loads it)."""
    if (conv.padding_mode != "zeros" or not isinstance(conv.padding, tuple) or conv.dilation != (1, 1)
            or not torch.backends.cudnn.enabled or not conv_applicable(x, conv.weight)):
        return None
    try:
        return conv2d(x, conv.weight, conv.stride, conv.padding, conv.bias, residual, relu)
    except Unsupported:
        return None
