"""``emopipe export-onnx``: EmoNet → ONNX at static shapes, checked against PyTorch, put where the engine finds it."""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from emopipe.cli.parsing import new_parser
from emopipe.engines.export import ONNX_PRECISIONS, OnnxSpec, cache_dir, export_emonet, unusable
from emopipe.engines.parity import TOLERANCES, Tolerance, check_parity, verification_crops
from emopipe.errors import OnnxModelError, UsageError
from emopipe.types import LABELS

if TYPE_CHECKING:
    from emopipe.model.emonet import EmoNet


def build_parser() -> argparse.ArgumentParser:
    parser = new_parser(
        "emopipe export-onnx",
        "Export EmoNet to ONNX at static batch shapes, check it (ONNX checker, outputs against PyTorch on random "
        "and real-face crops) and put it where `--backend onnxruntime` finds it. Exit code 6 when a check fails.")
    source = parser.add_mutually_exclusive_group()
    # "%(default).0s" prints nothing: it only stops argparse appending "(default: None)" after our own wording.
    source.add_argument("--weights", type=Path, help="an official-format EmoNet checkpoint (default: the published "
                                                     "emonet_<classes> weights, downloaded on first use)%(default).0s")
    source.add_argument("--classes", type=int, choices=sorted(LABELS), default=8,
                        help="which published model: 8 or 5 expressions")
    parser.add_argument("--models-dir", help="models directory (default: $EMOPIPE_HOME, the checkout's models/, "
                                             "or ~/.cache/emopipe)%(default).0s")
    parser.add_argument("--batch-size", default="32", help="static batch shape(s), comma-separated, e.g. 1,32")
    parser.add_argument("--precision", default="fp32,fp16", help="fp32 and/or fp16, comma-separated")
    parser.add_argument("--landmarks", action="store_true", help="also output 68 landmark positions per face")
    parser.add_argument("--output", type=Path,
                        help="folder for the .onnx files "
                             "(default: <models dir>/cache/onnx, where the engine looks)%(default).0s")
    parser.add_argument("--device", default="auto",
                        help="where the check runs: auto, cpu, cuda or cuda:N (ONNX Runtime's CUDA provider there)")
    parser.add_argument("--force", action="store_true", help="export again even when the file exists")
    parser.add_argument("--random-crops", type=int, default=4, help="random crops in the parity check")
    parser.add_argument("--faces", type=Path, default=None,
                        help="folder of face photos (any image type) added to the parity check; the astronaut "
                             "face is always in%(default).0s")
    parser.add_argument("--tolerance", type=float, default=None,
                        help="max |Δ| accepted for probabilities, valence and arousal "
                             "(default: 1e-3 for fp32, 1e-2 for fp16; landmarks: 0.5 px, 2 px)%(default).0s")
    return parser


def _csv(text: str, what: str) -> list[str]:
    items = [t.strip() for t in text.split(",") if t.strip()]
    if not items:
        raise UsageError(f"--{what} needs at least one value")
    return list(dict.fromkeys(items))


def _batch_sizes(text: str) -> list[int]:
    try:
        sizes = [int(t) for t in _csv(text, "batch-size")]
    except ValueError:
        raise UsageError(f"--batch-size takes whole numbers, e.g. 1,32; got {text!r}") from None
    if min(sizes) < 1:
        raise UsageError(f"batch sizes must be at least 1, got {text!r}")
    return sizes


def _load_model(args: argparse.Namespace) -> tuple[EmoNet, str, str]:
    """(model, checkpoint sha256, where it came from)."""
    from emopipe.model import weights
    from emopipe.model.emonet import build_emonet, read_checkpoint

    if args.weights is not None:
        path = weights.user_file(args.weights)
        digest = weights.sha256_of(path)
    else:
        name = f"emonet_{args.classes}"
        path = weights.ensure(name, args.models_dir)
        digest = weights.spec(name).sha256 or weights.sha256_of(path)
    return build_emonet(read_checkpoint(path)), digest, str(path)


def run(args: argparse.Namespace) -> int:
    from emopipe.engines.base import EngineOptions
    from emopipe.engines.onnxruntime_engine import OrtEngine
    from emopipe.model.devices import resolve_device

    batch_sizes = _batch_sizes(args.batch_size)
    precisions = _csv(args.precision, "precision")
    for precision in precisions:
        if precision not in ONNX_PRECISIONS:
            raise UsageError(f"--precision takes {' and/or '.join(ONNX_PRECISIONS)}, got {precision!r}")
    if args.random_crops < 0:
        raise UsageError(f"--random-crops must be ≥ 0, got {args.random_crops}")
    if args.tolerance is not None and not (math.isfinite(args.tolerance) and args.tolerance >= 0):
        raise UsageError(f"--tolerance must be a finite number ≥ 0, got {args.tolerance}")
    device = resolve_device(args.device)
    crop_sets = verification_crops(args.random_crops, args.faces)
    model, digest, source = _load_model(args)
    model = model.to(device)
    out_dir = args.output if args.output is not None else cache_dir(args.models_dir)
    faces = sum(len(crops) for name, crops in crop_sets.items() if name.startswith("real faces"))
    print(f"source: {source} (sha256 {digest}, {model.num_classes} classes); checking on {device} with "
          f"{args.random_crops} random crop(s) and {faces} real face(s)")

    failed: list[str] = []
    for precision in precisions:
        for batch in batch_sizes:
            spec = OnnxSpec(digest, model.num_classes, batch, precision, args.landmarks)
            path = out_dir / spec.file_name
            fresh = args.force or not path.is_file()
            if not fresh:
                problem = unusable(path, spec)
                if problem:  # as the engine treats its cache: a damaged or outdated file is exported again
                    print(f"{problem}; exporting it again", file=sys.stderr, flush=True)
                    fresh = True
            if fresh:
                print(f"exporting {precision}, batch {batch} …", file=sys.stderr, flush=True)
                t0 = time.perf_counter()
                export_emonet(model, spec, path)
                how = f"exported in {time.perf_counter() - t0:.1f} s, ONNX checker passed"
            else:
                how = "already there, checked again (--force exports anew)"
            try:
                options = EngineOptions(device=str(device), precision=precision, batch_size=batch,
                                        landmarks=args.landmarks, warmup=False)
                engine = OrtEngine(model, options, checkpoint_sha256=digest, onnx_path=path)
                tolerance = TOLERANCES[precision]
                if args.tolerance is not None:
                    tolerance = Tolerance(args.tolerance, args.tolerance, tolerance.landmarks_px)
                reports = check_parity(engine.infer, model, spec, crop_sets, tolerance)
            except BaseException:
                if fresh:
                    path.unlink(missing_ok=True)
                raise
            print(f"{path} ({how}; {', '.join(engine.active_providers)})")
            for report in reports:
                print(f"  {report.describe()}")
            bad = [r for r in reports if not r.ok]
            if bad:
                if fresh:
                    path.unlink(missing_ok=True)
                failed.append(f"{precision} batch {batch} on {bad[0].crops}: {'; '.join(bad[0].failures())}"
                              + (" (the new file was deleted)" if fresh else ""))
    if failed:
        more = f" (and {len(failed) - 1} more)" if len(failed) > 1 else ""
        raise OnnxModelError(f"ONNX output differs from PyTorch beyond the tolerance: {failed[0]}{more}")
    return 0
