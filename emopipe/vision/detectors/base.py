"""Face detection with face-alignment's networks at one fixed working resolution, on the frames' device.

Detectors are chosen by name (:data:`emopipe.vision.detectors.DETECTORS`, one module each): ``sfd``
(S3FD, the reference detector of face-alignment and of the published EmoNet demo), ``blazeface``
(MediaPipe's front-camera model, 128×128 input) and ``blazeface_back`` (the back-camera model, 256×256).
The networks are face-alignment's classes; the weights come from our manifest (verified, ``weights_only`` loading,
strict keys), and pre- and post-processing are ours:

* **One static input shape.** cuDNN tunes its algorithms per input shape, so every batch the
  network sees has the same shape: frames are resized on the device keeping their aspect ratio
  and *letterboxed* (padded, never cropped — face-alignment's BlazeFace path centre-crops, which
  loses faces at the sides of 16:9 frames) into the working size, and short batches are padded to
  ``batch_size`` with blank frames whose outputs are never decoded. S3FD's working size is fixed
  by the first frame size it sees (``warmup``), 640 px on the long side by default, rounded up to
  a multiple of 32, and never upscaling; BlazeFace works at its square input.
* **Decoding on the device**, vectorised over all anchors of all frames, reproducing
  face-alignment's semantics. S3FD: BGR minus mean (104, 117, 123), softmax, 6 scales of stride
  2**(i+2) with anchors 4·stride wide, variances 0.1/0.2, candidates above 0.05, NMS at IoU 0.3
  (pixel-inclusive areas, as face-alignment computes them), then the score threshold. Greedy NMS
  only ever lets a box suppress lower-scoring ones, so thresholding *before* NMS keeps exactly
  the same boxes above the threshold; the detector does that, which keeps NMS small. BlazeFace:
  RGB scaled to [-1, 1], its anchor table and scales, scores clipped to ±100, sigmoid, the
  threshold, then weighted NMS at IoU 0.3 (overlapping boxes averaged, weighted by score).
* **NMS on the host** in NumPy, on the few hundred best candidates per frame (``topk`` on the
  device, one transfer per batch): the greedy loop is sequential and the results go to the host
  anyway, so a GPU implementation would only add a synchronisation per kept box. ``launch`` queues
  the device part and returns; ``collect`` finishes on the host, so a caller can keep the device
  busy with the next batch meanwhile.

Boxes are returned in frame pixels, not clipped to the frame (the cropper clips), and detections
whose centre falls in the letterbox padding are dropped. Then the minimum face size (shorter
side, frame pixels) and the maximum number of faces per frame apply, largest face first.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from emopipe.errors import CheckpointError, UsageError
from emopipe.model.devices import PRECISIONS, resolve_device
from emopipe.types import Detections, WarmupReport, describe_array

logger = logging.getLogger(__name__)

DETECTOR_PRECISIONS = ("fp32", "fp16")
NMS_IOU = 0.3
MAX_CANDIDATES = 2000  # per frame, best first, before NMS
PREPARE_FRAMES = 8  # frames resized at once into the network input (bounds the float copy of full frames)


# -- geometry ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Letterbox:
    """Where a frame sits in the network input: resized to ``resized_w×resized_h`` at ``(pad_x, pad_y)``."""

    frame_h: int
    frame_w: int
    resized_h: int
    resized_w: int
    pad_y: int
    pad_x: int

    @classmethod
    def fit(cls, frame_h: int, frame_w: int, input_h: int, input_w: int, *, upscale: bool = True) -> Letterbox:
        scale = min(input_h / frame_h, input_w / frame_w)
        if not upscale:
            scale = min(scale, 1.0)
        rh = min(input_h, max(1, round(frame_h * scale)))
        rw = min(input_w, max(1, round(frame_w * scale)))
        return cls(frame_h, frame_w, rh, rw, (input_h - rh) // 2, (input_w - rw) // 2)

    def to_frame(self, boxes: np.ndarray) -> np.ndarray:
        """k×4 boxes in network pixels → frame pixels."""
        offset = np.array([self.pad_x, self.pad_y, self.pad_x, self.pad_y], dtype=boxes.dtype)
        scale = np.array([self.resized_w / self.frame_w, self.resized_h / self.frame_h] * 2, dtype=boxes.dtype)
        return (boxes - offset) / scale


# NMS works on the host in NumPy: a frame has a few dozen candidates, where each NumPy call costs a
# microsecond and a PyTorch CPU call ten; this loop runs for every frame of a video.

def nms(boxes: np.ndarray, scores: np.ndarray, iou_threshold: float, *,
        pixel_inclusive: bool = False) -> np.ndarray:
    """Greedy non-maximum suppression; indices of the kept boxes, best score first.

    A box is suppressed when its IoU with a kept, higher-scoring box exceeds ``iou_threshold``.
    ``pixel_inclusive`` counts ``x2 - x1 + 1`` pixels across a box, as face-alignment's S3FD NMS does.
    """
    if boxes.shape[0] == 0:
        return np.zeros(0, dtype=np.int64)
    order = np.argsort(-scores, kind="stable")
    b = boxes[order]
    one = np.float32(1.0 if pixel_inclusive else 0.0)
    areas = (b[:, 2] - b[:, 0] + one) * (b[:, 3] - b[:, 1] + one)
    keep = []
    remaining = np.arange(b.shape[0])
    with np.errstate(invalid="ignore", divide="ignore"):
        while remaining.size > 0:
            i = remaining[0]
            keep.append(i)
            rest = remaining[1:]
            width = np.maximum(np.minimum(b[i, 2], b[rest, 2]) - np.maximum(b[i, 0], b[rest, 0]) + one, 0)
            height = np.maximum(np.minimum(b[i, 3], b[rest, 3]) - np.maximum(b[i, 1], b[rest, 1]) + one, 0)
            inter = width * height
            iou = inter / (areas[i] + areas[rest] - inter)
            remaining = rest[~(iou > iou_threshold)]  # NaN IoU (degenerate boxes) suppresses nothing
    return order[np.array(keep)]


def weighted_nms(boxes: np.ndarray, scores: np.ndarray, iou_threshold: float) -> tuple[np.ndarray, np.ndarray]:
    """BlazeFace's blending NMS: each cluster (IoU above the threshold with its best box) becomes
    the score-weighted mean of its boxes, scored with the cluster's mean score."""
    if boxes.shape[0] == 0:
        return np.zeros((0, 4), boxes.dtype), np.zeros((0,), scores.dtype)
    order = np.argsort(-scores, kind="stable")
    areas = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
    out_boxes, out_scores = [], []
    remaining = order
    with np.errstate(invalid="ignore", divide="ignore"):
        while remaining.size > 0:
            first = remaining[0]
            width = np.maximum(np.minimum(boxes[first, 2], boxes[remaining, 2])
                               - np.maximum(boxes[first, 0], boxes[remaining, 0]), 0)
            height = np.maximum(np.minimum(boxes[first, 3], boxes[remaining, 3])
                                - np.maximum(boxes[first, 1], boxes[remaining, 1]), 0)
            inter = width * height
            iou = inter / (areas[first] + areas[remaining] - inter)
            cluster = iou > iou_threshold
            cluster[0] = True  # the best box always belongs to its own cluster (even when degenerate)
            members = remaining[cluster]
            remaining = remaining[~cluster]
            if members.size > 1:
                weights = scores[members]
                total = weights.sum()
                out_boxes.append((boxes[members] * weights[:, None]).sum(axis=0) / total)
                out_scores.append(total / members.size)
            else:
                out_boxes.append(boxes[first])
                out_scores.append(scores[first])
    return np.stack(out_boxes).astype(boxes.dtype), np.array(out_scores, dtype=scores.dtype)


