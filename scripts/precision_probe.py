"""Where does fp16 change EmoNet's predicted class? Each part of the fused network in turn is run in
float32 inside an otherwise fp16 network, and class agreement with true fp32 is measured on the
accuracy guard's crops and checkpoint (issue 7's accuracy guard, diagnosis).

    python3 scripts/precision_probe.py --faces 2048 --faces-dir shared/data/faces
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import cv2
import torch
from torch import nn

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from emopipe.engines.accuracy import face_photos, jittered_crops  # noqa: E402
from emopipe.model.emonet import build_emonet  # noqa: E402
from emopipe.model.fusion import fuse  # noqa: E402


class Float32Island(nn.Module):
    """Runs ``module`` in float32 and hands its output back in the caller's dtype."""

    def __init__(self, module: nn.Module) -> None:
        super().__init__()
        self.module = module.float()

    def forward(self, x: torch.Tensor, *_: object) -> torch.Tensor | tuple[torch.Tensor, None]:
        # (a block's precomputed first BatchNorm + ReLU, or a consumer to precompute it for, is not used:
        # the part recomputes its own in float32)
        out = self.module(x.float())
        return (out[0].to(x.dtype), None) if isinstance(out, tuple) else out.to(x.dtype)


PARTS = {  # name → attribute paths of FusedEmoNet to run in float32
    "none (all fp16)": [],
    "front (stem, conv2-4)": ["stem", "conv2", "conv3", "conv4"],
    "hourglass 0": ["hourglasses.0"],
    "hourglass 1": ["hourglasses.1"],
    "tops, conv_last, heatmap heads": ["tops.0", "tops.1", "lasts.0", "lasts.1", "heads.0", "heads.1"],
    "emotion branch (1×1 input conv, 4 blocks)": ["emotion_input", "emotion_blocks.0", "emotion_blocks.1",
                                                  "emotion_blocks.2", "emotion_blocks.3"],
}


def islanded(reference: nn.Module, paths: list[str]) -> nn.Module:
    model = fuse(reference).cuda().half().to(memory_format=torch.channels_last)
    model.fc1.float()
    model.fc2.float()
    for path in paths:
        parent, _, name = path.rpartition(".")
        owner = model.get_submodule(parent) if parent else model
        if isinstance(owner, nn.ModuleList):
            owner[int(name)] = Float32Island(owner[int(name)])
        else:
            setattr(owner, name, Float32Island(getattr(owner, name)))
    return model.eval()


@torch.inference_mode()
def predict(model: nn.Module, crops: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    out = []
    for start in range(0, len(crops), 64):
        x = crops[start:start + 64].cuda().to(dtype).contiguous(memory_format=torch.channels_last)
        out.append(torch.softmax(model(x).expression.float(), dim=1).cpu())
    return torch.cat(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--faces", type=int, default=2048)
    parser.add_argument("--faces-dir", type=Path)
    args = parser.parse_args()
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False  # true fp32
    extra = []
    if args.faces_dir and args.faces_dir.is_dir():
        for path in sorted(args.faces_dir.glob("*.png")):
            image = cv2.cvtColor(cv2.imread(str(path)), cv2.COLOR_BGR2RGB)
            extra.append((image, (0, 0, image.shape[1], image.shape[0])))
    photos = face_photos(extra)
    from checkpoints import calibrated_state

    reference = build_emonet(calibrated_state(8, jittered_crops(photos, 64, seed=1))).eval()
    crops = jittered_crops(photos, args.faces, seed=2)
    p32 = predict(reference.cuda(), crops, torch.float32)
    classes = p32.argmax(1)
    print("| part run in float32 (rest fp16) | class agreement | faces changed | max |Δp| |")
    print("|---|---|---|---|")
    for name, paths in PARTS.items():
        p = predict(islanded(reference.cpu(), paths), crops, torch.float16)
        changed = int((p.argmax(1) != classes).sum())
        print(f"| {name} | {100 * (1 - changed / len(crops)):.2f} % | {changed} | {float((p - p32).abs().max()):.4f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
