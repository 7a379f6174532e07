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
  device, one transfer per batch), vectorised over the batch's frames: the greedy loop is sequential
  within a frame and the results go to the host anyway, so a GPU implementation would only add a
  synchronisation per kept box. ``launch`` queues the device part and returns; ``collect`` finishes
  on the host, so a caller can keep the device busy with the next batch meanwhile.

Boxes are returned in frame pixels, not clipped to the frame (the cropper clips), and detections
whose centre falls in the letterbox padding are dropped. Then the minimum face size (shorter
side, frame pixels) and the maximum number of faces per frame apply, largest face first.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import math
import sys
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from emopipe.errors import CheckpointError, UsageError
from emopipe.model import cudnn_epilogue
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


# NMS works on the host in NumPy, for all frames of a batch at once. Each pass settles every frame's best undecided
# box (its leader) against the rest of that frame, so a batch of 32 frames with one face each costs one pass of
# about twenty NumPy calls instead of 32 (a NumPy call costs a microsecond; a PyTorch CPU call ten).

def _iou_with_leaders(boxes: np.ndarray, areas: np.ndarray, frames: np.ndarray, undecided: np.ndarray,
                      one: np.float32) -> tuple[np.ndarray, np.ndarray]:
    """For the undecided candidates (indices sorted by frame, best score first): which are their frame's leader
    (its first undecided one), and each one's IoU with that leader."""
    frame = frames[undecided]
    leads = np.empty(undecided.size, dtype=bool)
    leads[0] = True
    np.not_equal(frame[1:], frame[:-1], out=leads[1:])
    lead = undecided[leads][np.cumsum(leads) - 1]
    b, o = boxes[lead], boxes[undecided]
    width = np.maximum(np.minimum(b[:, 2], o[:, 2]) - np.maximum(b[:, 0], o[:, 0]) + one, 0)
    height = np.maximum(np.minimum(b[:, 3], o[:, 3]) - np.maximum(b[:, 1], o[:, 1]) + one, 0)
    inter = width * height
    return leads, inter / (areas[lead] + areas[undecided] - inter)


def _frame_by_frame(frames: np.ndarray, rounds: list[np.ndarray]) -> np.ndarray:
    """The passes' results (at most one per frame each) regrouped frame by frame, in pass order."""
    settled = np.concatenate(rounds) if rounds else np.zeros(0, dtype=np.int64)
    return settled[np.argsort(frames[settled], kind="stable")]  # type: ignore[no-any-return]


def batched_nms(frame_of: np.ndarray, boxes: np.ndarray, scores: np.ndarray, iou_threshold: float, *,
                pixel_inclusive: bool = False) -> np.ndarray:
    """Greedy non-maximum suppression within each frame; indices of the kept boxes, frame by frame, best first.

    ``frame_of`` says which frame each candidate belongs to. A box is suppressed when its IoU with a kept,
    higher-scoring box of its frame exceeds ``iou_threshold``. ``pixel_inclusive`` counts ``x2 - x1 + 1``
    pixels across a box, as face-alignment's S3FD NMS does.
    """
    order = np.lexsort((-scores, frame_of))  # by frame, best score first; equal scores keep their order
    frames, b = frame_of[order], boxes[order]
    one = np.float32(1.0 if pixel_inclusive else 0.0)
    areas = (b[:, 2] - b[:, 0] + one) * (b[:, 3] - b[:, 1] + one)
    kept = []
    undecided = np.arange(b.shape[0])
    with np.errstate(invalid="ignore", divide="ignore"):
        while undecided.size > 0:
            leads, iou = _iou_with_leaders(b, areas, frames, undecided, one)
            kept.append(undecided[leads])
            undecided = undecided[~(leads | (iou > iou_threshold))]  # NaN IoU (degenerate boxes) suppresses nothing
    return order[_frame_by_frame(frames, kept)]  # type: ignore[no-any-return]


