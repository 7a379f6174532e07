"""Run by tests/test_kernels.py in a child process with TRITON_INTERPRET=1 (set before Triton loads):
Triton's interpreter executes the CUDA kernels on CPU tensors, so the GPU code is checked here too."""

from __future__ import annotations

import sys

import torch
import torch.nn.functional as F

from emopipe.model import kernels
from emopipe.model.emonet import build_emonet
from emopipe.model.fusion import fuse
from tests.support.checkpoints import random_state


def channels_last(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.randn(*shape).to(dtype).contiguous(memory_format=torch.channels_last)


def check_affine_relu() -> None:
    for channels, dtype in ((64, torch.float32), (128, torch.float16), (256, torch.float16), (3, torch.float32)):
        x = channels_last(2, channels, 5, 7, dtype=dtype)
        x[1, -1, 4, 6] = float("nan")  # stays NaN through the ReLU, as in PyTorch (clamp propagates it)
        scale, shift = torch.randn(channels).to(dtype), torch.randn(channels).to(dtype)
        want = torch.addcmul(shift.view(1, -1, 1, 1), x, scale.view(1, -1, 1, 1)).clamp_(min=0)
        got = kernels.affine_relu(x, scale, shift)
        assert got.is_contiguous(memory_format=torch.channels_last) and got.dtype == dtype
        torch.testing.assert_close(got, want, rtol=1e-3 if dtype == torch.float16 else 1e-6, atol=1e-6,
                                   equal_nan=True)


def check_residual_slices() -> None:
    x = channels_last(3, 256, 4, 6, dtype=torch.float16)
    a, b, c = (channels_last(3, k, 4, 6, dtype=torch.float16) for k in (128, 64, 64))
    scale, shift = torch.rand(128).half() + 0.5, torch.randn(128).half()
    out = torch.full_like(x, float("nan"))
    act = kernels.add_residual_slice(a, x, out, 0, scale, shift)
    assert kernels.add_residual_slice(b, x, out, 128) is None
    kernels.add_residual_slice(c, x, out, 192)
    torch.testing.assert_close(out, torch.cat((a, b, c), dim=1) + x, rtol=1e-3, atol=1e-3)  # every slot written
    want = torch.addcmul(shift.view(1, -1, 1, 1), a, scale.view(1, -1, 1, 1)).clamp_(min=0)
    torch.testing.assert_close(act, want, rtol=1e-3, atol=1e-3)
    # the consuming block's first BatchNorm + ReLU over all 256 channels, written slice by slice
    following = (torch.full_like(x, float("nan")), torch.rand(256).half() + 0.5, torch.randn(256).half())
    out2 = torch.empty_like(x)
    kernels.add_residual_slice(a, x, out2, 0, scale, shift, following)
    kernels.add_residual_slice(b, x, out2, 128, next_act=following)
    kernels.add_residual_slice(c, x, out2, 192, next_act=following)
    torch.testing.assert_close(out2, out, rtol=0, atol=0)
    want = torch.addcmul(following[2].view(1, -1, 1, 1), out, following[1].view(1, -1, 1, 1)).clamp_(min=0)
    torch.testing.assert_close(following[0], want, rtol=1e-3, atol=1e-3)
    for bad in ((a, x, x.contiguous(), 0),  # out not channels_last
                (a.contiguous(), x, out, 0),  # y not channels_last: its rows would be read wrongly
                (b, x, out, 224)):  # past the residual's last channel
        try:
            kernels.add_residual_slice(*bad)
        except ValueError:
            continue
        raise AssertionError("a layout or slice the kernel cannot take must be refused")


def affine_relu_reference(x: torch.Tensor, scale: torch.Tensor, shift: torch.Tensor) -> torch.Tensor:
    return torch.addcmul(shift.view(1, -1, 1, 1), x, scale.view(1, -1, 1, 1)).clamp_(min=0)


def check_pool_and_upsample() -> None:
    for channels, dtype in ((256, torch.float16), (68, torch.float32), (3, torch.float16)):
        x = channels_last(2, channels, 6, 10, dtype=dtype)
        x[0, 0, 0, 0], x[1, 1 % channels, 5, 9] = float("nan"), float("-inf")  # NaN propagates, as in PyTorch
        scale, shift = torch.rand(channels) + 0.5, torch.randn(channels)
        got, none = kernels.max_pool2x2(x)
        assert none is None and got.is_contiguous(memory_format=torch.channels_last)
        want = F.max_pool2d(x, 2, stride=2)
        torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)
        got, act = kernels.max_pool2x2(x, scale, shift)  # with the consumer's BatchNorm + ReLU
        torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)
        torch.testing.assert_close(act, affine_relu_reference(want, scale, shift).to(dtype), rtol=1e-3, atol=1e-3,
                                   equal_nan=True)
        low = channels_last(2, channels, 3, 5, dtype=dtype)
        want = x + F.interpolate(low.float(), scale_factor=2, mode="nearest").to(dtype)
        got, none = kernels.add_upsampled(x, low)
        assert none is None
        torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)
        got, act = kernels.add_upsampled(x, low, scale, shift)
        torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)
        torch.testing.assert_close(act, affine_relu_reference(want, scale, shift).to(dtype), rtol=1e-3, atol=1e-3,
                                   equal_nan=True)
    for n, channels, size in ((3, 256, 8), (2, 68, 6)):  # the emotion head's input: pooled, then averaged
        x = channels_last(n, channels, size, size)
        x[1, 0, 2, 3] = float("nan")
        want = F.adaptive_avg_pool2d(F.max_pool2d(x, 2, stride=2), 1).flatten(1)
        got = kernels.max_pool_mean(x)
        assert got.dtype == torch.float32 and got.shape == (n, channels)
        torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6, equal_nan=True)
        half = x.half()  # rounded to fp16 as PyTorch's fp16 average pool rounds it
        want = F.adaptive_avg_pool2d(F.max_pool2d(half, 2, stride=2), 1).flatten(1).float()
        torch.testing.assert_close(kernels.max_pool_mean(half), want, rtol=0, atol=0, equal_nan=True)
    for bad in (lambda: kernels.max_pool2x2(channels_last(1, 8, 5, 4)),  # odd height
                lambda: kernels.max_pool2x2(torch.randn(1, 8, 4, 4)),  # not channels_last
                lambda: kernels.add_upsampled(channels_last(1, 8, 4, 4), channels_last(1, 8, 4, 4)),  # not half size
                lambda: kernels.add_upsampled(channels_last(1, 8, 4, 4), channels_last(1, 8, 2, 2).half())):
        try:
            bad()
        except ValueError:
            continue
        raise AssertionError("a shape or layout the kernel cannot take must be refused")


