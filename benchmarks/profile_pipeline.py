"""Where a whole many-source run spends the GPU: how busy it is, and on which kernels; the detector's part.

    python3 benchmarks/profile_pipeline.py --video video_720p_h264.mp4 --copies 4 \
        --models-dir shared/models/blazeface --out profile.json

Two parts, on the default file path (BlazeFace back, its default detector batch, NVDEC where available):

* **The detector's device part** on a batch of real frames of ``--video``: the whole call as the pipeline
  makes it (``launch`` + ``collect``: network input, network, decoding, top-k, in one CUDA graph, then the
  host's NMS), and apart, eager and profiled, the network input (resize, letterbox, normalise) and the network.
* **A whole run**: ``--copies`` copies of ``--video`` through ``Analyzer.run_many`` once plain (frames/s) and once
  under the profiler (CUDA activity only). The GPU's busy time is the union of all its kernel and copy
  intervals; busy / pipeline seconds says how far the GPU is from being the limit, and the kernels summed by
  name say where its time goes. The profiled run is slower (the profiler records every kernel).

EmoNet gets a random official-format checkpoint (speed does not depend on its values).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import torch
from torch.profiler import ProfilerActivity, profile

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

import synthetic  # noqa: E402

import emopipe  # noqa: E402
from emopipe.vision.detectors import create_detector  # noqa: E402

GPU_EVENTS = ("kernel", "gpu_memcpy", "gpu_memset")  # what the GPU itself runs, in a Chrome trace


def gpu_ms(call, iters: int) -> float:
    """Milliseconds per call between CUDA events (warm: five calls first)."""
    for _ in range(5):
        call()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        call()
    end.record()
    torch.cuda.synchronize()
    return float(start.elapsed_time(end)) / iters


def top_kernels(prof, calls: int, count: int = 12) -> list[dict[str, object]]:
    rows = [(e.self_device_time_total, e.count, e.key) for e in prof.key_averages() if e.self_device_time_total > 0]
    return [{"kernel": name[:120], "us_per_call": round(us / calls, 1), "launches_per_call": n / calls}
            for us, n, name in sorted(rows, reverse=True)[:count]]


def detector_part(args: argparse.Namespace) -> dict[str, Any]:
    capture = cv2.VideoCapture(str(args.video))
    images = []
    while len(images) < args.detect_batch:
        ok, image = capture.read()
        if not ok:
            break
        images.append(image)
    capture.release()
    frames = torch.from_numpy(np.stack(images)).cuda()
    detector = create_detector(args.detector, device="cuda", models_dir=args.models_dir,
                               batch_size=args.detect_batch, precision="fp16")
    detector.warmup(int(frames.shape[1]), int(frames.shape[2]))
    with torch.inference_mode():
        network_input = detector.network_input(frames)
        report: dict[str, Any] = {
            "frames": len(images), "size": f"{frames.shape[2]}x{frames.shape[1]}", **detector.info(),
            "call_ms": gpu_ms(lambda: detector.launch(frames).collect(), args.iters),
            "network_input_ms": gpu_ms(lambda: detector.network_input(frames), args.iters),
            "network_ms": gpu_ms(lambda: detector.network(network_input), args.iters),
        }
        for part, call in (("network_input", lambda: detector.network_input(frames)),
                           ("network", lambda: detector.network(network_input))):
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for _ in range(args.iters):
                    call()
                torch.cuda.synchronize()
            report[f"{part}_kernels"] = top_kernels(prof, args.iters)
    report["call_ms_per_frame"] = round(report["call_ms"] / len(images), 4)
    return report


def busy_seconds(trace: Path) -> tuple[float, float, dict[str, float]]:
    """(union of the GPU's intervals, first start to last end, seconds by kernel name) from a Chrome trace."""
    events = [e for e in json.loads(trace.read_text())["traceEvents"]
              if e.get("ph") == "X" and e.get("cat") in GPU_EVENTS]
    if not events:
        return 0.0, 0.0, {}
    by_name: dict[str, float] = defaultdict(float)
    spans = sorted((float(e["ts"]), float(e["ts"]) + float(e["dur"])) for e in events)
    for e in events:
        by_name[str(e["name"])[:120]] += float(e["dur"]) / 1e6
    busy, (start, end) = 0.0, spans[0]
    for s, e in spans[1:]:
        if s > end:
            busy += end - start
            start, end = s, e
        else:
            end = max(end, e)
    busy += end - start
    return busy / 1e6, (spans[-1][1] - spans[0][0]) / 1e6, dict(by_name)


def whole_run(args: argparse.Namespace, work: Path) -> list[dict[str, Any]]:
    folder = work / "sources"
    folder.mkdir()
    for i in range(args.copies):
        shutil.copy(args.video, folder / f"copy{i}{args.video.suffix}")
    weights = synthetic.random_checkpoint(work / "emonet_random.pth")
    runs = []
    with emopipe.Analyzer(weights=str(weights), detector=args.detector, models_dir=args.models_dir,
                          device=args.device) as analyzer:
        for profiled in (False, True):
            out = work / f"out-{'profiled' if profiled else 'plain'}"
            started = time.perf_counter()
            if profiled:  # (the CPU's activity on a check run without a GPU)
                activity = ProfilerActivity.CUDA if args.device.startswith("cuda") else ProfilerActivity.CPU
                with profile(activities=[activity]) as prof:
                    outcome = analyzer.run_many([str(folder)], out)
            else:
                outcome = analyzer.run_many([str(folder)], out)
            wall = time.perf_counter() - started
            summary = outcome.summary
            assert summary is not None
            run: dict[str, Any] = {
                "profiled": profiled, "wall_s": round(wall, 2), "frames": summary.frames, "faces": summary.faces,
                "pipeline_s": round(summary.seconds, 2), "frames_per_s": round(summary.fps, 1),
                "faces_per_s": round(summary.faces_per_s, 1), "decoder": summary.decoder,
                "stage_seconds": summary.stage_seconds,
                "ok": sum(r.status == "ok" for r in outcome.results)}
            if profiled:
                trace = work / "trace.json"
                prof.export_chrome_trace(str(trace))
                busy, span, by_name = busy_seconds(trace)
                run.update(gpu_busy_s=round(busy, 2), gpu_span_s=round(span, 2),
                           gpu_busy_of_pipeline=round(busy / summary.seconds, 3) if summary.seconds else None,
                           top_kernels_s=[{"kernel": k, "s": round(v, 3)} for k, v in
                                          sorted(by_name.items(), key=lambda kv: -kv[1])[:15]])
            runs.append(run)
    return runs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--video", type=Path, required=True, help="a long 720p video with faces")
    ap.add_argument("--copies", type=int, default=4)
    ap.add_argument("--models-dir")
    ap.add_argument("--detector", default="blazeface_back")
    ap.add_argument("--detect-batch", type=int, default=32)
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--device", default="cuda", help="cpu: the whole run only, to check the script (no GPU numbers)")
    args = ap.parse_args()
    torch.backends.cudnn.benchmark = True
    on_gpu = args.device.startswith("cuda")
    results: dict[str, Any] = {"gpu": torch.cuda.get_device_name() if on_gpu else None, "torch": torch.__version__,
                               "date": time.strftime("%Y-%m-%d")}
    if on_gpu:
        results["detector_part"] = detector_part(args)
        torch.cuda.empty_cache()
    with tempfile.TemporaryDirectory() as work:
        results["runs"] = whole_run(args, Path(work))
    args.out.write_text(json.dumps(results, indent=1))
    part = results.get("detector_part")
    if part:
        print(f"{results['gpu']}: detector call of {part['frames']} frames {part['call_ms']:.2f} ms "
              f"(network input {part['network_input_ms']:.2f} ms, network {part['network_ms']:.2f} ms, eager)")
    print("| run | frames/s | faces/s | pipeline s | GPU busy s | busy / pipeline |\n|---|---|---|---|---|---|")
    for run in results["runs"]:
        print(f"| {'profiled' if run['profiled'] else 'plain'} | {run['frames_per_s']} | {run['faces_per_s']} | "
              f"{run['pipeline_s']} | {run.get('gpu_busy_s', '')} | {run.get('gpu_busy_of_pipeline', '')} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
