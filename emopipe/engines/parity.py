"""Does an exported engine compute what PyTorch computes? Outputs compared on random and real-face crops.

The reference is EmoNet in exact float32 on the CPU (TF32 off), batch by batch; each output head is
compared against its tolerance for the precision (:data:`TOLERANCES`). ``emopipe export-onnx`` and the
ONNX Runtime engine run this check on every new export before anything uses it.
"""

from __future__ import annotations

import contextlib
import copy
import logging
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import torch

from emopipe.engines.export import ExportGraph, OnnxSpec
from emopipe.errors import InputNotFoundError, InputUnreadableError, UsageError
from emopipe.io.uris import IMAGE_SUFFIXES
from emopipe.model.emonet import EmoNet
from emopipe.types import INPUT_SIZE, EngineOutput

logger = logging.getLogger(__name__)

ASTRONAUT_FACE = (174, 77, 274, 177)  # x1, y1, x2, y2 of the face in skimage.data.astronaut()


@dataclass(frozen=True)
class Tolerance:
    """The largest |ONNX − PyTorch fp32| accepted, per output.

    Valence and arousal: relative to their scale, ``valence_arousal × max(1, max |reference|)``. The published
    checkpoints keep them within ±1, where this is the absolute tolerance; a fine-tuned or re-trained EmoNet can
    give values around ±10, and rounding errors grow with the values (half precision keeps ~3 significant
    digits, not 3 decimals), so an absolute 1e-2 refused valid exports of such checkpoints.

    fp32: 1e-3 — results are reported to 3 decimals; on the CPU the difference is ~1e-7, on CUDA
    it is what TF32 convolutions and other kernel choices leave (2.4e-4 on the logits, measured on
    an H100). fp16: 1e-2 — half precision keeps ~3 significant digits through 115 convolutions.
    Landmarks: mean distance in crop pixels; a heatmap cell is 4 px and where two cells are nearly
    equal, rounding moves the argmax by one — fp32 0.5 px, fp16 2 px (random-weight heatmaps are
    flat, so this is where fp16 showed 1.05 px on CPU).
    """

    probabilities: float
    valence_arousal: float
    landmarks_px: float

    def valence_arousal_limit(self, scale: float) -> float:
        """The accepted |Δ| of valence or arousal whose reference values reach ``scale`` in magnitude."""
        return self.valence_arousal * max(1.0, scale)

    def __post_init__(self) -> None:
        if min(self.probabilities, self.valence_arousal, self.landmarks_px) < 0:
            raise UsageError(f"tolerances must be ≥ 0, got {self}")


TOLERANCES = {"fp32": Tolerance(1e-3, 1e-3, 0.5), "fp16": Tolerance(1e-2, 1e-2, 2.0)}


@dataclass(frozen=True)
class Parity:
    """max |ONNX − PyTorch fp32| over one set of crops, and whether it is within tolerance."""

    crops: str
    count: int
    probabilities: float
    valence: float
    arousal: float
    tolerance: Tolerance
    landmarks_px: float | None = None  # mean distance, crop pixels
    scale: float = 1.0  # max |valence|, |arousal| of the reference: the V/A tolerance is relative to it

    @property
    def valence_arousal_limit(self) -> float:
        return self.tolerance.valence_arousal_limit(self.scale)

    def failures(self) -> list[str]:
        t = self.tolerance
        out = [f"{name} {value:.2e} > {_limit(limit)}" for name, value, limit in (
            ("probabilities", self.probabilities, t.probabilities),
            ("valence", self.valence, self.valence_arousal_limit),
            ("arousal", self.arousal, self.valence_arousal_limit),
        ) if not value <= limit]  # NaN fails too
        if self.landmarks_px is not None and not self.landmarks_px <= t.landmarks_px:
            out.append(f"landmarks {self.landmarks_px:.2f} px > {t.landmarks_px:g} px")
        return out

    @property
    def ok(self) -> bool:
        return not self.failures()

    def describe(self) -> str:
        t = self.tolerance
        landmarks = "" if self.landmarks_px is None else \
            f", landmarks {self.landmarks_px:.2f} px (≤ {t.landmarks_px:g})"
        verdict = "ok" if self.ok else "EXCEEDED: " + "; ".join(self.failures())
        relative = "" if self.scale <= 1 else f" = {t.valence_arousal:.0e} × scale {self.scale:.3g}"
        return (f"{self.crops} ({self.count}): max |Δ| probabilities {self.probabilities:.2e} "
                f"(≤ {t.probabilities:.0e}), valence {self.valence:.2e}, arousal {self.arousal:.2e} "
                f"(≤ {_limit(self.valence_arousal_limit)}{relative}){landmarks} — {verdict}")


