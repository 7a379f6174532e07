"""Is NVDEC usable on this host, and how does it compare with OpenCV's CPU decoding?

Decodes each video given with OpenCV (grab + retrieve, BGR on the CPU) and, where PyNvVideoCodec
and the driver's ``libnvcuvid`` are present, with NVDEC into GPU memory (interleaved RGB, each frame
copied into a torch tensor, as a pipeline would). Prints frames/s, the first frames' timestamps
from both, and how far NVDEC's RGB is from OpenCV's (their YUV→RGB conversions may differ).

    python3 scripts/nvdec_probe.py video_h264.mp4 [video2.mp4 ...] [--repeats 3]
"""

from __future__ import annotations

import argparse
import ctypes
import shutil
import time

import cv2
import numpy as np
import torch


def opencv_decode(path: str, repeats: int) -> tuple[float, list[np.ndarray], list[float]]:
    frames, first, stamps = 0, [], []
    start = time.perf_counter()
    for _ in range(repeats):
        capture = cv2.VideoCapture(path, cv2.CAP_FFMPEG)
        while capture.grab():
            _, image = capture.retrieve()
            if len(first) < 8:
                first.append(cv2.cvtColor(image, cv2.COLOR_BGR2RGB))
                stamps.append(capture.get(cv2.CAP_PROP_POS_MSEC) / 1000)
            frames += 1
        capture.release()
    return frames / (time.perf_counter() - start), first, stamps


def nvdec_decode(path: str, repeats: int, batch: int, threaded: bool) -> tuple[float, list[np.ndarray], dict]:
    import PyNvVideoCodec as nvc

    frames, first, facts = 0, [], {}
    target = None
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(repeats):
        if threaded:
            decoder = nvc.ThreadedDecoder(path, buffer_size=batch, gpu_id=0, use_device_memory=True,
                                          output_color_type=nvc.OutputColorType.RGB)
        else:
            decoder = nvc.SimpleDecoder(path, gpu_id=0, use_device_memory=True,
                                        output_color_type=nvc.OutputColorType.RGB)
        while True:
            decoded = decoder.get_batch_frames(batch)
            if not decoded:
                break
            for frame in decoded:
                pixels = torch.from_dlpack(frame)
                if target is None:
                    target = torch.empty_like(pixels)
                    facts = {"shape": tuple(pixels.shape), "dtype": str(pixels.dtype),
                             "attributes": [a for a in dir(frame) if not a.startswith("_")]}
                    try:
                        facts["metadata"] = str(decoder.get_stream_metadata())
                    except Exception as error:
                        facts["metadata"] = repr(error)
                target.copy_(pixels)
                if len(first) < 8:
                    first.append(target.cpu().numpy())
                    for name in ("getPTS", "pts", "timestamp"):
                        if hasattr(frame, name):
                            value = getattr(frame, name)
                            facts.setdefault("pts", []).append(value() if callable(value) else value)
                frames += 1
        if threaded:
            decoder.end()
    torch.cuda.synchronize()
    return frames / (time.perf_counter() - start), first, facts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("videos", nargs="+")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--batch", type=int, default=16)
    args = parser.parse_args()

    print("ffmpeg binary:", shutil.which("ffmpeg"))
    try:
        ctypes.CDLL("libnvcuvid.so.1")
        print("libnvcuvid.so.1: loads")
    except OSError as error:
        print("libnvcuvid.so.1: missing:", error)
    try:
        import PyNvVideoCodec as nvc
        print("PyNvVideoCodec", getattr(nvc, "__version__", "?"))
    except Exception as error:
        print("PyNvVideoCodec import failed:", repr(error))
        nvc = None
    if torch.cuda.is_available():
        print("GPU:", torch.cuda.get_device_name(0))
        torch.zeros(1, device="cuda")

    for path in args.videos:
        rate, cpu_first, stamps = opencv_decode(path, args.repeats)
        first_stamps = [round(s, 4) for s in stamps[:4]]
        print(f"\n{path}\n  OpenCV (CPU, BGR): {rate:.0f} frames/s; first timestamps {first_stamps}")
        if nvc is None:
            continue
        for threaded in (False, True):
            name = "ThreadedDecoder" if threaded else "SimpleDecoder"
            try:
                rate, gpu_first, facts = nvdec_decode(path, args.repeats, args.batch, threaded)
            except Exception as error:
                print(f"  NVDEC {name}: failed: {error!r}")
                continue
            diffs = [float(np.abs(a.astype(np.int16) - b.astype(np.int16)).mean())
                     for a, b in zip(cpu_first, gpu_first) if a.shape == b.shape]
            print(f"  NVDEC {name} (GPU, RGB): {rate:.0f} frames/s; {facts.get('shape')} {facts.get('dtype')}; "
                  f"mean |RGB − OpenCV| over the first frames {[round(d, 2) for d in diffs]}")
            if not threaded:
                print("  frame attributes:", facts.get("attributes"))
                print("  pts:", facts.get("pts"))
                print("  metadata:", facts.get("metadata"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
