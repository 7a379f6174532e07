"""ConvBlock convolutions that finish their block's glue in cuDNN's epilogue (CUDA, fp16/bf16, optional).

Each ConvBlock convolution's output y is only ever used three ways: added to a channel slice of the
residual into the block's output, passed through the next BatchNorm + ReLU as the next convolution's
input, and (for a block with a single consumer) through that consumer's first BatchNorm + ReLU.
Without this module a Triton kernel does that after the convolution (:func:`emopipe.kernels.add_residual_slice`),
so y is written once and read back once. Here the convolution does it itself: the cuDNN frontend's
graph API describes ``conv → add residual → out slice`` with the two activations as further outputs,
and cuDNN's runtime fusion engines run it as one kernel that never writes y. The sums are formed in
float32 and rounded once, where the two-pass path rounds y to fp16 first.

It needs the ``nvidia-cudnn-frontend`` package (the ``cudnn`` module, ``pip install emopipe[cudnn]``);
without it, or for a shape cuDNN has no engine for, the Triton kernels run as before. Plans are built
once per shape during the engine's warmup, before CUDA graph capture, and replayed inside the graphs.
``scripts/cudnn_epilogue_probe.py`` measures each shape alone; ``docs/benchmarks.md`` the whole engine.
"""

from __future__ import annotations

import functools
import importlib.util
import logging
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


class _Plan:
    """One built cuDNN graph and the order its tensors are bound in."""

    def __init__(self, x: torch.Tensor, weight: torch.Tensor, residual: torch.Tensor, out: torch.Tensor,
                 affine: tuple[torch.Tensor, torch.Tensor] | None,
                 following: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None) -> None:
        import cudnn

        io = _cudnn_type(x.dtype)
        self.handle = _handle(x.device)
        graph = cudnn.pygraph(io_data_type=io, intermediate_data_type=cudnn.data_type.FLOAT,
                              compute_data_type=cudnn.data_type.FLOAT, handle=self.handle)
        inputs = [graph.tensor_like(x), graph.tensor_like(weight), graph.tensor_like(residual)]
        y = graph.conv_fprop(image=inputs[0], weight=inputs[1], padding=[1, 1], stride=[1, 1], dilation=[1, 1])
        summed = graph.add(a=y, b=inputs[2])
        summed.set_output(True).set_data_type(io).set_stride(list(out.stride()))
        outputs = [summed]
        if affine is not None:  # the next convolution's input, relu(y · scale + shift), dense channels_last
            scale, shift = graph.tensor_like(affine[0]), graph.tensor_like(affine[1])
            inputs += [scale, shift]
            act = graph.relu(input=graph.bias(input=graph.scale(input=y, scale=scale), bias=shift))
            act.set_output(True).set_data_type(io).set_stride(_channels_last_strides(_y_shape(x, weight)))
            outputs.append(act)
        if following is not None:  # the consuming block's relu(out · scale + shift), into its slice
            scale, shift = graph.tensor_like(following[1]), graph.tensor_like(following[2])
            inputs += [scale, shift]
            nxt = graph.relu(input=graph.bias(input=graph.scale(input=summed, scale=scale), bias=shift))
            nxt.set_output(True).set_data_type(io).set_stride(list(following[0].stride()))
            outputs.append(nxt)
        try:
            graph.validate()
            graph.build_operation_graph()
            graph.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.B, cudnn.heur_mode.FALLBACK])
            graph.check_support()
            graph.build_plans()
        except Exception as exc:  # cudnnGraphNotSupportedError and kin: no engine for this graph here
            raise Unsupported(str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__) from exc
        self.graph, self.inputs, self.outputs = graph, inputs, outputs
        self.workspace_bytes = max(1, graph.get_workspace_size())

    def run(self, tensors: list[torch.Tensor], results: list[torch.Tensor]) -> None:
        import cudnn

        device = tensors[0].device
        cudnn.set_stream(self.handle, torch.cuda.current_stream(device).cuda_stream)
        workspace = torch.empty(self.workspace_bytes, dtype=torch.uint8, device=device)
        bindings = dict(zip(self.inputs, tensors, strict=True))
        bindings.update(zip(self.outputs, results, strict=True))
        self.graph.execute(bindings, workspace, handle=self.handle)


def _y_shape(x: torch.Tensor, weight: torch.Tensor) -> tuple[int, int, int, int]:
    return x.shape[0], weight.shape[0], x.shape[2], x.shape[3]


def _channels_last_strides(shape: tuple[int, int, int, int]) -> list[int]:
    _, c, h, w = shape
    return [h * w * c, 1, w * c, c]


_plans: dict[tuple, _Plan | Unsupported] = {}


def conv_add_slice(x: torch.Tensor, weight: torch.Tensor, residual: torch.Tensor, out: torch.Tensor, first: int,
                   scale: torch.Tensor | None = None, shift: torch.Tensor | None = None,
                   next_act: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor | None:
    """y = conv3×3(x, weight) (padding 1, no bias), then what :func:`emopipe.kernels.add_residual_slice`
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
    key = (x.device, *(_signature(t) for t in tensors), _signature(out[:, part]),
           following is not None and _signature(following[0]))
    plan = _plans.get(key)
    if plan is None:
        try:
            plan = _Plan(x, weight, residual[:, part], out[:, part], affine, following)
        except Exception as exc:  # no engine for it here, or the frontend refused the graph: the two-pass path
            plan = exc if isinstance(exc, Unsupported) else Unsupported(f"{type(exc).__name__}: {exc}")
            logger.info("cuDNN epilogue fusion unavailable for %s → %s channels at %s×%s: %s; using the Triton "
                        "kernels there", x.shape[1], channels, x.shape[2], x.shape[3], plan)
        _plans[key] = plan
    if isinstance(plan, Unsupported):
        raise plan
    act = torch.empty(_y_shape(x, weight), dtype=x.dtype, device=x.device,
                      memory_format=torch.channels_last) if affine is not None else None
    results = [out[:, part]] + ([act] if act is not None else []) + ([following[0]] if following is not None else [])
    plan.run(tensors, results)
    return act
