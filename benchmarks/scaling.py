#!/usr/bin/env python3
"""Scaling over the GPUs of one host: the archive with --ray local, and camera fleets, on 1, 2, 4, 8 GPUs (issue 24).

    python3 benchmarks/scaling.py --out scaling --clip clip10s_720p_h264.mp4 --clips 256 \
        [--models-dir shared/models/blazeface] [--gpus 1,2,1,2] [--fleet 24,28 --fleet-gpus 1,2]

**Archive.** For each GPU count N in ``--gpus`` (those the host has; repeat counts to interleave runs), the same
archive (``--clips`` copies of a 10-second 1280×720 clip, one face) runs as ``emopipe CLIPS -o OUT --ray local
--ray-workers N`` with ``CUDA_VISIBLE_DEVICES`` set to the first N GPUs. Two throughputs per run: the **whole
command** (frames ÷ wall time from the command's start to its exit: Ray's start, the workers' start-up and warm-up
included) and the **steady state** (frames ÷ the time from every worker ready to the last source done, from the
summary's Ray timeline). Efficiency = throughput ÷ (N × the median one-GPU throughput of the same host); peak GPU
memory is the most any one GPU held (nvidia-smi, sampled every 0.5 s). An untimed run on one GPU and two clips
comes first (``--no-warm-up`` skips it): a host's first process compiles GPU code (workers ready at 23 s against
12 s on 2026-11-26), which would count against whichever GPU count ran first.

**Fleet.** For each N in ``--fleet-gpus`` and each K in ``--fleet`` (cameras per GPU), N emopipe processes run at
once, one per GPU (``CUDA_VISIBLE_DEVICES=i``), each with K in-process 720p30 cameras (benchmarks/fleet.py): the
N×K fleet holds when every camera of every process has capture → result p99 ≤ 50 ms and drops ≤ 1 %. emopipe has no
fleet over Ray workers (issue 22 leaves it optional), so a fleet spreads over GPUs as one command per GPU.

Tables are printed last; ``OUT/scaling.json`` has every number.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import synthetic

HERE = Path(__file__).resolve().parent


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


def visible(n: int, first: int = 0) -> dict[str, str]:
    return {**os.environ, "CUDA_VISIBLE_DEVICES": ",".join(str(i) for i in range(first, first + n))}


def run_archive(n: int, index: int | str, archive: Path, options: list[str], out: Path) -> dict:
    folder = out / f"run{index}-{n}gpu"
    shutil.rmtree(folder, ignore_errors=True)
    stop, peak = threading.Event(), {}
    sampler = threading.Thread(target=sample_memory, args=(stop, peak), daemon=True)
    sampler.start()
    t = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "emopipe", str(archive), "-o", str(folder), "--ray", "local",
                           "--ray-workers", str(n), *options], capture_output=True, text=True, env=visible(n))
    wall = time.perf_counter() - t
    stop.set()
    sampler.join()
    (out / f"log-run{index}-{n}gpu.txt").write_text(done.stderr)
    if done.returncode != 0:
        print(done.stderr[-3000:], file=sys.stderr)
    summary = json.loads((folder / "summary.json").read_text()) if (folder / "summary.json").exists() else {}
    ray = summary.get("ray", {})
    timeline = ray.get("timeline", {})
    steady = timeline.get("done_s", 0.0) - timeline.get("ready_s", timeline.get("first_ready_s", 0.0))
    return {"gpus": n, "wall_s": wall, "returncode": done.returncode, "frames": summary.get("frames", 0),
            "faces": summary.get("faces", 0), "steady_s": steady, "timeline": timeline,
            "peak_gpu_memory_mib": max(peak.values(), default=None), "peak_by_gpu_mib": peak,
            "worker_failures": ray.get("worker_failures"),
            "per_worker": {name: {k: w.get(k) for k in ("sources", "frames", "busy_s")}
                           for name, w in ray.get("per_worker", {}).items()}}


def run_fleet(n: int, cameras: int, seconds: float, models_dir: str | None, out: Path) -> dict:
    """N fleet.py processes at once, one per GPU, each with ``cameras`` cameras; every camera must hold."""
    folders = [out / f"fleet-{n}gpu-{cameras}cam-gpu{i}" for i in range(n)]
    commands = []
    for i, folder in enumerate(folders):
        shutil.rmtree(folder, ignore_errors=True)
        command = [sys.executable, str(HERE / "fleet.py"), "--counts", str(cameras), "--seconds", str(seconds),
                   "--out", str(folder)]
        if models_dir:
            command += ["--models-dir", models_dir]
        commands.append(subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                         env=visible(1, i)))
    logs = [p.communicate()[0] for p in commands]
    per_gpu = []
    for i, (folder, log) in enumerate(zip(folders, logs)):
        (out / f"log-fleet-{n}gpu-{cameras}cam-gpu{i}.txt").write_text(log)
        results = folder / "results.json"
        per_gpu.append(json.loads(results.read_text())[0] if results.exists() else None)
    ran = [r for r in per_gpu if r is not None]
    p99 = [r["worst_p99_s"] for r in ran]
    return {"gpus": n, "cameras_per_gpu": cameras, "cameras": n * cameras, "seconds": seconds,
            "frames_per_s": sum(r["frames_per_s"] for r in ran),
            "worst_p99_s": None if len(ran) < n or None in p99 else max(p99),
            "worst_drop_rate": max((r["worst_drop_rate"] for r in ran), default=None),
            "meets_target": len(ran) == n and all(r["meets_target"] for r in ran),
            "per_gpu": [{k: r[k] for k in ("worst_p99_s", "median_p50_s", "worst_drop_rate", "frames_per_s",
                                           "meets_target")} if r else None for r in per_gpu]}


def counts(text: str, available: int) -> list[int]:
    return [n for n in (int(v) for v in text.split(",") if v) if n <= available]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--clip", type=Path, help="the archive's clip (no archive half without it)")
    parser.add_argument("--clips", type=int, default=256)
    parser.add_argument("--gpus", default="1,2,4,8", help="GPU counts for the archive, in order; repeats allowed")
    parser.add_argument("--models-dir")
    parser.add_argument("--detector", default="blazeface_back")
    parser.add_argument("--fleet", default="", help="cameras per GPU to try, e.g. 24,28 (no fleet half if empty)")
    parser.add_argument("--fleet-gpus", default="1,2,4,8", help="GPU counts for the fleet")
    parser.add_argument("--fleet-seconds", type=float, default=20.0)
    parser.add_argument("--no-warm-up", action="store_true", help="no untimed first run (caches already warm)")
    args = parser.parse_args()
    available = gpu_count()
    archive_counts = counts(args.gpus, available) if args.clip else []
    fleet_counts = counts(args.fleet_gpus, available) if args.fleet else []
    if not archive_counts and not fleet_counts:
        print(f"nothing to run: this host has {available} GPU(s)", file=sys.stderr)
        return 1
    args.out.mkdir(parents=True, exist_ok=True)
    report: dict = {"date": time.strftime("%Y-%m-%d %H:%M"), "gpus_on_host": available, "archive": [], "fleet": []}
    options = []
    if archive_counts:
        archive = args.out / "clips"
        shutil.rmtree(archive, ignore_errors=True)
        archive.mkdir()
        for i in range(args.clips):
            shutil.copy(args.clip, archive / f"clip{i:04d}{args.clip.suffix}")
        weights = synthetic.random_checkpoint(args.out / "emonet_random.pth")
        options = ["--weights", str(weights), "--detector", args.detector, "--no-progress"]
        if args.models_dir:
            options += ["--models-dir", args.models_dir]
        if not args.no_warm_up:
            first = args.out / "warm-up-clips"
            shutil.rmtree(first, ignore_errors=True)
            first.mkdir()
            for path in sorted(archive.iterdir())[:2]:
                shutil.copy(path, first / path.name)
            warm = run_archive(1, "warm-up", first, options, args.out)
            report["warm_up"] = warm
            print(f"  warm-up (untimed): {warm['wall_s']:.1f} s, exit {warm['returncode']}", flush=True)
    for index, n in enumerate(archive_counts):
        report["archive"].append(run_archive(n, index, archive, options, args.out))
        (args.out / "scaling.json").write_text(json.dumps(report, indent=1))
        print(f"  archive on {n} GPU(s): {report['archive'][-1]['wall_s']:.1f} s", flush=True)
    for n in fleet_counts:
        for cameras in (int(v) for v in args.fleet.split(",")):
            report["fleet"].append(run_fleet(n, cameras, args.fleet_seconds, args.models_dir, args.out))
            (args.out / "scaling.json").write_text(json.dumps(report, indent=1))
            print(f"  fleet of {n}×{cameras}: {'PASS' if report['fleet'][-1]['meets_target'] else 'FAIL'}",
                  flush=True)

    print(f"\n{report['date']}, {available} GPU(s) on the host")
    runs = [r for r in report["archive"] if r["returncode"] == 0 and r["frames"]]
    if runs:
        one = [r for r in runs if r["gpus"] == 1]
        base_whole = statistics.median(r["frames"] / r["wall_s"] for r in one) if one else 0.0
        base_steady = statistics.median(r["frames"] / r["steady_s"] for r in one if r["steady_s"] > 0) if one else 0.0
        print(f"archive: {args.clips} clips of {args.clip.name}, {' '.join(options)}")
        print("| GPUs | wall s | frames/s (whole) | efficiency | steady s | frames/s (steady) | efficiency | faces/s "
              "(steady) | workers ready s | peak GPU memory MiB |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for r in runs:
            whole = r["frames"] / r["wall_s"]
            steady = r["frames"] / r["steady_s"] if r["steady_s"] > 0 else 0.0
            eff_whole = f"{whole / (r['gpus'] * base_whole):.0%}" if base_whole else "—"
            eff_steady = f"{steady / (r['gpus'] * base_steady):.0%}" if base_steady else "—"
            print(f"| {r['gpus']} | {r['wall_s']:.1f} | {whole:.0f} | {eff_whole} | {r['steady_s']:.1f} | "
                  f"{steady:.0f} | {eff_steady} | {r['faces'] / r['steady_s'] if r['steady_s'] > 0 else 0:.0f} | "
                  f"{r['timeline'].get('ready_s', 0):.1f} | {r['peak_gpu_memory_mib']} |")
    for r in report["archive"]:
        if r["returncode"] != 0:
            print(f"archive on {r['gpus']} GPU(s) exited with {r['returncode']}: see log-run*-{r['gpus']}gpu.txt")
    if report["fleet"]:
        print("fleet: cameras at 1280×720, 30 frames/s each; one emopipe process per GPU")
        print("| GPUs | cameras per GPU | cameras | frames/s | worst p99 ms | worst drops | target |")
        print("|---|---|---|---|---|---|---|")
        for f in report["fleet"]:
            p99 = f"{f['worst_p99_s'] * 1000:.1f}" if f["worst_p99_s"] is not None else "—"
            drops = f"{f['worst_drop_rate']:.2%}" if f["worst_drop_rate"] is not None else "—"
            print(f"| {f['gpus']} | {f['cameras_per_gpu']} | {f['cameras']} | {f['frames_per_s']:.0f} | {p99} | "
                  f"{drops} | {'PASS' if f['meets_target'] else 'FAIL'} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
