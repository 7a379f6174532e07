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
is stored there and later processes read it back instead of compiling it again.
``docs/benchmarks.md`` has what it gains on the whole engine.

The same plans on disk serve :func:`conv2d`, a plain convolution for BlazeFace's depthwise convolutions: through
PyTorch, cuDNN plans each new depthwise shape in every process (~40 ms a shape, 1.3 s of the detector's warm-up on
an H100, session 22); read back, a plan costs milliseconds.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import logging
import os
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

logger = logging.getLogger(__name__)

_DTYPES = (torch.float16, torch.bfloat16)


class Unsupported(Exception):
    """cuDNN has no engine for this convolution's graph (the caller runs the two-pass path)."""


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


def _cudnn_type(dtype: torch.dtype) -> Any:
    import cudnn

    return {torch.float16: cudnn.data_type.HALF, torch.bfloat16: cudnn.data_type.BFLOAT16,
            torch.float32: cudnn.data_type.FLOAT}[dtype]


def _signature(t: torch.Tensor) -> tuple:
    return tuple(t.shape), tuple(t.stride()), t.dtype


# Tensors are bound by fixed UIDs (and carry names), so a plan read back from disk binds like a built one.
_X, _WEIGHT, _RESIDUAL, _SCALE, _SHIFT, _NEXT_SCALE, _NEXT_SHIFT = range(1, 8)
_OUT, _ACT, _NEXT_ACT = 11, 12, 13
_CONV_UIDS = [_X, _WEIGHT, _OUT]  # conv2d's graph: image, weight, result


def _uids(affine: bool, following: bool) -> list[int]:
    """The graph's tensors in binding order: inputs, then outputs."""
    inputs = [_X, _WEIGHT, _RESIDUAL] + ([_SCALE, _SHIFT] if affine else [])
    inputs += [_NEXT_SCALE, _NEXT_SHIFT] if following else []
    return inputs + [_OUT] + ([_ACT] if affine else []) + ([_NEXT_ACT] if following else [])


def _build_graph(handle: Any, x: torch.Tensor, weight: torch.Tensor, residual: torch.Tensor, out: torch.Tensor,
                 affine: tuple[torch.Tensor, torch.Tensor] | None,
                 following: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None) -> Any:
    """Describe the fused graph and build cuDNN's plan for it (NVRTC compiles its kernel: ~65 ms a shape)."""
    import cudnn

    io = _cudnn_type(x.dtype)
    graph = cudnn.pygraph(io_data_type=io, intermediate_data_type=cudnn.data_type.FLOAT,
                          compute_data_type=cudnn.data_type.FLOAT, handle=handle)

    def operand(t: torch.Tensor, name: str, uid: int) -> Any:
        tensor = graph.tensor_like(t)
        tensor.set_name(name)
        tensor.set_uid(uid)
        return tensor

    def result(t: Any, name: str, uid: int, strides: list[int]) -> None:
        t.set_output(True).set_data_type(io).set_stride(strides)
        t.set_name(name)
        t.set_uid(uid)

    y = graph.conv_fprop(image=operand(x, "x", _X), weight=operand(weight, "weight", _WEIGHT), padding=[1, 1],
                         stride=[1, 1], dilation=[1, 1])
    summed = graph.add(a=y, b=operand(residual, "residual", _RESIDUAL))
    result(summed, "out", _OUT, list(out.stride()))
    if affine is not None:  # the next convolution's input, relu(y · scale + shift), dense channels_last
        scale, shift = operand(affine[0], "scale", _SCALE), operand(affine[1], "shift", _SHIFT)
        act = graph.relu(input=graph.bias(input=graph.scale(input=y, scale=scale), bias=shift))
        result(act, "act", _ACT, _channels_last_strides(_y_shape(x, weight)))
    if following is not None:  # the consuming block's relu(out · scale + shift), into its slice
        scale = operand(following[1], "next_scale", _NEXT_SCALE)
        shift = operand(following[2], "next_shift", _NEXT_SHIFT)
        nxt = graph.relu(input=graph.bias(input=graph.scale(input=summed, scale=scale), bias=shift))
        result(nxt, "next_act", _NEXT_ACT, list(following[0].stride()))
    return _built(graph)


def _built(graph: Any) -> Any:
    """``graph`` with cuDNN's plan built (NVRTC compiles a runtime-fused kernel here), or :class:`Unsupported`."""
    import cudnn

    try:
        graph.validate()
        graph.build_operation_graph()
        graph.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.B, cudnn.heur_mode.FALLBACK])
        graph.check_support()
        graph.build_plans()
    except Exception as exc:  # cudnnGraphNotSupportedError and kin: no engine for this graph here
        raise Unsupported(str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__) from exc
    return graph


def _build_conv_graph(handle: Any, x: torch.Tensor, weight: torch.Tensor, y: torch.Tensor, stride: list[int],
                      padding: list[int]) -> Any:
    """A convolution alone, groups given by the weight (one input channel a group: depthwise), no bias."""
    import cudnn

    io = _cudnn_type(x.dtype)
    graph = cudnn.pygraph(io_data_type=io, intermediate_data_type=cudnn.data_type.FLOAT,
                          compute_data_type=cudnn.data_type.FLOAT, handle=handle)
    image, kernel = graph.tensor_like(x), graph.tensor_like(weight)
    for tensor, name, uid in ((image, "x", _X), (kernel, "weight", _WEIGHT)):
        tensor.set_name(name)
        tensor.set_uid(uid)
    out = graph.conv_fprop(image=image, weight=kernel, padding=padding, stride=stride, dilation=[1, 1])
    out.set_output(True).set_data_type(io).set_stride(list(y.stride()))
    out.set_name("y")
    out.set_uid(_OUT)
    return _built(graph)


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


