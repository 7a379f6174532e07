"""End-to-end frames/s on a synthesised 1280×720 video: emopipe's pipeline against a reference-style loop.

Both run in this one process on the same video, the same detector network and the same EmoNet:

* **emopipe**: the product's defaults on the device (decoding with NVDEC where PyNvVideoCodec is
  installed, reader/writer threads, detection at its
  working resolution in fp16 batches, crops on the GPU, static batches of faces, fp16 + channels_last
  + CUDA graphs, the fused network), with the per-stage split from the pipeline's own clock;
* **reference-style**: what the published demo does, minus reading the whole video into memory —
  every frame detected at full resolution, batch 1, fp32; the first face cropped on the CPU with
  OpenCV; EmoNet at batch 1 in fp32 (cuDNN benchmark on, as face-alignment sets it); one row written.

S3FD's real weights are not available here: the detector runs face-alignment's S3FD network with
random weights (its full cost: resize, forward, decoding, NMS) and then reports the synthetic video's
true face boxes, so both pipelines see one real face per frame. BlazeFace runs with its real weights
when ``shared/models/blazeface`` (or ``../shared``) is there. EmoNet has random weights: speed does
not depend on their values.

    python scripts/e2e_bench.py --out DIR [--frames 1800] [--reference-frames 300] [--rss] [--h264 PATH]
"""

from __future__ import annotations

import argparse
import csv
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import cv2
import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from synth import background, paste_head  # noqa: E402

from emopipe.engines.base import EngineOptions  # noqa: E402
from emopipe.engines.torch_engine import TorchEngine  # noqa: E402
from emopipe.io.nvdec import nvdec_unavailable, open_input  # noqa: E402
from emopipe.io.records import open_writer  # noqa: E402
from emopipe.model.emonet import build_emonet  # noqa: E402
from emopipe.pipeline.runner import Pipeline, PipelineSettings  # noqa: E402
from emopipe.pipeline.sinks import FaceRecorder, RecordSink  # noqa: E402
from emopipe.types import Detections  # noqa: E402
from emopipe.vision.crop import FaceCropper  # noqa: E402
from emopipe.vision.detect import PendingDetections, S3FDDetector, create_detector  # noqa: E402


def synthesise(path: Path, frames: int, width: int, height: int) -> list[list[tuple[float, ...]]]:
    """A close-up face (webcam-like, 240–300 px at 720p) panning and zooming; the true face box per frame."""
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), 30.0, (width, height))
    base = [background(width, height, seed=s) for s in range(8)]
    truth = []
    for i in range(frames):
        frame = base[i % 8].copy()
        t = (i % 300) / 300
        box = paste_head(frame, width * (0.3 + 0.4 * t), height * 0.5, (2.4 + 0.6 * t) * height / 720)
        writer.write(frame)
        truth.append([box])
    writer.release()
    return truth


class OracleS3FD(S3FDDetector):
    """S3FD's full cost on random weights, answering with the true boxes (frames arrive in order)."""

    def __init__(self, network: torch.nn.Module, truth: list, every: int = 1, **options: object) -> None:
        super().__init__(network, **options)
        self.truth = truth
        self.every = every  # it sees every `every`-th frame (--detect-every)
        self.next = 0

    def finish(self, pending: PendingDetections) -> list[Detections]:
        super().finish(pending)  # the host side's full cost too
        out = []
        for _ in range(pending.frames):
            boxes = np.array(self.truth[self.next % len(self.truth)], np.float32).reshape(-1, 4)
            out.append(Detections(boxes, np.ones(len(boxes), np.float32)))
            self.next += self.every
        return out


def s3fd_network() -> torch.nn.Module:
    from face_alignment.detection.sfd.net_s3fd import s3fd

    torch.manual_seed(0)
    network = s3fd()
    with torch.no_grad():  # background up: random weights would otherwise flood NMS with candidates
        for name, layer in network.named_children():
            if name.endswith("mbox_conf"):
                layer.bias[-1] -= 8.0
    return network


ABLATION = (  # (row, detector, pipeline settings)
    ("all on", "fused", {}),
    ("no detection overlap", "fused", {"overlap": False}),
    ("uploads on the main stream", "fused", {"copy_stream": False}),
    ("pageable uploads", "fused", {"pin_memory": False}),
    ("S3FD conv+ReLU not fused", "unfused", {}),
    ("GIL switch interval 0.1 ms (default 0.5)", "fused", {"gil_switch_interval_s": 0.0001}),
    ("GIL switch interval 5 ms (Python's own)", "fused", {"gil_switch_interval_s": 0.005}),
    ("decoding on the CPU (OpenCV)", "fused", {"decoder": "opencv"}),
    ("H.264 input", "fused", {"video": "h264"}),
    ("H.264 input, decoding on the CPU (OpenCV)", "fused", {"video": "h264", "decoder": "opencv"}),
    # The product's --detect-every 3: S3FD on every third frame, 3 frames per call (8/3, as the CLI
    # picks), boxes interpolated between; 9 frames per batch.
    ("S3FD on every 3rd frame", "every 3", {"detect_every": 3}),
)


