"""S3FD, face-alignment's reference detector (and the published EmoNet demo's), at one working size.

BGR minus mean (104, 117, 123), softmax, 6 scales of stride 2**(i+2) with anchors 4·stride wide,
variances 0.1/0.2, candidates above 0.05, NMS at IoU 0.3 with pixel-inclusive areas as face-alignment
computes them, then the score threshold (thresholding first keeps exactly the same boxes: greedy NMS only
lets a box suppress lower-scoring ones). Its L2Norm runs in float32 inside fp16 networks.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from emopipe.errors import UsageError
from emopipe.model.devices import resolve_device
from emopipe.vision.detectors.base import (
    NMS_IOU,
    FaceDetector,
    _round_up,
    batched_nms,
    face_alignment_network,
    load_network_weights,
)

S3FD_MEAN_BGR = (104.0, 117.0, 123.0)
S3FD_VARIANCES = (0.1, 0.2)
S3FD_CANDIDATE_SCORE = 0.05  # face-alignment keeps nothing below this, whatever the threshold
DEFAULT_WORKING_SIZE = 640  # S3FD, long side


def decode_s3fd(outputs: Sequence[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """S3FD's 12 raw outputs (class logits and box offsets at 6 scales) → (N×A×4 boxes, N×A scores).

    Boxes are in network-input pixels; scores are the face class's softmax probability.
    Anchor order: scale by scale, row-major within a scale (face-alignment's order).
    """
    all_boxes, all_scores = [], []
    for level in range(len(outputs) // 2):
        logits, offsets = outputs[2 * level].float(), outputs[2 * level + 1].float()
        n, _, h, w = logits.shape
        stride = 2 ** (level + 2)
        size = 4.0 * stride
        all_scores.append(F.softmax(logits, dim=1)[:, 1].reshape(n, h * w))
        ys = torch.arange(h, device=logits.device, dtype=torch.float32) * stride + stride / 2
        xs = torch.arange(w, device=logits.device, dtype=torch.float32) * stride + stride / 2
        cy, cx = (g.reshape(-1) for g in torch.meshgrid(ys, xs, indexing="ij"))
        loc = offsets.permute(0, 2, 3, 1).reshape(n, h * w, 4)
        centre_x = cx + loc[..., 0] * S3FD_VARIANCES[0] * size
        centre_y = cy + loc[..., 1] * S3FD_VARIANCES[0] * size
        box_w = size * torch.exp(loc[..., 2] * S3FD_VARIANCES[1])
        box_h = size * torch.exp(loc[..., 3] * S3FD_VARIANCES[1])
        x1, y1 = centre_x - box_w / 2, centre_y - box_h / 2
        all_boxes.append(torch.stack((x1, y1, x1 + box_w, y1 + box_h), dim=-1))
    return torch.cat(all_boxes, dim=1), torch.cat(all_scores, dim=1)


class Float32L2Norm(nn.Module):
    """S3FD's L2Norm computed in float32 inside a half-precision network.

    The sum of squares over 256–512 VGG channels easily exceeds fp16's range (65 504), and its
    1e-10 epsilon is zero in fp16: either would zero or NaN the features the detection heads read.
    Keeps the ``weight`` parameter name, so state dicts are unchanged.
    """

    def __init__(self, norm: nn.Module) -> None:
        super().__init__()
        self.weight = norm.weight
        self.eps = float(getattr(norm, "eps", 1e-10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x.float()
        y = y / (y.pow(2).sum(dim=1, keepdim=True).sqrt() + self.eps) * self.weight.float().view(1, -1, 1, 1)
        return y.to(x.dtype)


def _float32_norms(network: nn.Module) -> None:
    for name, module in list(network.named_modules()):
        if type(module).__name__ == "L2Norm":
            parent_name, _, attribute = name.rpartition(".")
            setattr(network.get_submodule(parent_name) if parent_name else network, attribute, Float32L2Norm(module))


class S3FDDetector(FaceDetector):
    """face-alignment's S3FD network (VGG-16 single-shot detector, 6 anchor scales)."""

    upscale = False  # the reference runs S3FD at the frame's own resolution; never enlarge

    def __init__(self, network: nn.Module, *, working_size: int = DEFAULT_WORKING_SIZE, name: str = "sfd",
                 fuse: bool | None = None, **options: object) -> None:
        if working_size < 32:
            raise UsageError(f"S3FD working size must be at least 32 pixels, got {working_size}")
        self.working_size = working_size
        if options.get("precision") == "fp16":
            _float32_norms(network)
        self.fused = resolve_device(str(options.get("device", "cpu"))).type == "cuda" if fuse is None else fuse
        if self.fused:
            # VGG applies ReLU straight after 19 convolutions: on CUDA each pair becomes one cuDNN call,
            # which saves a memory pass over large activations (b8 fp16: 6.6 → 4.3 ms on an H100,
            # docs/benchmark-log.md). Default on CUDA only; elsewhere it would run conv then ReLU.
            from emopipe.model.fusion import fuse_conv_relu

            network = fuse_conv_relu(network)
        super().__init__(network, name=name, **options)  # type: ignore[arg-type]
        self._mean = torch.tensor(S3FD_MEAN_BGR, device=self.device).view(1, 3, 1, 1)

    def info(self) -> dict[str, str]:
        return {**super().info(), "fuse": str(self.fused).lower()}

    def _choose_input_size(self, frame_h: int, frame_w: int) -> tuple[int, int]:
        long_side = min(self.working_size, max(frame_h, frame_w))
        scale = long_side / max(frame_h, frame_w)
        return _round_up(frame_h * scale, 32), _round_up(frame_w * scale, 32)

    def _normalise(self, bgr: torch.Tensor) -> torch.Tensor:
        return bgr - self._mean

    def _decode(self, outputs: object, n: int) -> tuple[torch.Tensor, torch.Tensor]:
        return decode_s3fd([o[:n] for o in outputs])  # type: ignore[union-attr]

    def _keep(self, scores: torch.Tensor | np.ndarray) -> torch.Tensor | np.ndarray:
        return scores > max(self.score_threshold, S3FD_CANDIDATE_SCORE)

    def _suppress(self, frame_of: np.ndarray, boxes: np.ndarray,
                  scores: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        keep = batched_nms(frame_of, boxes, scores, NMS_IOU, pixel_inclusive=True)
        return frame_of[keep], boxes[keep], scores[keep]


def build(models_dir: str | os.PathLike[str] | None, working_size: int | None,
               **options: object) -> FaceDetector:
    from emopipe.model import weights

    s3fd = face_alignment_network("detection.sfd.net_s3fd", "s3fd")

    network = load_network_weights(s3fd(), weights.ensure("s3fd", models_dir))
    return S3FDDetector(network, working_size=working_size or DEFAULT_WORKING_SIZE, **options)