def check_attention_input() -> None:
    x, f0, f1 = (channels_last(2, 64, 4, 6, dtype=torch.float16) for _ in range(3))
    mask = torch.randn(2, 68, 4, 6).half().contiguous(memory_format=torch.channels_last).sum(dim=1, keepdim=True)
    want = torch.cat((x, f0 * mask, f1 * mask), dim=1)
    got = kernels.attention_input(x, f0, f1, mask)
    assert got.is_contiguous(memory_format=torch.channels_last)
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    try:
        kernels.attention_input(x, f0, f1[:, :32].contiguous(memory_format=torch.channels_last), mask)
    except ValueError:
        return
    raise AssertionError("features of another shape must be refused")


def check_network() -> None:
    """The whole fused network on the kernels (forced on CPU tensors) computes the reference function."""
    reference = build_emonet(random_state(8, seed=5))
    calls: dict[str, int] = {}

    def counted(name):
        original = getattr(kernels, name)

        def call(*args, **kw):
            calls[name] = calls.get(name, 0) + 1
            return original(*args, **kw)
        return call

    kernels.applicable = lambda *tensors: all(t.is_contiguous(memory_format=torch.channels_last) for t in tensors)
    for name in ("add_residual_slice", "max_pool2x2", "add_upsampled", "attention_input", "max_pool_mean"):
        setattr(kernels, name, counted(name))
    fused = fuse(reference).to(memory_format=torch.channels_last)
    x = torch.rand(1, 3, 256, 256)
    with torch.inference_mode():
        want = reference(x)
        got = fused(x.contiguous(memory_format=torch.channels_last))
    # three slices in each of the 35 blocks; every 2×2 pool (stem, 4 per hourglass, 4 in the emotion head);
    # the 4 upsampled adds of each hourglass; the emotion branch's input; its last pool, averaged
    assert calls == {"add_residual_slice": 35 * 3, "max_pool2x2": 1 + 2 * 4 + 3, "add_upsampled": 2 * 4,
                     "attention_input": 1, "max_pool_mean": 1}, calls
    for name in ("expression", "valence", "arousal", "heatmap"):
        torch.testing.assert_close(getattr(got, name), getattr(want, name), atol=2e-5, rtol=1e-4)


if __name__ == "__main__":
    {"affine_relu": check_affine_relu, "slices": check_residual_slices,
     "pool_upsample": check_pool_and_upsample, "attention": check_attention_input,
     "network": check_network}[sys.argv[1]]()
    print("ok")
