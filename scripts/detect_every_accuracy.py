"""What ``--detect-every K`` costs in accuracy: boxes and EmoNet's answers against detecting every frame.

    python scripts/detect_every_accuracy.py [--device cpu] [--frames 60] [--every 2,3,5,8] [--json out.json]

Videos are synthesised (1280×720, 30 fps) from the astronaut's face, moving three ways: a talking
head (slow drift and jitter), a steady pan, and a head shake (fast, changing speed). Each runs through
the product's pipeline with BlazeFace (back model, real weights from shared/models/blazeface or
$EMOPIPE_HOME) and EmoNet (a random checkpoint with its head refitted on real faces, as in
scripts/accuracy_guard.py; or --weights), once per K. The frames between key frames are compared
with the K = 1 run: how far their boxes are from the detector's own, whether the face is there,
and whether EmoNet says the same.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from synth import background, paste_head, write_video  # noqa: E402

from emopipe.engines.accuracy import face_photos, jittered_crops  # noqa: E402
from emopipe.engines.base import EngineOptions  # noqa: E402
from emopipe.engines.torch_engine import TorchEngine  # noqa: E402
from emopipe.io.sources import open_source  # noqa: E402
from emopipe.model.emonet import build_emonet, read_checkpoint  # noqa: E402
from emopipe.pipeline.runner import Pipeline, PipelineSettings  # noqa: E402
from emopipe.types import FrameResult  # noqa: E402
from emopipe.vision.crop import FaceCropper  # noqa: E402
from emopipe.vision.detect import create_detector  # noqa: E402
from emopipe.vision.track import box_iou  # noqa: E402

WIDTH, HEIGHT, FPS = 1280, 720, 30.0


def head_path(motion: str, i: int, rng: np.random.Generator) -> tuple[float, float, float]:
    """(centre x, centre y, scale) of the head in frame i."""
    t = i / FPS
    if motion == "talking head":  # drifts 0.5 px/frame, nods and jitters by a few pixels
        return (500 + 15 * i + 6 * math.sin(2 * math.pi * t / 1.7) + rng.normal(0, 1.5),
                360 + 8 * math.sin(2 * math.pi * t / 1.1) + rng.normal(0, 1.5), 2.0 + 0.05 * math.sin(t))
    if motion == "steady pan":  # 6 px/frame across, zooming in slowly
        return 300 + 6 * i, 360 + 1 * i, 1.8 + 0.006 * i
    if motion == "head shake":  # ±40 px, 0.8 s period: up to 10 px/frame, changing direction
        return 640 + 40 * math.sin(2 * math.pi * t / 0.8), 360 + 5 * math.sin(2 * math.pi * t / 1.6), 2.0
    raise ValueError(motion)


def synthesise(path: Path, motion: str, frames: int) -> list[tuple[float, ...]]:
    rng = np.random.default_rng(0)
    images, truth = [], []
    for i in range(frames):
        frame = background(WIDTH, HEIGHT, seed=i % 8)
        truth.append(paste_head(frame, *head_path(motion, i, rng)))
        images.append(frame)
    write_video(path, images, FPS)
    return truth


class Collect:
    def __init__(self) -> None:
        self.results: list[FrameResult] = []

    def write(self, result: FrameResult) -> None:
        self.results.append(result)

    def close(self) -> None: ...


def run(video: Path, every: int, engine: TorchEngine, device: str) -> tuple[list[FrameResult], dict]:
    detector = create_detector("blazeface_back", device=device, batch_size=1 if device == "cpu" else 8)
    sink = Collect()
    pipeline = Pipeline(open_source(video), detector, FaceCropper(device=engine.device, dtype=engine.dtype), engine,
                        [sink], settings=PipelineSettings(detect_batch=detector.batch_size, detect_every=every))
    pipeline.run()
    return sink.results, pipeline.summary().as_dict()


def answers_on_true_boxes(results: list[FrameResult], truth: list[tuple[float, ...]], engine: TorchEngine) -> dict:
    """EmoNet on a crop of each frame's true face box: (class, valence, arousal) by frame index."""
    cropper = FaceCropper(device=engine.device, dtype=engine.dtype)
    out = {}
    for start in range(0, len(results), engine.batch_size):
        chunk = results[start:start + engine.batch_size]
        frames = torch.from_numpy(np.stack([r.frame.bgr for r in chunk])).to(engine.device)
        crops = cropper.crop(frames, [np.array([truth[r.frame.index]], np.float32) for r in chunk]).crops
        padded = torch.cat([crops, crops.new_zeros((engine.batch_size - len(chunk), *crops.shape[1:]))])
        answer = engine.infer(padded)
        for i, r in enumerate(chunk):
            out[r.frame.index] = (int(answer.probabilities[i].argmax()), float(answer.valence[i]),
                                  float(answer.arousal[i]))
    return out