def run_emopipe(video: Path, detector, engine, out: Path, decoder: str = "auto", **settings: bool | float) -> dict:
    source = open_input(video, decoder=decoder, device=engine.device)
    writer = open_writer(out, labels=engine.labels)
    sink = RecordSink(FaceRecorder(str(video), engine.labels), writer)
    cropper = FaceCropper(device=engine.device, dtype=engine.dtype)
    pipeline = Pipeline(source, detector, cropper, engine, [sink],
                        settings=PipelineSettings(detect_batch=detector.batch_size, queue_frames=4 * detector.batch_size
                                                  * int(settings.get("detect_every", 1)), **settings))
    pipeline.run()
    summary = pipeline.summary()
    source.close()
    return summary.as_dict()


def run_reference(video: Path, detector, engine, out: Path, frames: int) -> dict:
    capture = cv2.VideoCapture(str(video))
    cropper = FaceCropper(device=torch.device("cpu"))
    stages = dict.fromkeys(("decode", "detect", "crop", "infer", "write"), 0.0)
    rows = 0
    with open(out, "w", newline="") as f:
        table = csv.writer(f)
        started = time.perf_counter()
        for index in range(frames):
            t = time.perf_counter()
            ok, frame = capture.read()
            if not ok:
                break
            t1 = time.perf_counter()
            found = detector.detect(torch.from_numpy(frame[None]).to(engine.device))[0]
            t2 = time.perf_counter()
            stages["decode"] += t1 - t
            stages["detect"] += t2 - t1
            if len(found):
                crop = cropper.crop(torch.from_numpy(frame[None]), [found.boxes[:1]])
                t3 = time.perf_counter()
                result = engine.infer(crop.crops)
                t4 = time.perf_counter()
                table.writerow([index, *found.boxes[0], *result.probabilities[0].tolist(), float(result.valence[0]),
                                float(result.arousal[0])])
                f.flush()
                rows += 1
                stages["crop"] += t3 - t2
                stages["infer"] += t4 - t3
                stages["write"] += time.perf_counter() - t4
        elapsed = time.perf_counter() - started
    return {"frames": index + 1, "faces": rows, "seconds": elapsed, "fps": (index + 1) / elapsed,
            "stage_seconds": stages}


def boxes_against_truth(rows: Path, truth: list) -> dict:
    """The real detector's box per frame against the true one: a frame uploaded late, torn or in the
    wrong order would show up here (the detector sees the frame's pixels, the truth does not)."""
    best: dict[int, float] = {}
    with open(rows, newline="") as f:
        for row in csv.DictReader(f):
            frame = int(row["frame"])
            box = np.array([float(row[k]) for k in ("x1", "y1", "x2", "y2")])
            true = np.array(truth[frame][0])
            inter = np.prod(np.clip(np.minimum(box[2:], true[2:]) - np.maximum(box[:2], true[:2]), 0, None))
            union = np.prod(box[2:] - box[:2]) + np.prod(true[2:] - true[:2]) - inter
            best[frame] = max(best.get(frame, 0.0), float(inter / union))
    ious = np.array([best.get(i, 0.0) for i in range(len(truth))])
    summary = {"frames": len(truth), "frames with a face": len(best), "mean IoU": float(ious.mean()),
               "min IoU": float(ious.min()), "frames below IoU 0.5": int((ious < 0.5).sum())}
    print(f"BlazeFace boxes vs truth: {summary}", file=sys.stderr)
    return summary


def blazeface_dir() -> str | None:
    """The real BlazeFace weights beside the checkout (``shared/models/blazeface``), if any."""
    found = (p for p in (REPO / "shared/models/blazeface", REPO.parent / "shared/models/blazeface") if p.is_dir())
    return next((str(p) for p in found), None)


