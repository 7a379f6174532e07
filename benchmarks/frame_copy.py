"""Gathering a batch of host frames into one buffer (the GPU thread's upload of a camera fleet's batch), alone and
beside threads that run Python (the writer, the cameras' capture threads), at the pipeline's GIL switch interval.

    PYTHONPATH=. python3 benchmarks/frame_copy.py --frames 32 --busy 0 1 2

``np.stack`` gives up the GIL and takes it back once per frame, so beside a busy thread each frame's copy can wait a
switch interval; ``emopipe.pipeline.runner.stack_frames`` copies the batch in one PyTorch call, which gives the GIL
up once. Prints the median milliseconds a batch.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from emopipe.pipeline.runner import stack_frames


def busy(stop: threading.Event) -> None:
    while not stop.is_set():
        sum(range(200))  # Python work, as a writer or a capture thread does between its waits


def median_ms(copy, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        copy()
        times.append(time.perf_counter() - t)
    return 1000 * statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--frames", type=int, default=32)
    parser.add_argument("--size", default="1280x720")
    parser.add_argument("--busy", type=int, nargs="+", default=[0, 1, 2], help="threads running Python beside")
    parser.add_argument("--switch-ms", type=float, default=0.5, help="GIL switch interval (the pipeline's: 0.5)")
    parser.add_argument("--torch-threads", type=int, default=2, help="PyTorch's CPU threads (the pipeline's: 2)")
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    width, height = (int(v) for v in args.size.split("x"))
    sys.setswitchinterval(args.switch_ms / 1000)
    torch.set_num_threads(args.torch_threads)
    rng = np.random.default_rng(0)
    # two batches' worth, used in turn, so each copy reads frames that are not in the cache
    frames = [rng.integers(0, 256, (height, width, 3), dtype=np.uint8) for _ in range(2 * args.frames)]
    out = torch.empty((args.frames, height, width, 3), dtype=torch.uint8)
    turn = [0]

    def batch() -> list[np.ndarray]:
        turn[0] ^= 1
        return frames[turn[0] * args.frames:(turn[0] + 1) * args.frames]

    print(f"{args.frames} frames of {width}×{height}, switch interval {args.switch_ms} ms, "
          f"{args.torch_threads} PyTorch threads, {args.rounds} rounds; median ms a batch")
    print(f"{'busy threads':>12} {'np.stack':>10} {'stack_frames':>13}")
    for count in args.busy:
        stop = threading.Event()
        threads = [threading.Thread(target=busy, args=(stop,), daemon=True) for _ in range(count)]
        for t in threads:
            t.start()
        try:
            numpy_ms = median_ms(lambda: np.stack(batch(), out=out.numpy()), args.rounds)
            torch_ms = median_ms(lambda: stack_frames(batch(), out=out), args.rounds)
        finally:
            stop.set()
            for t in threads:
                t.join()
        print(f"{count:>12} {numpy_ms:>10.1f} {torch_ms:>13.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
