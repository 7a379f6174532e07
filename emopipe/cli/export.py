"""``emopipe export-onnx``: EmoNet → ONNX at static shapes, checked against PyTorch, put where the engine finds it."""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from emopipe.cli.parsing import new_parser
from emopipe.config import refuse_inputs, written_as
from emopipe.engines.export import MAX_BATCH, ONNX_PRECISIONS, OnnxSpec, cache_dir, export_emonet, unusable
from emopipe.engines.parity import TOLERANCES, Parity, Tolerance, check_parity, verification_crops
from emopipe.errors import OnnxModelError, OutputError, UsageError
from emopipe.io.records import InputFiles
from emopipe.types import LABELS

if TYPE_CHECKING:
    import torch

    from emopipe.engines.base import EngineOptions
    from emopipe.model.emonet import EmoNet


def build_parser() -> argparse.ArgumentParser:
    parser = new_parser(
        "emopipe export-onnx",
        "Export EmoNet to ONNX at static batch shapes, check it (ONNX checker, outputs against PyTorch on random "
        "and real-face crops) and put it where `--backend onnxruntime` finds it; a new file takes its name only once "
        "it passes (what was there stays otherwise), and no name it writes is the weights. Exit codes: 0 ok, 2 bad "
        "options (also: --output that is the weights), 3 --faces not found, 4 no readable photo there, 5 output not "
        "writable, 6 weights missing or not fitting, or a check that fails.")
    source = parser.add_mutually_exclusive_group()
    # "%(default).0s" prints nothing: it only stops argparse appending "(default: None)" after our own wording.
    source.add_argument("--weights", type=Path, help="an official-format EmoNet checkpoint (default: the published "
                                                     "emonet_<classes> weights, downloaded on first use)%(default).0s")
    source.add_argument("--classes", type=int, choices=sorted(LABELS), default=8,
                        help="which published model: 8 or 5 expressions")
    parser.add_argument("--models-dir", help="models directory (default: $EMOPIPE_HOME, the checkout's models/, "
                                             "or ~/.cache/emopipe)%(default).0s")
    parser.add_argument("--batch-size", default="32",
                        help=f"static batch shape(s), comma-separated, e.g. 1,32 (each 1 to {MAX_BATCH})")
    parser.add_argument("--precision", default="fp32,fp16", help="fp32 and/or fp16, comma-separated")
    parser.add_argument("--landmarks", action="store_true", help="also output 68 landmark positions per face")
    parser.add_argument("--output", type=Path,
                        help="folder for the .onnx files (default: <models dir>/cache/onnx, or $EMOPIPE_CACHE/onnx "
                             "when that is set: where the engine looks)%(default).0s")
    parser.add_argument("--device", default="auto",
                        help="where the check runs: auto, cpu, cuda or cuda:N (ONNX Runtime's CUDA provider there)")
    parser.add_argument("--force", action="store_true",
                        help="export again even when the file exists (it stays until the new one passes its check)")
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
    if not all(1 <= size <= MAX_BATCH for size in sizes):
        raise UsageError(f"batch sizes must be 1 to {MAX_BATCH}, got {text!r}")
    return sizes


def _weights(args: argparse.Namespace) -> tuple[Path, str]:
    """(the checkpoint file, its sha256): ``--weights``, or the published ``emonet_<classes>`` (fetched if missing)."""
    from emopipe.model import weights

    if args.weights is not None:
        path = weights.user_file(args.weights)
        return path, weights.sha256_of(path)
    name = f"emonet_{args.classes}"
    path = weights.ensure(name, args.models_dir)
    return path, weights.spec(name).sha256 or weights.sha256_of(path)


def _check_outputs(out_dir: Path, weights: Path, digest: str, batch_sizes: list[int], precisions: list[str],
                   landmarks: bool) -> None:
    """Before any model is built: ``--output`` is a folder (or can be made one), and no name an export may write in it
    — a file's own, or a temporary one it is written whole under — is the checkpoint, however spelled or linked
    (UsageError). The checkpoint's classes are not read yet: the names of both are checked."""
    inputs = InputFiles([weights])
    for folder in (out_dir, *out_dir.parents):  # (the first that is there must be a folder)
        if not (folder.exists() or folder.is_symlink()):
            continue
        if not folder.is_dir():
            where = f"--output {out_dir}" + (f": {folder}" if folder != out_dir else "")
            if inputs.named_by(folder) is not None:
                raise UsageError(f"{where} is the weights file, an input of this run: give a folder for the .onnx "
                                 "files (outputs never overwrite inputs)")
            raise UsageError(f"{where} is a file, not a folder: give a folder for the .onnx files")
        break
    written = [name for classes in sorted(LABELS) for precision in precisions for batch in batch_sizes
               for name in written_as("ONNX_model", str(out_dir / OnnxSpec(digest, classes, batch, precision,
                                                                             landmarks).file_name))]
    refuse_inputs(written, inputs, keep=(), advice="choose another --output folder", name_input=True)


