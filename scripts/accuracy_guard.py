"""Accuracy guard on the GPU: the product's fast paths (fp16/bf16, channels_last, CUDA graphs, fused
network) against a true-fp32 reference, on jittered real-face crops.

    python scripts/accuracy_guard.py [--faces 512] [--weights emonet_8.pth] [--json out.json]

Without --weights the checkpoint is random with a head refitted on other real-face crops so that its
predictions vary between faces (tests/checkpoints.py says why). With the official weights, pass them.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path

import cv2
import torch

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from emopipe.engines.accuracy import compare_precisions, face_photos, jittered_crops  # noqa: E402
from emopipe.model.emonet import build_emonet, read_checkpoint  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--faces", type=int, default=512)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--weights", type=Path)
    parser.add_argument("--precisions", default="fp16,bf16",
                        help="comma-separated; a -halfhead suffix (fp16-halfhead) also runs the final linear "
                             "layers in that precision, as before they were kept in float32")
    parser.add_argument("--faces-dir", type=Path, help="extra face photos (whole image = face), e.g. shared/data/faces")
    parser.add_argument("--compile", help="the engines' torch.compile mode, e.g. 'default'")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    extra = []
    if args.faces_dir and args.faces_dir.is_dir():
        for path in sorted(args.faces_dir.glob("*.png")):
            image = cv2.cvtColor(cv2.imread(str(path)), cv2.COLOR_BGR2RGB)
            extra.append((image, (0, 0, image.shape[1], image.shape[0])))
    photos = face_photos(extra)
    if args.weights:
        model = build_emonet(read_checkpoint(args.weights))
    else:
        from checkpoints import calibrated_state

        model = build_emonet(calibrated_state(8, jittered_crops(photos, 64, seed=1)))
    crops = jittered_crops(photos, args.faces, seed=2)
    options = {"compile": args.compile} if args.compile else {}
    reports = compare_precisions(model, crops, args.precisions.split(","), device=args.device, batch_size=64,
                                 **options)
    gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"
    print(f"\n{gpu}, torch {torch.__version__}, {args.faces} jittered real-face crops, fast path defaults"
          + (f", compile={args.compile}" if args.compile else ""))
    for report in reports:
        print(report.describe())
    if args.json:
        args.json.write_text(json.dumps([asdict(r) | {"passed": r.passed} for r in reports], indent=1))
    return 0 if all(r.passed for r in reports) else 1


if __name__ == "__main__":
    raise SystemExit(main())