def _limit(value: float) -> str:
    """1e-02 for a round tolerance, 1.23e-01 for one scaled by the outputs."""
    short = f"{value:.0e}"
    return short if float(short) == value else f"{value:.2e}"


@contextlib.contextmanager
def _exact_fp32() -> Iterator[None]:
    """No TF32 in the reference: it must be the fp32 function, not a faster approximation of it."""
    matmul = torch.backends.cuda.matmul.allow_tf32
    try:
        torch.backends.cuda.matmul.allow_tf32 = False
        with torch.backends.cudnn.flags(enabled=True, benchmark=False, deterministic=False, allow_tf32=False):
            yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = matmul


@torch.inference_mode()
def reference_outputs(model: EmoNet, crops: torch.Tensor, landmarks: bool, chunk: int = 8) -> EngineOutput:
    """PyTorch fp32 on the model's own device: the ground truth an export is compared with."""
    parameter = next(model.parameters())
    reference = ExportGraph(model if parameter.dtype == torch.float32 else copy.deepcopy(model).float(), landmarks)
    parts: list[tuple[torch.Tensor, ...]] = []
    with _exact_fp32():
        for start in range(0, crops.shape[0], chunk):
            x = crops[start:start + chunk].to(parameter.device)
            x = x.float() / 255 if not x.is_floating_point() else x.float()
            parts.append(tuple(t.cpu() for t in reference.eval()(x)))
    joined = [torch.cat(column) for column in zip(*parts, strict=True)]
    return EngineOutput(probabilities=joined[0], valence=joined[1], arousal=joined[2],
                        landmarks=joined[3] if landmarks else None)


def run_in_batches(infer: Callable[[torch.Tensor], EngineOutput], crops: torch.Tensor, batch: int) -> EngineOutput:
    """Run a static-shape engine over any number of crops: pad the last batch by repeating crops."""
    count = int(crops.shape[0])
    padded = crops
    if count % batch:
        extra = batch - count % batch
        padded = torch.cat([crops, crops[torch.arange(extra) % count]])
    outs = [infer(padded[i:i + batch]) for i in range(0, padded.shape[0], batch)]
    landmarks = [o.landmarks for o in outs]
    return EngineOutput(
        probabilities=torch.cat([o.probabilities for o in outs])[:count],
        valence=torch.cat([o.valence for o in outs])[:count],
        arousal=torch.cat([o.arousal for o in outs])[:count],
        landmarks=torch.cat(landmarks)[:count] if all(lm is not None for lm in landmarks) else None,  # type: ignore[arg-type]
    )


def compare(found: EngineOutput, reference: EngineOutput, crops: str, tolerance: Tolerance) -> Parity:
    def gap(a: torch.Tensor, b: torch.Tensor) -> float:
        return float((a.float() - b.float()).abs().max())

    landmarks = None
    if found.landmarks is not None and reference.landmarks is not None:
        landmarks = float((found.landmarks - reference.landmarks).norm(dim=-1).mean())
    scale = float(torch.cat([reference.valence.float(), reference.arousal.float()]).abs().max())
    return Parity(crops=crops, count=len(reference), probabilities=gap(found.probabilities, reference.probabilities),
                  valence=gap(found.valence, reference.valence), arousal=gap(found.arousal, reference.arousal),
                  tolerance=tolerance, landmarks_px=landmarks, scale=scale)


