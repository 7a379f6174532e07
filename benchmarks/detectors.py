"""Time each face detector at its working size on a 1280×720 frame: batch 1 and 8, fp32 and fp16.

Usage (on the GPU machine, from the repository root)::

    python benchmarks/detectors.py                       # all detectors, cuda, batches 1,8, fp32,fp16
    python benchmarks/detectors.py --detectors sfd --batches 1,4,8 --json out.json

For each configuration the detector is built, warmed up (cuDNN benchmark on, so this is where
it tunes), and then timed with CUDA events over ``--iters`` calls, median reported:

* ``network``: the forward pass alone on the static letterboxed batch;
* ``detect``: the whole ``detect()`` — resize + letterbox, forward, decoding, candidate transfer,
  NMS on the host, mapping back — on frames already on the device (the pipeline uploads once).

Weights are used when found (``--models-dir``, ``$EMOPIPE_HOME``, ``shared/models/blazeface``,
``../shared/models/blazeface``); otherwise the network is randomly initialised (speed does not
depend on the values). A random S3FD scores every anchor near 0.5, which would swamp NMS with
thousands of false candidates, so its face logit is biased down: the timed post-processing then
matches a real frame with a face or two (the astronaut is pasted into the frame).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from emopipe.errors import WeightsError
from emopipe.model import weights
from emopipe.vision.detectors import FaceDetector
from emopipe.vision.detectors.base import load_network_weights
from emopipe.vision.detectors.blazeface import BlazeFaceDetector, load_anchors
from emopipe.vision.detectors.s3fd import DEFAULT_WORKING_SIZE, S3FDDetector

REPO = Path(__file__).resolve().parents[1]


def find_weights(name: str, models_dir: str | None) -> Path | None:
    candidates = [models_dir] if models_dir else []
    candidates += [None, REPO / "shared" / "models" / "blazeface", REPO.parent / "shared" / "models" / "blazeface"]
    for directory in candidates:
        try:
            return weights.ensure(name, directory, allow_download=False)
        except WeightsError:
            continue
    return None


def blazeface_anchors() -> np.ndarray:
    """MediaPipe's table: 2 anchors per cell of a 16×16 grid, then 6 per cell of 8×8, unit size."""
    rows = [((x + 0.5) / n, (y + 0.5) / n, 1.0, 1.0)
            for n, per_cell in ((16, 2), (8, 6)) for y in range(n) for x in range(n) for _ in range(per_cell)]
    return np.array(rows, dtype=np.float32)


def build(name: str, args: argparse.Namespace, batch: int, precision: str) -> tuple[FaceDetector, str]:
    options = {"device": args.device, "batch_size": batch, "precision": precision,
               "channels_last": {"auto": None, "on": True, "off": False}[args.channels_last]}
    if name == "sfd":
        from face_alignment.detection.sfd.net_s3fd import s3fd

        network, origin = s3fd(), "random"
        path = find_weights("s3fd", args.models_dir)
        if path:
            network, origin = load_network_weights(network, path), "real"
        else:
            torch.manual_seed(0)
            with torch.no_grad():  # background logits up: a random network otherwise "sees" faces everywhere
                for layer in (network.conv3_3_norm_mbox_conf, network.conv4_3_norm_mbox_conf,
                              network.conv5_3_norm_mbox_conf, network.fc7_mbox_conf,
                              network.conv6_2_mbox_conf, network.conv7_2_mbox_conf):
                    layer.bias[-1] -= 8.0
        return S3FDDetector(network, working_size=args.working_size, **options), origin
    from face_alignment.detection.blazeface.net_blazeface import BlazeFace

    back = name == "blazeface_back"
    prefix = "blazeface_back" if back else "blazeface_front"
    network, origin = BlazeFace(back_model=back), "random"
    path, anchors_path = find_weights(prefix, args.models_dir), find_weights(f"{prefix}_anchors", args.models_dir)
    if path:
        network, origin = load_network_weights(network, path), "real"
    anchors = load_anchors(anchors_path) if anchors_path else blazeface_anchors()
    return BlazeFaceDetector(network, anchors, back_model=back, name=name, **options), origin


