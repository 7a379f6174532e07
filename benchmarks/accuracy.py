#!/usr/bin/env python3
"""Your EmoNet checkpoint in fp16 (and bf16) against true fp32: the accuracy guard on real-face crops.

    python3 benchmarks/accuracy.py --weights emonet_8.pth --faces-dir shared/data/faces [--faces 512] \
        [--precisions fp16,bf16] [--device cuda] [--json accuracy.json]

The product's fast path for each precision (channels_last, CUDA graphs, fused network on CUDA) against an fp32
reference engine with TF32 off, on ``--faces`` crops jittered in position, scale, mirroring and brightness from
scikit-image's astronaut portrait and every image in ``--faces-dir`` (each image taken whole as one face). The guard
(``emopipe.engines.accuracy``): every clear decision keeps its class (fp32 top-2 gap > 0.02), at least 98 % of all
faces agree, and |Δvalence|, |Δarousal| ≤ 0.02 at the 99th percentile. The tests hold a random proxy checkpoint to
it; with the official weights this settles the question for them (docs/benchmark-log.md, "Accuracy guard").

Exit codes: 0 every precision passes, 1 one fails, 2 bad arguments, 6 a checkpoint that cannot be read.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--weights", type=Path, required=True, help="an EmoNet checkpoint in the official format")
    parser.add_argument("--faces-dir", type=Path, help="photos of faces, each taken whole as one face")
    parser.add_argument("--faces", type=int, default=512, help="jittered crops to compare (default: 512)")
    parser.add_argument("--precisions", default="fp16", help="comma-separated: fp16, bf16 (default: fp16)")
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--json", type=Path, help="write the reports here")
    args = parser.parse_args()

    from emopipe.errors import EmopipeError, UsageError
    from emopipe.model.devices import resolve_device

    try:
        precisions = [p.strip() for p in args.precisions.split(",") if p.strip()]
        if not precisions or any(p not in ("fp16", "bf16") for p in precisions):
            raise UsageError(f"--precisions takes fp16 and/or bf16, got {args.precisions!r}")
        if args.faces < 1 or args.batch_size < 1:
            raise UsageError("--faces and --batch-size must be at least 1")
        if args.faces_dir is not None and not args.faces_dir.is_dir():
            raise UsageError(f"--faces-dir {args.faces_dir} is not a folder")
        from emopipe.engines.accuracy import compare_precisions, face_photos, jittered_crops, photos_in
        from emopipe.model.emonet import build_emonet, read_checkpoint

        model = build_emonet(read_checkpoint(args.weights))
        device = str(resolve_device(args.device))
        crops = jittered_crops(face_photos(photos_in(args.faces_dir) if args.faces_dir else []), args.faces, seed=2)
        reports = compare_precisions(model, crops, precisions, device=device, batch_size=args.batch_size)
    except EmopipeError as exc:
        print(f"accuracy: error: {exc}", file=sys.stderr)
        return exc.exit_code
    for report in reports:
        print(report.describe())
        if report.classes_predicted == 1:
            print(f"{report.precision}: the checkpoint predicts one class for every crop: agreement says little here")
    if args.json:
        args.json.write_text(json.dumps([asdict(r) | {"passed": r.passed} for r in reports], indent=1))
    return 0 if all(r.passed for r in reports) else 1


if __name__ == "__main__":
    sys.exit(main())