def compare(reference: list[FrameResult], sparse: list[FrameResult], truth: list[tuple[float, ...]],
            on_truth: dict) -> dict:
    """The frames between key frames against the same frames detected, and both against the true boxes."""
    ious, truth_ious, same_class, dv, da = [], [], [], [], []
    truth_class = {"detected": [], "given": []}  # same class as EmoNet on the true box?
    missing = extra = between = 0
    for ref, got in zip(reference, sparse, strict=True):
        if got.detected:
            continue
        between += 1
        missing += len(ref.faces) > 0 and len(got.faces) == 0
        extra += len(ref.faces) == 0 and len(got.faces) > 0
        if not (ref.faces and got.faces):
            continue
        overlap = box_iou(got.detections.boxes[:1], ref.detections.boxes[:1])[0, 0]
        ious.append(overlap)
        truth_ious.append(box_iou(got.detections.boxes[:1], np.array([truth[got.frame.index]]))[0, 0])
        a, b = ref.faces[0], got.faces[0]
        same_class.append(int(np.argmax(a.probabilities)) == int(np.argmax(b.probabilities)))
        dv.append(abs(a.valence - b.valence))
        da.append(abs(a.arousal - b.arousal))
        true_class = on_truth[got.frame.index][0]
        truth_class["detected"].append(int(np.argmax(a.probabilities)) == true_class)
        truth_class["given"].append(int(np.argmax(b.probabilities)) == true_class)
    q = lambda xs, p: float(np.quantile(xs, p)) if xs else float("nan")  # noqa: E731
    mean = lambda xs: float(np.mean(xs)) if xs else float("nan")  # noqa: E731
    return {"frames_between": between, "iou_with_detected_mean": float(np.mean(ious)) if ious else float("nan"),
            "iou_with_detected_min": min(ious, default=float("nan")),
            "iou_with_truth_mean": float(np.mean(truth_ious)) if truth_ious else float("nan"),
            "missing_faces": missing, "extra_faces": extra,
            "class_agreement": float(np.mean(same_class)) if same_class else float("nan"),
            "valence_abs_diff_p50": q(dv, 0.5), "valence_abs_diff_max": max(dv, default=float("nan")),
            "arousal_abs_diff_p50": q(da, 0.5), "arousal_abs_diff_max": max(da, default=float("nan")),
            "true_box_class_agreement_detected": mean(truth_class["detected"]),
            "true_box_class_agreement_given": mean(truth_class["given"])}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--frames", type=int, default=60)
    parser.add_argument("--every", default="2,3,5,8")
    parser.add_argument("--motions", default="talking head,steady pan,head shake")
    parser.add_argument("--weights", type=Path, help="an EmoNet checkpoint (default: the refitted random one)")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/detect_every"))
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    shared = REPO.parent / "shared" / "models" / "blazeface"
    if "EMOPIPE_HOME" not in os.environ and shared.is_dir():
        os.environ["EMOPIPE_HOME"] = str(shared)
    if args.weights:
        model = build_emonet(read_checkpoint(args.weights))
    else:
        from checkpoints import calibrated_state

        model = build_emonet(calibrated_state(8, jittered_crops(face_photos(), 64, seed=1)))
    engine = TorchEngine(model, EngineOptions(device=args.device, batch_size=8))
    engine.warmup()
    args.workdir.mkdir(parents=True, exist_ok=True)
    report = {"device": args.device, "torch": torch.__version__, "frames": args.frames, "rows": []}
    print(f"{args.frames} frames of 1280×720 per motion, BlazeFace back, EmoNet on {args.device}")
    print("motion | K | frames between | box IoU with the detector's (mean / min) | IoU with the true box "
          "(detected / given) | faces missing / extra | same class | |Δvalence| p50 / max | |Δarousal| p50 / max "
          "| same class as on the true box (detected / given) | detect + nms s per frame")
    for motion in args.motions.split(","):
        video = args.workdir / f"{motion.replace(' ', '_')}.mp4"
        truth = synthesise(video, motion, args.frames)
        t = time.perf_counter()
        reference, ref_summary = run(video, 1, engine, args.device)
        on_truth = answers_on_true_boxes(reference, truth, engine)
        ref_truth = np.mean([box_iou(r.detections.boxes[:1], np.array([truth[r.frame.index]]))[0, 0]
                             for r in reference if len(r.detections)])
        ref_detect = sum(ref_summary["stage_seconds"].get(k, 0.0) for k in ("detect", "nms")) / args.frames
        print(f"{motion} | 1 | – | – | {ref_truth:.3f} | – | – | – | – | – | {ref_detect * 1000:.2f} ms "
              f"({time.perf_counter() - t:.0f} s run)")
        for every in (int(k) for k in args.every.split(",")):
            sparse, summary = run(video, every, engine, args.device)
            row = compare(reference, sparse, truth, on_truth)
            detect = sum(summary["stage_seconds"].get(k, 0.0) for k in ("detect", "nms")) / args.frames
            row.update(motion=motion, every=every, detect_nms_s_per_frame=detect, reference_truth_iou=float(ref_truth),
                       reference_detect_nms_s_per_frame=ref_detect, frames_detected=summary["frames_detected"])
            report["rows"].append(row)
            print(f"{motion} | {every} | {row['frames_between']} | {row['iou_with_detected_mean']:.3f} / "
                  f"{row['iou_with_detected_min']:.3f} | {ref_truth:.3f} / {row['iou_with_truth_mean']:.3f} | "
                  f"{row['missing_faces']} / {row['extra_faces']} | {100 * row['class_agreement']:.1f} % | "
                  f"{row['valence_abs_diff_p50']:.4f} / {row['valence_abs_diff_max']:.4f} | "
                  f"{row['arousal_abs_diff_p50']:.4f} / {row['arousal_abs_diff_max']:.4f} | "
                  f"{100 * row['true_box_class_agreement_detected']:.1f} / "
                  f"{100 * row['true_box_class_agreement_given']:.1f} % | {detect * 1000:.2f} ms")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