def graph_parity(detector, video: Path, height: int, width: int) -> dict:
    """The same detections with and without the detector's CUDA graph, on the video's first frames."""
    plain = create_detector(detector.name, device=detector.device, batch_size=detector.batch_size,
                            precision=detector.precision, cuda_graphs=False,
                            models_dir=blazeface_dir())
    plain.warmup(height, width)
    capture = cv2.VideoCapture(str(video))
    frames = torch.from_numpy(np.stack([capture.read()[1] for _ in range(detector.batch_size * 2)]))
    worst, count = 0.0, 0
    for start in (0, detector.batch_size, detector.batch_size + 3):  # full batches and a partial one
        chunk = frames[start:start + detector.batch_size].to(detector.device)
        for a, b in zip(detector.detect(chunk), plain.detect(chunk)):
            assert len(a) == len(b), (len(a), len(b))
            count += len(a)
            if len(a):
                worst = max(worst, float(np.abs(a.boxes - b.boxes).max()))
    print(f"detector graph parity: {count} faces, max |Δbox| {worst:.4f} px", file=sys.stderr)
    return {"faces": count, "max_box_delta_px": worst}


def engine_for(model, device: str, fast: bool, batch: int) -> TorchEngine:
    if fast:
        options = EngineOptions(device=device, batch_size=batch)  # the product's defaults
    else:
        options = EngineOptions(device=device, precision="fp32", batch_size=1, channels_last=False, cuda_graphs=False,
                                fuse=False, warmup=False)
    engine = TorchEngine(model, options)
    engine.warmup()
    return engine


def rss_child(video: str, device: str) -> None:
    model = build_emonet(classes=8)
    engine = engine_for(model, device, True, 64)
    detector = create_detector("blazeface_back", device=device, batch_size=8, models_dir=blazeface_dir(),
                               precision="fp16" if device.startswith("cuda") else "fp32")
    detector.warmup(720, 1280)
    with tempfile.TemporaryDirectory() as tmp:
        summary = run_emopipe(Path(video), detector, engine, Path(tmp) / "rows.csv")
    print(json.dumps({"frames": summary["frames"], "max_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
                      / 1024}))