def batched_weighted_nms(frame_of: np.ndarray, boxes: np.ndarray, scores: np.ndarray,
                         iou_threshold: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """BlazeFace's blending NMS within each frame: each cluster (IoU above the threshold with its best box)
    becomes the score-weighted mean of its boxes, scored with the cluster's mean score. Returns the frame,
    box and score of each cluster, frame by frame, best first."""
    order = np.lexsort((-scores, frame_of))
    frames, b, s = frame_of[order], boxes[order], scores[order]
    zero = np.float32(0.0)
    areas = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    leaders, blended, blended_scores = [], [], []
    undecided = np.arange(b.shape[0])
    with np.errstate(invalid="ignore", divide="ignore"):
        while undecided.size > 0:
            leads, iou = _iou_with_leaders(b, areas, frames, undecided, zero)
            cluster = leads | (iou > iou_threshold)  # the best box always belongs to its own (even when degenerate)
            members = undecided[cluster]
            starts = np.flatnonzero(leads[cluster])  # clusters are runs of members, each led by its best
            weights = s[members]
            totals = np.add.reduceat(weights, starts)
            sizes = np.diff(starts, append=members.size)
            mean = np.add.reduceat(b[members] * weights[:, None], starts, axis=0) / totals[:, None]
            lead = undecided[leads]
            alone = sizes == 1
            mean[alone] = b[lead[alone]]  # a box alone is kept as it is
            leaders.append(lead)
            blended.append(mean)
            blended_scores.append(np.where(alone, s[lead], totals / sizes.astype(s.dtype)))
            undecided = undecided[~cluster]
    if not leaders:
        return frame_of[:0], np.zeros((0, 4), boxes.dtype), np.zeros((0,), scores.dtype)
    settled = frames[np.concatenate(leaders)]
    index = np.argsort(settled, kind="stable")  # frame by frame, each frame's clusters in pass order
    return (settled[index], np.concatenate(blended)[index].astype(boxes.dtype),
            np.concatenate(blended_scores)[index].astype(scores.dtype))


def nms(boxes: np.ndarray, scores: np.ndarray, iou_threshold: float, *,
        pixel_inclusive: bool = False) -> np.ndarray:
    """:func:`batched_nms` of one frame: indices of the kept boxes, best score first."""
    one_frame = np.zeros(boxes.shape[0], dtype=np.int64)
    return batched_nms(one_frame, boxes, scores, iou_threshold, pixel_inclusive=pixel_inclusive)


def weighted_nms(boxes: np.ndarray, scores: np.ndarray, iou_threshold: float) -> tuple[np.ndarray, np.ndarray]:
    """:func:`batched_weighted_nms` of one frame: (boxes, scores), best cluster first."""
    _, blended, blended_scores = batched_weighted_nms(np.zeros(boxes.shape[0], dtype=np.int64), boxes, scores,
                                                      iou_threshold)
    return blended, blended_scores


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
    MAX_GRAPHS = 4  # CUDA graphs kept, one a frame size: those used last

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
        # The device part (letterbox, network, decoding, top-k) replayed as one CUDA graph per frame size: the
        # MAX_GRAPHS sizes used last (each holds a batch of frames and the network's activations: about 1 GiB
        # reserved a size for blazeface_back's 32 frames on an H200; a service fed every phone's size kept them all)
        self.cuda_graphs = self.device.type == "cuda" if cuda_graphs is None else cuda_graphs
        self._graphs: OrderedDict[tuple[int, int], _DetectorGraph] = OrderedDict()
        self._plans_found: set[tuple[int, int]] = set()  # frame sizes whose cuDNN plans were looked for

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

    def _suppress(self, frame_of: np.ndarray, boxes: np.ndarray,
                  scores: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """NMS within each frame of a batch: (frame, box, score) of what is kept, frame by frame."""
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

    def _finish(self, frame_of: np.ndarray, boxes: np.ndarray, scores: np.ndarray, box: Letterbox,
                frames: int) -> list[Detections]:
        """Network pixels → frame pixels; drop padding hits, small faces; largest first; cap the count. All
        frames of the batch at once, then one :class:`Detections` per frame."""
        boxes = box.to_frame(boxes)
        cx, cy = (boxes[:, 0] + boxes[:, 2]) / 2, (boxes[:, 1] + boxes[:, 3]) / 2
        inside = (cx >= 0) & (cx <= box.frame_w) & (cy >= 0) & (cy <= box.frame_h)
        sides = np.minimum(boxes[:, 2] - boxes[:, 0], boxes[:, 3] - boxes[:, 1])
        valid = inside & (sides >= self.min_face) & (sides > 0)
        frame_of, boxes, scores = frame_of[valid], boxes[valid], scores[valid]
        areas = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
        order = np.lexsort((-areas, frame_of))  # frame by frame, largest first (equal areas keep their order)
        frame_of = frame_of[order]
        if self.max_faces is not None:
            rank = np.arange(frame_of.size) - np.searchsorted(frame_of, frame_of)  # place within its frame
            order, frame_of = order[rank < self.max_faces], frame_of[rank < self.max_faces]
        cuts = np.searchsorted(frame_of, np.arange(1, frames))
        boxes, scores = boxes[order].astype(np.float32), scores[order].astype(np.float32)
        return [Detections(b, s) for b, s in zip(np.split(boxes, cuts), np.split(scores, cuts), strict=True)]

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
        if graph is not None:
            self._graphs.move_to_end((height, width))
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
        candidates = pending.candidates.numpy()[: pending.frames]
        frame_of, slot = np.nonzero(self._keep(candidates[..., 4]))  # frame by frame, best first (top-k order)
        passed = candidates[frame_of, slot]
        kept = self._suppress(frame_of, passed[:, :4], passed[:, 4])
        return self._finish(*kept, pending.box, pending.frames)

    def _blank_frames(self, frame_height: int, frame_width: int) -> torch.Tensor:
        self._letterbox(frame_height, frame_width)
        return torch.full((self.batch_size, frame_height, frame_width, 3), 127, dtype=torch.uint8, device=self.device)

    @torch.inference_mode()
    def find_plans(self, frame_height: int, frame_width: int) -> None:
        """The cuDNN plans (BlazeFace's convolutions') that frames of this size need and the plan folder
        lacks: found by one pass that computes nothing and built at once in builder processes. Within an enclosing
        :func:`~emopipe.model.cudnn_epilogue.plans_built_ahead` (EmoNet's warm-up's, where the frame size is known
        by then) they are built together with that window's plans."""
        with cudnn_epilogue.plans_built_ahead(self.device) as ahead:
            if ahead:
                frames = self._blank_frames(frame_height, frame_width)
                self._device_part(frames, self._letterbox(frame_height, frame_width))
        self._plans_found.add((frame_height, frame_width))

    def warmed_for(self, frame_height: int, frame_width: int) -> bool:
        """Whether frames of this size run as its warm-up left them: on a graph of their own where graphs are used
        (one let go of for sizes used since is captured again by :meth:`warmup`)."""
        return not self.cuda_graphs or (frame_height, frame_width) in self._graphs

    def _forget_graphs_past(self, kept: int) -> None:
        """Let go of the graphs of the sizes used longest ago past ``kept``, and of their memory."""
        if len(self._graphs) <= kept:
            return
        while len(self._graphs) > kept:
            size, _ = self._graphs.popitem(last=False)
            logger.info("%s detector: the CUDA graph for %d×%d frames let go of (%d sizes kept)", self.name,
                        size[1], size[0], kept)
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            torch.cuda.empty_cache()  # (a graph's private pool goes back to the GPU only here)

    @torch.inference_mode()
    def warmup(self, frame_height: int, frame_width: int) -> WarmupReport:
        """Fix the input shape for these frames and run the full path on it (cuDNN tunes here)."""
        start = time.perf_counter()
        frames = self._blank_frames(frame_height, frame_width)
        if (frame_height, frame_width) not in self._plans_found:
            self.find_plans(frame_height, frame_width)
        for _ in range(2):  # the first call tunes; the second runs on the cached choices
            self.detect(frames)
        if self.cuda_graphs:
            self._graphs[(frame_height, frame_width)] = _DetectorGraph(self, frames,
                                                                       self._letterbox(frame_height, frame_width))
            self.detect(frames)  # and once through the graph
            self._forget_graphs_past(self.MAX_GRAPHS)
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

def face_alignment_network(module: str, name: str) -> type[nn.Module]:
    """The network class ``name`` of face-alignment's ``module`` (``detection.sfd.net_s3fd``), its file loaded on
    its own: importing it as part of the package runs the package's ``__init__``, whose landmark API imports
    scikit-image, numba and imageio (about 0.5 s of every command's start on the CPU machine) that a detector
    never uses. The network files import only PyTorch and NumPy; should that change, the package is imported."""
    qualified = f"face_alignment.{module}"
    private = f"emopipe._face_alignment.{module}"
    if private not in sys.modules:
        try:
            package = importlib.util.find_spec("face_alignment")  # (finds it without running its __init__)
            if package is None or not package.submodule_search_locations:
                raise ImportError(qualified)
            path = Path(package.submodule_search_locations[0], *module.split(".")).with_suffix(".py")
            spec = importlib.util.spec_from_file_location(private, path)
            if spec is None or spec.loader is None:
                raise ImportError(qualified)
            loaded = importlib.util.module_from_spec(spec)
            sys.modules[private] = loaded  # (as an import would: classes find their module by name)
            try:
                spec.loader.exec_module(loaded)
            except BaseException:
                del sys.modules[private]
                raise
        except (ImportError, OSError, SyntaxError):  # not there, or laid out otherwise: the package's own import
            return getattr(importlib.import_module(qualified), name)  # type: ignore[no-any-return]
    return getattr(sys.modules[private], name)  # type: ignore[no-any-return]


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
