"""The Triton kernels behind :mod:`emopipe.model.kernels` (imported only where Triton is installed).

Tensors are dense channels_last, seen as a [rows = N·H·W, channels] matrix; per-channel scale and
shift are read in their own dtype and the arithmetic is float32, rounded once on the store. With
USE_PDL (Hopper and later), a kernel is launched as a programmatic dependent launch: it is scheduled
while the kernel before it still runs, and waits for it before touching memory.
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _tile(rows, channels, BLOCK_ROWS: tl.constexpr, BLOCK_CHANNELS: tl.constexpr, USE_PDL: tl.constexpr):
    """This program's rows (a column) and channels (a row), and which of them exist. Under PDL, first
    waits for the kernel this one depends on."""
    if USE_PDL:
        tl.extra.cuda.gdc_wait()
    r = (tl.program_id(0) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)).to(tl.int64)[:, None]
    c = tl.arange(0, BLOCK_CHANNELS)[None, :]
    return r, c, (r < rows) & (c < channels)


@triton.jit
def _store_affine_relu(value, scale_ptr, shift_ptr, channel, channel_exists, out_ptrs, inside):
    """out = relu(value · scale[channel] + shift[channel]), in float32, rounded once; NaN stays NaN, as
    PyTorch's clamp leaves it."""
    scale = tl.load(scale_ptr + channel, mask=channel_exists, other=0.0).to(tl.float32)
    shift = tl.load(shift_ptr + channel, mask=channel_exists, other=0.0).to(tl.float32)
    act = tl.maximum(value.to(tl.float32) * scale + shift, 0.0, propagate_nan=tl.PropagateNan.ALL)
    tl.store(out_ptrs, act.to(out_ptrs.dtype.element_ty), mask=inside)


@triton.jit
def _max2x2(x_ptr, top_left, row_step, channels, inside):
    """The 2×2 window's maximum from its top-left offsets (NaN propagates, as in PyTorch)."""
    below = top_left + row_step
    m = tl.maximum(tl.load(x_ptr + top_left, mask=inside, other=0.0),
                   tl.load(x_ptr + top_left + channels, mask=inside, other=0.0), propagate_nan=tl.PropagateNan.ALL)
    m = tl.maximum(m, tl.load(x_ptr + below, mask=inside, other=0.0), propagate_nan=tl.PropagateNan.ALL)
    return tl.maximum(m, tl.load(x_ptr + below + channels, mask=inside, other=0.0), propagate_nan=tl.PropagateNan.ALL)


@triton.jit
def affine_relu_kernel(x_ptr, scale_ptr, shift_ptr, y_ptr, rows, channels,
                       BLOCK_ROWS: tl.constexpr, BLOCK_CHANNELS: tl.constexpr, USE_PDL: tl.constexpr = False):
    """y = relu(x · scale + shift), one read and one write."""
    r, c, inside = _tile(rows, channels, BLOCK_ROWS, BLOCK_CHANNELS, USE_PDL)
    x = tl.load(x_ptr + r * channels + c, mask=inside, other=0.0)
    _store_affine_relu(x, scale_ptr, shift_ptr, c, c < channels, y_ptr + r * channels + c, inside)


@triton.jit
def residual_slice_kernel(y_ptr, residual_ptr, out_ptr, scale_ptr, shift_ptr, act_ptr,
                          next_scale_ptr, next_shift_ptr, next_act_ptr, rows, channels, total_channels, first_channel,
                          WITH_ACT: tl.constexpr, WITH_NEXT: tl.constexpr,
                          BLOCK_ROWS: tl.constexpr, BLOCK_CHANNELS: tl.constexpr, USE_PDL: tl.constexpr = False):
    """out[:, first:first+C] = y + residual[:, first:first+C]; with WITH_ACT also act = relu(y · scale + shift).
    With WITH_NEXT also next_act[:, first:first+C] = relu(out · next_scale + next_shift) over the same
    channels: the first BatchNorm + ReLU of the block that takes out next, from out as stored.

    One read of y serves all: the block's output slice and the next convolutions' inputs."""
    r, c, inside = _tile(rows, channels, BLOCK_ROWS, BLOCK_CHANNELS, USE_PDL)
    y = tl.load(y_ptr + r * channels + c, mask=inside, other=0.0).to(tl.float32)
    wide = r * total_channels + first_channel + c
    residual = tl.load(residual_ptr + wide, mask=inside, other=0.0).to(tl.float32)
    out = (y + residual).to(out_ptr.dtype.element_ty)
    tl.store(out_ptr + wide, out, mask=inside)
    if WITH_ACT:
        _store_affine_relu(y, scale_ptr, shift_ptr, c, c < channels, act_ptr + r * channels + c, inside)
    if WITH_NEXT:
        _store_affine_relu(out, next_scale_ptr, next_shift_ptr, first_channel + c, c < channels, next_act_ptr + wide,
                           inside)


