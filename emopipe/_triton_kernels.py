"""The Triton kernels behind :mod:`emopipe.kernels` (imported only where Triton is installed).

Tensors are dense channels_last, seen as a [rows = N·H·W, channels] matrix; per-channel scale and
shift are read in their own dtype and the arithmetic is float32, rounded once on the store.
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def affine_relu_kernel(x_ptr, scale_ptr, shift_ptr, y_ptr, rows, channels,
                       BLOCK_ROWS: tl.constexpr, BLOCK_CHANNELS: tl.constexpr):
    """y = relu(x · scale + shift), one read and one write."""
    r = (tl.program_id(0) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)).to(tl.int64)[:, None]
    c = tl.arange(0, BLOCK_CHANNELS)[None, :]
    inside = (r < rows) & (c < channels)
    x = tl.load(x_ptr + r * channels + c, mask=inside, other=0.0).to(tl.float32)
    scale = tl.load(scale_ptr + c, mask=c < channels, other=0.0).to(tl.float32)
    shift = tl.load(shift_ptr + c, mask=c < channels, other=0.0).to(tl.float32)
    y = tl.maximum(x * scale + shift, 0.0)
    tl.store(y_ptr + r * channels + c, y.to(y_ptr.dtype.element_ty), mask=inside)


@triton.jit
def residual_slice_kernel(y_ptr, residual_ptr, out_ptr, scale_ptr, shift_ptr, act_ptr, rows, channels,
                          total_channels, first_channel, WITH_ACT: tl.constexpr,
                          BLOCK_ROWS: tl.constexpr, BLOCK_CHANNELS: tl.constexpr):
    """out[:, first:first+C] = y + residual[:, first:first+C]; with WITH_ACT also act = relu(y · scale + shift).

    One read of y serves both: the block's output slice and the next convolution's input."""
    r = (tl.program_id(0) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)).to(tl.int64)[:, None]
    c = tl.arange(0, BLOCK_CHANNELS)[None, :]
    inside = (r < rows) & (c < channels)
    y = tl.load(y_ptr + r * channels + c, mask=inside, other=0.0).to(tl.float32)
    wide = r * total_channels + first_channel + c
    residual = tl.load(residual_ptr + wide, mask=inside, other=0.0).to(tl.float32)
    tl.store(out_ptr + wide, (y + residual).to(out_ptr.dtype.element_ty), mask=inside)
    if WITH_ACT:
        scale = tl.load(scale_ptr + c, mask=c < channels, other=0.0).to(tl.float32)
        shift = tl.load(shift_ptr + c, mask=c < channels, other=0.0).to(tl.float32)
        act = tl.maximum(y * scale + shift, 0.0)
        tl.store(act_ptr + r * channels + c, act.to(act_ptr.dtype.element_ty), mask=inside)