def check_parity(infer: Callable[[torch.Tensor], EngineOutput], model: EmoNet, spec: OnnxSpec,
                 crop_sets: Mapping[str, torch.Tensor], tolerance: Tolerance | None = None) -> list[Parity]:
    """Compare a static-batch engine with PyTorch fp32 on each named set of crops."""
    tolerance = tolerance or TOLERANCES[spec.precision]
    reports = []
    for name, crops in crop_sets.items():
        found = run_in_batches(infer, crops, spec.batch_size)
        reports.append(compare(found, reference_outputs(model, crops, spec.landmarks), name, tolerance))
    return reports


def random_crops(count: int, seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.rand((count, 3, INPUT_SIZE, INPUT_SIZE), generator=generator)


def _to_crop(rgb) -> torch.Tensor:
    import cv2

    resized = cv2.resize(rgb, (INPUT_SIZE, INPUT_SIZE), interpolation=cv2.INTER_LINEAR)
    return torch.from_numpy(resized).permute(2, 0, 1).float() / 255


def real_face_crops(faces_dir: Path | None = None) -> tuple[list[str], torch.Tensor | None]:
    """Real faces as EmoNet crops: the astronaut portrait's face box, and each photo in ``faces_dir`` whole.

    The crops follow the EmoNet contract (box cut out, bilinear resize to 256×256, RGB / 255). A folder that
    is missing, or holds no photo that reads, is an error: the check asked for would not happen.
    """
    names, crops = [], []
    try:
        from skimage import data

        x1, y1, x2, y2 = ASTRONAUT_FACE
        crops.append(_to_crop(data.astronaut()[y1:y2, x1:x2]))
        names.append("astronaut")
    except ImportError:
        logger.warning("scikit-image is not installed: no astronaut face in the parity check")
    if faces_dir is not None:
        import cv2

        for photo in _photos(faces_dir):
            bgr = cv2.imread(str(photo), cv2.IMREAD_COLOR)
            if bgr is None:
                logger.warning("--faces: cannot read %s as an image: left out of the check", photo)
                continue
            crops.append(_to_crop(cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)))
            names.append(photo.name)
        if not any(name != "astronaut" for name in names):
            raise InputUnreadableError(f"--faces {faces_dir}: none of its images could be read")
    return names, (torch.stack(crops) if crops else None)


def _photos(folder: Path) -> list[Path]:
    """The image files in ``folder`` (any case of suffix, hidden files aside), sorted by name."""
    if not folder.exists():
        raise InputNotFoundError(f"--faces: folder not found: {folder}")
    if not folder.is_dir():
        raise InputUnreadableError(f"--faces {folder} is not a folder")
    try:
        photos = sorted(f for f in folder.iterdir()
                        if f.suffix.lower() in IMAGE_SUFFIXES and not f.name.startswith(".") and f.is_file())
    except OSError as exc:
        raise InputUnreadableError(f"cannot list {folder}: {exc.strerror or exc}") from None
    if not photos:
        raise InputUnreadableError(f"--faces: no image files in {folder} (looked for "
                                   f"{', '.join(sorted(IMAGE_SUFFIXES))})")
    return photos


def verification_crops(random_count: int, faces_dir: Path | None = None) -> dict[str, torch.Tensor]:
    """The crop sets an export is checked on: seeded random crops, and real faces when available."""
    sets = {"random crops": random_crops(random_count)} if random_count > 0 else {}
    names, faces = real_face_crops(faces_dir)
    if faces is not None:
        shown = names if len(names) <= 5 else [*names[:4], f"… {len(names) - 4} more"]
        sets[f"real faces [{', '.join(shown)}]"] = faces
    if not sets:
        raise UsageError("nothing to check the export on: ask for at least one random crop")
    return sets
