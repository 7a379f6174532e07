"""NVDEC against OpenCV, video by video: the same frames, sizes, timestamps and damage reports?

For each video: frames, size, timestamps and pixels from ``NvdecVideoSource`` against ``VideoSource``
(OpenCV), both ``ended_early`` reports, and what ``--decoder auto`` picks. Errors are reported per file.

    python3 scripts/nvdec_parity.py videos/*   # on a CUDA host with PyNvVideoCodec
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from emopipe.errors import EmopipeError
from emopipe.io.nvdec import NvdecVideoSource, nvdec_unavailable, open_input
from emopipe.io.video import VideoSource


def read(kind: type[VideoSource], path: Path) -> tuple[list, str | None, str | None]:
    try:
        with kind(path) as source:
            return list(source), source.ended_early, None
    except EmopipeError as error:
        return [], None, f"{type(error).__name__}: {error}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("videos", nargs="+", type=Path)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="  log: %(message)s")
    print("NVDEC:", nvdec_unavailable(torch.device("cuda")) or "available")
    for path in args.videos:
        cpu, cpu_early, cpu_error = read(VideoSource, path)
        gpu, gpu_early, gpu_error = read(NvdecVideoSource, path)
        print(f"\n{path.name}")
        print(f"  OpenCV: {len(cpu)} frames {cpu[0].bgr.shape if cpu else ''} {cpu_error or ''} "
              f"ended early: {cpu_early}")
        print(f"  NVDEC:  {len(gpu)} frames {tuple(gpu[0].pixels.shape) if gpu else ''} {gpu_error or ''} "
              f"ended early: {gpu_early}")
        if cpu and gpu:
            pairs = list(zip(cpu, gpu))
            same_size = all(a.bgr.shape == b.bgr.shape for a, b in pairs)
            dt = max(abs(a.timestamp_s - b.timestamp_s) for a, b in pairs)
            diff = [float(np.abs(a.bgr.astype(np.int16) - b.bgr.astype(np.int16)).mean()) for a, b in pairs
                    if a.bgr.shape == b.bgr.shape]
            print(f"  same sizes: {same_size}; indexes equal: {[a.index for a in cpu] == [b.index for b in gpu]}; "
                  f"max |Δt| {dt * 1000:.2f} ms; mean |Δpixel| median {np.median(diff) if diff else float('nan'):.2f} "
                  f"max {max(diff) if diff else float('nan'):.2f}")
        try:
            with open_input(path, decoder="auto", device="cuda") as source:
                print(f"  --decoder auto: {source.decoder}")
        except EmopipeError as error:
            print(f"  --decoder auto: {type(error).__name__}: {error}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