def test_frame(width: int, height: int) -> np.ndarray:
    import cv2
    from skimage import data

    rng = np.random.default_rng(0)
    frame = rng.integers(40, 200, (height, width, 3), dtype=np.uint8)
    face = cv2.cvtColor(data.astronaut(), cv2.COLOR_RGB2BGR)[10:260, 110:340]
    scale = height * 0.5 / face.shape[0]
    face = cv2.resize(face, None, fx=scale, fy=scale, interpolation=cv2.INTER_AREA)
    y, x = height // 4, width // 3
    frame[y:y + face.shape[0], x:x + face.shape[1]] = face
    return frame


def time_cuda(fn, iters: int) -> list[float]:
    times = []
    for _ in range(iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return times


def time_host(fn, iters: int) -> list[float]:
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--detectors", default="sfd,blazeface,blazeface_back")
    parser.add_argument("--batches", default="1,8")
    parser.add_argument("--precisions", default="fp32,fp16")
    parser.add_argument("--frame", default="1280x720", help="WIDTHxHEIGHT")
    parser.add_argument("--cudnn-benchmark", choices=("on", "off"), default="on",
                        help="off: cuDNN's heuristics pick the algorithms (warmup cost against speed)")
    parser.add_argument("--working-size", type=int, default=DEFAULT_WORKING_SIZE, help="S3FD long side")
    parser.add_argument("--channels-last", choices=("auto", "on", "off"), default="auto")
    parser.add_argument("--iters", type=int, default=50)
    parser.add_argument("--models-dir")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    cuda = args.device.startswith("cuda")
    if cuda:
        torch.backends.cudnn.benchmark = args.cudnn_benchmark == "on"
    width, height = (int(v) for v in args.frame.lower().split("x"))
    frame = torch.from_numpy(test_frame(width, height))
    clock = time_cuda if cuda else time_host
    rows = []
    for name in args.detectors.split(","):
        for precision in args.precisions.split(","):
            for batch in (int(b) for b in args.batches.split(",")):
                detector, origin = build(name, args, batch, precision)
                frames = frame.to(detector.device).unsqueeze(0).expand(batch, -1, -1, -1).contiguous()
                report = detector.warmup(height, width)
                x = detector.network_input(frames)
                with torch.inference_mode():
                    network_ms = clock(lambda x=x, d=detector: d.network(x), args.iters)
                detect_ms = clock(lambda f=frames, d=detector: d.detect(f), args.iters)
                faces = [len(d) for d in detector.detect(frames)]
                h, w = detector.input_size or (0, 0)
                rows.append({
                    "detector": name, "weights": origin, "precision": precision, "batch": batch,
                    "input": f"{w}x{h}", "channels_last": detector.channels_last,
                    "warmup_s": round(report.seconds, 3),
                    "network_ms": round(statistics.median(network_ms), 3),
                    "detect_ms": round(statistics.median(detect_ms), 3),
                    "detect_ms_per_frame": round(statistics.median(detect_ms) / batch, 3),
                    "frames_per_s": round(1000 * batch / statistics.median(detect_ms), 1),
                    "faces_found": faces[0],
                })
                print(f"done: {name} {precision} b{batch}", file=sys.stderr, flush=True)
                del detector, frames, x
                if cuda:
                    torch.cuda.empty_cache()
    device = torch.cuda.get_device_name() if cuda else "cpu"
    print(f"\n{device}, frame {width}×{height}, median of {args.iters} "
          f"({'CUDA events' if cuda else 'host clock'}), torch {torch.__version__}\n")
    print("| detector | weights | precision | batch | input | warmup s | network ms | detect ms | "
          "detect ms/frame | frames/s | faces |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['detector']} | {r['weights']} | {r['precision']} | {r['batch']} | {r['input']} | "
              f"{r['warmup_s']:.2f} | {r['network_ms']:.2f} | {r['detect_ms']:.2f} | "
              f"{r['detect_ms_per_frame']:.2f} | {r['frames_per_s']:.0f} | {r['faces_found']} |")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
