"""What a run reports when it ends: counts, rates, start-up, first-frame against steady-state latency."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class RunSummary:
    """What a run did, printed on stderr and written as JSON."""

    source: str
    decoder: str = "opencv"  # "nvdec": decoded on the GPU (emopipe.io.nvdec)
    frames: int = 0
    detect_every: int = 1  # the detector ran on every K-th frame (--detect-every)
    frames_detected: int = 0  # frames the detector ran on
    faces: int = 0
    seconds: float = 0.0
    fps: float = 0.0
    faces_per_s: float = 0.0
    load_s: float = 0.0
    warmup_s: float = 0.0
    first_frame_latency_s: float | None = None
    steady_latency_p50_s: float | None = None
    steady_latency_p99_s: float | None = None
    stage_seconds: dict[str, float] = field(default_factory=dict)
    ended_early: str | None = None
    damaged: str | None = None  # damaged stretches skipped, the end reached (not an error)
    frames_skipped: int = 0
    interrupted: bool = False
    engine: dict[str, str] = field(default_factory=dict)
    outputs: dict[str, str] = field(default_factory=dict)
    startup: dict[str, Any] = field(default_factory=dict)  # load, warmup, and how many warmups this process ran
    skipped_files: list[str] = field(default_factory=list)  # a folder of images: files that did not decode
    live: dict[str, Any] | None = None  # live mode: capture rate, drops, reconnects (see emopipe.pipeline.live)
    tracks: list[dict[str, Any]] | None = None  # one summary per face track (emopipe.report.tracks.TrackSummary)
    start_s: float | None = None  # --start: where reading began in the source (an annotated video's first frame)

    @property
    def complete(self) -> bool:
        """The source was read to the end asked for: not interrupted, nor cut short by a damaged input."""
        return not (self.interrupted or self.ended_early)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def _describe_startup(self) -> str:
        phases = self.startup
        if phases.get("first_row_s") is None or phases.get("before_load_s") is None:
            return f"startup: load {self.load_s:.2f} s, warmup {self.warmup_s:.2f} s"
        return (f"startup: first row {phases['first_row_s']:.2f} s after the start (imports and opening the input "
                f"{phases['before_load_s']:.2f} s, load {self.load_s:.2f} s, EmoNet warmup "
                f"{phases['engine_warmup_s']:.2f} s, detector warmup {phases['detector_warmup_s']:.2f} s)")

    def describe(self) -> str:
        def ms(s: float | None) -> str:
            return "n/a" if s is None else f"{s * 1000:.1f} ms"

        lines = [
            f"{self.frames} frames, {self.faces} faces in {self.seconds:.2f} s "
            f"({self.fps:.1f} frames/s, {self.faces_per_s:.1f} faces/s)",
            self._describe_startup(),
            f"frame latency: first {ms(self.first_frame_latency_s)}, steady p50 {ms(self.steady_latency_p50_s)}, "
            f"p99 {ms(self.steady_latency_p99_s)}",
        ]
        if self.decoder != "opencv":
            lines.append(f"decoder: {self.decoder}")
        if self.detect_every > 1:
            lines.append(f"detector ran on {self.frames_detected} of {self.frames} frames (--detect-every "
                         f"{self.detect_every}); boxes in between from the key frames")
        if self.stage_seconds:
            lines.append("time per stage: " + ", ".join(f"{k} {v:.2f} s" for k, v in self.stage_seconds.items()))
        if self.ended_early:
            lines.append(f"input ended early: {self.ended_early}")
        if self.damaged:
            lines.append(f"damaged input: {self.damaged}")
        if self.skipped_files:
            shown = ", ".join(Path(f).name for f in self.skipped_files[:5])
            more = f" and {len(self.skipped_files) - 5} more" if len(self.skipped_files) > 5 else ""
            lines.append(f"skipped {len(self.skipped_files)} file(s) that did not decode: {shown}{more}")
        if self.interrupted:
            lines.append("interrupted: results up to the last complete frame were written")
        if self.tracks is not None:
            short = sum(1 for t in self.tracks if t.get("short"))
            lines.append(f"{len(self.tracks)} face track(s)" + (f", {short} of them short" if short else ""))
        if self.live:
            lines.append(self.live.get("description", ""))
        return "\n".join(lines)
