"""Exact eval-time rewrites of EmoNet that move fewer bytes: the same function, fewer memory passes.

Three quarters of EmoNet's GPU time is memory-bound glue around the convolutions (BatchNorm,
ReLU, concatenation, residual adds, upsampling). These rewrites remove passes without changing
the arithmetic beyond floating-point rounding:

* a BatchNorm that directly follows a convolution or linear layer is folded into its weights
  (stem ``conv1``/``bn1``, ``conv_last{i}``/``bn_end{i}``, ``emo_fc_2`` linear/BatchNorm1d);
* each pre-activation BatchNorm + ReLU becomes one affine-then-clamp with precomputed scale/shift;
* ``cat(a, b, c) + residual`` writes the three sums straight into channel slices of one output
  instead of materialising the concatenation first;
* the hourglass's ``up + nearest_upsample(low)`` adds through a broadcast view instead of
  materialising the upsampled tensor;
* the attention concat writes its parts into one preallocated buffer;
* each 1×1 convolution with a bias is a matrix product with the bias in its epilogue (:class:`PointwiseConv`);
* on CUDA with Triton (:mod:`emopipe.model.kernels`), each BatchNorm + ReLU is one pass instead of two;
  each slice of the residual add also writes the next convolution's BatchNorm + ReLU input from the
  same read; 2×2 max pools, upsampled adds and (for single-consumer chains) residual slices also
  write the first BatchNorm + ReLU input of the block that consumes their result (:data:`Prepared`);
  the attention input and the head's last pool + average are one pass each;
* a ReLU applied straight to a convolution's output runs inside the convolution on CUDA
  (cuDNN's fused convolution + bias + activation, :class:`ConvReLU`); :func:`fuse_conv_relu` does
  the same for any traceable network (the S3FD detector's 19 pairs); :class:`ConvAddReLU` does it for a
  convolution whose output is added to a residual first (BlazeFace's blocks), and :func:`bias_pushed_forward`
  moves a depthwise convolution's bias into the 1×1 convolution after it.

One rewrite changes the schedule, not the arithmetic: on CUDA each hourglass level's upper branch
(``b1_L``, which needs only the level's input) runs on a side stream of its own, concurrently with the
lower branch (pool, ``b2_L``, the levels below, ``b3_L``); so do the stem blocks' downsampled
residuals beside their convolutions, and ``previous + bl0(f)`` beside ``al0(l0(f))`` between the
stacks — :class:`SideStreams`. At small batches one block's kernels
fill few of the GPU's SMs, so independent branches run side by side instead of in turn; the kernels
and their inputs are the same, so the outputs are bit-identical.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import itertools
import logging
from collections.abc import Iterator

import torch
import torch.fx as fx
import torch.nn.functional as F
from torch import nn

from emopipe.model import cudnn_epilogue, kernels
from emopipe.model.emonet import ConvBlock, EmoNet, EmotionOutput, HourGlass

logger = logging.getLogger(__name__)


def _bn_scale_shift(bn: nn.BatchNorm1d | nn.BatchNorm2d) -> tuple[torch.Tensor, torch.Tensor]:
    var = bn.running_var.double()
    scale = bn.weight.double() / torch.sqrt(var + bn.eps)
    shift = bn.bias.double() - bn.running_mean.double() * scale
    return scale, shift


@torch.no_grad()
def _fold_into(layer: nn.Conv2d | nn.Linear, bn: nn.BatchNorm1d | nn.BatchNorm2d) -> None:
    """layer ← bn ∘ layer, computed in float64."""
    scale, shift = _bn_scale_shift(bn)
    weight = layer.weight.double() * scale.view(-1, *([1] * (layer.weight.ndim - 1)))
    bias = layer.bias.double() if layer.bias is not None else torch.zeros_like(shift)
    layer.weight.copy_(weight.to(layer.weight.dtype))
    new_bias = (bias * scale + shift).to(layer.weight.dtype)
    if layer.bias is None:
        layer.bias = nn.Parameter(new_bias, requires_grad=False)
    else:
        layer.bias.copy_(new_bias)


class AffineReLU(nn.Module):
    """relu(x * scale + shift): an eval-mode BatchNorm followed by ReLU, in one expression."""

    def __init__(self, bn: nn.BatchNorm2d, use_kernels: bool = True) -> None:
        super().__init__()
        self.kernels = use_kernels
        scale, shift = _bn_scale_shift(bn)
        self.register_buffer("scale", scale.float().view(1, -1, 1, 1))
        self.register_buffer("shift", shift.float().view(1, -1, 1, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.kernels and kernels.applicable(x):
            return kernels.affine_relu(x, self.scale, self.shift)
        return torch.addcmul(self.shift, x, self.scale).clamp_(min=0)


class ConvReLU(nn.Module):
    """relu(conv(x)) as one cuDNN call on CUDA (the activation is applied before the result is
    written, so the separate ReLU pass over the output disappears); conv then ReLU elsewhere.
    ``planned``: in half precision through a cuDNN plan kept on disk (:func:`cudnn_epilogue.planned_conv`: read back
    in milliseconds where PyTorch sets up each shape again in every process) — for the networks it was measured on."""

    def __init__(self, conv: nn.Conv2d, planned: bool = False) -> None:
        super().__init__()
        if conv.padding_mode != "zeros" or isinstance(conv.padding, str):
            raise ValueError("ConvReLU takes convolutions with numeric zero padding")
        self.conv = conv
        self.planned = planned

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        c = self.conv
        y = cudnn_epilogue.planned_conv(c, x, relu=True) if self.planned else None
        if y is not None:
            return y
        if x.is_cuda and torch.backends.cudnn.enabled:
            return torch.cudnn_convolution_relu(x, c.weight, c.bias, c.stride, c.padding, c.dilation, c.groups)
        return F.relu(c(x))


class ConvAddReLU(nn.Module):
    """relu(conv(x) + z) — a convolution, its bias, a residual and the activation — as one cuDNN call on CUDA
    (the three element-wise passes over the output disappear); conv, add, ReLU in turn elsewhere. ``planned``: as
    :class:`ConvReLU`'s."""

    def __init__(self, conv: nn.Conv2d, planned: bool = False) -> None:
        super().__init__()
        if conv.padding_mode != "zeros" or isinstance(conv.padding, str):
            raise ValueError("ConvAddReLU takes convolutions with numeric zero padding")
        self.conv = conv
        self.planned = planned

    def forward(self, x: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        c = self.conv
        y = cudnn_epilogue.planned_conv(c, x, residual=z, relu=True) if self.planned else None
        if y is not None:
            return y
        if x.is_cuda and torch.backends.cudnn.enabled:
            return torch.cudnn_convolution_add_relu(x, c.weight, z, 1.0, c.bias, c.stride, c.padding, c.dilation,
                                                    c.groups)
        return F.relu(c(x) + z)


class PlannedConv(nn.Module):
    """``conv(x)``, in half precision on CUDA through a cuDNN plan kept on disk (as :class:`ConvReLU`'s)."""

    def __init__(self, conv: nn.Conv2d) -> None:
        super().__init__()
        self.conv = conv

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = cudnn_epilogue.planned_conv(self.conv, x)
        return self.conv(x) if y is None else y


@torch.no_grad()
def bias_pushed_forward(first: nn.Conv2d, pointwise: nn.Conv2d) -> tuple[nn.Conv2d, nn.Conv2d]:
    """Copies of ``first`` without its bias and of the 1×1 ``pointwise`` with that bias carried through it:
    ``pointwise(first(x))`` is unchanged (a bias is one constant a channel wherever it is added, padding
    included, and a 1×1 convolution maps constants to constants), but ``first`` no longer needs the pass
    that PyTorch spends adding a bias after cuDNN's convolution. Computed in float64; the inputs are untouched."""
    if pointwise.kernel_size != (1, 1) or pointwise.groups != 1 or pointwise.in_channels != first.out_channels:
        raise ValueError("the bias can only be carried through a 1×1 convolution without groups that follows")
    first, pointwise = copy.deepcopy(first), copy.deepcopy(pointwise)
    if first.bias is None:
        return first, pointwise
    carried = pointwise.weight.double().flatten(1) @ first.bias.double()
    if pointwise.bias is not None:
        carried += pointwise.bias.double()
    pointwise.bias = nn.Parameter(carried.to(pointwise.weight.dtype), requires_grad=False)
    first.bias = None
    return first, pointwise


class PointwiseConv(nn.Module):
    """A 1×1 convolution with bias, on channels_last input, as one matrix product with the bias added in
    its epilogue (cuBLASLt on CUDA): cuDNN adds a convolution's bias in a pass of its own over the output.
    A channels_last N×C×H×W tensor is an (N·H·W)×C matrix in memory, so no data moves to get there."""

    def __init__(self, conv: nn.Conv2d) -> None:
        super().__init__()
        if conv.kernel_size != (1, 1) or conv.stride != (1, 1) or conv.padding != (0, 0) or conv.groups != 1 \
                or conv.bias is None:
            raise ValueError("PointwiseConv takes 1×1 convolutions with a bias, stride 1, no padding, no groups")
        self.conv = conv

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not x.is_contiguous(memory_format=torch.channels_last) or x.shape[1] == 1:
            return self.conv(x)
        n, c, h, w = x.shape
        weight = self.conv.weight.view(self.conv.out_channels, c)
        y = F.linear(x.permute(0, 2, 3, 1).reshape(n * h * w, c), weight, self.conv.bias)
        return y.view(n, h, w, -1).permute(0, 3, 1, 2)  # N×C×H×W, channels_last in memory


def fuse_conv_relu(network: nn.Module) -> fx.GraphModule:
    """``network`` traced with torch.fx, each convolution whose only use is a ReLU turned into a
    :class:`ConvReLU`. Parameters are shared with ``network``, not copied."""
    graph = fx.symbolic_trace(network)
    modules = dict(graph.named_modules())
    fused = 0
    for node in list(graph.graph.nodes):
        # (in place or not: the convolution's output feeds nothing else, so no one sees the difference)
        is_relu = node.op == "call_function" and node.target in (F.relu, torch.relu) and len(node.args) == 1
        if not is_relu:
            continue
        conv = node.args[0]
        layer = modules.get(conv.target) if isinstance(conv, fx.Node) and conv.op == "call_module" else None
        if not isinstance(layer, nn.Conv2d) or len(conv.users) != 1 or layer.padding_mode != "zeros" \
                or isinstance(layer.padding, str):
            continue
        name = f"{conv.target.replace('.', '_')}_relu"
        graph.add_submodule(name, ConvReLU(layer))
        with graph.graph.inserting_after(node):
            fused_node = graph.graph.call_module(name, conv.args)
        node.replace_all_uses_with(fused_node)
        graph.graph.erase_node(node)
        graph.graph.erase_node(conv)
        fused += 1
    graph.delete_all_unused_submodules()
    graph.recompile()
    logger.debug("fused %d convolution → ReLU pairs in %s", fused, type(network).__name__)
    return graph


class SideStreams:
    """Side CUDA streams, one per concurrent branch, for work that may run beside the current stream.

    Memory stays safe across streams: a branch's input is marked as used on the side stream, and its
    result as used on the stream that joins it, so the caching allocator reuses neither block before
    both streams are done with it. Inside a CUDA graph capture, the fork and the join become edges of
    the graph: the branches are captured as parallel nodes.
    """

    def __init__(self) -> None:
        self._streams: dict[tuple[torch.device, int | str], torch.cuda.Stream] = {}

    @staticmethod
    def apply_to(x: torch.Tensor) -> bool:
        """Whether work on ``x`` can fork onto side streams: CUDA, outside a torch.compile trace."""
        return x.is_cuda and not torch.compiler.is_compiling()

    def stream(self, device: torch.device, branch: int | str) -> torch.cuda.Stream:
        key = (device, branch)
        if key not in self._streams:
            self._streams[key] = torch.cuda.Stream(device)
        return self._streams[key]

    @contextlib.contextmanager
    def branch(self, x: torch.Tensor, branch: int | str, *used: torch.Tensor) -> Iterator[torch.cuda.Stream]:
        """Queue the body's work on side stream ``branch`` once ``x`` (and all work queued so far) is
        ready; ``used``: other tensors the body reads there. :meth:`join` its results."""
        main = torch.cuda.current_stream(x.device)
        side = self.stream(x.device, branch)
        side.wait_stream(main)
        with torch.cuda.stream(side):
            yield side
        for t in (x, *used):
            t.record_stream(side)

    @staticmethod
    def join(y: torch.Tensor, side: torch.cuda.Stream | None) -> torch.Tensor:
        """``y`` (made on ``side``), usable on the current stream from here on (``side`` None: ran in place)."""
        if side is None:
            return y
        main = torch.cuda.current_stream(y.device)
        main.wait_stream(side)
        y.record_stream(main)
        return y

    def __deepcopy__(self, memo: dict) -> SideStreams:
        return SideStreams()  # streams belong to a process and a device, not to a copy of the network


@contextlib.contextmanager
def _beside(streams: SideStreams | None, x: torch.Tensor, branch: int | str,
            *used: torch.Tensor) -> Iterator[torch.cuda.Stream | None]:
    """The body on side stream ``branch`` where ``streams`` apply to ``x``, else in place (yields None);
    either way, :meth:`SideStreams.join` its results."""
    if streams is None or not SideStreams.apply_to(x):
        yield None
        return
    with streams.branch(x, branch, *used) as side:
        yield side


Prepared = tuple[torch.Tensor, torch.Tensor | None]  # a result, and its consumer's relu(bn1(·)) when written


class FusedConvBlock(nn.Module):
    def __init__(self, block: ConvBlock, use_kernels: bool = True, side_streams: SideStreams | None = None,
                 use_cudnn_epilogue: bool = True) -> None:
        super().__init__()
        self.kernels = use_kernels
        self.cudnn_epilogue = use_cudnn_epilogue  # where cuDNN's frontend is installed (emopipe.cudnn_epilogue)
        self.side_streams = side_streams  # CUDA: the downsampled residual beside the three convolutions
        self.act1, self.act2, self.act3 = (AffineReLU(bn, use_kernels) for bn in (block.bn1, block.bn2, block.bn3))
        self.conv1, self.conv2, self.conv3 = block.conv1, block.conv2, block.conv3
        self.downsample = None
        if block.downsample is not None:
            conv = block.downsample[2]
            self.downsample = nn.Sequential(AffineReLU(block.downsample[0], use_kernels),
                                            PlannedConv(conv) if use_cudnn_epilogue else conv)

    def forward(self, x: torch.Tensor, prepared: torch.Tensor | None = None) -> torch.Tensor:
        """``prepared``: relu(bn1(x)), where the kernel that produced x wrote it too (see :meth:`prepares`)."""
        return self.forward_prepared(x, prepared)[0]

    def forward_prepared(self, x: torch.Tensor, prepared: torch.Tensor | None = None,
                         consumer: FusedConvBlock | None = None) -> Prepared:
        """The block's output, and ``consumer``'s relu(bn1(output)) where the residual-slice kernels wrote
        it in the same pass (``consumer``: the one block that takes the output next)."""
        first = self.act1(x) if prepared is None else prepared
        if self.cudnn_epilogue and cudnn_epilogue.applicable(first, self.conv1.weight):
            try:
                return self._forward_cudnn_epilogue(x, first, consumer)
            except cudnn_epilogue.Unsupported:  # no cuDNN engine for one of its shapes: the two-pass path
                pass
        if self.kernels and kernels.applicable(x):
            return self._forward_kernels(x, first, consumer)
        a = self.conv1(first)
        b = self.conv2(self.act2(a))
        c = self.conv3(self.act3(b))
        residual = x if self.downsample is None else self.downsample(x)
        out = torch.empty_like(residual)
        ha, hb = a.shape[1], a.shape[1] + b.shape[1]
        torch.add(a, residual[:, :ha], out=out[:, :ha])
        torch.add(b, residual[:, ha:hb], out=out[:, ha:hb])
        torch.add(c, residual[:, hb:], out=out[:, hb:])
        return out, None

    def prepares(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The scale and shift of relu(bn1(x)), for the kernel producing x to write it in the same pass."""
        return self.act1.scale, self.act1.shift

    def _forward_cudnn_epilogue(self, x: torch.Tensor, first: torch.Tensor,
                                consumer: FusedConvBlock | None) -> Prepared:
        """The same, each convolution writing its residual slice and the next activations itself."""
        residual, side = x, None
        if self.downsample is not None:
            with _beside(self.side_streams, x, "downsample") as side:
                residual = self.downsample(x)
        residual = SideStreams.join(residual, side)  # (the first convolution reads it now)
        out = torch.empty_like(residual)
        following = (torch.empty_like(residual), *consumer.prepares()) if consumer is not None else None
        conv = cudnn_epilogue.conv_add_slice
        a = conv(first, self.conv1.weight, residual, out, 0, self.act2.scale, self.act2.shift, following)
        first_b = self.conv1.weight.shape[0]
        b = conv(a, self.conv2.weight, residual, out, first_b, self.act3.scale, self.act3.shift, following)
        conv(b, self.conv3.weight, residual, out, first_b + self.conv2.weight.shape[0], next_act=following)
        return out, following[0] if following is not None else None

    def _forward_kernels(self, x: torch.Tensor, first: torch.Tensor, consumer: FusedConvBlock | None) -> Prepared:
        """The same, with each residual slice written by the kernel that also prepares the next input."""
        residual, side = x, None
        if self.downsample is not None:
            with _beside(self.side_streams, x, "downsample") as side:
                residual = self.downsample(x)
        a = self.conv1(first)
        residual = SideStreams.join(residual, side)
        out = torch.empty_like(residual)
        following = (torch.empty_like(residual), *consumer.prepares()) if consumer is not None else None
        b = self.conv2(kernels.add_residual_slice(a, residual, out, 0, self.act2.scale, self.act2.shift, following))
        c = self.conv3(kernels.add_residual_slice(b, residual, out, a.shape[1], self.act3.scale, self.act3.shift,
                                                  following))
        kernels.add_residual_slice(c, residual, out, a.shape[1] + b.shape[1], next_act=following)
        return out, following[0] if following is not None else None


def _add_upsampled(up: torch.Tensor, low: torch.Tensor, use_kernels: bool,
                   consumer: FusedConvBlock | None = None) -> Prepared:
    """up + nearest_upsample×2(low), with no upsampled tensor in memory: one Triton pass on CUDA (which
    also writes ``consumer``'s first BatchNorm + ReLU), else through a broadcast view."""
    if use_kernels and kernels.applicable(up, low):
        return kernels.add_upsampled(up, low, *(consumer.prepares() if consumer is not None else ()))
    n, c, h, w = up.shape
    return (up.view(n, c, h // 2, 2, w // 2, 2) + low.view(n, c, h // 2, 1, w // 2, 1)).view(n, c, h, w), None


def _pool_kernel_takes(x: torch.Tensor, use_kernels: bool) -> bool:
    return use_kernels and x.shape[2] % 2 == 0 and x.shape[3] % 2 == 0 and kernels.applicable(x)


def _max_pool(x: torch.Tensor, use_kernels: bool, consumer: FusedConvBlock | None = None) -> Prepared:
    """2×2 max pool, stride 2: one Triton pass on CUDA (PyTorch's channels_last pool is ~4× off bandwidth),
    which also writes ``consumer``'s first BatchNorm + ReLU."""
    if _pool_kernel_takes(x, use_kernels):
        return kernels.max_pool2x2(x, *(consumer.prepares() if consumer is not None else ()))
    return F.max_pool2d(x, 2, stride=2), None


class FusedHourGlass(nn.Module):
    def __init__(self, hourglass: HourGlass, use_kernels: bool = True, side_streams: SideStreams | None = None,
                 use_cudnn_epilogue: bool = True) -> None:
        super().__init__()
        self.kernels = use_kernels
        make_block = functools.partial(FusedConvBlock, use_kernels=use_kernels, side_streams=side_streams,
                                       use_cudnn_epilogue=use_cudnn_epilogue)
        self.depth = hourglass.depth
        self.blocks = nn.ModuleDict({name: make_block(block) for name, block in hourglass.named_children()})
        self.side_streams = side_streams  # CUDA: each level's upper branch beside its lower one

    def _level(self, level: int, t: torch.Tensor, consumer: FusedConvBlock | None) -> Prepared:
        with _beside(self.side_streams, t, level) as side:
            up = self.blocks[f"b1_{level}"](t)
        b2, b3 = self.blocks[f"b2_{level}"], self.blocks[f"b3_{level}"]
        if level > 1:
            low = self._level(level - 1, b2(*_max_pool(t, self.kernels, b2)), b3)
        else:  # b2_1 → b2_plus_1 → b3_1: each output has one consumer, which its kernels prepare for
            plus = self.blocks["b2_plus_1"]
            low = plus.forward_prepared(*b2.forward_prepared(*_max_pool(t, self.kernels, b2), plus), b3)
        low = b3(*low)  # (before the join: the main stream must not wait for b1_L any sooner)
        return _add_upsampled(SideStreams.join(up, side), low, self.kernels, consumer)

    def forward(self, x: torch.Tensor, consumer: FusedConvBlock | None = None) -> Prepared:
        """The hourglass's output, and ``consumer``'s relu(bn1(output)) where the last kernel wrote it."""
        return self._level(self.depth, x, consumer)


class FusedEmoNet(nn.Module):
    """EmoNet for inference only, with the rewrites above. Build it with :func:`fuse`."""

    def __init__(self, model: EmoNet, use_kernels: bool = True, branch_streams: bool = True,
                 use_cudnn_epilogue: bool = True, in_place: bool = False) -> None:
        super().__init__()
        model = (model if in_place else copy.deepcopy(model)).eval()
        side_streams = SideStreams() if branch_streams else None
        block = functools.partial(FusedConvBlock, use_kernels=use_kernels, side_streams=side_streams,
                                  use_cudnn_epilogue=use_cudnn_epilogue)
        self.kernels = use_kernels
        self.side_streams = side_streams
        self.num_classes = model.num_classes
        self.labels = model.labels
        _fold_into(model.conv1, model.bn1)
        self.stem = ConvReLU(model.conv1, planned=use_cudnn_epilogue)
        self.conv2, self.conv3, self.conv4 = (block(b) for b in (model.conv2, model.conv3, model.conv4))
        self.hourglasses = nn.ModuleList()
        self.tops = nn.ModuleList()
        self.lasts = nn.ModuleList()
        self.heads = nn.ModuleList()
        for i in range(model.num_stacks):
            last = model.get_submodule(f"conv_last{i}")
            _fold_into(last, model.get_submodule(f"bn_end{i}"))
            self.hourglasses.append(FusedHourGlass(model.get_submodule(f"m{i}"), use_kernels, side_streams,
                                                   use_cudnn_epilogue))
            self.tops.append(block(model.get_submodule(f"top_m_{i}")))
            self.lasts.append(ConvReLU(last, planned=use_cudnn_epilogue))
            self.heads.append(PointwiseConv(model.get_submodule(f"l{i}")))
        self.bl0, self.al0 = PointwiseConv(model.bl0), PointwiseConv(model.al0)
        self.emotion_input = PointwiseConv(model.conv1x1_input_emo_2)
        self.emotion_blocks = nn.ModuleList(block(m) for m in model.emo_net_2 if isinstance(m, ConvBlock))
        fc = model.emo_fc_2
        _fold_into(fc[0], fc[1])
        self.fc1, self.fc2 = fc[0], fc[3]

    def _pooled_features(self, y: torch.Tensor) -> torch.Tensor:
        """The mean over the map of the last 2×2 max pool, N×C: one Triton pass on CUDA."""
        if _pool_kernel_takes(y, self.kernels):
            return kernels.max_pool_mean(y)
        return F.adaptive_avg_pool2d(F.max_pool2d(y, 2, stride=2), 1).flatten(1)

    def _attention_input(self, x: torch.Tensor, features: list[torch.Tensor], mask: torch.Tensor) -> torch.Tensor:
        """concat(x, f_0 · mask, f_1 · mask), written part by part into one buffer (one pass on CUDA)."""
        if self.kernels and len(features) == 2 and kernels.applicable(x, *features):
            return kernels.attention_input(x, *features, mask)
        n, c, h, w = x.shape
        out = torch.empty((n, c * (1 + len(features)), h, w), dtype=x.dtype, device=x.device,
                          memory_format=_format_of(x))
        out[:, :c] = x
        for i, f in enumerate(features, 1):
            torch.mul(f, mask, out=out[:, i * c:(i + 1) * c])
        return out

    def forward(self, x: torch.Tensor) -> EmotionOutput:
        x = self.stem(x)
        x = self.conv4(*self.conv3.forward_prepared(*_max_pool(self.conv2(x), self.kernels, self.conv3), self.conv4))
        previous, features, heatmap = x, [], x
        last = len(self.hourglasses) - 1
        for i, (hourglass, top, conv_last, head) in enumerate(zip(self.hourglasses, self.tops, self.lasts,
                                                                  self.heads)):
            f = conv_last(top(*hourglass(previous, top)))  # ReLU included
            if i < last:  # previous + bl0(f) beside heatmap → al0 (the path the next hourglass waits for)
                with _beside(self.side_streams, f, "junction", previous) as side:
                    f_out = self.bl0(f)
                    partial = previous + f_out
            heatmap = head(f)
            if i < last:
                from_heatmap = self.al0(heatmap)  # queued before the join, so it runs beside the side stream
                previous = SideStreams.join(partial, side) + from_heatmap
                f = SideStreams.join(f_out, side)
            features.append(f)
        mask = heatmap.sum(dim=1, keepdim=True)
        y = self.emotion_input(self._attention_input(x, features, mask))
        prepared = None
        blocks = list(self.emotion_blocks)
        for block, after in itertools.pairwise(blocks):
            y, prepared = _max_pool(block(y, prepared), self.kernels, after)
        pooled = self._pooled_features(blocks[-1](y, prepared)).to(self.fc1.weight.dtype)
        y = self.fc2(F.relu(self.fc1(pooled)))
        k = self.num_classes
        return EmotionOutput(expression=y[:, :k], valence=y[:, k], arousal=y[:, k + 1], heatmap=heatmap)


def keep_head_in_float32(model: torch.nn.Module) -> None:
    """After the network was cast to fp16/bf16: its two final linear layers (256 → 128 → classes + 2)
    back to float32. They cost nothing next to the convolutions, and in half precision they would
    round the logits to steps of 0.004–0.008 (fp16 at magnitudes 4–8), enough to swap near-tied
    classes; valence and arousal come out of the same layer."""
    if isinstance(model, FusedEmoNet):
        model.fc1.float()
        model.fc2.float()


def _format_of(x: torch.Tensor) -> torch.memory_format:
    return torch.channels_last if x.is_contiguous(memory_format=torch.channels_last) and x.shape[1] > 1 \
        else torch.contiguous_format


def fuse(model: EmoNet, use_kernels: bool = True, branch_streams: bool = True,
         use_cudnn_epilogue: bool = True, in_place: bool = False) -> FusedEmoNet:
    """An inference-only copy of ``model`` computing the same function with fewer memory passes;
    ``use_kernels``: Triton kernels for the blocks' glue where they apply (:mod:`emopipe.model.kernels`);
    ``branch_streams``: on CUDA, the hourglasses' independent branches run concurrently (:class:`SideStreams`);
    ``use_cudnn_epilogue``: on CUDA in fp16/bf16, the ConvBlock convolutions do that glue in cuDNN's
    epilogue where its frontend is installed (:mod:`emopipe.cudnn_epilogue`); ``in_place``: no copy, ``model``'s
    layers are rewritten and reused (a model built for this alone: copying EmoNet took 0.5 s of a GPU host's
    start-up)."""
    return FusedEmoNet(model, use_kernels, branch_streams, use_cudnn_epilogue, in_place).eval().requires_grad_(False)
