"""IouTracker.update per frame for 1, 4, 12 and 30 faces (moving, jittered), best of three: TREE's tracker."""

import sys
import time

import numpy as np

sys.path.insert(0, sys.argv[1])
from emopipe.vision.track import IouTracker

rng = np.random.default_rng(0)
for faces in (1, 4, 12, 30):
    base = np.array([[60 * j, 100, 60 * j + 50, 160] for j in range(faces)], np.float64)
    frames = [(base + t * 0.5 + rng.normal(0, 1, base.shape)).astype(np.float32) for t in range(1500)]
    best = float("inf")
    for _ in range(3):
        tracker = IouTracker()
        start = time.perf_counter()
        for boxes in frames:
            tracker.update(boxes)
        best = min(best, (time.perf_counter() - start) / len(frames))
    print(f"{sys.argv[1]} {faces} face(s): {best * 1e6:.0f} µs a frame")
