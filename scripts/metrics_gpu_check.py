"""On a GPU: do the metrics cost anything, and does a run's /metrics agree with the benchmark?

    PYTHONPATH=. python scripts/metrics_gpu_check.py --device cuda --batch-size 32
    PYTHONPATH=. python scripts/metrics_gpu_check.py --device cuda --batch-size 32 --run-args "--detector sfd"

1. Engine only (random EmoNet weights; speed does not depend on them): steady batches of the static
   shape timed bare, with a host clock + ``observe_batch``, and with :class:`emopipe.metrics.GpuTimer`
   (CUDA events, read without waiting). Prints the median per batch of each and what the metrics add.
2. When the run command exists (emopipe/run.py): a real run on a synthesised video with
   ``--metrics-port``; while it lingers, /metrics is scraped and the first-frame latency, steady-state
   p50/p99 (bucket interpolation, as PromQL's histogram_quantile), per-stage means and start-up are
   printed — to set beside ``emopipe bench`` on the same GPU (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import shlex
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests")]  # emopipe from this checkout; tests/ for the video and scrape


def engine_overhead(device: str, batch_size: int, batches: int) -> None:
    import torch  # noqa: I001
    from emopipe.engines.base import EngineOptions
    from emopipe.pipeline.timing import GpuTimer
    from prometheus_client import CollectorRegistry

    from emopipe.engines.torch_engine import TorchEngine
    from emopipe.model.emonet import EmoNet
    from emopipe.observe.metrics import PipelineMetrics

    engine = TorchEngine(EmoNet(8), EngineOptions(device=device, batch_size=batch_size))
    report = engine.warmup()
    print(f"engine: {engine.info()}; {report.describe()}")
    crops = torch.randint(0, 256, (batch_size, 3, 256, 256), dtype=torch.uint8).pin_memory() \
        if engine.device.type == "cuda" else torch.randint(0, 256, (batch_size, 3, 256, 256), dtype=torch.uint8)
    registry = CollectorRegistry()
    metrics = PipelineMetrics(registry, info={}, batch_sizes=(batch_size,))
    timer = GpuTimer() if engine.device.type == "cuda" else None
    event_times: list[float] = []

    def bare() -> None:
        engine.infer(crops)

    def host_clock() -> None:
        t = time.perf_counter()
        engine.infer(crops)
        metrics.observe_batch(batch_size, batch_size, time.perf_counter() - t)

    def cuda_events() -> None:
        with timer.measure(event_times.append):
            engine.infer(crops)

    variants = [("bare", bare), ("host clock + observe_batch", host_clock)]
    if timer is not None:
        variants.append(("GpuTimer (CUDA events)", cuda_events))
    results = {}
    for _ in range(2):  # alternate, so drift hits every variant alike
        for name, run in variants:
            samples = results.setdefault(name, [])
            for _ in range(batches):
                t = time.perf_counter()
                run()
                samples.append(time.perf_counter() - t)
    if timer is not None:
        timer.drain()
    base = statistics.median(results["bare"])
    print(f"\n| timing | median ms / batch of {batch_size} | vs bare |\n|---|---|---|")
    for name, samples in results.items():
        med = statistics.median(samples)
        print(f"| {name} | {med * 1000:.3f} | {100 * (med - base) / base:+.2f} % |")
    if event_times:
        print(f"| (GPU time by events, median) | {statistics.median(event_times) * 1000:.3f} | |")


def _quantile(q: float, values: dict, name: str, **labels: str) -> float:
    """histogram_quantile over a cumulative histogram's buckets (linear within a bucket)."""
    buckets = sorted((float(dict(lbl)["le"]), v) for (n, lbl), v in values.items()
                     if n == f"{name}_bucket" and all(dict(lbl).get(k) == x for k, x in labels.items()))
    total = buckets[-1][1] if buckets else 0
    if not total:
        return math.nan
    rank, lower, below = q * total, 0.0, 0.0
    for le, count in buckets:
        if count >= rank:
            return lower if math.isinf(le) else lower + (le - lower) * (rank - below) / (count - below)
        lower, below = le, count
    return math.nan


