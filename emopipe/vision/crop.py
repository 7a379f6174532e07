"""Face crops for EmoNet: each detected box → one 256×256 RGB crop in [0, 1].

The EmoNet contract (``shared/emonet-architecture.md``): crop the box out of the RGB frame,
resize it to 256×256 with bilinear interpolation (aspect ratio not kept), divide by 255.
Made precise here:

1. ``margin`` (a fraction of the box's width and height) is added on each side;
2. the box is rounded to integer pixels (``floor(v + 0.5)``) and clipped to the frame, so it
   covers columns ``x1 … x2 - 1`` and rows ``y1 … y2 - 1``;
3. a box that is empty after clipping (entirely outside the frame, or degenerate) is dropped and
   reported in :attr:`CropBatch.dropped`;
4. the crop is resized like OpenCV's ``INTER_LINEAR``: half-pixel centres, sample positions
   clamped to the crop so its border pixels repeat (nothing outside the box leaks in).

On the CPU this is literally the reference preparation (``cv2.resize`` of the uint8 crop, then
÷255). On a CUDA device every face of every frame is cropped in one batched gather from the
frames already uploaded for detection — no host round trip per face — and computed in float, so
it matches the reference within OpenCV's own uint8 rounding (under 1/255).
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np
import torch

from emopipe.model.devices import resolve_device

CROP_SIZE = 256
METHODS = ("auto", "torch", "opencv")
CROP_CHUNK = 64  # crops gathered at once on the device


@dataclass(frozen=True)
class CropBatch:
    """The crops of one batch of frames, with where each came from."""

    crops: torch.Tensor  # K×3×S×S RGB in [0, 1]
    frame_of_crop: np.ndarray  # K int64: the frame (position in the batch) each crop comes from
    face_of_crop: np.ndarray  # K int64: the box's position in that frame's box list
    boxes_used: np.ndarray  # K×4 float32: the integer, clipped boxes actually cropped
    dropped: tuple[tuple[int, int], ...] = ()  # (frame, face) of boxes empty after clipping

    def __post_init__(self) -> None:
        c = self.crops
        if not isinstance(c, torch.Tensor) or c.ndim != 4 or c.shape[1] != 3 or c.shape[2] != c.shape[3]:
            raise ValueError(f"CropBatch.crops must be K×3×S×S, got {tuple(getattr(c, 'shape', ()))}")
        k = c.shape[0]
        for name, array, shape in (("frame_of_crop", self.frame_of_crop, (k,)),
                                   ("face_of_crop", self.face_of_crop, (k,)),
                                   ("boxes_used", self.boxes_used, (k, 4))):
            if not isinstance(array, np.ndarray) or array.shape != shape:
                raise ValueError(f"CropBatch.{name} must have shape {shape}, got "
                                 f"{getattr(array, 'shape', type(array).__name__)}")
        if self.boxes_used.dtype != np.float32:
            raise ValueError(f"CropBatch.boxes_used must be float32, got {self.boxes_used.dtype}")

    def __len__(self) -> int:
        return int(self.crops.shape[0])


def integer_boxes(boxes: np.ndarray, frame_w: int, frame_h: int, margin: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """(k×4 int64 boxes after margin, rounding and clipping; k bools: non-empty)."""
    b = np.asarray(boxes, dtype=np.float64).reshape(-1, 4)
    if margin:
        dw = (b[:, 2] - b[:, 0]) * margin
        dh = (b[:, 3] - b[:, 1]) * margin
        b = b + np.stack((-dw, -dh, dw, dh), axis=1)
    finite = np.isfinite(b).all(axis=1)
    b = np.where(finite[:, None], b, 0.0)
    limits = np.array([frame_w, frame_h, frame_w, frame_h], dtype=np.float64)
    r = np.clip(np.floor(b + 0.5), 0, limits).astype(np.int64)
    valid = finite & (r[:, 2] > r[:, 0]) & (r[:, 3] > r[:, 1])
    return r, valid


def opencv_crop(frame_bgr: np.ndarray, box: np.ndarray, size: int = CROP_SIZE) -> np.ndarray:
    """The reference preparation for one integer box: 3×S×S float32 RGB in [0, 1]."""
    x1, y1, x2, y2 = (int(v) for v in box)
    resized = cv2.resize(frame_bgr[y1:y2, x1:x2], (size, size), interpolation=cv2.INTER_LINEAR)
    return (resized[:, :, ::-1].transpose(2, 0, 1) / np.float32(255)).astype(np.float32)


def _sample_axis(start: np.ndarray, length: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """OpenCV INTER_LINEAR positions along one axis for K boxes: (first index, second index, weight of the
    second), each K×S. On the host: a few small NumPy arrays cost less than the dozen tiny GPU kernels (and
    their launches on the GPU thread) they would take on the device."""
    centres = np.arange(size, dtype=np.float64) + 0.5
    extent = length.astype(np.float64)[:, None]
    position = centres[None, :] * (extent / size) - 0.5
    position = np.minimum(np.maximum(position, 0.0), extent - 1)  # border pixels of the crop repeat
    low = np.floor(position)
    weight = (position - low).astype(np.float32)
    low = low.astype(np.int64)
    high = np.minimum(low + 1, length[:, None] - 1)
    return start[:, None] + low, start[:, None] + high, weight


def torch_crops(frames: torch.Tensor, frame_of_crop: np.ndarray, boxes: np.ndarray, size: int = CROP_SIZE,
                dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """All crops in one batched gather: frames N×H×W×3 uint8 BGR, K integer boxes (host arrays: K frame
    positions, K×4 boxes) → K×3×S×S RGB."""
    n, height, width, _ = frames.shape
    k = len(boxes)
    out = torch.empty((k, 3, size, size), dtype=dtype, device=frames.device)
    if k == 0:
        return out
    boxes = np.asarray(boxes, dtype=np.int64)
    x_low, x_high, wx = _sample_axis(boxes[:, 0], boxes[:, 2] - boxes[:, 0], size)
    y_low, y_high, wy = _sample_axis(boxes[:, 1], boxes[:, 3] - boxes[:, 1], size)
    rows = (np.asarray(frame_of_crop, dtype=np.int64)[:, None] * height + np.stack((y_low, y_high))) * width
    # One host→device copy for the whole batch: the flat row starts and columns (int64), then both axes'
    # weights (float32 bytes, viewed back on the device).
    weights = np.stack((wx, wy), axis=1).reshape(k, 2 * size)  # K×2S float32: the bytes of one K×S int64 table
    table = torch.from_numpy(np.concatenate((rows, np.stack((x_low, x_high)), weights.view(np.int64)[None])))
    if frames.device.type == "cuda":
        # From page-locked memory without waiting: a plain copy would first wait for all work already
        # queued on the GPU (the pipeline's next detection batch).
        table = table.pin_memory().to(frames.device, non_blocking=True)
    else:
        table = table.to(frames.device)
    flat = frames.reshape(n * height * width, 3)
    for first in range(0, k, CROP_CHUNK):  # bounds the gathered corners' memory (12 floats a crop pixel)
        part = slice(first, min(k, first + CROP_CHUNK))
        m = part.stop - part.start
        rows_, cols = table[0:2, part], table[2:4, part]  # 2×m×S each: (low, high)
        w = table[4, part].view(torch.float32).reshape(m, 2, size)
        index = rows_[:, None, :, :, None] + cols[None, :, :, None, :]  # (y, x corner)×m×S×S
        corners = flat.index_select(0, index.reshape(-1)).reshape(2, 2, m, size, size, 3).float()
        across = torch.lerp(corners[:, 0], corners[:, 1], w[None, :, 0, None, :, None])  # along x: 2×m×S×S×3
        rgb = torch.lerp(across[0], across[1], w[:, 1, :, None, None]).flip(-1)  # along y, BGR → RGB
        out[part] = rgb.permute(0, 3, 1, 2) / 255.0
    return out


class FaceCropper:
    """Cuts each box of each frame into a ``size``×``size`` RGB crop in [0, 1] (see the module doc).

    ``method``: ``opencv`` (the reference, per face on the host), ``torch`` (one batched gather on
    the frames' device) or ``auto`` (torch on CUDA, OpenCV on the CPU).
    """

    def __init__(self, size: int = CROP_SIZE, margin: float = 0.0, device: str | torch.device = "cpu",
                 dtype: torch.dtype = torch.float32, method: str = "auto") -> None:
        if size < 1:
            raise ValueError(f"crop size must be at least 1, got {size}")
        if not margin > -0.5:
            raise ValueError(f"crop margin must be greater than -0.5 (a fraction of the box per side), got {margin}")
        if method not in METHODS:
            raise ValueError(f"crop method must be one of {', '.join(METHODS)}, got {method!r}")
        if not dtype.is_floating_point:
            raise ValueError(f"crop dtype must be a floating-point type, got {dtype}")
        self.size = size
        self.margin = float(margin)
        self.device = resolve_device(str(device))
        self.dtype = dtype
        self.method = ("torch" if self.device.type == "cuda" else "opencv") if method == "auto" else method

    def crop(self, frames: torch.Tensor, boxes: list[np.ndarray]) -> CropBatch:
        """Crops for ``boxes[i]`` (k_i×4, frame pixels) of frame ``i`` of ``frames`` (N×H×W×3 uint8 BGR)."""
        if not isinstance(frames, torch.Tensor) or frames.dtype != torch.uint8 or frames.ndim != 4 \
                or frames.shape[3] != 3:
            shape = tuple(getattr(frames, "shape", ()))
            raise ValueError(f"crop() takes N×H×W×3 uint8 BGR frames, got {shape} {getattr(frames, 'dtype', '')}")
        if frames.device != self.device:
            raise ValueError(f"frames are on {frames.device}, the cropper on {self.device}")
        if len(boxes) != frames.shape[0]:
            raise ValueError(f"got {len(boxes)} box lists for {frames.shape[0]} frames")
        height, width = int(frames.shape[1]), int(frames.shape[2])
        per_frame = [np.asarray(b) for b in boxes]
        for i, b in enumerate(per_frame):
            if b.size and (b.ndim != 2 or b.shape[1] != 4):
                raise ValueError(f"boxes of frame {i} must be k×4, got shape {b.shape}")
        # every box of every frame at once: a frame costs no NumPy call of its own
        counts = np.array([b.size // 4 for b in per_frame], dtype=np.int64)
        every = np.concatenate([b.reshape(-1, 4) for b in per_frame]) if per_frame else np.zeros((0, 4))
        rounded, valid = integer_boxes(every, width, height, self.margin)
        frame_of = np.repeat(np.arange(len(per_frame), dtype=np.int64), counts)
        face_of = np.arange(frame_of.size, dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
        dropped = [(int(i), int(j)) for i, j in zip(frame_of[~valid], face_of[~valid], strict=True)]
        boxes_used = rounded[valid]
        frame_of_crop = frame_of[valid]
        if self.method == "torch":
            crops = torch_crops(frames, frame_of_crop, boxes_used, self.size, self.dtype)
        else:
            crops = self._opencv(frames, frame_of_crop, boxes_used)
        return CropBatch(crops=crops, frame_of_crop=frame_of_crop, face_of_crop=face_of[valid],
                         boxes_used=boxes_used.astype(np.float32), dropped=tuple(dropped))

    def _opencv(self, frames: torch.Tensor, frame_of_crop: np.ndarray, boxes: np.ndarray) -> torch.Tensor:
        host = frames.cpu().numpy()
        out = np.empty((len(boxes), 3, self.size, self.size), dtype=np.float32)
        for k, (f, box) in enumerate(zip(frame_of_crop, boxes, strict=True)):
            out[k] = opencv_crop(host[f], box, self.size)
        return torch.from_numpy(out).to(self.device, dtype=self.dtype)
