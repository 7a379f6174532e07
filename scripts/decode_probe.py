"""How fast OpenCV decodes a 1280×720 mp4v clip on its own, outside the pipeline.

    python3 scripts/decode_probe.py

Modes: ``read`` (decode + convert to BGR), ``pinned`` (read into a page-locked buffer), ``read+copy``
(read, then copy into one), ``grab`` (decode only), and ``read``/``grab`` per FFmpeg thread count.
Measured on the H100 host on 2026-11-22 (docs/benchmarks.md, "What limits us now"): read 0.56–0.65 ms
per frame with OpenCV's default 16 threads, grab 0.15 ms, read with one thread 2.04 ms — decoding
alone keeps up with well over 1 000 frames/s there, so it is not what limits the end-to-end run.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import cv2
import numpy as np
import torch

WIDTH, HEIGHT, FRAMES = 1280, 720, 600


def synthesise(path: Path) -> None:
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), 30, (WIDTH, HEIGHT))
    noise = np.random.default_rng(0).random((HEIGHT, WIDTH, 3)) * 255
    base = cv2.GaussianBlur(noise.astype(np.uint8), (31, 31), 0)  # texture that compresses like video
    for i in range(FRAMES):
        writer.write(np.roll(base, i * 3, axis=1))
    writer.release()


def ms_per_frame(path: Path, mode: str, threads: int | None = None) -> float:
    params = [cv2.CAP_PROP_N_THREADS, threads] if threads else []
    capture = cv2.VideoCapture(str(path), cv2.CAP_FFMPEG, params)
    pinned = torch.empty((HEIGHT, WIDTH, 3), dtype=torch.uint8).pin_memory().numpy() if torch.cuda.is_available() \
        else np.empty((HEIGHT, WIDTH, 3), np.uint8)
    frames, start = 0, time.perf_counter()
    while True:
        if mode == "grab":
            ok = capture.grab()
        elif mode == "pinned":
            ok, _ = capture.read(pinned)
        else:
            ok, image = capture.read()
            if ok and mode == "read+copy":
                np.copyto(pinned, image)
        if not ok:
            break
        frames += 1
    return (time.perf_counter() - start) / max(frames, 1) * 1000


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        clip = Path(tmp) / "clip.mp4"
        synthesise(clip)
        print(f"OpenCV {cv2.__version__}, {FRAMES} frames {WIDTH}×{HEIGHT} mp4v")
        for mode in ("read", "read", "grab", "pinned", "read+copy"):  # the first read warms the file cache
            print(f"{mode:10s} default threads  {ms_per_frame(clip, mode):.2f} ms/frame")
        for threads in (1, 2, 4, 8, 16):
            for mode in ("read", "grab"):
                print(f"{mode:10s} {threads:2d} threads       {ms_per_frame(clip, mode, threads):.2f} ms/frame")


if __name__ == "__main__":
    main()
