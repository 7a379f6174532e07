"""Do the fast paths compute the same function? Reduced precision against fp32 on real-face crops.

The guard: every clear decision keeps its class (a face whose two most probable classes differ by more
than ``CLEAR_GAP`` in fp32), at most 2 % of all faces change class (near-ties, which rounding alone can
flip), and |Δvalence|, |Δarousal| ≤ 0.02 at the 99th percentile. Crops are cut from real photographs with
jitter in position, scale, mirroring and brightness, as a detector's boxes on video would vary.

Why not a plain agreement share: how many faces change class depends on how many near-ties the
checkpoint has on these crops, not only on the precision's error. On the proxy checkpoint of the tests
(a random backbone, a refitted head) fp16 agreed on 99.02–99.41 % of 512 faces in every GPU run, and
every face that changed had an fp32 top-2 gap ≤ 0.0084 (docs/benchmark-log.md, "Accuracy guard").
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np
import torch

from emopipe.engines.base import EngineOptions
from emopipe.engines.torch_engine import TorchEngine
from emopipe.types import INPUT_SIZE

AGREEMENT = 0.98  # share of all faces that keep their class: a floor for near-ties (fp16's lowest run 99.02 %)
CLEAR_GAP = 0.02  # fp32 top-2 probability gap above which a face's class must not change: twice the largest
# |Δp| fp16 showed in any GPU run (0.0102), so only an error beyond rounding can flip it
MAX_DELTA_P99 = 0.02

ASTRONAUT_FACE = (174, 77, 274, 177)  # skimage.data.astronaut(), x1, y1, x2, y2
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".webp")


def face_photos(extra: Sequence[tuple[np.ndarray, tuple[int, int, int, int]]] = ()) -> list[tuple[np.ndarray, tuple]]:
    """(RGB image, face box) pairs: the astronaut portrait that ships with scikit-image, plus ``extra``."""
    from skimage import data

    return [(data.astronaut(), ASTRONAUT_FACE), *extra]


def photos_in(folder: str | os.PathLike[str]) -> list[tuple[np.ndarray, tuple[int, int, int, int]]]:
    """Every image in ``folder`` (by name) as an (RGB image, whole-image box) pair: photos of faces, each taken
    whole as one face box (jittering then cuts crops of varied position and scale from it)."""
    pairs = []
    for path in sorted(Path(folder).iterdir()):
        image = cv2.imread(str(path)) if path.suffix.lower() in IMAGE_SUFFIXES else None
        if image is not None:
            pairs.append((cv2.cvtColor(image, cv2.COLOR_BGR2RGB), (0, 0, image.shape[1], image.shape[0])))
    return pairs


def jittered_crops(photos: Sequence[tuple[np.ndarray, tuple]], n: int, seed: int = 0) -> torch.Tensor:
    """n crops, 3×256×256 RGB in [0, 1], prepared per the EmoNet contract from jittered face boxes."""
    rng = np.random.default_rng(seed)
    crops = []
    for i in range(n):
        image, (x1, y1, x2, y2) = photos[i % len(photos)]
        h, w = image.shape[:2]
        size = max(x2 - x1, y2 - y1) * rng.uniform(0.85, 1.25)
        cx = (x1 + x2) / 2 + rng.uniform(-0.12, 0.12) * (x2 - x1)
        cy = (y1 + y2) / 2 + rng.uniform(-0.12, 0.12) * (y2 - y1)
        a, b = int(max(0, cx - size / 2)), int(max(0, cy - size / 2))
        c, d = int(min(w, cx + size / 2)), int(min(h, cy + size / 2))
        crop = cv2.resize(image[b:d, a:c], (INPUT_SIZE, INPUT_SIZE), interpolation=cv2.INTER_LINEAR)
        if rng.random() < 0.5:
            crop = crop[:, ::-1]
        crop = np.clip(crop.astype(np.float32) * rng.uniform(0.75, 1.25) + rng.uniform(-20, 20), 0, 255)
        crops.append(crop.transpose(2, 0, 1) / 255)
    return torch.from_numpy(np.ascontiguousarray(np.stack(crops), dtype=np.float32))


@dataclass(frozen=True)
class PrecisionReport:
    precision: str
    faces: int
    agreement: float  # share of faces whose predicted class matches fp32
    valence_p99: float  # 99th percentile of |Δvalence| against fp32
    arousal_p99: float
    probability_max: float  # largest |Δp| over all classes and faces
    classes_predicted: int  # distinct fp32 predictions: a degenerate model predicts one class for all
    flip_margin_max: float = 0.0  # largest fp32 top-2 probability gap among faces whose class changed
    clear_faces: int = 0  # faces whose fp32 top-2 gap exceeds CLEAR_GAP
    clear_changed: int = 0  # of those, how many changed class

    @property
    def passed(self) -> bool:
        return (self.clear_changed == 0 and self.agreement >= AGREEMENT
                and max(self.valence_p99, self.arousal_p99) <= MAX_DELTA_P99)

    def describe(self) -> str:
        verdict = "pass" if self.passed else "FAIL"
        flips = (f"; the changed faces' fp32 top-2 gap ≤ {self.flip_margin_max:.4f}"
                 if self.agreement < 1 else "")
        return (f"{self.precision}: class agreement {self.agreement:.2%} over {self.faces} faces "
                f"({self.classes_predicted} classes predicted; {self.clear_changed} of {self.clear_faces} clear "
                f"decisions changed), |Δvalence| p99 {self.valence_p99:.4f}, "
                f"|Δarousal| p99 {self.arousal_p99:.4f}, max |Δp| {self.probability_max:.4f}{flips} — {verdict}")


def _run(engine: TorchEngine, crops: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    b = engine.batch_size
    probabilities, valence, arousal = [], [], []
    for start in range(0, len(crops), b):
        chunk = crops[start:start + b]
        real = len(chunk)
        if real < b:  # the static shape, padded
            chunk = torch.cat([chunk, chunk.new_zeros((b - real, *chunk.shape[1:]))])
        out = engine.infer(chunk)
        probabilities.append(out.probabilities[:real])
        valence.append(out.valence[:real])
        arousal.append(out.arousal[:real])
    return torch.cat(probabilities), torch.cat(valence), torch.cat(arousal)


def compare_precisions(model: torch.nn.Module, crops: torch.Tensor, precisions: Sequence[str], *,
                       device: str = "cpu", batch_size: int = 32, **options: object) -> list[PrecisionReport]:
    """Each precision's engine (the product's fast path on the device) against an fp32 reference engine."""
    reference = TorchEngine(model, EngineOptions(device=device, precision="fp32", batch_size=batch_size,
                                                 channels_last=False, cuda_graphs=False, fuse=False))
    tf32 = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    try:  # the reference is true fp32, not TF32
        torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
        p32, v32, a32 = _run(reference, crops)
    finally:
        torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = tf32
    classes = p32.argmax(1)
    reports = []
    for precision in precisions:
        # "fp16-halfhead": the final linear layers in fp16 too (the fp32 head's ablation)
        name, _, head = precision.partition("-")
        variant = {**options, "fp32_head": False} if head == "halfhead" else options
        engine = TorchEngine(model, EngineOptions(device=device, precision=name, batch_size=batch_size,
                                                  **variant))  # type: ignore[arg-type]
        engine.warmup()
        p, v, a = _run(engine, crops)
        top2 = p32.topk(2, dim=1).values
        gap = top2[:, 0] - top2[:, 1]
        flipped = p.argmax(1) != classes
        clear = gap > CLEAR_GAP
        reports.append(PrecisionReport(
            precision=precision, faces=len(crops),
            agreement=float((p.argmax(1) == classes).float().mean()),
            valence_p99=float(torch.quantile((v - v32).abs(), 0.99)),
            arousal_p99=float(torch.quantile((a - a32).abs(), 0.99)),
            probability_max=float((p - p32).abs().max()),
            classes_predicted=int(classes.unique().numel()),
            flip_margin_max=float(gap[flipped].max()) if flipped.any() else 0.0,
            clear_faces=int(clear.sum()), clear_changed=int((clear & flipped).sum()),
        ))
    return reports
