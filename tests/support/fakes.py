"""A stand-in engine for pipeline tests at scale (EmoNet costs ~1 s per face on a CPU).

It honours the engine contract (static batch shape, per-slot outputs) and derives its outputs from
each crop's pixels, so results that reach the wrong frame or slot are detectable.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from emopipe.types import LABELS, EngineOutput, WarmupReport


class PixelEngine:
    backend = "fake"

    def __init__(self, batch_size: int = 4, classes: int = 8) -> None:
        self.batch_size = batch_size
        self.device = torch.device("cpu")
        self.labels = LABELS[classes]
        self.num_classes = classes
        self.warmup_report: WarmupReport | None = None
        self.shapes_seen: set[tuple[int, ...]] = set()

    def warmup(self, batch_sizes: Sequence[int] | None = None) -> WarmupReport:
        self.warmup_report = WarmupReport(shapes=[(self.batch_size, 3, 256, 256)], seconds_per_shape=[0.0])
        return self.warmup_report

    def infer(self, crops: torch.Tensor) -> EngineOutput:
        self.shapes_seen.add(tuple(crops.shape))
        mean = crops.float().mean(dim=(1, 2, 3))  # 0 for padding
        logits = torch.stack([mean * (k + 1) for k in range(self.num_classes)], dim=1)
        return EngineOutput(probabilities=torch.softmax(logits, dim=1), valence=mean, arousal=-mean)

    def info(self) -> dict[str, str]:
        return {"backend": self.backend, "device": "cpu", "precision": "fp32", "batch_size": str(self.batch_size)}
