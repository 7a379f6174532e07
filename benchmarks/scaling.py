#!/usr/bin/env python3
"""Scaling over the GPUs of one host: the archive benchmark with --ray local on 1, 2, 4, 8 GPUs (issue 24).

    python3 benchmarks/scaling.py --out scaling --clip clip10s_720p_h264.mp4 --clips 256 \
        [--models-dir shared/models/blazeface] [--gpus 1,2,4,8]

For each GPU count N (those the host has), the same archive (``--clips`` copies of a 10-second 1280×720
clip, one face) runs as ``emopipe CLIPS -o OUT --ray local --ray-workers N`` with ``CUDA_VISIBLE_DEVICES``
set to the first N GPUs: wall time from the command's start to its exit, aggregate frames/s and faces/s,
efficiency against N × the one-GPU run of the same host, and the most GPU memory any GPU held (nvidia-smi,
sampled every 0.5 s). The table is printed last; ``OUT/scaling.json`` has every number. The camera-fleet
half of the issue waits for several live sources in one process (issue 21, item 6).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import synthetic


def gpu_count() -> int:
    done = subprocess.run(["nvidia-smi", "--query-gpu=index", "--format=csv,noheader"], capture_output=True,
                          text=True)
    return len(done.stdout.split()) if done.returncode == 0 else 0


def sample_memory(stop: threading.Event, peak: dict[int, int]) -> None:
    while not stop.wait(0.5):
        done = subprocess.run(["nvidia-smi", "--query-gpu=index,memory.used", "--format=csv,noheader,nounits"],
                              capture_output=True, text=True)
        for line in done.stdout.splitlines():
            index, used = (int(v) for v in line.split(","))
            peak[index] = max(peak.get(index, 0), used)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--clip", type=Path, required=True)
    parser.add_argument("--clips", type=int, default=256)
    parser.add_argument("--gpus", default="1,2,4,8")
    parser.add_argument("--models-dir")
    parser.add_argument("--detector", default="blazeface_back")
    args = parser.parse_args()
    available = gpu_count()
    counts = [n for n in (int(v) for v in args.gpus.split(",")) if n <= available]
    if not counts:
        print(f"no GPU counts to run: this host has {available} GPU(s)", file=sys.stderr)
        return 1
    args.out.mkdir(parents=True, exist_ok=True)
    archive = args.out / "clips"
    shutil.rmtree(archive, ignore_errors=True)
    archive.mkdir()
    for i in range(args.clips):
        shutil.copy(args.clip, archive / f"clip{i:04d}{args.clip.suffix}")
    weights = synthetic.random_checkpoint(args.out / "emonet_random.pth")
    options = ["--weights", str(weights), "--detector", args.detector, "--no-progress"]
    if args.models_dir:
        options += ["--models-dir", args.models_dir]
    rows = []
    for n in counts:
        out = args.out / f"run-{n}gpu"
        shutil.rmtree(out, ignore_errors=True)
        env = {**os.environ, "CUDA_VISIBLE_DEVICES": ",".join(str(i) for i in range(n))}
        stop, peak = threading.Event(), {}
        sampler = threading.Thread(target=sample_memory, args=(stop, peak), daemon=True)
        sampler.start()
        t = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "emopipe", str(archive), "-o", str(out), "--ray", "local",
                               "--ray-workers", str(n), *options], capture_output=True, text=True, env=env)
        wall = time.perf_counter() - t
        stop.set()
        sampler.join()
        if done.returncode != 0:
            print(done.stderr[-3000:], file=sys.stderr)
        summary = json.loads((out / "summary.json").read_text()) if (out / "summary.json").exists() else {}
        rows.append({"gpus": n, "wall_s": wall, "returncode": done.returncode, "frames": summary.get("frames", 0),
                     "faces": summary.get("faces", 0), "peak_gpu_memory_mib": max(peak.values(), default=None),
                     "worker_failures": summary.get("ray", {}).get("worker_failures")})
        (args.out / "scaling.json").write_text(json.dumps(rows, indent=1))
    base = rows[0]["frames"] / rows[0]["wall_s"] if rows[0]["wall_s"] else 0.0
    print(f"\n{time.strftime('%Y-%m-%d')}, {args.clips} clips of {args.clip.name}, {' '.join(options)}")
    print("| GPUs | wall s | frames/s | faces/s | efficiency | peak GPU memory MiB |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        fps = r["frames"] / r["wall_s"] if r["wall_s"] else 0.0
        efficiency = fps / (r["gpus"] * base) if base else 0.0
        print(f"| {r['gpus']} | {r['wall_s']:.1f} | {fps:.0f} | {r['faces'] / r['wall_s']:.0f} | {efficiency:.0%} | "
              f"{r['peak_gpu_memory_mib']} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
