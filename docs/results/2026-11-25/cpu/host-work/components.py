"""Two parts of host_work.py alone, per frame: the detector's host side (``finish``: threshold, NMS, mapping,
largest first) and the cropper's (rounding, clipping, bookkeeping; 8×8 crops so that their arithmetic is small),
on 32 real 720p frames of the benchmark's video (one face, or four with ``f4``), BlazeFace back on the CPU.

    ROOT=/path/to/an/emopipe/checkout python3 components.py [f4]
"""

import os
import sys
import time

import cv2
import numpy as np
import torch

ROOT = os.environ.get("ROOT", ".")
sys.path.insert(0, ROOT)

from emopipe.vision.crop import FaceCropper  # noqa: E402
from emopipe.vision.detectors import create_detector  # noqa: E402


def per_call(call, n: int = 200) -> float:
    call()
    started = time.perf_counter()
    for _ in range(n):
        call()
    return (time.perf_counter() - started) / n


def main() -> None:
    video = "video_720p_4faces_h264.mp4" if "f4" in sys.argv else "video_720p_h264.mp4"
    capture = cv2.VideoCapture(os.path.join(ROOT, ".rw4", video))
    frames = torch.from_numpy(np.stack([capture.read()[1] for _ in range(32)]))
    detector = create_detector("blazeface_back", device="cpu", batch_size=32,
                               models_dir=os.environ.get("MODELS", "../shared/models/blazeface"))
    with torch.inference_mode():
        pending = detector.launch(frames)
        found = detector.finish(pending)
    boxes = [d.boxes for d in found]
    cropper = FaceCropper(size=8, method="torch")
    print(f"{ROOT} {video}: {sum(map(len, found))} faces in 32 frames; finish "
          f"{per_call(lambda: detector.finish(pending)) / 32 * 1e6:.1f} µs a frame, crop "
          f"{per_call(lambda: cropper.crop(frames, boxes)) / 32 * 1e6:.1f} µs a frame")


if __name__ == "__main__":
    main()
