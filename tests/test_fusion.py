"""The fused inference rewrite computes the published function (eval mode), in both memory formats."""

from __future__ import annotations

import contextlib
import inspect
from typing import ClassVar

import pytest
import torch

from emopipe.model import fusion
from emopipe.model.emonet import build_emonet
from emopipe.model.fusion import (
    ConvAddReLU,
    ConvReLU,
    FusedEmoNet,
    PointwiseConv,
    bias_pushed_forward,
    fuse,
    fuse_conv_relu,
)
from tests.support.checkpoints import random_state


@pytest.mark.parametrize("classes", [8, 5])
def test_fused_model_matches_the_reference(classes):
    reference = build_emonet(random_state(classes, seed=3))
    fused = fuse(reference)
    assert isinstance(fused, FusedEmoNet) and fused.labels == reference.labels
    x = torch.rand(2, 3, 256, 256)
    with torch.inference_mode():
        want = reference(x)
        for memory_format in (torch.contiguous_format, torch.channels_last):
            got = fused.to(memory_format=memory_format)(x.contiguous(memory_format=memory_format))
            for name in ("expression", "valence", "arousal", "heatmap"):
                torch.testing.assert_close(getattr(got, name), getattr(want, name), atol=2e-5, rtol=1e-4)


def test_fusion_leaves_the_source_model_untouched():
    reference = build_emonet(random_state(8))
    before = {k: v.clone() for k, v in reference.state_dict().items()}
    fuse(reference)
    after = reference.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)


def test_fusion_in_place_computes_the_same_function_without_a_copy(monkeypatch):
    """An engine's own model is fused in place (no 0.5 s deep copy at start-up): the same function as the copy's."""
    state = random_state(8, seed=5)
    copied = fuse(build_emonet(state))
    source = build_emonet(state)
    copies: list[object] = []
    monkeypatch.setattr(fusion.copy, "deepcopy", lambda *args: copies.append(args) or args[0])
    in_place = fuse(source, in_place=True)
    assert copies == []
    assert in_place.stem.conv.weight.data_ptr() == source.conv1.weight.data_ptr()  # the source's layer, folded
    x = torch.rand(2, 3, 256, 256)
    with torch.inference_mode():
        want, got = copied(x), in_place(x)
    for name in ("expression", "valence", "arousal", "heatmap"):
        torch.testing.assert_close(getattr(got, name), getattr(want, name), atol=0, rtol=0)


def test_an_engine_copies_a_model_it_was_given_and_rewrites_one_built_for_it():
    from emopipe.engines.base import EngineOptions
    from emopipe.engines.torch_engine import TorchEngine

    options = EngineOptions(device="cpu", precision="fp32", warmup=False)
    given = build_emonet(random_state(8, seed=6))
    before = {k: v.clone() for k, v in given.state_dict().items()}
    TorchEngine(given, options)
    assert all(torch.equal(before[k], v) for k, v in given.state_dict().items())
    owned = build_emonet(random_state(8, seed=6))
    TorchEngine(owned, options, owns_model=True)
    assert not torch.equal(before["conv1.weight"], owned.conv1.weight)  # batch norm folded into it, in place


def test_fused_model_has_no_batchnorm_left_to_run():
    fused = fuse(build_emonet(classes=8))
    assert not any(isinstance(m, (torch.nn.BatchNorm1d, torch.nn.BatchNorm2d)) for m in fused.modules())