def h264_copy(video: Path, path: Path | None) -> Path | None:
    """The H.264 copy of the synthesised video (the codec most recordings use; it costs the CPU more to decode)."""
    if path is None:
        return None
    if not path.exists():
        if shutil.which("ffmpeg") is None:
            raise SystemExit(f"{path} is missing and there is no ffmpeg to write it")
        subprocess.run(["ffmpeg", "-loglevel", "error", "-y", "-i", str(video), "-c:v", "libx264",
                        "-preset", "veryfast", "-crf", "20", "-pix_fmt", "yuv420p", str(path)], check=True)
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--frames", type=int, default=1800)
    parser.add_argument("--reference-frames", type=int, default=300)
    parser.add_argument("--size", default="1280x720")
    parser.add_argument("--rows", help="ablation rows to run (comma-separated, by the start of their names); "
                        "default: all")
    parser.add_argument("--rounds", type=int, default=2, help="interleaved rounds of the ablation rows")
    parser.add_argument("--rss", action="store_true", help="also peak RSS at 300 vs 3000 frames (subprocesses)")
    parser.add_argument("--rss-child", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--h264", type=Path, help="an H.264 copy of the synthesised video for the H.264 rows "
                        "(written with the ffmpeg command where that is installed and the file is missing)")
    args = parser.parse_args()
    if args.rss_child:
        rss_child(*args.rss_child)
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    width, height = map(int, args.size.split("x"))
    work = Path(tempfile.mkdtemp())
    video = work / "e2e.mp4"
    t = time.perf_counter()
    truth = synthesise(video, args.frames, width, height)
    print(f"synthesised {args.frames} frames {width}×{height} in {time.perf_counter() - t:.1f} s", file=sys.stderr)
    device = args.device
    model = build_emonet(classes=8)
    results = {}

    torch.backends.cudnn.benchmark = True
    engine = engine_for(model, device, True, 64)
    fast_precision = engine.options.precision or "fp16"
    detector = OracleS3FD(s3fd_network(), truth, device=torch.device(device), batch_size=8,
                          precision=fast_precision if fast_precision != "bf16" else "fp16")
    detector.warmup(height, width)
    detector.next = 0
    results["emopipe, S3FD"] = run_emopipe(video, detector, engine, args.out / "emopipe_s3fd.csv")
    # Issue 7's ablation: each lever turned off in turn, same process and video, every variant run
    # twice in interleaved rounds (the first row above is round 0) so the spread between rounds shows.
    unfused = OracleS3FD(s3fd_network(), truth, device=torch.device(device), batch_size=8, fuse=False,
                         precision=fast_precision if fast_precision != "bf16" else "fp16")
    unfused.warmup(height, width)
    sparse = OracleS3FD(s3fd_network(), truth, every=3, device=torch.device(device), batch_size=3,
                        precision=fast_precision if fast_precision != "bf16" else "fp16")
    sparse.warmup(height, width)
    rows = [row for row in ABLATION if not args.rows or any(row[0].startswith(w) for w in args.rows.split(","))]
    videos = {"mp4v": video, "h264": h264_copy(video, args.h264)}
    no_nvdec = nvdec_unavailable(torch.device(device))
    results["decoder"] = f"OpenCV (CPU): {no_nvdec}" if no_nvdec else "NVDEC (GPU), unless the row says otherwise"
    for round_ in range(1, args.rounds + 1):
        for name, chosen, settings in rows:
            settings = dict(settings)
            clip = videos[settings.pop("video", "mp4v")]
            if clip is None:
                results[f"emopipe, S3FD, {name}, round {round_}"] = {"skipped": "no H.264 copy (--h264)"}
                continue
            runner = {"unfused": unfused, "every 3": sparse}.get(chosen, detector)
            runner.next = 0
            results[f"emopipe, S3FD, {name}, round {round_}"] = run_emopipe(
                clip, runner, engine, args.out / "ablation.csv", **settings)

    blaze = create_detector("blazeface_back", device=device, batch_size=8, precision="fp16",
                            models_dir=blazeface_dir())
    blaze.warmup(height, width)
    results["detector graph parity"] = graph_parity(blaze, video, height, width)
    results["emopipe, BlazeFace back"] = run_emopipe(video, blaze, engine, args.out / "emopipe_blazeface.csv")
    results["BlazeFace boxes vs truth"] = boxes_against_truth(args.out / "emopipe_blazeface.csv", truth)

    reference_engine = engine_for(model, device, False, 1)
    reference_detector = OracleS3FD(s3fd_network(), truth, device=torch.device(device), batch_size=1, fuse=False,
                                    precision="fp32", working_size=max(width, height), channels_last=False)
    reference_detector.warmup(height, width)
    reference_detector.next = 0
    results["reference-style, S3FD"] = run_reference(video, reference_detector, reference_engine,
                                                     args.out / "reference.csv", args.reference_frames)

    if args.rss:
        for frames in (300, 3000):
            clip = work / f"rss{frames}.mp4"
            synthesise(clip, frames, width, height)
            done = subprocess.run([sys.executable, __file__, "--out", str(args.out), "--rss-child", str(clip), device],
                                  capture_output=True, text=True)
            if done.returncode != 0:  # keep the timings above; say why the memory figure is missing
                results[f"peak RSS, {frames} frames"] = {"error": done.stderr.strip().splitlines()[-1:]}
                continue
            results[f"peak RSS, {frames} frames"] = json.loads(done.stdout.strip().splitlines()[-1])

    results["gpu"] = torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"
    results["torch"] = torch.__version__
    (args.out / "e2e.json").write_text(json.dumps(results, indent=1, default=str))
    ref_fps = results["reference-style, S3FD"]["fps"]
    print(f"\n{results['gpu']}, torch {torch.__version__}, {width}×{height}, one face per frame\n")
    print("| pipeline | frames | faces | s | frames/s | × reference | decode | detect | nms | crop | infer | write "
          "(stage seconds) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    ablation = [f"emopipe, S3FD, {name}, round {r}" for r in range(1, args.rounds + 1) for name, _, _ in rows]
    for name in ("emopipe, S3FD", *ablation, "emopipe, BlazeFace back", "reference-style, S3FD"):
        r = results[name]
        if "skipped" in r:
            print(f"| {name} | skipped: {r['skipped']} |")
            continue
        s = r["stage_seconds"]
        print(f"| {name} | {r['frames']} | {r['faces']} | {r['seconds']:.2f} | {r['fps']:.0f} | "
              f"{r['fps'] / ref_fps:.1f}× | " + " | ".join(f"{s.get(k, 0):.2f}" for k in
                                                         ("decode", "detect", "nms", "crop", "infer", "write")) + " |")
    if args.rss:
        a, b = results["peak RSS, 300 frames"], results["peak RSS, 3000 frames"]
        if "error" in a or "error" in b:
            print(f"\npeak RSS not measured: {a.get('error') or b.get('error')}")
            return 1
        print(f"\npeak RSS: {a['max_rss_mib']:.0f} MiB for {a['frames']} frames, {b['max_rss_mib']:.0f} MiB for "
              f"{b['frames']} frames ({b['max_rss_mib'] / a['max_rss_mib'] - 1:+.1%})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
