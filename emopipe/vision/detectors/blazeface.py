"""BlazeFace (MediaPipe's front- and back-camera models) at its fixed square input.

RGB scaled to [-1, 1], the model's anchor table and scales, scores clipped to ±100, sigmoid, the
threshold, then weighted NMS at IoU 0.3 (overlapping boxes averaged, weighted by score).
"""

from __future__ import annotations

import copy
import os
from functools import partial
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from emopipe.errors import CheckpointError, UsageError
from emopipe.model.devices import resolve_device
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


def depthwise(conv: nn.Conv2d, x: torch.Tensor) -> torch.Tensor:
    """``conv(x)`` for a fused block's depthwise convolution (no bias). On CUDA in half precision it runs a cuDNN
    plan kept on disk beside the epilogue's (:func:`emopipe.model.cudnn_epilogue.planned_conv`), which the next
    process reads back in milliseconds: through PyTorch, cuDNN plans each depthwise shape again in every process
    (~40 ms a shape, 1.3 s of the detector's warm-up on an H100), and the heuristics' plan runs as fast as PyTorch's
    tuned choice there (2.21 ms a 32-frame call). Elsewhere, or where cuDNN has no plan, PyTorch's convolution."""
    from emopipe.model import cudnn_epilogue

    y = cudnn_epilogue.planned_conv(conv, x)
    return conv(x) if y is None else y


class FusedBlazeBlock(nn.Module):
    """A BlazeBlock — relu(pointwise(depthwise(x')) + shortcut(x)) — in two cuDNN calls on CUDA: the depthwise
    convolution without its bias (carried into the pointwise one), then the pointwise convolution with its bias,
    the shortcut and the ReLU applied as it writes. Unfused, a block runs four kernels more: two bias adds, the
    residual add and the ReLU (with the stem's and the heads', 30 % of the back model's call on an H200)."""

    def __init__(self, block: nn.Module) -> None:
        from emopipe.model.fusion import ConvAddReLU, bias_pushed_forward

        super().__init__()
        depthwise, pointwise = block.convs
        self.depthwise, pointwise = bias_pushed_forward(depthwise, pointwise)
        self.pointwise = ConvAddReLU(pointwise, planned=True)
        self.stride: int = block.stride
        self.channel_pad: int = block.channel_pad
        self.max_pool = block.max_pool if self.stride == 2 else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x
        if self.max_pool is not None:
            h = F.pad(x, (0, 2, 0, 2))  # the TFLite model's padding for a stride of 2: right and bottom only
            x = self.max_pool(x)
        if self.channel_pad > 0:
            x = F.pad(x, (0, 0, 0, 0, 0, self.channel_pad))  # the shortcut widened with zero channels
        return self.pointwise(depthwise(self.depthwise, h), x)


class FusedFinalBlock(nn.Module):
    """The back model's last block — relu(pointwise(depthwise(x'))), no shortcut — in two cuDNN calls."""

    def __init__(self, block: nn.Module) -> None:
        from emopipe.model.fusion import ConvReLU, bias_pushed_forward

        super().__init__()
        depthwise, pointwise = block.convs
        self.depthwise, pointwise = bias_pushed_forward(depthwise, pointwise)
        self.pointwise = ConvReLU(pointwise, planned=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pointwise(depthwise(self.depthwise, F.pad(x, (0, 2, 0, 2))))


def fuse_blazeface(network: nn.Module) -> nn.Module:
    """A copy of face-alignment's BlazeFace (front or back) computing the same function in fewer GPU passes:
    the first convolution and its ReLU as one call, each block as :class:`FusedBlazeBlock`, the four output
    convolutions as matrix products with their bias in the epilogue. The copy's forward is the network's own."""
    from emopipe.model.fusion import ConvReLU, PointwiseConv  # (torch.fx and the EmoNet rewrites: only when fused)

    block_type = face_alignment_network("detection.blazeface.net_blazeface", "BlazeBlock")
    final_type = face_alignment_network("detection.blazeface.net_blazeface", "FinalBlazeBlock")
    fused = copy.deepcopy(network)
    stems = [fused.backbone] if hasattr(fused, "backbone") else [fused.backbone1, fused.backbone2]
    for stage in stems:
        for i, layer in enumerate(stage):
            if isinstance(layer, block_type):
                stage[i] = FusedBlazeBlock(layer)
            elif isinstance(layer, nn.Conv2d) and i + 1 < len(stage) and isinstance(stage[i + 1], nn.ReLU):
                stage[i], stage[i + 1] = ConvReLU(layer, planned=True), nn.Identity()
    if isinstance(getattr(fused, "final", None), final_type):
        fused.final = FusedFinalBlock(fused.final)
    for head in ("classifier_8", "classifier_16", "regressor_8", "regressor_16"):
        setattr(fused, head, PointwiseConv(getattr(fused, head)))
    return fused


class BlazeFaceDetector(FaceDetector):
    """face-alignment's BlazeFace network (MediaPipe): front model 128×128, back model 256×256."""

    def __init__(self, network: nn.Module, anchors: np.ndarray | torch.Tensor, *, back_model: bool = False,
                 name: str | None = None, fuse: bool | None = None, **options: object) -> None:
        size = 256 if back_model else 128
        anchors = torch.as_tensor(np.asarray(anchors), dtype=torch.float32)
        if tuple(anchors.shape) != (896, 4):
            raise CheckpointError(f"BlazeFace anchors must be a 896×4 table, got shape {tuple(anchors.shape)}")
        self.back_model = back_model
        # Default on CUDA only: elsewhere the fused modules run their parts in turn, which gains nothing.
        self.fused = resolve_device(str(options.get("device", "cpu"))).type == "cuda" if fuse is None else fuse
        if self.fused:
            network = fuse_blazeface(network)
        super().__init__(network, name=name or ("blazeface_back" if back_model else "blazeface"),
                         input_size=(size, size), **options)  # type: ignore[arg-type]
        self.anchors = anchors.to(self.device)

    def info(self) -> dict[str, str]:
        return {**super().info(), "fuse": str(self.fused).lower()}

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

