"""The data that crosses stages: frames, source info, detections, engine outputs, face results and records.

A leaf module: it imports nothing from emopipe, and neither torch nor OpenCV, so reading or writing
rows, describing a source or checking a detection never loads a deep-learning framework. Tensors
appear in type hints only. Every type validates its shape once, at construction, with a message
giving expected against actual.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

if TYPE_CHECKING:
    import torch

# -- the EmoNet contract (the published model's, see docs/architecture.md) -------------------------------
INPUT_SIZE = 256  # crops are INPUT_SIZE × INPUT_SIZE RGB in [0, 1]
# The largest static batch (of faces, or of frames per detector call): a face's crop is 0.8 MB in float32, so a batch
# of 4096 is 3.2 GB of input alone. Beyond it a typo (1000000) was an internal error once the weights had loaded: an
# allocation of hundreds of GB, or an overflow.
MAX_BATCH_SIZE = 4096
HEATMAP_SIZE = 64  # landmark heatmaps of the last hourglass
NUM_LANDMARKS = 68

LABELS: dict[int, tuple[str, ...]] = {
    8: ("neutral", "happy", "sad", "surprise", "fear", "disgust", "anger", "contempt"),
    5: ("neutral", "happy", "sad", "surprise", "anger"),
}

# what a source is: files and folders, and live cameras and network streams
# Numeric precisions by name, as options spell them (the torch dtypes: emopipe.model.devices.PRECISIONS)
PRECISION_NAMES = ("fp32", "fp16", "bf16")
SOURCE_KINDS = frozenset({"video", "image", "images", "camera", "stream"})


def describe_array(a: object) -> str:
    shape = getattr(a, "shape", None)
    if shape is not None and hasattr(a, "dtype"):
        return f"{type(a).__name__} of shape {tuple(shape)} and dtype {a.dtype}"
    return type(a).__name__


# -- sources and frames ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class SourceInfo:
    """What is known about a source before reading it."""

    uri: str
    kind: str  # one of SOURCE_KINDS
    fps: float | None  # None for images and live sources
    frame_count: int | None  # as declared by the container (or counted, for images); None when unknown
    width: int  # of the first frame; frames of a folder may differ
    height: int

    def __post_init__(self) -> None:
        if self.kind not in SOURCE_KINDS:
            raise ValueError(f"SourceInfo.kind must be one of {sorted(SOURCE_KINDS)}, got {self.kind!r}")
        if self.fps is not None and not (math.isfinite(self.fps) and self.fps > 0):
            raise ValueError(f"SourceInfo.fps must be a positive number or None, got {self.fps!r}")
        if self.frame_count is not None and self.frame_count < 0:
            raise ValueError(f"SourceInfo.frame_count must be ≥ 0 or None, got {self.frame_count}")
        if self.width <= 0 or self.height <= 0:
            raise ValueError(f"SourceInfo size must be positive, got {self.width}×{self.height}")

    @property
    def duration_s(self) -> float | None:
        if self.fps is None or self.frame_count is None:
            return None
        return self.frame_count / self.fps


@runtime_checkable
class Frame(Protocol):
    """One decoded frame, wherever its pixels are: what every stage after the source reads.

    ``bgr`` is the host copy (H×W×3 uint8, as OpenCV decodes); ``device_pixels`` is the same image as a
    uint8 tensor on the GPU when the frame was decoded there (NVDEC), else None.
    """

    index: int  # 0-based position in the source
    timestamp_s: float  # seconds from the start of the source (live: Unix capture time)
    read_time: float  # time.perf_counter() when it was read
    stream: int  # which of the run's sources it came from (0 for a run of one source)
    file: str | None  # a folder of images: the image file's name
    reconnects: int  # live: the stream's reconnections before this frame (a new count: no boxes carry across)

    @property
    def height(self) -> int: ...

    @property
    def width(self) -> int: ...

    @property
    def bgr(self) -> np.ndarray: ...

    @property
    def device_pixels(self) -> torch.Tensor | None: ...


def _check_position(kind: str, index: int, timestamp_s: float) -> None:
    if index < 0:
        raise ValueError(f"{kind}.index must be ≥ 0, got {index}")
    if not (math.isfinite(timestamp_s) and timestamp_s >= 0):
        raise ValueError(f"{kind}.timestamp_s must be a finite number ≥ 0, got {timestamp_s}")


@dataclass(frozen=True)
class HostFrame:
    """A frame decoded on the CPU: BGR uint8 pixels as OpenCV decodes them."""

    index: int
    timestamp_s: float
    bgr: np.ndarray  # H×W×3 uint8
    read_time: float
    file: str | None = None  # the image file, for a folder of images
    stream: int = 0  # which of the run's sources it came from (several sources in one run: their order)
    reconnects: int = 0  # live: the stream's reconnections before this frame

    def __post_init__(self) -> None:
        b = self.bgr
        if not isinstance(b, np.ndarray) or b.ndim != 3 or b.shape[2] != 3 or b.dtype != np.uint8:
            got = f"{type(b).__name__} {getattr(b, 'shape', '')} {getattr(b, 'dtype', '')}".strip()
            raise ValueError(f"HostFrame.bgr must be an H×W×3 uint8 array, got {got}")
        if b.shape[0] == 0 or b.shape[1] == 0:
            raise ValueError(f"HostFrame.bgr must not be empty, got shape {b.shape}")
        _check_position("HostFrame", self.index, self.timestamp_s)

    @property
    def height(self) -> int:
        return int(self.bgr.shape[0])

    @property
    def width(self) -> int:
        return int(self.bgr.shape[1])

    @property
    def device_pixels(self) -> None:
        return None


@dataclass(frozen=True, eq=False)
class DeviceFrame:
    """A frame decoded on the GPU (NVDEC): its pixels stay there; ``bgr`` copies them out on demand."""

    index: int
    timestamp_s: float
    pixels: torch.Tensor  # H×W×3 uint8 BGR, on the decoding device
    read_time: float
    file: str | None = None
    stream: int = 0
    reconnects: int = 0  # (always 0: NVDEC reads files)

    def __post_init__(self) -> None:
        p = self.pixels
        if p.ndim != 3 or p.shape[2] != 3 or str(p.dtype) != "torch.uint8" or p.shape[0] == 0 or p.shape[1] == 0:
            raise ValueError(f"DeviceFrame.pixels must be an H×W×3 uint8 tensor, got {tuple(p.shape)} {p.dtype}")
        _check_position("DeviceFrame", self.index, self.timestamp_s)

    @property
    def height(self) -> int:
        return int(self.pixels.shape[0])

    @property
    def width(self) -> int:
        return int(self.pixels.shape[1])

    @property
    def device_pixels(self) -> torch.Tensor:
        return self.pixels

    @cached_property
    def bgr(self) -> np.ndarray:
        """The pixels on the host (copied once, when something draws on the frame)."""
        return self.pixels.cpu().numpy()


# -- detections -----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Detections:
    """The faces found in one frame, largest first: boxes ``x1, y1, x2, y2`` in frame pixels."""

    boxes: np.ndarray  # k×4 float32
    scores: np.ndarray  # k float32

    def __post_init__(self) -> None:
        b, s = self.boxes, self.scores
        if not isinstance(b, np.ndarray) or b.dtype != np.float32 or b.ndim != 2 or b.shape[1] != 4:
            raise ValueError(f"Detections.boxes must be a k×4 float32 array, got {describe_array(b)}")
        if not isinstance(s, np.ndarray) or s.dtype != np.float32 or s.ndim != 1:
            raise ValueError(f"Detections.scores must be a 1-D float32 array, got {describe_array(s)}")
        if s.shape[0] != b.shape[0]:
            raise ValueError(f"Detections has {b.shape[0]} boxes but {s.shape[0]} scores")
        if not (np.isfinite(b).all() and np.isfinite(s).all()):
            raise ValueError("Detections must be finite")

    def __len__(self) -> int:
        return int(self.boxes.shape[0])

    @classmethod
    def empty(cls) -> Detections:
        return cls(np.zeros((0, 4), np.float32), np.zeros((0,), np.float32))

    @classmethod
    def largest_first(cls, boxes: np.ndarray, scores: np.ndarray, limit: int | None = None) -> Detections:
        """Boxes and scores ordered by area, largest first (the ``limit`` largest, if given), as float32."""
        areas = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
        order = np.argsort(-areas, kind="stable")[:limit]
        return cls(boxes[order].astype(np.float32), scores[order].astype(np.float32))

    @property
    def areas(self) -> np.ndarray:
        return (self.boxes[:, 2] - self.boxes[:, 0]) * (self.boxes[:, 3] - self.boxes[:, 1])  # type: ignore[no-any-return]


# -- engines --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class EngineOutput:
    """Per-slot results on the CPU (float32 tensors); padding rows are still here, callers drop them."""

    probabilities: torch.Tensor  # N×C, softmax of the expression logits
    valence: torch.Tensor  # N
    arousal: torch.Tensor  # N
    landmarks: torch.Tensor | None = None  # N×68×2 (x, y) in 256×256 crop pixels

    def __len__(self) -> int:
        return int(self.valence.shape[0])


@dataclass
class WarmupReport:
    """What was tuned before the first real batch, and what it cost."""

    shapes: list[tuple[int, ...]] = field(default_factory=list)
    seconds_per_shape: list[float] = field(default_factory=list)
    seconds: float = 0.0
    settings: dict[str, object] = field(default_factory=dict)

    def describe(self) -> str:
        if not self.shapes:
            return "no warmup"
        parts = ", ".join(f"{s[0]}×{s[1]}×{s[2]}×{s[3]} {t * 1000:.0f} ms" for s, t in
                          zip(self.shapes, self.seconds_per_shape))
        knobs = ", ".join(f"{k}={v}" for k, v in self.settings.items())
        return f"warmed up {len(self.shapes)} shape(s) in {self.seconds:.2f} s ({parts}; {knobs})"


# -- results --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class FaceResult:
    """EmoNet's answer for one face (one real batch slot)."""

    probabilities: np.ndarray  # C
    valence: float
    arousal: float
    landmarks: np.ndarray | None  # 68×2 in crop pixels