@triton.jit
def max_pool2x2_kernel(x_ptr, y_ptr, scale_ptr, shift_ptr, act_ptr, rows, channels, out_width, out_pixels,
                       WITH_ACT: tl.constexpr, BLOCK_ROWS: tl.constexpr, BLOCK_CHANNELS: tl.constexpr,
                       USE_PDL: tl.constexpr = False):
    """y = 2×2 max pool with stride 2 (even H and W); rows are y's pixels. NaN propagates, as in PyTorch.
    With WITH_ACT also act = relu(y · scale + shift), the next convolution's input, from the same values."""
    r, c, inside = _tile(rows, channels, BLOCK_ROWS, BLOCK_CHANNELS, USE_PDL)
    n, pixel = r // out_pixels, r % out_pixels
    i, j = pixel // out_width, pixel % out_width
    in_width = 2 * out_width
    top_left = (n * 4 * out_pixels + 2 * i * in_width + 2 * j) * channels + c
    m = _max2x2(x_ptr, top_left, in_width * channels, channels, inside)
    tl.store(y_ptr + r * channels + c, m, mask=inside)
    if WITH_ACT:
        _store_affine_relu(m, scale_ptr, shift_ptr, c, c < channels, act_ptr + r * channels + c, inside)


@triton.jit
def add_upsampled_kernel(up_ptr, low_ptr, out_ptr, scale_ptr, shift_ptr, act_ptr, rows, channels, width, pixels,
                         WITH_ACT: tl.constexpr, BLOCK_ROWS: tl.constexpr, BLOCK_CHANNELS: tl.constexpr,
                         USE_PDL: tl.constexpr = False):
    """out = up + nearest_upsample×2(low); rows are up's pixels, low has half of up's height and width.
    With WITH_ACT also act = relu(out · scale + shift), computed from out as stored (rounded)."""
    r, c, inside = _tile(rows, channels, BLOCK_ROWS, BLOCK_CHANNELS, USE_PDL)
    n, pixel = r // pixels, r % pixels
    y, x = pixel // width, pixel % width
    low_row = n * (pixels // 4) + (y // 2) * (width // 2) + x // 2
    up = tl.load(up_ptr + r * channels + c, mask=inside, other=0.0).to(tl.float32)
    low = tl.load(low_ptr + low_row * channels + c, mask=inside, other=0.0).to(tl.float32)
    out = (up + low).to(out_ptr.dtype.element_ty)
    tl.store(out_ptr + r * channels + c, out, mask=inside)
    if WITH_ACT:
        _store_affine_relu(out, scale_ptr, shift_ptr, c, c < channels, act_ptr + r * channels + c, inside)


@triton.jit
def attention_input_kernel(x_ptr, f0_ptr, f1_ptr, mask_ptr, out_ptr, rows, channels,
                           BLOCK_ROWS: tl.constexpr, BLOCK_CHANNELS: tl.constexpr, USE_PDL: tl.constexpr = False):
    """out = concat(x, f0 · mask, f1 · mask) along channels; mask holds one value per pixel (row)."""
    r, c, inside = _tile(rows, channels, BLOCK_ROWS, BLOCK_CHANNELS, USE_PDL)
    narrow, wide = r * channels + c, r * 3 * channels + c
    m = tl.load(mask_ptr + r, mask=r < rows, other=0.0).to(tl.float32)
    tl.store(out_ptr + wide, tl.load(x_ptr + narrow, mask=inside), mask=inside)
    f0 = tl.load(f0_ptr + narrow, mask=inside, other=0.0).to(tl.float32)
    tl.store(out_ptr + wide + channels, (f0 * m).to(out_ptr.dtype.element_ty), mask=inside)
    f1 = tl.load(f1_ptr + narrow, mask=inside, other=0.0).to(tl.float32)
    tl.store(out_ptr + wide + 2 * channels, (f1 * m).to(out_ptr.dtype.element_ty), mask=inside)


@triton.jit
def max_pool_mean_kernel(x_ptr, out_ptr, channels, out_width, out_pixels,
                         BLOCK_PIXELS: tl.constexpr, BLOCK_CHANNELS: tl.constexpr, USE_PDL: tl.constexpr = False):
    """out[n] = mean over the map of the 2×2 max pool of x[n] (one program per sample)."""
    if USE_PDL:  # launched before the kernel it depends on finished: wait for it here
        tl.extra.cuda.gdc_wait()
    n = tl.program_id(0).to(tl.int64)
    p = tl.arange(0, BLOCK_PIXELS)[:, None]
    c = tl.arange(0, BLOCK_CHANNELS)[None, :]
    inside = (p < out_pixels) & (c < channels)
    in_width = 2 * out_width
    top_left = (n * 4 * out_pixels + 2 * (p // out_width) * in_width + 2 * (p % out_width)) * channels + c
    m = _max2x2(x_ptr, top_left, in_width * channels, channels, inside)  # pixels past the map: 0, not summed in
    # summed in float32, rounded to x's precision as PyTorch's average pool does, then handed on as float32
    mean = (tl.sum(m.to(tl.float32), axis=0) / out_pixels).to(x_ptr.dtype.element_ty).to(tl.float32)
    tl.store(out_ptr + n * channels + tl.arange(0, BLOCK_CHANNELS), mean, mask=tl.arange(0, BLOCK_CHANNELS) < channels)