class _ConvNet(torch.nn.Module):
    """conv→ReLU pairs of several geometries, and one convolution whose output is also used raw."""

    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.b = torch.nn.Conv2d(8, 8, 3, stride=2, padding=2, dilation=2)
        self.c = torch.nn.Conv2d(8, 8, 1, bias=False)
        self.d = torch.nn.Conv2d(8, 4, 3, padding=1, groups=4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.nn.functional.relu(self.a(x))
        x = torch.nn.functional.relu(self.b(x), inplace=True)
        raw = self.c(x)
        y = torch.nn.functional.relu(raw) + raw  # raw is needed too: this pair must stay apart
        return torch.nn.functional.relu(self.d(y))


def test_conv_relu_rewrite_fuses_only_pairs_whose_convolution_feeds_nothing_else():
    net = _ConvNet().eval()
    fused = fuse_conv_relu(net)
    kinds = {name: type(m).__name__ for name, m in fused.named_children()}
    assert sorted(k for k, v in kinds.items() if v == "ConvReLU") == ["a_relu", "b_relu", "d_relu"]
    assert kinds["c"] == "Conv2d"
    x = torch.randn(2, 3, 20, 20)
    with torch.inference_mode():
        torch.testing.assert_close(fused(x), net(x))
    assert fused.a_relu.conv.weight is net.a.weight  # parameters shared, not copied


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (cuDNN's fused convolution)")
def test_conv_relu_on_cuda_matches_conv_then_relu():
    net = _ConvNet().eval().cuda()
    fused = fuse_conv_relu(net)
    x = torch.randn(2, 3, 20, 20, device="cuda")
    with torch.inference_mode():
        torch.testing.assert_close(fused(x), net(x), atol=1e-4, rtol=1e-3)


def test_conv_relu_refuses_padding_it_cannot_pass_to_cudnn():
    with pytest.raises(ValueError, match="zero padding"):
        ConvReLU(torch.nn.Conv2d(3, 3, 3, padding=1, padding_mode="reflect"))


def test_pointwise_conv_is_the_convolution_as_a_matrix_product():
    conv = torch.nn.Conv2d(24, 40, 1).eval()
    layer = PointwiseConv(conv)
    x = torch.randn(3, 24, 5, 7)
    with torch.inference_mode():
        want = conv(x)
        got = layer(x.contiguous(memory_format=torch.channels_last))  # the matrix-product path
        assert got.is_contiguous(memory_format=torch.channels_last)
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(layer(x), want)  # NCHW input: the convolution itself
    with pytest.raises(ValueError, match="1×1"):
        PointwiseConv(torch.nn.Conv2d(24, 40, 3))


def _depthwise_then_pointwise(seed: int = 0) -> tuple[torch.nn.Conv2d, torch.nn.Conv2d]:
    torch.manual_seed(seed)
    depthwise, pointwise = torch.nn.Conv2d(6, 6, 3, padding=1, groups=6), torch.nn.Conv2d(6, 10, 1)
    with torch.no_grad():  # biases far from zero, so a bias lost or doubled shows
        depthwise.bias.uniform_(-3, 3)
        pointwise.bias.uniform_(-3, 3)
    return depthwise.eval(), pointwise.eval()


def test_a_bias_pushed_through_the_pointwise_convolution_computes_the_same_function():
    depthwise, pointwise = _depthwise_then_pointwise()
    before = [t.clone() for t in (depthwise.weight, depthwise.bias, pointwise.weight, pointwise.bias)]
    first, second = bias_pushed_forward(depthwise, pointwise)
    assert first.bias is None and second.bias is not None
    x = torch.randn(2, 6, 9, 7)
    with torch.inference_mode():
        torch.testing.assert_close(second(first(x)), pointwise(depthwise(x)), atol=1e-5, rtol=1e-5)
    for kept, was in zip((depthwise.weight, depthwise.bias, pointwise.weight, pointwise.bias), before, strict=True):
        assert torch.equal(kept, was)  # the originals untouched
    with pytest.raises(ValueError, match="1×1"):
        bias_pushed_forward(depthwise, torch.nn.Conv2d(6, 10, 3))


def test_conv_add_relu_adds_the_residual_before_the_activation():
    conv = torch.nn.Conv2d(6, 6, 1).eval()
    layer = ConvAddReLU(conv)
    x, z = torch.randn(2, 6, 5, 5), torch.randn(2, 6, 5, 5) * 3
    with torch.inference_mode():
        want = torch.relu(conv(x) + z)
        torch.testing.assert_close(layer(x, z), want)
        assert not torch.equal(want, torch.relu(conv(x)) + z)  # the order matters for these inputs
    with pytest.raises(ValueError, match="zero padding"):
        ConvAddReLU(torch.nn.Conv2d(3, 3, 3, padding=1, padding_mode="reflect"))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (cuDNN's fused convolution)")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_conv_add_relu_on_cuda_matches_its_parts(dtype):
    depthwise, pointwise = _depthwise_then_pointwise(seed=1)
    first, second = bias_pushed_forward(depthwise, pointwise)
    first, layer = first.cuda().to(dtype), ConvAddReLU(second).cuda().to(dtype)
    depthwise, pointwise = depthwise.cuda().to(dtype), pointwise.cuda().to(dtype)
    cl = torch.channels_last
    x = torch.randn(4, 6, 16, 16, device="cuda", dtype=dtype).contiguous(memory_format=cl)
    z = torch.randn(4, 10, 16, 16, device="cuda", dtype=dtype).contiguous(memory_format=cl)
    saved = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = False  # (TF32 keeps 10 bits of each product: fp32 is compared as fp32)
    try:
        with torch.inference_mode():
            want = torch.relu(pointwise(depthwise(x)) + z)
            got = layer(first(x), z)
    finally:
        torch.backends.cudnn.allow_tf32 = saved
    tolerance = 1e-4 if dtype == torch.float32 else 2e-2
    torch.testing.assert_close(got, want, atol=tolerance, rtol=tolerance)


class InPlaceStreams(fusion.SideStreams):
    """Side streams that run their branch where it stands: the concurrent schedule's code path on the CPU."""

    forks: ClassVar[list[object]] = []

    @staticmethod
    def apply_to(x):
        return True

    @contextlib.contextmanager
    def branch(self, x, branch, *used):
        InPlaceStreams.forks.append(branch)
        yield None

    @staticmethod
    def join(y, side):
        return y


def test_the_concurrent_schedule_computes_the_same_function(monkeypatch):
    """Hourglass branches and the stacks' junction forked (in place here): outputs as the reference."""
    for method in ("branch", "join", "apply_to"):  # the stand-in is called as the real one is
        real, stand_in = (inspect.signature(getattr(cls, method)).parameters for cls in (fusion.SideStreams,
                                                                                         InPlaceStreams))
        assert [(p.name, p.kind) for p in real.values()] == [(p.name, p.kind) for p in stand_in.values()], method
    reference = build_emonet(classes=8).eval()
    monkeypatch.setattr(fusion, "SideStreams", InPlaceStreams)
    InPlaceStreams.forks.clear()
    fused = fuse(reference, use_kernels=False)
    x = torch.rand(2, 3, 256, 256)
    with torch.inference_mode():
        want, got = reference(x), fused(x)
    assert sorted(InPlaceStreams.forks, key=str) == [1, 1, 2, 2, 3, 3, 4, 4, "junction"]  # 2 hourglasses, 1 junction
    for name in ("expression", "valence", "arousal", "heatmap"):
        torch.testing.assert_close(getattr(got, name), getattr(want, name), atol=2e-5, rtol=1e-4)
