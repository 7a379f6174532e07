"""Fused elementwise glue for EmoNet's residual blocks, as Triton kernels on CUDA.

In a block ``cat(a, b, c) + x`` where ``a = conv1(relu(bn1(x)))``, ``b = conv2(relu(bn2(a)))``,
``c = conv3(relu(bn3(b)))``, every BatchNorm + ReLU and every slice of the residual add is a pass over
memory of its own in PyTorch (``addcmul`` then ``clamp_``: two reads, two writes). Here:

* :func:`affine_relu` — relu(x · scale + shift) in one pass;
* :func:`add_residual_slice` — writes ``a + x[:, slice]`` into the block's output and, from the same
  read of ``a``, the next convolution's input ``relu(bn2(a))``;
* :func:`max_pool2x2` and :func:`add_upsampled` (the hourglass's ``up + nearest_upsample×2(low)``):
  one read and one write each, where PyTorch's channels_last max pool and broadcast add run at a
  fraction of the memory bandwidth (and take ~10 µs a call at batch 1); each can also write, from the
  same values, the BatchNorm + ReLU input of the one block that consumes its result;
* :func:`attention_input` — the emotion branch's input ``concat(x, f0 · mask, f1 · mask)`` in one
  pass (PyTorch: a copy and two broadcast multiplies); :func:`max_pool_mean` — its last max pool and
  the average over the map in one.

The arithmetic is the same expression in float32, rounded once (PyTorch rounds the affine result
before the ReLU), so results agree with :mod:`emopipe.fusion`'s PyTorch path to the last bit or one
rounding step. Used for dense channels_last CUDA tensors when Triton is installed (PyTorch's CUDA
wheels bring it); everywhere else the PyTorch expressions run. On a CPU, ``TRITON_INTERPRET=1``
runs the same kernels for tests.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import logging
import os
import threading
from collections.abc import Iterator
from concurrent.futures import Future
from typing import Any

import torch

logger = logging.getLogger(__name__)

_ELEMENTS_PER_PROGRAM = 8192  # per program (measured on an H100: docs/benchmark-log.md, "glue kernels")
_NUM_WARPS = 4


@functools.cache
def triton_installed() -> bool:
    """Whether Triton is installed, found without importing it: its import (0.3–0.9 s on the GPU hosts) happens on
    :func:`start_triton_key`'s thread. One that is installed but does not import fails :func:`kernels_run_on`."""
    try:
        return importlib.util.find_spec("triton") is not None
    except (ImportError, ValueError):
        return False


def applicable(*tensors: torch.Tensor) -> bool:
    """Whether the kernels take these tensors: CUDA, dense channels_last, and Triton working there."""
    if not triton_installed() or torch.compiler.is_compiling():
        return False
    if not all(t.is_cuda and t.dim() == 4 and t.is_contiguous(memory_format=torch.channels_last) for t in tensors):
        return False
    return kernels_run_on(tensors[0].device)


_triton_key_thread: threading.Thread | None = None


def start_triton_key() -> None:
    """Begin Triton's once-per-process set-up on a thread: its import, and the hash of Triton's own installation
    its first kernel call puts into its cache key (its ~500 MB library: 0.6 s of warmup on the GPU hosts,
    docs/benchmark-log.md). Started as soon as a run knows it is on CUDA (``pipeline.models.start_ahead``: the
    command line's, before the source opens), else when the engine is created, that overlaps opening the source,
    reading the weights and the first convolutions' planning; the hash releases the GIL, and the result is the
    same whichever thread computes it."""
    global _triton_key_thread
    if _triton_key_thread is not None or not triton_installed():
        return

    def compute() -> None:
        try:
            from triton.runtime.cache import triton_key

            triton_key()  # (functools.lru_cache: later callers get the stored value)
        except Exception:  # another Triton layout: its first kernel call computes the key as before
            pass

    _triton_key_thread = threading.Thread(target=compute, name="triton-key", daemon=True)
    _triton_key_thread.start()


