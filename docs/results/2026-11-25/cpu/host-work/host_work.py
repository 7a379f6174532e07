"""The host work of the pipeline's GPU thread per frame, on a machine without a GPU (2026-11-25, the CPU machine).

    ROOT=/path/to/an/emopipe/checkout python3 host_work.py [FRAMES] [f4]

One pipeline over FRAMES in-memory 320×180 frames: real BlazeFace-back post-processing (``finish``: threshold,
NMS, mapping, largest first) on candidates the network produced once for 32 real 720p frames of the benchmark's
talking-head video (one face, or four with ``f4``), real batched torch crops at 16×16 (small, so that the crops'
arithmetic stays out of the way), the tests' stand-in engine. The network itself is not run (``launch`` returns
the stored candidates), so what is timed is the host work that runs per frame or per detector call on the GPU
thread, plus what only a CPU run pays (stacking frames for the upload, the crops' and the stand-in's arithmetic).
``ROOT`` picks the checkout: before and after a change, interleaved. With ``rows`` the frames go to the product's
rows sink (tracking, a CSV rows file, track summaries) instead of a counter, so the writer thread's work, which
shares the interpreter with the GPU thread, is in the time too.
"""

import os
import sys
import time

import cv2
import numpy as np
import torch

ROOT = os.environ.get("ROOT", ".")
sys.path.insert(0, ROOT)

from emopipe.pipeline.runner import Pipeline, PipelineSettings  # noqa: E402
from emopipe.types import HostFrame, SourceInfo  # noqa: E402
from emopipe.vision.crop import FaceCropper  # noqa: E402
from emopipe.vision.detectors import create_detector  # noqa: E402
from emopipe.vision.detectors.base import PendingDetections  # noqa: E402
from tests.support.fakes import PixelEngine  # noqa: E402

FRAMES = int(sys.argv[1]) if len(sys.argv) > 1 else 4096
VIDEO = ".rw4/video_720p_4faces_h264.mp4" if "f4" in sys.argv else ".rw4/video_720p_h264.mp4"
HEIGHT, WIDTH = 180, 320


class MemorySource:
    info = SourceInfo("memory", "video", 30.0, FRAMES, WIDTH, HEIGHT)
    ended_early = None
    expected_frames = FRAMES

    def __iter__(self):
        pixels = np.zeros((HEIGHT, WIDTH, 3), np.uint8)
        for i in range(FRAMES):
            yield HostFrame(i, i / 30, pixels, time.perf_counter())

    def close(self):
        pass


class CountingSink:
    frames = faces = 0

    def write(self, result):
        self.frames += 1
        self.faces += len(result.faces)

    def close(self):
        pass


def main():
    capture = cv2.VideoCapture(os.path.join(ROOT, VIDEO))
    images = [capture.read()[1] for _ in range(32)]
    detector = create_detector("blazeface_back", device="cpu", batch_size=32,
                               models_dir=os.environ.get("MODELS", "../shared/models/blazeface"))
    with torch.inference_mode():
        candidates = detector.launch(torch.from_numpy(np.stack(images))).candidates
    box = detector._letterbox(HEIGHT, WIDTH)
    detector.launch = lambda frames: PendingDetections(detector, candidates[:frames.shape[0]], None, box,
                                                       int(frames.shape[0]))
    counter = CountingSink()
    sinks = [counter]
    if "rows" in sys.argv:
        from emopipe.io.records import open_writer
        from emopipe.pipeline.sinks import FaceRecorder, RecordSink, TrackWatcher

        labels = PixelEngine().labels
        writer = open_writer("/tmp/host_work_rows.csv", labels=labels)
        import inspect

        held = {"hold_rows": True} if "hold_rows" in inspect.signature(RecordSink).parameters else {}  # as file runs
        sinks.insert(0, RecordSink(FaceRecorder("memory", labels), writer, None, [TrackWatcher(False)], **held))
    pipeline = Pipeline(MemorySource(), detector, FaceCropper(size=16, method="torch"), PixelEngine(batch_size=64),
                        sinks, settings=PipelineSettings(detect_batch=32, queue_frames=64))
    started = time.perf_counter()
    pipeline.run()
    seconds = time.perf_counter() - started
    sink = counter
    per_frame = seconds / sink.frames * 1e6
    print(f"{ROOT}: frames {sink.frames} faces {sink.faces} {seconds:.2f} s, {per_frame:.0f} µs a frame")


if __name__ == "__main__":
    main()
