"""Inputs for the benchmarks: synthesised talking-head videos and a random EmoNet checkpoint.

Speed does not depend on EmoNet's weight values, so a random checkpoint in the official format stands in
for the published one (whose licence forbids shipping it). The faces are the astronaut's (scikit-image),
moving across a textured background so that detectors and trackers do real work.
"""

from __future__ import annotations

import math
from pathlib import Path

import cv2
import numpy as np

ASTRONAUT_FACE = (160, 50, 290, 200)  # skimage.data.astronaut(): the head with some margin, x1, y1, x2, y2


def _head() -> np.ndarray:
    from skimage import data

    x1, y1, x2, y2 = ASTRONAUT_FACE
    return cv2.cvtColor(data.astronaut()[y1:y2, x1:x2], cv2.COLOR_RGB2BGR)


def _background(width: int, height: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    small = rng.integers(40, 200, (max(2, height // 40), max(2, width // 40), 3), dtype=np.uint8)
    return cv2.resize(small, (width, height), interpolation=cv2.INTER_LINEAR)


def talking_heads(path: Path, frames: int, size: tuple[int, int] = (1280, 720), fps: float = 30.0,
                  faces: int = 1, seed: int = 0, fourcc: str = "mp4v") -> Path:
    """A video of ``faces`` heads drifting and bobbing, one static background per file."""
    width, height = size
    head = _head()
    background = _background(width, height, seed)
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*fourcc), fps, (width, height))
    if not writer.isOpened():
        raise RuntimeError(f"OpenCV cannot write {path} with {fourcc}")
    try:
        for i in range(frames):
            frame = background.copy()
            for k in range(faces):
                t = i / fps
                scale = height / 720 * (2.0 + 0.2 * math.sin(t + k)) / max(1, faces) ** 0.5
                w, h = int(head.shape[1] * scale), int(head.shape[0] * scale)
                cx = width * (k + 0.5) / faces + width * 0.05 * math.sin(0.7 * t + seed + k)
                cy = height * 0.5 + height * 0.03 * math.sin(2.1 * t + k)
                x, y = int(np.clip(cx - w / 2, 0, width - w)), int(np.clip(cy - h / 2, 0, height - h))
                frame[y:y + h, x:x + w] = cv2.resize(head, (w, h))
            writer.write(frame)
    finally:
        writer.release()
    return path


def random_checkpoint(path: Path, classes: int = 8, seed: int = 0) -> Path:
    """An official-format EmoNet checkpoint with random weights (``--weights`` takes it)."""
    import torch

    from emopipe.model.emonet import build_emonet

    torch.manual_seed(seed)
    torch.save(build_emonet(classes=classes).state_dict(), path)
    return path