@dataclass
class FrameResult:
    """Everything the writer needs about one frame, handed over in frame order."""

    frame: Frame
    detections: Detections
    crop_boxes: np.ndarray  # k×4, the integer boxes actually cropped (landmarks map through these)
    faces: list[FaceResult] = field(default_factory=list)
    detected: bool = True  # False: boxes interpolated or carried from key frames (--detect-every)


def _readonly(array: np.ndarray) -> np.ndarray:
    array.setflags(write=False)
    return array


@dataclass(frozen=True, eq=False)
class FaceRecord:
    """One face in one frame: where it is, which track it belongs to, and what EmoNet says.

    ``valence`` and ``arousal`` are the model's raw outputs, not clamped: the published model keeps them
    near [-1, 1], other checkpoints may not. ``probabilities`` are in the order of ``labels`` (the model's
    classes; ``probabilities_by_label`` pairs them). ``landmarks`` are 68 (x, y) points in frame pixels,
    or None. Arrays are stored as read-only copies.
    """

    source: str
    frame: int
    timestamp_s: float  # seconds from the start of the source (live: Unix capture time)
    track_id: int  # from 1, in order of first appearance, never reused
    box: tuple[float, float, float, float]  # x1, y1, x2, y2 in frame pixels
    score: float  # detector confidence
    label: str  # the class with the highest probability
    probabilities: np.ndarray  # C, sums to 1
    valence: float
    arousal: float
    landmarks: np.ndarray | None = None  # 68×2 in frame pixels
    detected: bool = True  # False: the box was interpolated or carried from key frames (--detect-every)
    labels: tuple[str, ...] = ()  # the class names of ``probabilities``, in order (empty when unknown)
    file: str | None = None  # the image file, for a folder of images

    def __post_init__(self) -> None:
        def fix(name: str, value: Any) -> None:
            object.__setattr__(self, name, value)

        if not isinstance(self.source, str):
            raise TypeError(f"FaceRecord.source must be a str, got {type(self.source).__name__}")
        if int(self.frame) != self.frame or self.frame < 0:
            raise ValueError(f"FaceRecord.frame must be an integer ≥ 0, got {self.frame}")
        if int(self.track_id) != self.track_id or self.track_id < 1:
            raise ValueError(f"FaceRecord.track_id must be an integer ≥ 1, got {self.track_id}")
        fix("frame", int(self.frame))
        fix("track_id", int(self.track_id))
        fix("detected", bool(self.detected))
        for name in ("timestamp_s", "score", "valence", "arousal"):
            value = float(getattr(self, name))
            if not np.isfinite(value):
                raise ValueError(f"FaceRecord.{name} must be a finite number, got {value}")
            fix(name, value)

        box = np.asarray(self.box, dtype=np.float64)
        if box.shape != (4,) or not np.isfinite(box).all():
            raise ValueError(f"FaceRecord.box must be 4 finite numbers (x1, y1, x2, y2), got {self.box!r}")
        if box[2] < box[0] or box[3] < box[1]:
            raise ValueError(f"FaceRecord.box must have x2 ≥ x1 and y2 ≥ y1, got {box.tolist()}")
        fix("box", tuple(float(v) for v in box))

        probabilities = np.array(self.probabilities, dtype=np.float64)
        if probabilities.ndim != 1 or probabilities.shape[0] < 2:
            raise ValueError(f"FaceRecord.probabilities must be a vector of C ≥ 2 values, got shape "
                             f"{probabilities.shape}")
        total = probabilities.sum()
        if not np.isfinite(probabilities).all() or probabilities.min() < 0 or abs(total - 1) > 1e-3:
            raise ValueError(f"FaceRecord.probabilities must be ≥ 0 and sum to 1, got sum {total:.6g}")
        fix("probabilities", _readonly(probabilities))
        if not isinstance(self.label, str) or not self.label:
            raise ValueError(f"FaceRecord.label must be a class name, got {self.label!r}")
        fix("labels", tuple(self.labels))
        if self.labels and len(self.labels) != probabilities.shape[0]:
            raise ValueError(f"FaceRecord has {probabilities.shape[0]} probabilities for {len(self.labels)} labels")

        if self.landmarks is not None:
            landmarks = np.array(self.landmarks, dtype=np.float64)
            if landmarks.shape != (NUM_LANDMARKS, 2) or not np.isfinite(landmarks).all():
                raise ValueError(f"FaceRecord.landmarks must be {NUM_LANDMARKS}×2 finite numbers or None, got "
                                 f"shape {landmarks.shape}")
            fix("landmarks", _readonly(landmarks))

    @classmethod
    def create(cls, *, labels: Sequence[str], probabilities: np.ndarray, **fields: Any) -> FaceRecord:
        """A record whose label is the most probable of ``labels`` (the model's class order)."""
        probabilities = np.asarray(probabilities)
        if probabilities.shape != (len(labels),):
            raise ValueError(f"expected {len(labels)} probabilities for labels {tuple(labels)}, got shape "
                             f"{probabilities.shape}")
        return cls(label=labels[int(np.argmax(probabilities))], probabilities=probabilities, labels=tuple(labels),
                   **fields)

    @classmethod
    def for_frame(cls, *, source: str, frame: int, timestamp_s: float, labels: Sequence[str],
                  track_ids: np.ndarray, boxes: np.ndarray, scores: np.ndarray, probabilities: np.ndarray,
                  valence: np.ndarray, arousal: np.ndarray, landmarks: np.ndarray | None = None,
                  detected: bool = True, file: str | None = None) -> list[FaceRecord]:
        """The records of one frame's k faces (arrays of k rows): the values, types and checks of k calls of
        :meth:`create`, checked together (the writer thread makes one frame's records at a time, and k
        records' checks one by one cost it ~0.1 ms a face). Should any check fail, the records are made one by
        one, so the error is the one :meth:`create` gives for the first bad face."""
        labels = tuple(labels)
        k = len(track_ids)
        if k == 0:
            return []
        try:
            matrix = np.array(probabilities, dtype=np.float64, ndmin=2)  # (copies: the records' own)
            corners = np.array(boxes, dtype=np.float64)
            values = np.array([scores, valence, arousal], dtype=np.float64)
            ids = np.asarray(track_ids)
            points = None if landmarks is None else np.array(landmarks, dtype=np.float64)
            # (one sum per array stands for "all finite": a NaN or ±inf makes it so; a sum that overflows only
            # sends the frame the slow way)
            total = float(matrix.sum()) + float(corners.sum()) + float(values.sum()) + float(timestamp_s)
            valid = bool(
                isinstance(source, str) and isinstance(frame, (int, np.integer)) and frame >= 0
                and len(labels) >= 2 and all(isinstance(n, str) and n for n in labels)
                and matrix.shape == (k, len(labels)) and corners.shape == (k, 4) and values.shape == (3, k)
                and ids.shape == (k,) and np.issubdtype(ids.dtype, np.integer) and ids.min() >= 1
                and math.isfinite(total) and (corners[:, 2:] >= corners[:, :2]).all() and matrix.min() >= 0
                and np.abs(matrix.sum(axis=1) - 1).max() <= 1e-3
                and (points is None or (points.shape == (k, NUM_LANDMARKS, 2) and math.isfinite(points.sum()))))
        except (TypeError, ValueError):
            valid = False
        if not valid:
            return [cls.create(labels=labels, probabilities=probabilities[i], source=source, frame=frame,
                               timestamp_s=timestamp_s, track_id=track_ids[i], box=tuple(boxes[i]), score=scores[i],
                               valence=valence[i], arousal=arousal[i],
                               landmarks=None if landmarks is None else landmarks[i], detected=detected, file=file)
                    for i in range(k)]
        matrix.setflags(write=False)  # each record's rows are read-only views of these copies
        if points is not None:
            points.setflags(write=False)
        shared = {"source": source, "frame": int(frame), "timestamp_s": float(timestamp_s),
                  "detected": bool(detected), "labels": labels, "file": file}
        score, val, aro = values.tolist()
        records = []
        for i, (track, box, best) in enumerate(zip(ids.tolist(), corners.tolist(), matrix.argmax(axis=1).tolist())):
            record = object.__new__(cls)  # (checked above; a frozen dataclass's fields are set through __dict__)
            record.__dict__.update(shared, track_id=track, box=tuple(box), score=score[i], label=labels[best],
                                   probabilities=matrix[i], valence=val[i], arousal=aro[i],
                                   landmarks=None if points is None else points[i])
            records.append(record)
        return records

    @property
    def probabilities_by_label(self) -> Mapping[str, float]:
        """``{label: probability}`` in the model's class order."""
        if not self.labels:
            raise ValueError("this FaceRecord was made without its labels")
        return dict(zip(self.labels, (float(p) for p in self.probabilities)))