# -- detectors ---------------------------------------------------------------------------------

def _round_up(value: float, multiple: int) -> int:
    return max(multiple, math.ceil(value / multiple - 1e-9) * multiple)


def check_options(*, batch_size: int, precision: str, score_threshold: float, min_face: float,
                  max_faces: int | None) -> None:
    """Reject bad detector options (before any weights are fetched)."""
    if precision not in DETECTOR_PRECISIONS:
        raise UsageError(f"unknown detector precision {precision!r}; choose from {', '.join(DETECTOR_PRECISIONS)}")
    if batch_size < 1:
        raise UsageError(f"detector batch size must be at least 1, got {batch_size}")
    if not 0.0 <= score_threshold <= 1.0:
        raise UsageError(f"detection score threshold must be in [0, 1], got {score_threshold}")
    if min_face < 0:
        raise UsageError(f"minimum face size must be ≥ 0 pixels, got {min_face}")
    if max_faces is not None and max_faces < 1:
        raise UsageError(f"maximum faces per frame must be at least 1, got {max_faces}")


@dataclass
class PendingDetections:
    """A batch of frames whose detection was launched on the device and is not read back yet."""

    detector: FaceDetector
    candidates: torch.Tensor | None  # N×K×5 on the host (page-locked, possibly still being copied into)
    copied: torch.cuda.Event | None  # marks the end of that copy on CUDA
    box: Letterbox | None
    frames: int

    @torch.inference_mode()
    def collect(self) -> list[Detections]:
        """Wait for the device part and finish on the host: one :class:`Detections` per frame."""
        return self.detector.finish(self)