def real_run(device: str, batch_size: int, frames: int, run_args: list[str]) -> None:
    from prometheus_helpers import scrape
    from synth import moving_face_video

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with tempfile.TemporaryDirectory() as tmp:
        video = moving_face_video(Path(tmp) / "clip.mp4", frames=frames, size=(1280, 720), empty=None)
        command = [sys.executable, "-m", "emopipe", str(video.path), "--device", device, "--batch-size",
                   str(batch_size), "--metrics-port", str(port), "--metrics-host", "127.0.0.1",
                   "--metrics-linger", "300", "-o", str(Path(tmp) / "out.csv"), *run_args]
        print("\n$ " + shlex.join(command))
        proc = subprocess.Popen(command, cwd=REPO)
        url = f"http://127.0.0.1:{port}/metrics"
        try:
            final: dict = {}
            deadline = time.monotonic() + 600
            while time.monotonic() < deadline and proc.poll() is None:
                try:
                    values = scrape(url)
                except OSError:
                    time.sleep(0.2)
                    continue
                if values.get(("emopipe_frames_total", frozenset())) == frames and values == final:
                    break
                final = values
                time.sleep(0.5)
            if proc.poll() is not None or final.get(("emopipe_frames_total", frozenset())) != frames:
                raise SystemExit(f"the run did not finish {frames} frames and linger (exit code {proc.returncode})")
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=30)

    def get(name: str, **labels: str) -> float:
        return final.get((name, frozenset(labels.items())), math.nan)

    (build,) = [dict(lbl) for n, lbl in final if n == "emopipe_build_info"]
    print(f"\nbuild: {build}")
    first = get("emopipe_first_frame_latency_seconds")
    p50 = _quantile(0.5, final, "emopipe_frame_latency_seconds", phase="steady")
    p99 = _quantile(0.99, final, "emopipe_frame_latency_seconds", phase="steady")
    print(f"\n| {frames} frames, 1280×720, one face each | value |\n|---|---|")
    print(f"| start-up: load / warmup | {get('emopipe_startup_seconds', step='load'):.2f} s / "
          f"{get('emopipe_startup_seconds', step='warmup'):.2f} s |")
    print(f"| first frame (read → written) | {first * 1000:.1f} ms |")
    print(f"| steady p50 / p99 (bucket interpolation) | {p50 * 1000:.1f} ms / {p99 * 1000:.1f} ms |")
    print(f"| first ÷ steady p50 | {first / p50:.1f}× |")
    for stage in ("decode", "detect", "nms", "crop", "infer", "write"):
        n, total = get("emopipe_stage_seconds_count", stage=stage), get("emopipe_stage_seconds_sum", stage=stage)
        print(f"| {stage}: calls, mean | {n:.0f}, {1000 * total / n if n else math.nan:.2f} ms |")
    sizes = sorted({dict(lbl)["batch_size"] for n, lbl in final if n == "emopipe_inference_batch_seconds_count"})
    for size in sizes:
        for phase in ("first", "steady"):
            n = get("emopipe_inference_batch_seconds_count", batch_size=size, phase=phase)
            total = get("emopipe_inference_batch_seconds_sum", batch_size=size, phase=phase)
            print(f"| batch {size} {phase}: batches, mean | {n:.0f}, {1000 * total / n if n else math.nan:.2f} ms |")
    print(f"| batch fill | {get('emopipe_batch_fill_ratio'):.3f} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--batches", type=int, default=100, help="steady batches per timing variant and round")
    parser.add_argument("--frames", type=int, default=300, help="frames of the synthesised video for the real run")
    parser.add_argument("--run-args", default="", help="extra arguments for the real run, e.g. '--detector sfd'")
    parser.add_argument("--skip-engine", action="store_true", help="only the real run")
    args = parser.parse_args()
    if not args.skip_engine:
        engine_overhead(args.device, args.batch_size, args.batches)
    if importlib.util.find_spec("emopipe.run") is None:
        print("\n(no emopipe/run.py here: the real-run part is skipped)")
    else:
        real_run(args.device, args.batch_size, args.frames, shlex.split(args.run_args))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
