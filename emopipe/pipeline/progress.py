"""The progress bar on stderr, of one process's pipeline or of a Ray run's workers together (loads no PyTorch: a Ray
driver draws it)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from emopipe.pipeline.hooks import Observer

if TYPE_CHECKING:
    from emopipe.types import FrameResult


class ProgressBar(Observer):
    """tqdm on stderr: frames of the known total (``--max-frames`` and ``--end`` counted), frames/s, faces.

    The bar stays on its own line when the run ends (the summary starts on the next one) and shows the
    final face count."""

    def __init__(self, total: int | None, file: Any = None) -> None:
        from tqdm import tqdm

        self.bar = tqdm(total=total, unit="frame", file=file or sys.stderr, dynamic_ncols=True, leave=True,
                        mininterval=0.2)
        self.faces = 0
        self.extra: dict[str, Any] = {}  # shown after the faces (a Ray run: the workers alive)

    def frame(self, result: FrameResult, latency_s: float) -> None:
        self.faces += len(result.faces)
        self.bar.set_postfix(faces=self.faces, **self.extra, refresh=False)  # drawn with the next update
        self.bar.update(1)

    def show(self, frames: int, faces: int, total: int | None, **extra: Any) -> None:
        """Counts gathered elsewhere (a Ray run's workers): the bar moves to them. ``frames`` may go back
        (a dead worker's frames are done again elsewhere); ``total`` None while it is not known."""
        self.faces = faces
        self.extra = extra
        self.bar.total = total
        self.bar.set_postfix(faces=faces, **extra, refresh=False)
        if frames >= self.bar.n:
            self.bar.update(frames - self.bar.n)  # (tqdm's rate follows updates, not assignments)
        else:
            self.bar.n = frames
            self.bar.refresh()

    def close(self) -> None:
        self.bar.set_postfix(faces=self.faces, **self.extra, refresh=False)
        self.bar.close()
