"""Writer thread per frame (CPU): tracker, FaceRecord creation, CSV rows, the whole RecordSink.write."""

import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, sys.argv[1])
import emopipe.io.records as rec
from emopipe.pipeline.sinks import FaceRecorder, RecordSink
from emopipe.types import Detections, FaceResult, FrameResult
from emopipe.types import HostFrame as Frame
from emopipe.vision.track import IouTracker

LABELS = ("neutral", "happy", "sad", "surprise", "fear", "disgust", "anger", "contempt")
rng = np.random.default_rng(0)


def frames(faces, n=2000):
    out = []
    base = np.array([[100 + 250 * j, 100, 300 + 250 * j, 330] for j in range(faces)], np.float32)
    img = np.zeros((8, 8, 3), np.uint8)
    for i in range(n):
        boxes = base + rng.normal(0, 1, base.shape).astype(np.float32)
        det = Detections(boxes, rng.uniform(0.6, 1, faces).astype(np.float32))
        p = rng.dirichlet(np.ones(8)).astype(np.float32)
        fr = FrameResult(
            frame=Frame(index=i, timestamp_s=i / 30, bgr=img, read_time=0.0), detections=det, crop_boxes=boxes.copy()
        )
        fr.faces = [FaceResult(p, float(rng.normal()), float(rng.normal()), None) for _ in range(faces)]
        out.append(fr)
    return out


def bench(faces):
    data = frames(faces)
    res = {}
    for _round in range(3):
        tr = IouTracker()
        t = time.perf_counter()
        for fr in data:
            tr.update(fr.detections.boxes)
        res.setdefault("tracker", []).append((time.perf_counter() - t) / len(data) * 1e6)
        fr_ = FaceRecorder("clip.mp4", LABELS)
        t = time.perf_counter()
        recs = [fr_.records(fr) for fr in data]
        res.setdefault("records (incl. tracker)", []).append((time.perf_counter() - t) / len(data) * 1e6)
        with tempfile.TemporaryDirectory() as d:
            w = rec.CsvRecordWriter(Path(d) / "rows.csv", LABELS) if hasattr(rec, "CsvRecordWriter") else None
            t = time.perf_counter()
            for r in recs:
                if r:
                    w.write(r)
            res.setdefault("csv write", []).append((time.perf_counter() - t) / len(data) * 1e6)
            w.close()
            w2 = rec.CsvRecordWriter(Path(d) / "rows2.csv", LABELS)
            sink = RecordSink(FaceRecorder("clip.mp4", LABELS), w2)
            t = time.perf_counter()
            for fr in data:
                sink.write(fr)
            res.setdefault("RecordSink.write", []).append((time.perf_counter() - t) / len(data) * 1e6)
            w2.close()
    print(f"{sys.argv[1]} {faces} face(s): " + ", ".join(f"{k} {min(v):.0f} µs" for k, v in res.items()))


for f in (1, 4):
    bench(f)
