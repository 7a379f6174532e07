"""Launch parameters of the Triton glue kernels (emopipe.kernels): elements per program × warps.

    python3 scripts/glue_kernel_tuning.py

Times each kernel (CUDA events, median of 30) at EmoNet's largest glue shapes at batch 256 (64×64
maps, 256 channels, fp16; memory-bound, so GB/s against the GPU's bandwidth is the measure) and at
batch 1 (64×64 and 8×8 maps; these time a call from Python, launch included: ~40 µs against the
~2 µs the kernels take inside a CUDA graph, so they only show a setting that breaks small launches),
for every combination of ``_ELEMENTS_PER_PROGRAM`` and ``_NUM_WARPS``; prints one table per shape set
and the best setting.
"""

from __future__ import annotations

import itertools
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from emopipe.model import kernels

ELEMENTS = (2048, 4096, 8192, 16384, 32768)
WARPS = (2, 4, 8)


def cl(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, device="cuda").half().contiguous(memory_format=torch.channels_last)


def cases(n: int, size: int) -> dict[str, tuple]:
    """kernel name → (call, bytes moved)."""
    x, a, low = cl(n, 256, size, size), cl(n, 128, size, size), cl(n, 256, size // 2, size // 2)
    out = torch.empty_like(x)
    ones256, ones128 = torch.ones(256, device="cuda").half(), torch.ones(128, device="cuda").half()
    mask = cl(n, 68, size, size).sum(dim=1, keepdim=True)
    e = x.element_size()
    return {
        "affine_relu": (lambda: kernels.affine_relu(x, ones256, ones256), 2 * x.numel() * e),
        "residual_slice+act": (lambda: kernels.add_residual_slice(a, x, out, 0, ones128, ones128), 4 * a.numel() * e),
        "max_pool2x2+act": (lambda: kernels.max_pool2x2(x, ones256, ones256), (x.numel() + low.numel() * 2) * e),
        "add_upsampled+act": (lambda: kernels.add_upsampled(x, low, ones256, ones256),
                              (3 * x.numel() + low.numel()) * e),
        "attention_input": (lambda: kernels.attention_input(x, x, x, mask), 6 * x.numel() * e),
    }


def median_us(call, repeats: int = 30) -> float:
    for _ in range(3):
        call()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        call()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1000)
    return statistics.median(times)


def main() -> int:
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}")
    for n, size in ((256, 64), (1, 64), (1, 8)):
        table = cases(n, size)
        print(f"\n## batch {n}, {size}×{size} maps, 256 channels (µs; GB/s)\n")
        print("| elements × warps | " + " | ".join(table) + " | sum µs |")
        print("|---" * (len(table) + 2) + "|")
        best = None
        for elements, warps in itertools.product(ELEMENTS, WARPS):
            kernels._ELEMENTS_PER_PROGRAM, kernels._NUM_WARPS = elements, warps
            cells, total = [], 0.0
            for call, moved in table.values():
                us = median_us(call)
                total += us
                cells.append(f"{us:.1f}; {moved / us / 1e3:.0f}")
            mark = " (current)" if (elements, warps) == (8192, 4) else ""
            print(f"| {elements} × {warps}{mark} | " + " | ".join(cells) + f" | {total:.1f} |")
            if best is None or total < best[0]:
                best = (total, elements, warps)
        print(f"\nbest: {best[1]} elements × {best[2]} warps, {best[0]:.1f} µs for the five calls")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
