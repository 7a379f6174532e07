#!/usr/bin/env python3
"""The annotated video's writers, alone: frames/s and file size of FFmpeg's (H.264, fragmented MP4; Matroska;
Motion JPEG AVI) against OpenCV's (mp4v; Motion JPEG), on the frames of one video.

    python3 benchmarks/video_writer.py VIDEO [--frames 600] [--rounds 2] [--out DIR]

The video's frames are decoded once into memory (``--frames`` of them), then each writer encodes them all, in
interleaved rounds; the time runs from the writer's opening to its file closed (FFmpeg's child finished). Which
FFmpeg: as emopipe finds it (``EMOPIPE_FFMPEG``, imageio-ffmpeg, ``PATH``). The table is printed last.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import cv2
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from emopipe.io.encode import find_ffmpeg
from emopipe.vision.annotate import AnnotatedVideoWriter

VARIANTS = [("ffmpeg", ".mp4"), ("opencv", ".mp4"), ("ffmpeg", ".mkv"), ("ffmpeg", ".avi"), ("opencv", ".avi")]


def frames_of(video: Path, count: int) -> tuple[list[np.ndarray], float]:
    capture = cv2.VideoCapture(str(video))
    fps = capture.get(cv2.CAP_PROP_FPS) or 30.0
    frames = []
    while len(frames) < count:
        ok, frame = capture.read()
        if not ok:
            break
        frames.append(frame)
    capture.release()
    if not frames:
        raise SystemExit(f"no frame in {video}")
    return frames, fps


def write_all(path: Path, frames: list[np.ndarray], fps: float, writer: str) -> tuple[float, str]:
    height, width = frames[0].shape[:2]
    start = time.perf_counter()
    with AnnotatedVideoWriter(path, fps, (width, height), writer=writer) as video:
        for frame in frames:
            video.write(frame, ())
    return time.perf_counter() - start, video.codec


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("video", type=Path)
    parser.add_argument("--frames", type=int, default=600)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--out", type=Path, help="where the videos go (default: a temporary folder, removed)")
    args = parser.parse_args()
    ffmpeg = find_ffmpeg()
    frames, fps = frames_of(args.video, args.frames)
    height, width = frames[0].shape[:2]
    print(f"# {len(frames)} frames of {width}×{height} at {fps:g} from {args.video.name}; FFmpeg: {ffmpeg}; "
          f"{os.cpu_count()} cores; {time.strftime('%Y-%m-%d %H:%M')}", flush=True)
    variants = [(w, s) for w, s in VARIANTS if w == "opencv" or ffmpeg is not None]
    times: dict[tuple[str, str], list[float]] = {v: [] for v in variants}
    sizes: dict[tuple[str, str], int] = {}
    codecs: dict[tuple[str, str], str] = {}
    with tempfile.TemporaryDirectory(prefix="video-writer-") as scratch:
        folder = args.out or Path(scratch)
        folder.mkdir(parents=True, exist_ok=True)
        for round_ in range(args.rounds):
            for writer, suffix in variants:
                path = folder / f"{writer}{suffix}"
                path.unlink(missing_ok=True)
                seconds, codecs[writer, suffix] = write_all(path, frames, fps, writer)
                times[writer, suffix].append(seconds)
                sizes[writer, suffix] = path.stat().st_size
                print(f"  round {round_ + 1}: {writer:6} {suffix:4} {len(frames) / seconds:8.0f} frames/s", flush=True)
    print(f"{'writer':7} {'file':5} {'codec':8} {'frames/s (median)':>17} {'all rounds':>22} {'MB':>7}")
    for variant in variants:
        rates = [len(frames) / t for t in times[variant]]
        print(f"{variant[0]:7} {variant[1]:5} {codecs[variant]:8} {statistics.median(rates):17.0f} "
              f"{', '.join(f'{r:.0f}' for r in rates):>22} {sizes[variant] / 1e6:7.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