@functools.cache
def kernels_run_on(device: torch.device) -> bool:
    """Compile and run every kernel once on ``device`` (the first call, during warmup). Triton builds
    its launchers with the system's C compiler and Python's headers: where that fails, say so once and
    let the PyTorch expressions run instead of failing the run."""
    if _triton_key_thread is not None:
        _triton_key_thread.join()  # computed once, not twice side by side

    def every_kernel() -> None:
        x = torch.zeros((1, 16, 2, 2), device=device).contiguous(memory_format=torch.channels_last)
        ones = torch.ones(16, device=device)
        add_residual_slice(affine_relu(x, ones, ones), x, torch.empty_like(x), 0, ones, ones)
        pooled, _ = max_pool2x2(x, ones, ones)
        add_upsampled(x, pooled, ones, ones)
        attention_input(x, x, x, x[:, :1])
        max_pool_mean(x)

    try:
        if device.type == "cuda":
            with _compiled_ahead(device):  # (compiled side by side: ~5 s one after the other on a fresh machine)
                every_kernel()
        every_kernel()
    except Exception as exc:  # any failure means: not here
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        logger.warning("Triton kernels do not run on %s (%s): the PyTorch path runs instead", device, reason)
        return False
    return True


# -- compiled ahead, side by side ------------------------------------------------------------------
# On a fresh machine Triton compiles each kernel at its first launch, one after the other on the warm-up's thread
# (PTX, the assembler, a launcher built with the C compiler: ~0.8 s a kernel, ~9 s of EmoNet's first warm-up on an
# H100, session 24). Most of that is other programs the thread waits for, so within :func:`compiling_ahead` each
# launch is compiled on a thread of a pool instead (nothing computed: the pass only finds what to compile), and the
# warm-up's next pass finds every kernel compiled.


