"""Test videos synthesised from real face photos (no video files are committed).

The astronaut portrait (scikit-image) has its face at about (174, 77)–(274, 177); the shared
photos in ``../shared/data/faces`` are 128×128 with one, three and four faces.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import cv2
import numpy as np

from emopipe.config import RunConfig

ASTRONAUT_FACE = (174, 77, 274, 177)  # x1, y1, x2, y2 in the 512×512 portrait
_HEAD = (110, 10, 340, 260)  # the region pasted into frames: face plus hair and collar


def astronaut_bgr() -> np.ndarray:
    from skimage import data

    return cv2.cvtColor(data.astronaut(), cv2.COLOR_RGB2BGR)


def background(width: int, height: int, seed: int = 0) -> np.ndarray:
    """A smooth, face-free background (a gradient with mild noise)."""
    rng = np.random.default_rng(seed)
    x = np.linspace(0, 1, width, dtype=np.float32)[None, :, None]
    y = np.linspace(0, 1, height, dtype=np.float32)[:, None, None]
    base = 60 + 80 * x + 40 * y + np.array([0, 20, 40], dtype=np.float32)
    noise = rng.normal(0, 4, (height, width, 3)).astype(np.float32)
    return np.clip(base + noise, 0, 255).astype(np.uint8)


def paste_head(frame: np.ndarray, cx: float, cy: float, scale: float) -> tuple[float, float, float, float]:
    """Paste the astronaut's head centred at (cx, cy), scaled; returns the face box in frame pixels."""
    head = astronaut_bgr()[_HEAD[1]:_HEAD[3], _HEAD[0]:_HEAD[2]]
    h, w = head.shape[:2]
    sw, sh = max(1, round(w * scale)), max(1, round(h * scale))
    resized = cv2.resize(head, (sw, sh), interpolation=cv2.INTER_AREA)
    x0, y0 = round(cx - sw / 2), round(cy - sh / 2)
    fh, fw = frame.shape[:2]
    ax0, ay0, ax1, ay1 = max(0, x0), max(0, y0), min(fw, x0 + sw), min(fh, y0 + sh)
    frame[ay0:ay1, ax0:ax1] = resized[ay0 - y0:ay1 - y0, ax0 - x0:ax1 - x0]
    fx1, fy1, fx2, fy2 = ASTRONAUT_FACE
    return (x0 + (fx1 - _HEAD[0]) * scale, y0 + (fy1 - _HEAD[1]) * scale,
            x0 + (fx2 - _HEAD[0]) * scale, y0 + (fy2 - _HEAD[1]) * scale)


@dataclass
class SynthVideo:
    path: Path
    fps: float
    size: tuple[int, int]  # width, height
    frame_count: int
    faces: list[list[tuple[float, float, float, float]]] = field(default_factory=list)  # true face boxes per frame

    @property
    def face_frames(self) -> list[int]:
        return [i for i, boxes in enumerate(self.faces) if boxes]

    @property
    def empty_frames(self) -> list[int]:
        return [i for i, boxes in enumerate(self.faces) if not boxes]


def write_video(path: Path, frames: list[np.ndarray], fps: float, fourcc: str = "mp4v") -> None:
    """``mp4v`` in .mp4 (index at the end of the file) or ``MJPG`` in .avi (frame count in the header)."""
    h, w = frames[0].shape[:2]
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*fourcc), fps, (w, h))
    if not writer.isOpened():
        raise RuntimeError(f"cannot write {path}")
    for frame in frames:
        writer.write(frame)
    writer.release()


def moving_face_video(path: Path, frames: int = 40, size: tuple[int, int] = (320, 240), fps: float = 25.0,
                      empty: tuple[int, int] | None = (24, 32), two_faces: bool = False) -> SynthVideo:
    """One (or two) astronaut heads panning and zooming; frames in ``empty`` [start, stop) have no face."""
    w, h = size
    out, truth = [], []
    for i in range(frames):
        frame = background(w, h, seed=i)
        boxes: list[tuple[float, float, float, float]] = []
        if not (empty and empty[0] <= i < empty[1]):
            t = i / max(1, frames - 1)
            scale = (0.55 + 0.35 * t) * h / 240
            if two_faces:
                boxes.append(paste_head(frame, w * (0.25 + 0.05 * t), h * 0.5, scale * 0.8))
                boxes.append(paste_head(frame, w * (0.75 - 0.05 * t), h * 0.5, scale * 0.8))
            else:
                boxes.append(paste_head(frame, w * (0.35 + 0.3 * t), h * (0.45 + 0.1 * t), scale))
        out.append(frame)
        truth.append(boxes)
    write_video(path, out, fps)
    return SynthVideo(path=path, fps=fps, size=size, frame_count=frames, faces=truth)


