#!/usr/bin/env python3
"""Many sources in one command: an archive of short clips, several long videos, many faces per frame.

    python3 benchmarks/archive.py --out arch --clip clip10s_720p_h264.mp4 [--clips 64] \
        [--long long_720p_h264.mp4 --long-copies 4] [--models-dir shared/models/blazeface] [--baseline 4]

* **archive**: ``--clips`` copies of ``--clip`` (a 10-second 1280×720 H.264 clip, one face) in a folder, then
  ``emopipe FOLDER -o OUT`` as a user types it: wall time from the command's start to its exit, start-up
  included, and the effective frames/s over the whole archive;
* **baseline**: ``--baseline`` of those clips with one ``emopipe CLIP`` process each, in sequence (what the
  archive cost before many sources per process), extrapolated to the archive;
* **long**: ``--long-copies`` copies of ``--long`` in one command: aggregate steady frames/s and faces/s from
  the run summary (first frame read → last row written).

Every run uses a random official-format EmoNet checkpoint and BlazeFace back (real weights from
``--models-dir``); the table is printed last and ``OUT/archive.json`` holds every number.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import synthetic


def command(*args: object) -> tuple[float, subprocess.CompletedProcess]:
    t = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "emopipe", *map(str, args)], capture_output=True, text=True)
    seconds = time.perf_counter() - t
    if done.returncode != 0:
        print(done.stderr[-3000:], file=sys.stderr)
    return seconds, done


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--clip", type=Path, required=True, help="a short clip (e.g. 10 s 1280×720 H.264, one face)")
    parser.add_argument("--clips", type=int, default=64)
    parser.add_argument("--baseline", type=int, default=4, help="clips run one process each (0: skip)")
    parser.add_argument("--long", type=Path, help="a long video for the aggregate throughput run")
    parser.add_argument("--long-copies", type=int, default=4)
    parser.add_argument("--models-dir")
    parser.add_argument("--detector", default="blazeface_back")
    parser.add_argument("--parallel", type=int)
    parser.add_argument("--extra", default="", help="more emopipe options, space-separated")
    parser.add_argument("--ray", metavar="ADDRESS", help="also run the archive with --ray ADDRESS (e.g. local)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    weights = synthetic.random_checkpoint(args.out / "emonet_random.pth")
    options = ["--weights", weights, "--detector", args.detector, "--no-progress", *args.extra.split()]
    if args.models_dir:
        options += ["--models-dir", args.models_dir]
    if args.parallel:
        options += ["--parallel", args.parallel]
    result: dict = {"date": time.strftime("%Y-%m-%d"), "options": [str(o) for o in options]}
    archive = args.out / "clips"
    shutil.rmtree(archive, ignore_errors=True)
    archive.mkdir()
    for i in range(args.clips):
        shutil.copy(args.clip, archive / f"clip{i:03d}{args.clip.suffix}")
    runs = args.out / "runs"
    shutil.rmtree(runs, ignore_errors=True)
    seconds, done = command(archive, "-o", runs / "archive", *options)
    summary = json.loads((runs / "archive" / "summary.json").read_text()) if done.returncode == 0 else {}
    result["archive"] = {"clips": args.clips, "wall_s": seconds, "returncode": done.returncode,
                         "frames": summary.get("frames"), "faces": summary.get("faces"),
                         "pipeline_fps": (summary.get("pipeline") or {}).get("fps"),
                         "startup": (summary.get("pipeline") or {}).get("startup")}
    if args.ray:
        seconds_ray, done = command(archive, "-o", runs / "archive-ray", "--ray", args.ray, *options)
        summary = json.loads((runs / "archive-ray" / "summary.json").read_text()) if done.returncode == 0 else {}
        ray_facts = {k: v for k, v in summary.get("ray", {}).items() if k != "worker_summaries"}
        result["archive_ray"] = {"clips": args.clips, "wall_s": seconds_ray, "returncode": done.returncode,
                                 "frames": summary.get("frames"), "ray": ray_facts}
    if args.baseline:
        times = []
        for i in range(args.baseline):
            seconds_one, _ = command(archive / f"clip{i:03d}{args.clip.suffix}", "-o", runs / f"one{i}.csv", *options)
            times.append(seconds_one)
        result["baseline"] = {"clips": args.baseline, "seconds_each": times,
                              "archive_estimate_s": sum(times) / len(times) * args.clips}
    if args.long:
        longs = []
        for i in range(args.long_copies):
            target = args.out / f"long{i}{args.long.suffix}"
            shutil.copy(args.long, target)
            longs.append(target)
        seconds_long, done = command(*longs, "-o", runs / "long", *options)
        summary = json.loads((runs / "long" / "summary.json").read_text()) if done.returncode == 0 else {}
        result["long"] = {"sources": args.long_copies, "wall_s": seconds_long, "returncode": done.returncode,
                          "frames": summary.get("frames"), "faces": summary.get("faces"),
                          "fps": (summary.get("pipeline") or {}).get("fps"),
                          "faces_per_s": (summary.get("pipeline") or {}).get("faces_per_s"),
                          "stages": summary.get("pipeline", {}).get("stage_seconds")}
    (args.out / "archive.json").write_text(json.dumps(result, indent=1))
    a = result["archive"]
    print(f"\n{result['date']}, {' '.join(result['options'])}")
    print("| run | sources | frames | wall s | frames/s |")
    print("|---|---|---|---|---|")
    if a["frames"]:
        print(f"| archive, one command | {a['clips']} | {a['frames']} | {a['wall_s']:.1f} | "
              f"{a['frames'] / a['wall_s']:.0f} (pipeline {a['pipeline_fps']:.0f}) |")
    if result.get("archive_ray", {}).get("frames"):
        r = result["archive_ray"]
        print(f"| archive, one command, --ray {args.ray} ({r['ray'].get('workers')} worker(s)) | {r['clips']} | "
              f"{r['frames']} | {r['wall_s']:.1f} | {r['frames'] / r['wall_s']:.0f} |")
    if "baseline" in result:
        b = result["baseline"]
        per = b["archive_estimate_s"] / args.clips
        fps = (a["frames"] or 0) / b["archive_estimate_s"]
        print(f"| one process per clip (measured on {b['clips']}, extrapolated) | {args.clips} | | "
              f"{b['archive_estimate_s']:.1f} | {fps:.0f} ({per:.1f} s a clip) |")
    if "long" in result and result["long"]["frames"]:
        lg = result["long"]
        print(f"| {lg['sources']} long videos, one command | {lg['sources']} | {lg['frames']} | {lg['wall_s']:.1f} | "
              f"{lg['fps']:.0f} steady, {lg['faces_per_s']:.0f} faces/s |")
    print(f"archive start-up: {a['startup']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