def run(args: argparse.Namespace) -> int:
    from emopipe.engines.base import EngineOptions
    from emopipe.engines.onnxruntime_engine import ONNX_PATH_HINT
    from emopipe.model.devices import resolve_device
    from emopipe.model.emonet import build_emonet, read_checkpoint

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
    weights, digest = _weights(args)
    out_dir = args.output if args.output is not None else cache_dir(args.models_dir)
    _check_outputs(out_dir, weights, digest, batch_sizes, precisions, args.landmarks)
    model = build_emonet(read_checkpoint(weights)).to(device)
    for precision in precisions:  # a folder at a file's name: said now, not after exporting what came before it
        for batch in batch_sizes:
            path = out_dir / OnnxSpec(digest, model.num_classes, batch, precision, args.landmarks).file_name
            if path.is_dir():
                raise OutputError(f"cannot write {path}: a folder has its name; move it away (nothing was exported)")
    faces = sum(len(crops) for name, crops in crop_sets.items() if name.startswith("real faces"))
    print(f"source: {weights} (sha256 {digest}, {model.num_classes} classes); checking on {device} with "
          f"{args.random_crops} random crop(s) and {faces} real face(s)")

    failed: list[str] = []
    for precision in precisions:
        for batch in batch_sizes:
            spec = OnnxSpec(digest, model.num_classes, batch, precision, args.landmarks)
            path = out_dir / spec.file_name
            tolerance = TOLERANCES[precision]
            if args.tolerance is not None:
                tolerance = Tolerance(args.tolerance, args.tolerance, tolerance.landmarks_px)
            options = EngineOptions(device=str(device), precision=precision, batch_size=batch,
                                    landmarks=args.landmarks, warmup=False)
            check = _Check(model, spec, options, crop_sets, tolerance)
            fresh = args.force or not path.is_file()
            if not fresh:
                problem = unusable(path, spec)
                if problem:  # as the engine treats its cache: a damaged or outdated file is exported again
                    print(f"{problem}; exporting it again", file=sys.stderr, flush=True)
                    fresh = True
            t0 = time.perf_counter()
            try:
                if not fresh:
                    try:
                        check(path)
                    except OnnxModelError as exc:  # its graph does not fit its metadata, or ONNX Runtime cannot
                        # load it: exported again, as the engine treats its cache (was exit 6, "… with --force")
                        print(f"{str(exc).removesuffix(f'; {ONNX_PATH_HINT}')}; exporting it again", file=sys.stderr,
                              flush=True)
                        fresh, check, t0 = True, _Check(model, spec, options, crop_sets, tolerance), time.perf_counter()
                if fresh:
                    # checked under its temporary name: only a file that passes takes the final name, so a failed
                    # export leaves what was there (an earlier good export, with --force) as it was
                    print(f"exporting {precision}, batch {batch} …", file=sys.stderr, flush=True)
                    export_emonet(model, spec, path, check=check)
            except _Differs:
                pass
            if fresh:
                how = f"exported in {check.started - t0:.1f} s, ONNX checker passed"
                how += "; not kept: its outputs differ from PyTorch's" if not check.ok else ""
            else:
                how = "already there, checked again (--force exports anew)"
            print(f"{path} ({how}; {', '.join(check.providers)})")
            for report in check.reports:
                print(f"  {report.describe()}")
            bad = [r for r in check.reports if not r.ok]
            if bad:
                kept = " (the new export was not kept" + ("; the file there is unchanged)" if path.is_file() else ")")
                failed.append(f"{precision} batch {batch} on {bad[0].crops}: {'; '.join(bad[0].failures())}"
                              + (kept if fresh else ""))
    if failed:
        more = f" (and {len(failed) - 1} more)" if len(failed) > 1 else ""
        raise OnnxModelError(f"ONNX output differs from PyTorch beyond the tolerance: {failed[0]}{more}")
    return 0


class _Differs(Exception):
    """The file's outputs differ from PyTorch's beyond the tolerance (:class:`_Check`'s reports say how)."""


class _Check:
    """The comparison of one file with PyTorch: a new export's under its temporary name, before it takes its name
    (export_emonet's ``check``), or a file already there. Raises _Differs when it fails."""

    def __init__(self, model: EmoNet, spec: OnnxSpec, options: EngineOptions, crop_sets: dict[str, torch.Tensor],
                 tolerance: Tolerance) -> None:
        self.model, self.spec, self.options, self.crop_sets, self.tolerance = model, spec, options, crop_sets, tolerance
        self.providers: list[str] = []
        self.reports: list[Parity] = []
        self.started = 0.0  # perf_counter when the check began (an export's time ends there)

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.reports)

    def __call__(self, path: Path) -> None:
        from emopipe.engines.onnxruntime_engine import OrtEngine

        self.started = time.perf_counter()
        engine = OrtEngine(self.model, self.options, checkpoint_sha256=self.spec.checkpoint_sha256, onnx_path=path)
        self.providers = engine.active_providers
        self.reports = check_parity(engine.infer, self.model, self.spec, self.crop_sets, self.tolerance)
        if not self.ok:
            raise _Differs