def two_small_clips(folder: Path) -> Path:
    """``folder/clips`` with two 2-frame clips of a moving face (a.mp4, b.mp4): runs that start Ray and few frames."""
    clips = folder / "clips"
    clips.mkdir()
    for name in ("a.mp4", "b.mp4"):
        moving_face_video(clips / name, frames=2, empty=None)
    return clips


def numbered_frames(count: int, size: tuple[int, int] = (160, 120), seed: int = 0) -> list[np.ndarray]:
    """Frames that differ from each other (a background and the frame's number drawn large)."""
    w, h = size
    out = []
    for i in range(count):
        frame = background(w, h, seed=seed + i)
        cv2.putText(frame, str(i), (w // 8, h * 3 // 4), cv2.FONT_HERSHEY_SIMPLEX, h / 60, (255, 255, 255),
                    max(1, h // 40))
        out.append(frame)
    return out


# Streams a seek must land right in: B-frames, open GOPs (the frames shown just before a key frame are decoded after
# it, from the GOP before), a 29.97 frame rate, HEVC, Matroska; key frames every 48 frames (x264 / x265 by ffmpeg).
SEEK_STREAMS = {
    "h264-bframes.mp4": ["-r", "30", "-c:v", "libx264", "-g", "48", "-bf", "3"],
    "h264-open-gop.mp4": ["-r", "30", "-c:v", "libx264", "-g", "48", "-bf", "3", "-x264-params", "open-gop=1"],
    "h264-2997.mp4": ["-r", "30000/1001", "-c:v", "libx264", "-g", "48"],
    "hevc.mp4": ["-r", "30", "-c:v", "libx265", "-x265-params", "keyint=48:log-level=error", "-tag:v", "hvc1"],
    "h264.mkv": ["-r", "30", "-c:v", "libx264", "-g", "48", "-bf", "2"],
}
SEEK_STARTS = [k + d for k in (48, 96, 144, 240) for d in (-3, -1, 0, 1, 2, 30)] + [5, 200]  # frames to start at


def seek_stream(ffmpeg: str, path: Path, size: tuple[int, int], seconds: float = 12.0) -> Path:
    """``path`` (a name of SEEK_STREAMS) encoded from ffmpeg's moving test pattern."""
    subprocess.run([ffmpeg, "-v", "error", "-y", "-f", "lavfi", "-i",
                    f"testsrc2=size={size[0]}x{size[1]}:rate=30:duration={seconds}", *SEEK_STREAMS[path.name],
                    "-pix_fmt", "yuv420p", str(path)], check=True, timeout=300)
    return path


def truncate(source: Path, target: Path, keep: float) -> Path:
    """A copy of ``source`` with only its first ``keep`` fraction of bytes (a cut download)."""
    data = source.read_bytes()
    target.write_bytes(data[: int(len(data) * keep)])
    return target


def corrupt(source: Path, target: Path, at: float, length: int, seed: int = 0) -> Path:
    """A copy of ``source`` with ``length`` random bytes written over it at the ``at`` fraction of its size."""
    data = bytearray(source.read_bytes())
    start = int(len(data) * at)
    data[start:start + length] = np.random.default_rng(seed).integers(0, 256, length, dtype=np.uint8).tobytes()
    target.write_bytes(bytes(data))
    return target


def many_clips_run(folder: Path, shared_dir: Path, weights: Path, count: int) -> tuple[Path, RunConfig]:
    """``folder/clips`` with ``count`` clips of a moving face (2 or 3 frames; the fourth with two faces) and
    ``folder/models`` with BlazeFace's real weights: (the clips' folder, a CPU many-source run's options over it)."""
    clips = folder / "clips"
    clips.mkdir()
    for i in range(count):
        moving_face_video(clips / f"clip{i}.mp4", frames=2 + i % 2, empty=None, two_faces=i == 3)
    models = folder / "models"
    models.mkdir()
    for f in (shared_dir / "models" / "blazeface").iterdir():
        if f.suffix in (".pth", ".npy"):
            shutil.copy(f, models / f.name)
    return clips, RunConfig(sources=(str(clips),), detector="blazeface", weights=str(weights), device="cpu",
                            models_dir=str(models), no_progress=True)

