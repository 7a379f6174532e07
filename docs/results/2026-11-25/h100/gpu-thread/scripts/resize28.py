"""The detector's network input: F.interpolate(antialias=True) against the same resize as two matrix products
(weights = the interpolation of identity matrices), inside the real detector call (CUDA graph), 720p, b32."""

import json
import os
import sys

import cv2
import numpy as np
import torch
import torch.nn.functional as F

from emopipe.vision.detectors import base, create_detector

M, R, VIDEO = os.environ["M"], os.environ["R"], sys.argv[1]
torch.backends.cudnn.benchmark = True
cap = cv2.VideoCapture(VIDEO)
imgs = []
while len(imgs) < 320:
    ok, im = cap.read()
    if not ok:
        break
    imgs.append(im)
allf = torch.from_numpy(np.stack(imgs)).cuda()
stock = base.FaceDetector._prepare
_w = {}


def weights(box, dtype):
    key = (box.frame_h, box.frame_w, box.resized_h, box.resized_w, dtype)
    if key not in _w:
        eye_h = torch.eye(box.frame_h, device="cuda")[None, None]
        eye_w = torch.eye(box.frame_w, device="cuda")[None, None]
        wy = F.interpolate(
            eye_h, size=(box.resized_h, box.frame_h), mode="bilinear", align_corners=False, antialias=True
        )[0, 0]
        wxt = F.interpolate(
            eye_w, size=(box.frame_w, box.resized_w), mode="bilinear", align_corners=False, antialias=True
        )[0, 0]
        _w[key] = (wy.to(dtype).contiguous(), wxt.to(dtype).contiguous())
    return _w[key]


def make_mm(dtype, chunk):
    def prepare(self, frames, box):
        h, w = self.input_size
        batch = torch.zeros((self.batch_size, 3, h, w), dtype=torch.float32, device=frames.device)
        wy, wxt = weights(box, dtype)
        for first in range(0, frames.shape[0], chunk):
            x = frames[first : first + chunk].permute(0, 3, 1, 2).to(dtype)
            x = (wy @ (x @ wxt)).float()
            batch[
                first : first + x.shape[0],
                :,
                box.pad_y : box.pad_y + box.resized_h,
                box.pad_x : box.pad_x + box.resized_w,
            ] = self._normalise(x)
        mf = torch.channels_last if self.channels_last else torch.contiguous_format
        return batch.to(dtype=self.dtype, memory_format=mf)

    return prepare


def gpu_ms(call, iters=40):
    for _ in range(5):
        call()
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(iters):
        call()
    b.record()
    torch.cuda.synchronize()
    return a.elapsed_time(b) / iters


variants = {
    "interpolate_aa": stock,
    "mm_fp32_c8": make_mm(torch.float32, 8),
    "mm_fp32_c32": make_mm(torch.float32, 32),
    "mm_fp16_c32": make_mm(torch.float16, 32),
}
report, dets = {"gpu": torch.cuda.get_device_name()}, {}
frames = allf[:32]
for name, prep in variants.items():
    base.FaceDetector._prepare = prep
    det = create_detector("blazeface_back", device="cuda", models_dir=M, batch_size=32, precision="fp16")
    det.warmup(720, 1280)
    box = det._letterbox(720, 1280)
    with torch.inference_mode():
        r = {
            "prepare_ms": gpu_ms(lambda: det._prepare(frames, box)),  # noqa: B023 (called here)
            "call_ms": gpu_ms(lambda: det.launch(frames).collect()),  # noqa: B023
        }
        x = det._prepare(frames, box).float()
        base.FaceDetector._prepare = stock
        ref = det._prepare(frames, box).float()
        base.FaceDetector._prepare = prep
        r["input_maxdiff"] = float((x - ref).abs().max())
        out = []
        for i in range(0, allf.shape[0], 32):
            out += det.detect(allf[i : i + 32])
    dets[name] = out
    report[name] = r
    print(name, r, flush=True)
base.FaceDetector._prepare = stock
ref = dets["interpolate_aa"]
for name, out in dets.items():
    nb = [len(d.boxes) for d in out]
    nr = [len(d.boxes) for d in ref]
    same = sum(a == b for a, b in zip(nb, nr))
    md = max(
        (
            float(np.abs(a.boxes - b.boxes).max())
            for a, b in zip(out, ref)
            if len(a.boxes) == len(b.boxes) and len(a.boxes)
        ),
        default=0,
    )
    ms = max(
        (
            float(np.abs(a.scores - b.scores).max())
            for a, b in zip(out, ref)
            if len(a.boxes) == len(b.boxes) and len(a.boxes)
        ),
        default=0,
    )
    report[name].update(frames=len(out), faces=sum(nb), same_count_frames=same, box_maxdiff_px=md, score_maxdiff=ms)
    print(
        f"{name:16s} prepare {report[name]['prepare_ms']:.3f} ms  call {report[name]['call_ms']:.3f} ms/32 frames  "
        f"input maxdiff {report[name]['input_maxdiff']:.4f}  faces {sum(nb)} same-count {same}/{len(out)} "
        f"box {md:.3f}px score {ms:.4f}"
    )
with open(os.path.join(R, "resize.json"), "w") as f:
    json.dump(report, f, indent=1)
