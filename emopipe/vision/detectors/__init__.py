"""Face detectors, one module each, chosen by name from :data:`DETECTORS` (imported when chosen).

``sfd`` (S3FD: face-alignment's reference detector and the published EmoNet demo's), ``blazeface``
(MediaPipe's front-camera model, 128×128 input: fast, for faces that fill a good part of the frame) and
``blazeface_back`` (the back-camera model, 256×256: smaller faces). What they share — one static input
shape, letterboxing, decoding on the device, NMS on the host, ``launch``/``collect`` — is in
:mod:`emopipe.vision.detectors.base`.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import torch

from emopipe.model.devices import resolve_device
from emopipe.registry import Registry
from emopipe.vision.detectors.base import FaceDetector, PendingDetections, check_options

__all__ = ["DETECTORS", "FaceDetector", "PendingDetections", "create_detector"]

# name → build(models_dir, working_size, **options) -> FaceDetector
DETECTORS: Registry[Callable[..., FaceDetector]] = Registry("detector", {
    "sfd": "emopipe.vision.detectors.s3fd:build",
    "blazeface": "emopipe.vision.detectors.blazeface:build_front",
    "blazeface_back": "emopipe.vision.detectors.blazeface:build_back",
})


def create_detector(name: str, *, device: str | torch.device, models_dir: str | os.PathLike[str] | None = None,
                    score_threshold: float = 0.5, min_face: float = 0, max_faces: int | None = None,
                    working_size: int | None = None, batch_size: int = 1, precision: str = "fp32",
                    channels_last: bool | None = None, cuda_graphs: bool | None = None) -> FaceDetector:
    """The detector called ``name`` on ``device``, its weights fetched and verified on first use."""
    build = DETECTORS.get(name)
    check_options(batch_size=batch_size, precision=precision, score_threshold=score_threshold,
                  min_face=min_face, max_faces=max_faces)
    return build(models_dir, working_size, device=resolve_device(str(device)), batch_size=batch_size,
                 precision=precision, score_threshold=score_threshold, min_face=min_face, max_faces=max_faces,
                 channels_last=channels_last, cuda_graphs=cuda_graphs)
