#!/usr/bin/env python3
"""What a detector's warm-up costs against what its layout, precision and cuDNN tuning give in the steady state.

    python3 benchmarks/detector_warmup.py --models-dir shared/models/blazeface --faces shared/data/faces/4faces.png \
        [--rounds 2] [--out warmup.json]

Each variant runs in a process of its own (cuDNN's choices and the loaded GPU code live per process): the detector
is built, ``warmup(720, 1280)`` timed (its first calls tune; its CUDA graph is captured), then 200 calls' device part
(letterbox, network, decoding, top-k: one CUDA graph replay) timed between CUDA events, and one real-face frame
detected, so the variants' boxes can be compared. S3FD runs with random weights (its file is not reachable offline,
so it is built from its class, not ``create_detector``): timing only.

2026-11-25, H200 (docs/results/2026-11-25/h200/session7/r37b): an earlier form of this script timed the graph's
replays directly; the numbers in docs/benchmarks.md come from it. Boxes and scores are compared with the same
detector's default variant. ``unfused``: BlazeFace's blocks as the network's own modules (before 2026-11-27).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

VARIANTS = {  # name: detector, precision, channels_last, cuDNN autotuning, batch, fused (None: the default)
    "blazeface_back fp16 NHWC tuned (default)": ("blazeface_back", "fp16", True, True, 32, None),
    "blazeface_back fp16 NHWC tuned unfused": ("blazeface_back", "fp16", True, True, 32, False),
    "blazeface_back fp16 NHWC heuristics": ("blazeface_back", "fp16", True, False, 32, None),
    "blazeface_back fp16 NCHW tuned": ("blazeface_back", "fp16", False, True, 32, None),
    "blazeface_back fp16 NCHW heuristics": ("blazeface_back", "fp16", False, False, 32, None),
    "blazeface_back fp32 NCHW tuned": ("blazeface_back", "fp32", False, True, 32, None),
    "blazeface fp16 NHWC tuned (default)": ("blazeface", "fp16", True, True, 32, None),
    "blazeface fp16 NHWC tuned unfused": ("blazeface", "fp16", True, True, 32, False),
    "sfd fp16 NHWC tuned (default)": ("sfd", "fp16", True, True, 8, None),
    "sfd fp16 NHWC heuristics": ("sfd", "fp16", True, False, 8, None),
    "sfd fp16 NCHW tuned": ("sfd", "fp16", False, True, 8, None),
}
HEIGHT, WIDTH, REPLAYS = 720, 1280, 200


def _time_calls(detector, frames, cuda: bool) -> float:
    """Milliseconds of device time per call: ``launch`` queues the device part (one CUDA graph replay after
    warm-up) and its copy out, bracketed by CUDA events; the host's NMS (``collect``) is left out."""
    import torch

    if not cuda:
        t = time.perf_counter()
        detector.detect(frames)
        return (time.perf_counter() - t) * 1000
    for _ in range(20):
        detector.launch(frames).collect()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    pending = [detector.launch(frames) for _ in range(REPLAYS)]
    end.record()
    end.synchronize()
    for call in pending:
        call.collect()
    return start.elapsed_time(end) / REPLAYS


def child(name: str, models_dir: str, faces: str | None, device: str) -> dict:
    started = time.perf_counter()
    import cv2
    import numpy as np
    import torch

    from emopipe.vision.detectors import DETECTORS

    detector_name, precision, channels_last, tuned, batch, fused = VARIANTS[name]
    torch.backends.cudnn.benchmark = tuned
    imported = time.perf_counter()
    cuda = device != "cpu"  # the CPU path only checks that this script runs
    options = dict(device=device, batch_size=batch, precision=precision if cuda else "fp32",
                   channels_last=channels_last, cuda_graphs=cuda)
    if detector_name == "sfd":
        from face_alignment.detection.sfd.net_s3fd import s3fd

        from emopipe.vision.detectors.s3fd import S3FDDetector

        torch.manual_seed(0)
        detector = S3FDDetector(s3fd(), **options)
    else:
        detector = DETECTORS.get(detector_name)(models_dir, None, fuse=fused, **options)
    built = time.perf_counter()
    warm = detector.warmup(HEIGHT, WIDTH).seconds
    frames = torch.full((batch, HEIGHT, WIDTH, 3), 127, dtype=torch.uint8, device=device)
    with torch.inference_mode():  # the graph's buffers are inference tensors
        call_ms = _time_calls(detector, frames, cuda)
    result = {"variant": name, "import_s": imported - started, "build_s": built - imported, "warmup_s": warm,
              "call_ms": call_ms, "frames_per_call": batch}
    if faces and detector_name != "sfd":
        image = cv2.imread(faces)
        scale = min(WIDTH / image.shape[1], HEIGHT / image.shape[0])
        image = cv2.resize(image, (int(image.shape[1] * scale), int(image.shape[0] * scale)))
        canvas = np.full((HEIGHT, WIDTH, 3), 127, np.uint8)
        canvas[: image.shape[0], : image.shape[1]] = image
        (found,) = detector.detect(torch.from_numpy(canvas)[None].to(device))
        result["boxes"] = np.asarray(found.boxes).round(2).tolist()
        result["scores"] = np.asarray(found.scores).round(4).tolist()
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models-dir", required=True, help="folder with the BlazeFace weights and anchors")
    parser.add_argument("--faces", help="a photo with faces, detected by each BlazeFace variant to compare boxes")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--only", help="variants whose name contains this")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.models_dir, args.faces, args.device)))
        return 0
    results = []
    for round_ in range(args.rounds):
        for name in [v for v in VARIANTS if not args.only or args.only in v]:
            command = [sys.executable, __file__, "--models-dir", args.models_dir, "--device", args.device,
                       "--child", name]
            done = subprocess.run(command + (["--faces", args.faces] if args.faces else []), capture_output=True,
                                  text=True)
            if done.returncode != 0:
                print(f"{name}: failed\n{done.stderr[-2000:]}", file=sys.stderr)
                continue
            result = json.loads(done.stdout.strip().splitlines()[-1]) | {"round": round_}
            results.append(result)
            print(f"round {round_} {name:45s} warmup {result['warmup_s']:.3f} s, call {result['call_ms']:.3f} ms "
                  f"({result['frames_per_call']} frames), build {result['build_s']:.2f} s", flush=True)
    for r in results:
        reference = next((q for q in results if q["variant"].split()[0] == r["variant"].split()[0]
                          and q["variant"].endswith("(default)")), None)
        if reference and "boxes" in r and len(r["boxes"]) == len(reference["boxes"]) and r["boxes"]:
            import numpy as np

            r["max_box_diff_px"] = float(np.abs(np.array(r["boxes"]) - np.array(reference["boxes"])).max())
            r["max_score_diff"] = float(np.abs(np.array(r["scores"]) - np.array(reference["scores"])).max())
    print(f"\n{'variant':45s} {'warmup s':>9s} {'call ms':>8s} {'faces':>5s} {'box Δpx':>8s} {'score Δ':>8s}")
    for r in results:
        print(f"{r['variant']:45s} {r['warmup_s']:9.3f} {r['call_ms']:8.3f} {len(r.get('boxes', [])):5d} "
              f"{r.get('max_box_diff_px', float('nan')):8.2f} {r.get('max_score_diff', float('nan')):8.4f}")
    if args.out:
        args.out.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