class FaceDetector:
    """A network run at one static input shape on batches of frames already on its device.

    ``detect(frames)`` takes N×H×W×3 uint8 BGR frames (N ≤ ``batch_size``) and returns one
    :class:`Detections` per frame. ``input_size`` is the network input (height, width); for S3FD
    it is fixed by :meth:`warmup` (or the first batch) and later frames of other sizes are
    letterboxed into it.
    """

    name: str
    upscale = True  # may frames smaller than the input be enlarged?

    def __init__(self, network: nn.Module, *, name: str, device: str | torch.device = "cpu",
                 batch_size: int = 1, precision: str = "fp32", score_threshold: float = 0.5,
                 min_face: float = 0, max_faces: int | None = None, channels_last: bool | None = None,
                 input_size: tuple[int, int] | None = None, max_candidates: int = MAX_CANDIDATES,
                 cuda_graphs: bool | None = None) -> None:
        self.device = resolve_device(str(device))
        check_options(batch_size=batch_size, precision=precision, score_threshold=score_threshold,
                      min_face=min_face, max_faces=max_faces)
        self.name = name
        self.batch_size = batch_size
        self.precision = precision
        self.dtype = PRECISIONS[precision]
        self.score_threshold = float(score_threshold)
        self.min_face = float(min_face)
        self.max_faces = max_faces
        self.max_candidates = max_candidates
        self.channels_last = self.device.type == "cuda" if channels_last is None else channels_last
        self.input_size: tuple[int, int] | None = input_size
        self.warmup_report: WarmupReport | None = None
        memory_format = torch.channels_last if self.channels_last else torch.contiguous_format
        self.network = network.eval().requires_grad_(False).to(self.device, dtype=self.dtype,
                                                                 memory_format=memory_format)
        self._letterboxes: dict[tuple[int, int], Letterbox] = {}
        # The device part (letterbox, network, decoding, top-k) replayed as one CUDA graph per frame size.
        self.cuda_graphs = self.device.type == "cuda" if cuda_graphs is None else cuda_graphs
        self._graphs: dict[tuple[int, int], _DetectorGraph] = {}

    def info(self) -> dict[str, str]:
        h, w = self.input_size or (0, 0)
        return {"detector": self.name, "device": str(self.device), "precision": self.precision,
                "batch_size": str(self.batch_size), "input": f"{w}×{h}" if self.input_size else "not fixed yet",
                "channels_last": str(self.channels_last).lower(), "cuda_graphs": str(self.cuda_graphs).lower(),
                "score_threshold": f"{self.score_threshold:g}"}

    # -- what each network defines ---------------------------------------------------------------

    def _choose_input_size(self, frame_h: int, frame_w: int) -> tuple[int, int]:
        raise NotImplementedError

    def _normalise(self, bgr: torch.Tensor) -> torch.Tensor:
        """N×3×H×W float BGR in 0..255 → the network's input values (padding is 0 after this)."""
        raise NotImplementedError

    def _decode(self, outputs: object, n: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Raw outputs of the first n batch slots → (n×A×4 boxes in input pixels, n×A scores)."""
        raise NotImplementedError

    def _keep(self, scores: torch.Tensor | np.ndarray) -> torch.Tensor | np.ndarray:
        """Which candidates pass the score threshold (the network's own comparison; on the device
        before the top-k, and on the host again)."""
        raise NotImplementedError

    def _suppress(self, boxes: np.ndarray, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError

    # -- the shared path -------------------------------------------------------------------------

    def _letterbox(self, frame_h: int, frame_w: int) -> Letterbox:
        if self.input_size is None:
            self.input_size = self._choose_input_size(frame_h, frame_w)
            logger.info("%s detector input fixed at %d×%d for %d×%d frames", self.name, self.input_size[1],
                        self.input_size[0], frame_w, frame_h)
        box = self._letterboxes.get((frame_h, frame_w))
        if box is None:
            box = Letterbox.fit(frame_h, frame_w, *self.input_size, upscale=self.upscale)
            self._letterboxes[(frame_h, frame_w)] = box
        return box

    def _check_frames(self, frames: torch.Tensor) -> None:
        if not isinstance(frames, torch.Tensor) or frames.dtype != torch.uint8 or frames.ndim != 4 \
                or frames.shape[3] != 3:
            raise ValueError(f"detect() takes N×H×W×3 uint8 BGR frames, got {describe_array(frames)}")
        if frames.shape[0] > self.batch_size:
            raise ValueError(f"detect() got {frames.shape[0]} frames, more than the batch size {self.batch_size}")
        if frames.device != self.device:
            raise ValueError(f"frames are on {frames.device}, the {self.name} detector on {self.device}")
        if frames.shape[1] == 0 or frames.shape[2] == 0:
            raise ValueError(f"frames must not be empty, got shape {tuple(frames.shape)}")

    def _prepare(self, frames: torch.Tensor, box: Letterbox) -> torch.Tensor:
        """Resize (keeping the aspect ratio) and letterbox into a full static batch."""
        assert self.input_size is not None
        height, width = self.input_size
        batch = torch.zeros((self.batch_size, 3, height, width), dtype=torch.float32, device=frames.device)
        # A few frames at a time: their full-resolution float copy is the largest buffer here (32 frames of
        # 3840×2160 would take 3.2 GB), and each frame is resized on its own anyway.
        for first in range(0, frames.shape[0], PREPARE_FRAMES):
            x = frames[first:first + PREPARE_FRAMES].permute(0, 3, 1, 2).float()
            if (box.resized_h, box.resized_w) != (box.frame_h, box.frame_w):
                x = F.interpolate(x, size=(box.resized_h, box.resized_w), mode="bilinear", align_corners=False,
                                  antialias=True)
            batch[first:first + x.shape[0], :, box.pad_y:box.pad_y + box.resized_h,
                  box.pad_x:box.pad_x + box.resized_w] = self._normalise(x)
        memory_format = torch.channels_last if self.channels_last else torch.contiguous_format
        return batch.to(dtype=self.dtype, memory_format=memory_format)

    @torch.inference_mode()
    def network_input(self, frames: torch.Tensor) -> torch.Tensor:
        """The static batch the network sees for these frames (for benchmarks and debugging)."""
        self._check_frames(frames)
        return self._prepare(frames, self._letterbox(int(frames.shape[1]), int(frames.shape[2])))

    def _device_part(self, frames: torch.Tensor, box: Letterbox) -> torch.Tensor:
        """Frames → each slot's best ``max_candidates`` anchors passing the threshold, as one N×K×5 device
        tensor (box in input pixels, score; -1 for a slot with fewer candidates). Static shapes throughout,
        so this part can be captured in a CUDA graph."""
        outputs = self.network(self._prepare(frames, box))
        boxes, scores = self._decode(outputs, int(frames.shape[0]))
        k = min(self.max_candidates, scores.shape[1])
        masked = torch.where(self._keep(scores), scores, torch.full_like(scores, -1.0))
        top, index = torch.topk(masked, k, dim=1, sorted=True)
        picked = torch.gather(boxes, 1, index.unsqueeze(-1).expand(-1, -1, 4))
        return torch.cat((picked, top.unsqueeze(-1)), dim=-1)

    def _finish(self, boxes: np.ndarray, scores: np.ndarray, box: Letterbox) -> Detections:
        """Network pixels → frame pixels; drop padding hits, small faces; largest first; cap the count."""
        if boxes.shape[0] == 0:
            return Detections.empty()
        boxes = box.to_frame(boxes)
        cx, cy = (boxes[:, 0] + boxes[:, 2]) / 2, (boxes[:, 1] + boxes[:, 3]) / 2
        inside = (cx >= 0) & (cx <= box.frame_w) & (cy >= 0) & (cy <= box.frame_h)
        sides = np.minimum(boxes[:, 2] - boxes[:, 0], boxes[:, 3] - boxes[:, 1])
        valid = inside & (sides >= self.min_face) & (sides > 0)
        return Detections.largest_first(boxes[valid], scores[valid], limit=self.max_faces)

    @torch.inference_mode()
    def detect(self, frames: torch.Tensor) -> list[Detections]:
        return self.launch(frames).collect()

    @torch.inference_mode()
    def launch(self, frames: torch.Tensor) -> PendingDetections:
        """Queue the device part for these frames and return at once; :meth:`PendingDetections.collect`
        finishes on the host. The pipeline launches the next batch before collecting this one, so the
        device detects batch k+1 while the host runs NMS on batch k."""
        self._check_frames(frames)
        n, height, width = (int(d) for d in frames.shape[:3])
        if n == 0:
            return PendingDetections(self, None, None, None, 0)
        box = self._letterbox(height, width)
        graph = self._graphs.get((height, width))
        candidates = graph.run(frames)[:n] if graph is not None else self._device_part(frames, box)
        if self.device.type != "cuda":
            return PendingDetections(self, candidates, None, box, n)
        # One copy into page-locked memory, queued behind the network: the next launch may overwrite the
        # graph's output buffer only after this copy has run (same stream).
        host = candidates.to("cpu", non_blocking=True)
        copied = torch.cuda.Event()
        copied.record()
        return PendingDetections(self, host, copied, box, n)

    def finish(self, pending: PendingDetections) -> list[Detections]:
        """Host side of detection: threshold, NMS and mapping back to frame pixels, per frame."""
        if pending.candidates is None or pending.box is None:
            return []
        if pending.copied is not None:
            pending.copied.synchronize()
        candidates = pending.candidates.numpy()
        boxes, scores = candidates[..., :4], candidates[..., 4]
        results = []
        for i in range(pending.frames):
            passed = self._keep(scores[i])
            kept_boxes, kept_scores = self._suppress(boxes[i][passed], scores[i][passed])
            results.append(self._finish(kept_boxes, kept_scores, pending.box))
        return results

    @torch.inference_mode()
    def warmup(self, frame_height: int, frame_width: int) -> WarmupReport:
        """Fix the input shape for these frames and run the full path on it (cuDNN tunes here)."""
        start = time.perf_counter()
        self._letterbox(frame_height, frame_width)
        assert self.input_size is not None
        frames = torch.full((self.batch_size, frame_height, frame_width, 3), 127, dtype=torch.uint8,
                            device=self.device)
        for _ in range(2):  # the first call tunes; the second runs on the cached choices
            self.detect(frames)
        if self.cuda_graphs:
            self._graphs[(frame_height, frame_width)] = _DetectorGraph(self, frames,
                                                                       self._letterbox(frame_height, frame_width))
            self.detect(frames)  # and once through the graph
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        seconds = time.perf_counter() - start
        report = WarmupReport(shapes=[(self.batch_size, 3, *self.input_size)], seconds_per_shape=[seconds],
                              seconds=seconds, settings={k: v for k, v in self.info().items() if k != "device"})
        self.warmup_report = report
        logger.info("%s detector: %s", self.name, report.describe())
        return report


class _DetectorGraph:
    """The detector's device part captured for one frame size; frames are copied into a fixed buffer
    (slots past a partial batch keep stale frames, whose candidates are never read)."""

    def __init__(self, detector: FaceDetector, example: torch.Tensor, box: Letterbox) -> None:
        self.frames = example.clone()
        stream = torch.cuda.Stream(detector.device)
        stream.wait_stream(torch.cuda.current_stream(detector.device))
        with torch.cuda.stream(stream):
            for _ in range(2):  # settle allocations outside the capture
                detector._device_part(self.frames, box)
        torch.cuda.current_stream(detector.device).wait_stream(stream)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.candidates = detector._device_part(self.frames, box)

    def run(self, frames: torch.Tensor) -> torch.Tensor:
        self.frames[: frames.shape[0]].copy_(frames)
        self.graph.replay()
        return self.candidates


# -- weights and the registry ------------------------------------------------------------------

def load_network_weights(network: nn.Module, path: Path) -> nn.Module:
    """Load a plain state dict with ``weights_only=True`` and strict keys; errors name the keys."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises several types for corrupt or foreign files
        raise CheckpointError(f"cannot read the weights file {path}: {str(exc).splitlines()[0]}") from None
    if not isinstance(state, dict):
        raise CheckpointError(f"{path} does not hold a state dict (found {type(state).__name__})")
    expected = network.state_dict()
    missing = sorted(set(expected) - set(state))
    unexpected = sorted(set(state) - set(expected))
    if missing or unexpected:
        raise CheckpointError(f"{path} does not fit {type(network).__name__}: missing keys {missing[:5]}"
                              f"{'…' if len(missing) > 5 else ''}, unexpected keys {unexpected[:5]}"
                              f"{'…' if len(unexpected) > 5 else ''}")
    wrong = [f"{k} {tuple(state[k].shape)} (expected {tuple(v.shape)})" for k, v in expected.items()
             if tuple(state[k].shape) != tuple(v.shape)]
    if wrong:
        raise CheckpointError(f"{path} does not fit {type(network).__name__}: wrong shapes {wrong[:3]}")
    network.load_state_dict(state, strict=True)
    return network
