#!/usr/bin/env python3
"""End to end on one GPU: frames/s of whole videos through emopipe's public API, and of the command.

    python3 benchmarks/e2e.py --out e2e [--frames 1800] [--size 1280x720] [--faces 1] \
        [--detector blazeface_back --models-dir shared/models/blazeface] [--rounds 3] [--decoder auto]

1. A talking-head video is synthesised (``benchmarks/synthetic.py``) and a random EmoNet checkpoint in
   the official format is written (speed does not depend on weight values).
2. ``emopipe.Analyzer`` builds and warms the engines once; ``analyzer.run(video)`` then processes the whole
   video ``--rounds`` times, writing CSV rows as the command does. Each round prints the run summary's
   frames/s (first frame read → last row written), faces/s and first-frame vs steady latency.
3. ``--cli`` also times the ``emopipe`` command on the same video in a fresh process: wall time from
   process start to exit, start-up included (what one-video-per-process users pay).

The table is printed last; ``DIR/e2e.json`` has every number and the host's versions.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import synthetic

import emopipe


def host() -> dict[str, str]:
    import torch

    return {"gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu", "torch": torch.__version__,
            "cuda": str(torch.version.cuda), "cudnn": str(torch.backends.cudnn.version()),
            "emopipe": emopipe.__version__, "date": time.strftime("%Y-%m-%d")}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--frames", type=int, default=1800)
    parser.add_argument("--size", default="1280x720")
    parser.add_argument("--faces", type=int, default=1, help="faces per frame")
    parser.add_argument("--fourcc", default="mp4v", help="the synthesised video's codec (OpenCV writer)")
    parser.add_argument("--video", type=Path, help="use this video instead of synthesising one")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cli", action="store_true", help="also time the emopipe command in a fresh process")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--detector", default="blazeface_back")
    parser.add_argument("--models-dir", help="where the detector's weights are (BlazeFace: shared/models/blazeface)")
    parser.add_argument("--decoder", default="auto")
    parser.add_argument("--detect-every", type=int, default=1)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    width, height = (int(v) for v in args.size.split("x"))
    video = args.video
    if video is None:
        t = time.perf_counter()
        video = synthetic.talking_heads(args.out / f"heads_{args.size}_{args.faces}.mp4", args.frames, (width, height),
                                        faces=args.faces, fourcc=args.fourcc)
        print(f"synthesised {args.frames} frames {args.size} in {time.perf_counter() - t:.1f} s", file=sys.stderr)
    weights = synthetic.random_checkpoint(args.out / "emonet_random.pth")
    options = dict(weights=str(weights), models_dir=args.models_dir, detector=args.detector, device=args.device,
                   decoder=args.decoder, detect_every=args.detect_every, no_progress=True)
    rounds = []
    t = time.perf_counter()
    with emopipe.Analyzer(**options) as analyzer:
        ready_s = time.perf_counter() - t
        for i in range(args.rounds):
            out = args.out / f"rows_{i}.csv"
            outcome = analyzer.run(str(video), output=str(out), summary=str(out.with_suffix(".summary.json")))
            rounds.append(outcome.summary.as_dict())
    result: dict = {"host": host(), "video": str(video), "options": options, "analyzer_ready_s": ready_s,
                    "rounds": rounds}
    if args.cli:
        command = [sys.executable, "-m", "emopipe", str(video), "-o", str(args.out / "rows_cli.csv"), "--no-progress",
                   *(f"--{k.replace('_', '-')}={v}" for k, v in options.items() if v not in (None, True))]
        t = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True)
        result["cli"] = {"wall_s": time.perf_counter() - t, "returncode": done.returncode, "command": command}
        if done.returncode:
            print(done.stderr[-2000:], file=sys.stderr)
    (args.out / "e2e.json").write_text(json.dumps(result, indent=1))

    print(f"\n{result['host']}")
    print(f"video {video.name}: {rounds[0]['frames']} frames; analyzer built and warmed in {ready_s:.1f} s "
          f"(decoder {rounds[0]['decoder']}, detector {args.detector})")
    print("| round | frames/s | faces/s | first frame ms | steady p50 ms | p99 ms |")
    print("|---|---|---|---|---|---|")
    for i, r in enumerate(rounds):
        print(f"| {i + 1} | {r['fps']:.0f} | {r['faces_per_s']:.0f} | {1000 * (r['first_frame_latency_s'] or 0):.1f} | "
              f"{1000 * (r['steady_latency_p50_s'] or 0):.1f} | {1000 * (r['steady_latency_p99_s'] or 0):.1f} |")
    print(f"median frames/s: {statistics.median(r['fps'] for r in rounds):.0f}")
    if "cli" in result:
        fps = rounds[0]["frames"] / result["cli"]["wall_s"]
        print(f"emopipe command, fresh process: {result['cli']['wall_s']:.1f} s wall = {fps:.0f} frames/s effective "
              f"(exit {result['cli']['returncode']})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
