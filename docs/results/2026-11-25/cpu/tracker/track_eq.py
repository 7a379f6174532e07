"""The list-based IouTracker against 03f0bad's NumPy one (`git show 03f0bad:emopipe/vision/track.py > OLD`):
the same ids, expired ids and predicted boxes (bit for bit) on random scenes — faces moving with jitter, coming and
going, crossing, crowds past the small-frame cut — under several thresholds and ages."""

import importlib.util
import sys

import numpy as np

from emopipe.vision.track import IouTracker

spec = importlib.util.spec_from_file_location("track_old", sys.argv[1])
old = importlib.util.module_from_spec(spec)
spec.loader.exec_module(old)

rng = np.random.default_rng(int(sys.argv[2]) if len(sys.argv) > 2 else 0)
frames = checked_pairs = 0
for scene in range(400):
    most = int(rng.choice([1, 2, 4, 6, 12, 30]))
    threshold = float(rng.choice([0.1, 0.3, 0.5, 0.9]))
    age = int(rng.choice([0, 1, 3, 30]))
    a, b = IouTracker(threshold, age), old.IouTracker(threshold, age)
    centres = rng.uniform(50, 950, size=(most, 2))
    speed = rng.normal(0, float(rng.choice([1, 5, 40])), size=(most, 2))
    sides = rng.uniform(20, 200, size=most)
    for _ in range(int(rng.integers(5, 120))):
        centres += speed + rng.normal(0, 2, size=centres.shape)
        present = rng.random(most) < 0.85
        order = rng.permutation(np.flatnonzero(present))
        boxes = np.array([[centres[j, 0] - sides[j] / 2, centres[j, 1] - sides[j] / 2,
                           centres[j, 0] + sides[j] / 2, centres[j, 1] + sides[j] / 2] for j in order]).reshape(-1, 4)
        if rng.random() < 0.5:
            boxes = boxes.astype(np.float32)  # as the detector gives them
        ids_a, ids_b = a.update(boxes), b.update(boxes)
        assert ids_a.dtype == ids_b.dtype and np.array_equal(ids_a, ids_b), (scene, ids_a, ids_b)
        assert a.expired == b.expired and a.active_ids == b.active_ids and len(a) == len(b)
        assert np.array_equal(a.predicted_boxes(), b.predicted_boxes())
        frames += 1
        checked_pairs += len(boxes) * len(a)
print(f"identical on {frames} frames ({checked_pairs} track-box pairs)")