def _channels_last_strides(shape: tuple[int, int, int, int]) -> list[int]:
    _, c, h, w = shape
    return [h * w * c, 1, w * c, c]


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
    import cudnn

    props = torch.cuda.get_device_properties(device)
    return f"{props.name} sm{props.major}{props.minor} cudnn {cudnn.backend_version()} frontend {cudnn.__version__}"


def _plan_path(signature: tuple, device: torch.device) -> Path | None:
    if _cache_dir is None:
        return None
    digest = hashlib.sha256(f"{_environment(device)} {signature!r}".encode()).hexdigest()[:32]
    return _cache_dir / f"{digest}.plan"


def _read_plan(handle: Any, path: Path) -> Any | None:
    """The plan stored at ``path``, or None where there is none or it does not load (it is then rebuilt)."""
    import cudnn

    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        logger.info("cannot read the cuDNN plan %s (%s); building it", path, exc)
        return None
    try:
        graph = cudnn.pygraph(handle=handle)
        graph.deserialize(handle, list(data))  # (its binding takes a sequence of byte values, not bytes)
        return graph
    except Exception as exc:  # truncated, or from another cuDNN build: build it again and overwrite
        logger.info("the cuDNN plan %s does not load (%s); building it again", path,
                    str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__)
        return None


def _write_plan(graph: Any, path: Path) -> None:
    try:
        data = bytes(graph.serialize())
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path.parent, prefix=path.name, suffix=".tmp", delete=False) as tmp:
            tmp.write(data)
        os.replace(tmp.name, path)  # whole files only: another process may be reading this plan
    except Exception as exc:  # a read-only models folder, a full disk: only the next start is slower
        logger.info("cannot store the cuDNN plan %s (%s)", path, exc)


def _plan(signature: tuple, device: torch.device, uids: list[int], build: Callable[[Any], Any]) -> _Plan:
    """The plan for ``signature``: read back from the plan folder, else built (``build(handle)``) and stored."""
    handle = _handle(device)
    path = _plan_path(signature, device)
    graph = _read_plan(handle, path) if path is not None else None
    if graph is None:
        graph = build(handle)
        if path is not None:
            _write_plan(graph, path)
    return _Plan(graph, handle, uids)


_plans: dict[tuple, _Plan | Unsupported] = {}


def _process_plan(signature: tuple, device: torch.device, uids: list[int], build: Callable[[Any], Any],
                  unavailable: Callable[[Unsupported], None]) -> _Plan:
    """This process's plan for ``signature`` (:func:`_plan` at its first call). Where cuDNN has none (no engine for
    it here, or the frontend refused the graph), ``unavailable`` says so once, and every call raises
    :class:`Unsupported` for the caller's PyTorch path."""
    key = (device, *signature)
    plan = _plans.get(key)
    if plan is None:
        try:
            plan = _plan(signature, device, uids, build)
        except Exception as exc:
            plan = exc if isinstance(exc, Unsupported) else Unsupported(f"{type(exc).__name__}: {exc}")
            unavailable(plan)
        _plans[key] = plan
    if isinstance(plan, Unsupported):
        raise plan
    return plan


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
    plan = _process_plan(
        signature, x.device, _uids(affine is not None, following is not None),
        lambda handle: _build_graph(handle, x, weight, residual[:, part], out[:, part], affine, following),
        lambda why: logger.info("cuDNN epilogue fusion unavailable for %s → %s channels at %s×%s: %s; using the "
                                "Triton kernels there", x.shape[1], channels, x.shape[2], x.shape[3], why))
    act = torch.empty(_y_shape(x, weight), dtype=x.dtype, device=x.device,
                      memory_format=torch.channels_last) if affine is not None else None
    results = [out[:, part]] + ([act] if act is not None else []) + ([following[0]] if following is not None else [])
    plan.run(tensors, results)
    return act


def conv_applicable(x: torch.Tensor, weight: torch.Tensor) -> bool:
    """Whether :func:`conv2d` may try: CUDA, fp16/bf16, dense channels_last input, the frontend installed."""
    return (x.is_cuda and x.dtype in _DTYPES and weight.dtype == x.dtype and x.dim() == 4 and weight.dim() == 4
            and x.is_contiguous(memory_format=torch.channels_last) and not torch.compiler.is_compiling()
            and installed())


def conv2d(x: torch.Tensor, weight: torch.Tensor, stride: Sequence[int], padding: Sequence[int]) -> torch.Tensor:
    """``F.conv2d(x, weight, None, stride, padding, groups=x.shape[1] // weight.shape[1])`` through a cuDNN plan
    kept in the plan folder, the result dense channels_last. Raises :class:`Unsupported` where cuDNN cannot (the
    caller runs PyTorch's convolution)."""
    n, _, height, width = x.shape
    kernel_h, kernel_w = weight.shape[2:]
    steps, pads = [int(v) for v in stride], [int(v) for v in padding]
    shape = (n, weight.shape[0], (height + 2 * pads[0] - kernel_h) // steps[0] + 1,
             (width + 2 * pads[1] - kernel_w) // steps[1] + 1)
    y = torch.empty(shape, dtype=x.dtype, device=x.device, memory_format=torch.channels_last)
    signature = ("conv2d", tuple(steps), tuple(pads), _signature(x), _signature(weight), _signature(y))
    plan = _process_plan(
        signature, x.device, _CONV_UIDS, lambda handle: _build_conv_graph(handle, x, weight, y, steps, pads),
        lambda why: logger.info("cuDNN plan unavailable for a %s×%s convolution of %s channels at %s×%s: %s; "
                                "PyTorch's convolution runs there", kernel_h, kernel_w, x.shape[1], height, width, why))
    plan.run([x, weight], [y])
    return y
