"""BlazeFace (MediaPipe's front- and back-camera models) at its fixed square input.

RGB scaled to [-1, 1], the model's anchor table and scales, scores clipped to ±100, sigmoid, the
threshold, then weighted NMS at IoU 0.3 (overlapping boxes averaged, weighted by score).
"""

from __future__ import annotations

import os
from functools import partial
from pathlib import Path

import numpy as np
import torch
from torch import nn

from emopipe.errors import CheckpointError, UsageError
from emopipe.vision.detectors.base import (
    NMS_IOU,
    FaceDetector,
    batched_weighted_nms,
    face_alignment_network,
    load_network_weights,
)

BLAZEFACE_SCORE_CLIP = 100.0


def decode_blazeface(raw_boxes: torch.Tensor, raw_scores: torch.Tensor, anchors: torch.Tensor,
                     input_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """BlazeFace's raw outputs (N×896×16 regressions, N×896×1 logits) → (N×896×4 boxes, N×896 scores).

    Regressions are in input pixels relative to anchors given as normalised centre and size;
    boxes come out in input pixels.
    """
    raw = raw_boxes.float()
    anchors = anchors.float()
    centre_x = raw[..., 0] / input_size * anchors[:, 2] + anchors[:, 0]
    centre_y = raw[..., 1] / input_size * anchors[:, 3] + anchors[:, 1]
    half_w = raw[..., 2] / input_size * anchors[:, 2] / 2
    half_h = raw[..., 3] / input_size * anchors[:, 3] / 2
    boxes = torch.stack((centre_x - half_w, centre_y - half_h, centre_x + half_w, centre_y + half_h), dim=-1)
    scores = raw_scores.float().clamp(-BLAZEFACE_SCORE_CLIP, BLAZEFACE_SCORE_CLIP).sigmoid().squeeze(-1)
    return boxes * input_size, scores


class BlazeFaceDetector(FaceDetector):
    """face-alignment's BlazeFace network (MediaPipe): front model 128×128, back model 256×256."""

    def __init__(self, network: nn.Module, anchors: np.ndarray | torch.Tensor, *, back_model: bool = False,
                 name: str | None = None, **options: object) -> None:
        size = 256 if back_model else 128
        anchors = torch.as_tensor(np.asarray(anchors), dtype=torch.float32)
        if tuple(anchors.shape) != (896, 4):
            raise CheckpointError(f"BlazeFace anchors must be a 896×4 table, got shape {tuple(anchors.shape)}")
        self.back_model = back_model
        super().__init__(network, name=name or ("blazeface_back" if back_model else "blazeface"),
                         input_size=(size, size), **options)  # type: ignore[arg-type]
        self.anchors = anchors.to(self.device)

    def _choose_input_size(self, frame_h: int, frame_w: int) -> tuple[int, int]:  # pragma: no cover - fixed
        raise AssertionError("BlazeFace has a fixed input size")

    def _normalise(self, bgr: torch.Tensor) -> torch.Tensor:
        return bgr.flip(1) / 127.5 - 1.0  # BGR → RGB in [-1, 1]

    def _decode(self, outputs: object, n: int) -> tuple[torch.Tensor, torch.Tensor]:
        raw_boxes, raw_scores = outputs  # type: ignore[misc]
        assert self.input_size is not None
        return decode_blazeface(raw_boxes[:n], raw_scores[:n], self.anchors, self.input_size[0])

    def _keep(self, scores: torch.Tensor | np.ndarray) -> torch.Tensor | np.ndarray:
        return scores >= self.score_threshold

    def _suppress(self, frame_of: np.ndarray, boxes: np.ndarray,
                  scores: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return batched_weighted_nms(frame_of, boxes, scores, NMS_IOU)


def load_anchors(path: Path) -> np.ndarray:
    try:
        anchors = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise CheckpointError(f"cannot read the anchor table {path}: {exc}") from None
    if anchors.shape != (896, 4):
        raise CheckpointError(f"{path} is not a BlazeFace anchor table (shape {anchors.shape}, expected (896, 4))")
    return anchors


def _build(back_model: bool, models_dir: str | os.PathLike[str] | None, working_size: int | None,
           **options: object) -> FaceDetector:
    from emopipe.model import weights

    BlazeFace = face_alignment_network("detection.blazeface.net_blazeface", "BlazeFace")

    size = 256 if back_model else 128
    if working_size not in (None, size):
        name = "blazeface_back" if back_model else "blazeface"
        raise UsageError(f"{name} runs at its fixed {size}×{size} input; leave the working size unset")
    prefix = "blazeface_back" if back_model else "blazeface_front"
    network = load_network_weights(BlazeFace(back_model=back_model), weights.ensure(prefix, models_dir))
    anchors = load_anchors(weights.ensure(f"{prefix}_anchors", models_dir))
    return BlazeFaceDetector(network, anchors, back_model=back_model, **options)


build_front = partial(_build, False)  # MediaPipe's front-camera model, 128×128
build_back = partial(_build, True)  # the back-camera model, 256×256 (smaller faces)