class _Compiler:
    def __init__(self, device: torch.device) -> None:
        from concurrent.futures import ThreadPoolExecutor

        self.device = device
        self.pool = ThreadPoolExecutor(max(1, min(8, (os.cpu_count() or 1) // 2)), thread_name_prefix="emopipe-triton")
        self.futures: list[Future[None]] = []
        self.seen: set[tuple] = set()

    def submit(self, kernel: Any, grid: tuple[int, ...], args: tuple, options: dict[str, Any]) -> None:
        key = (id(kernel), tuple(_specialised(a) for a in args), tuple(sorted(options.items())))
        if key not in self.seen:  # (a launch of the same kind: the same compiled kernel)
            self.seen.add(key)
            self.futures.append(self.pool.submit(self._compile, kernel, grid, args, options))

    def _compile(self, kernel: Any, grid: tuple[int, ...], args: tuple, options: dict[str, Any]) -> None:
        with torch.cuda.device(self.device):
            compiled = kernel.warmup(*args, grid=grid, **options)
            load = getattr(compiled, "_init_handles", None)  # (loads it and builds its launcher, as a first launch)
            if callable(load):
                load()

    def finish(self) -> None:
        for future in self.futures:
            try:
                future.result()
            except Exception as exc:  # the launch itself compiles it again, and fails there if it must
                logger.debug("Triton kernel not compiled ahead: %s", exc)
        self.pool.shutdown()


def _specialised(value: object) -> tuple:
    """What Triton specialises a kernel on for one argument (its pointers' and integers' divisibility by 16)."""
    if isinstance(value, torch.Tensor):
        return "tensor", value.dtype, value.data_ptr() % 16 == 0
    if isinstance(value, int) and not isinstance(value, bool):
        return "int", value == 1, value % 16 == 0
    return "value", repr(value)


# The thread's pass, where one runs: only its own launches are compiled instead of run (another engine's thread
# launching meanwhile runs its kernels as always).
_pass = threading.local()


def _compiler_here() -> _Compiler | None:
    return getattr(_pass, "compiler", None)


@contextlib.contextmanager
def compiling_ahead(device: torch.device) -> Iterator[bool]:
    """Around one pass of a network, to compile every Triton kernel launch of it side by side before the warm-up
    runs it for real. Yields whether the kernels run here (else the caller need not run the pass); within, each
    launch is compiled on a thread and not run (its outputs hold whatever memory held); on leaving, the
    compilations are waited for. Within another window on this thread, that one compiles the launches and waits
    for them as it ends (another network's pass goes on meanwhile)."""
    if _compiler_here() is not None:
        yield True
        return
    if device.type != "cuda" or not triton_installed() or not kernels_run_on(device):
        yield False
        return
    with _compiled_ahead(device):
        yield True


@contextlib.contextmanager
def _compiled_ahead(device: torch.device) -> Iterator[None]:
    _pass.compiler = compiler = _Compiler(device)
    try:
        yield
    finally:
        _pass.compiler = None
        compiler.finish()


def _run(kernel: Any, grid: tuple[int, ...], *args: Any, **options: Any) -> None:
    """``kernel[grid](*args, **options)`` — within :func:`compiling_ahead`, compiled on a thread instead."""
    compiler = _compiler_here()
    if compiler is not None:
        compiler.submit(kernel, grid, args, options)
        return
    kernel[grid](*args, **options)


def _launch(rows: int, channels: int, device: torch.device) -> tuple[tuple[int], dict[str, int | bool]]:
    """The grid and launch parameters for a rows × channels pass: all channels of a row in one program."""
    import triton

    block_channels = triton.next_power_of_2(channels)
    block_rows = max(1, _ELEMENTS_PER_PROGRAM // block_channels)
    return (triton.cdiv(rows, block_rows),), {"BLOCK_ROWS": block_rows, "BLOCK_CHANNELS": block_channels,
                                              **_launch_options(device)}


def _launch_options(device: torch.device) -> dict[str, int | bool]:
    """What every kernel is launched with. Multiply-adds fused, as PyTorch's own kernels compile them:
    that keeps the outputs bit-identical to the PyTorch path (tests/test_gpu.py checks it); said here
    because Triton 3.10 turns it off by default."""
    pdl = _programmatic_launch(device)
    return {"num_warps": _NUM_WARPS, "USE_PDL": pdl, "launch_pdl": pdl, "enable_fp_fusion": True}


# Programmatic dependent launch (Hopper and later): each kernel is scheduled while the one before it
# still runs and waits for it on the device, which hides a launch's latency on small tensors. None:
# on where the GPU has it; docs/benchmark-log.md has the comparison.
PDL: bool | None = None


@functools.cache
def _device_has_pdl(device: torch.device) -> bool:
    return device.type == "cuda" and torch.cuda.get_device_capability(device)[0] >= 9


def _programmatic_launch(device: torch.device) -> bool:
    return _device_has_pdl(device) if PDL is None else PDL and _device_has_pdl(device)


def _dense_channels_last(*tensors: torch.Tensor) -> None:
    # the kernels index rows × channels; any other layout would be read wrongly, not fail
    if not all(t.dim() == 4 and t.is_contiguous(memory_format=torch.channels_last) for t in tensors):
        raise ValueError("the glue kernels take dense channels_last N×C×H×W tensors")


def _rows(t: torch.Tensor) -> int:
    n, _, h, w = t.shape
    return n * h * w


def affine_relu(x: torch.Tensor, scale: torch.Tensor, shift: torch.Tensor) -> torch.Tensor:
    """relu(x · scale + shift) per channel; x dense channels_last N×C×H×W, scale and shift C values."""
    from emopipe.model._triton_kernels import affine_relu_kernel

    _dense_channels_last(x)
    y = torch.empty_like(x, memory_format=torch.channels_last)
    grid, launch = _launch(_rows(x), x.shape[1], x.device)
    _run(affine_relu_kernel, grid, x, scale, shift, y, _rows(x), x.shape[1], **launch)
    return y


def add_residual_slice(y: torch.Tensor, residual: torch.Tensor, out: torch.Tensor, first_channel: int,
                       scale: torch.Tensor | None = None, shift: torch.Tensor | None = None,
                       next_act: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor | None:
    """out[:, first:first+C] = y + residual[:, first:first+C] (y has C channels); with scale and shift,
    also returns relu(y · scale + shift). With ``next_act`` = (buffer, scale, shift) over all of out's
    channels, also writes buffer[:, first:first+C] = relu(out · scale + shift) for those channels. All
    dense channels_last; out and buffer shaped like residual."""
    from emopipe.model._triton_kernels import residual_slice_kernel

    _dense_channels_last(y, residual, out, *(next_act[:1] if next_act is not None else ()))
    if out.shape != residual.shape or y.shape[0] != residual.shape[0] or y.shape[2:] != residual.shape[2:] \
            or first_channel + y.shape[1] > residual.shape[1] \
            or (next_act is not None and next_act[0].shape != residual.shape):
        raise ValueError("y must fit into channels [first, first + C) of the residual, and out (and the next "
                         "activation's buffer) be shaped like it")
    with_act = scale is not None
    act = torch.empty_like(y, memory_format=torch.channels_last) if with_act else y  # (unused without act)
    following, next_scale, next_shift = next_act if next_act is not None else (y, y, y)
    grid, launch = _launch(_rows(y), y.shape[1], y.device)
    _run(residual_slice_kernel, grid, y, residual, out, scale if with_act else y, shift if with_act else y, act,
         next_scale, next_shift, following, _rows(y), y.shape[1], residual.shape[1], first_channel,
         WITH_ACT=with_act, WITH_NEXT=next_act is not None, **launch)
    return act if with_act else None


def _even_size(x: torch.Tensor) -> None:
    if x.shape[2] % 2 or x.shape[3] % 2:
        raise ValueError(f"2×2 pooling and upsampling here take even heights and widths, got {tuple(x.shape)}")


def max_pool2x2(x: torch.Tensor, scale: torch.Tensor | None = None,
                shift: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
    """F.max_pool2d(x, 2, stride=2) for a dense channels_last x of even height and width; with scale and
    shift, also relu(pooled · scale + shift) (else None)."""
    from emopipe.model._triton_kernels import max_pool2x2_kernel

    _dense_channels_last(x)
    _even_size(x)
    n, c, h, w = x.shape
    y = torch.empty((n, c, h // 2, w // 2), dtype=x.dtype, device=x.device, memory_format=torch.channels_last)
    with_act = scale is not None
    act = torch.empty_like(y, memory_format=torch.channels_last) if with_act else None
    grid, launch = _launch(_rows(y), c, y.device)
    _run(max_pool2x2_kernel, grid, x, y, scale if with_act else y, shift if with_act else y, act if with_act else y,
         _rows(y), c, w // 2, (h // 2) * (w // 2), WITH_ACT=with_act, **launch)
    return y, act


def add_upsampled(up: torch.Tensor, low: torch.Tensor, scale: torch.Tensor | None = None,
                  shift: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
    """up + nearest_upsample×2(low); both dense channels_last, low half of up's height and width. With
    scale and shift, also relu(sum · scale + shift) (else None)."""
    from emopipe.model._triton_kernels import add_upsampled_kernel

    _dense_channels_last(up, low)
    _even_size(up)
    n, c, h, w = up.shape
    if tuple(low.shape) != (n, c, h // 2, w // 2) or low.dtype != up.dtype:
        raise ValueError(f"low must be {(n, c, h // 2, w // 2)} {up.dtype}, got {tuple(low.shape)} {low.dtype}")
    out = torch.empty_like(up, memory_format=torch.channels_last)
    with_act = scale is not None
    act = torch.empty_like(out, memory_format=torch.channels_last) if with_act else None
    grid, launch = _launch(_rows(up), c, up.device)
    _run(add_upsampled_kernel, grid, up, low, out, scale if with_act else out, shift if with_act else out,
         act if with_act else out, _rows(up), c, w, h * w, WITH_ACT=with_act, **launch)
    return out, act


def attention_input(x: torch.Tensor, f0: torch.Tensor, f1: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """concat(x, f0 · mask, f1 · mask) along channels in one pass; x, f0, f1 dense channels_last of one
    shape, mask N×1×H×W (the attention over the landmark heatmaps)."""
    from emopipe.model._triton_kernels import attention_input_kernel

    _dense_channels_last(x, f0, f1)
    n, c, h, w = x.shape
    if f0.shape != x.shape or f1.shape != x.shape or tuple(mask.shape) != (n, 1, h, w) \
            or len({x.dtype, f0.dtype, f1.dtype, mask.dtype}) != 1:
        raise ValueError("x, f0 and f1 must share shape and dtype, and mask be N×1×H×W of that dtype")
    out = torch.empty((n, 3 * c, h, w), dtype=x.dtype, device=x.device, memory_format=torch.channels_last)
    grid, launch = _launch(_rows(x), c, x.device)
    _run(attention_input_kernel, grid, x, f0, f1, mask.reshape(n * h * w), out, _rows(x), c, **launch)
    return out


def max_pool_mean(x: torch.Tensor) -> torch.Tensor:
    """adaptive_avg_pool2d(max_pool2d(x, 2, stride=2), 1) (rounded to x's dtype, as PyTorch's is) as
    float32 N×C, in one pass: the emotion head's input. x dense channels_last of even height and width,
    at most 1 024 pooled pixels."""
    import triton

    from emopipe.model._triton_kernels import max_pool_mean_kernel

    _dense_channels_last(x)
    _even_size(x)
    n, c, h, w = x.shape
    pixels = (h // 2) * (w // 2)
    if pixels > 1024:
        raise ValueError(f"max_pool_mean takes maps of at most 1 024 pooled pixels, got {h // 2}×{w // 2}")
    out = torch.empty((n, c), dtype=torch.float32, device=x.device)
    _run(max_pool_mean_kernel, (n,), x, out, c, w // 2, pixels, BLOCK_PIXELS=triton.next_power_of_2(pixels),
         BLOCK_CHANNELS=triton.next_power_of_2(c), **_launch_options(x.device))
    return out
