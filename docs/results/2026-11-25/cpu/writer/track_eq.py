import importlib.util
import sys

import numpy as np

sys.path.insert(0, "/work/main")
from emopipe.vision import track as new

spec = importlib.util.spec_from_file_location("track_old", "/tmp/track_old.py")
old = importlib.util.module_from_spec(spec)
sys.modules["track_old"] = old
spec.loader.exec_module(old)
rng = np.random.default_rng(1)
for trial in range(300):
    a = rng.uniform(0, 100, (rng.integers(0, 6), 4))
    b = rng.uniform(0, 100, (rng.integers(0, 6), 4))
    if trial % 3 == 0 and len(a) and len(b):
        b[0] = a[0]
    assert np.array_equal(new.box_iou(a, b), old.box_iou(a, b)), trial
ta, tb = new.IouTracker(), old.IouTracker()
base = rng.uniform(0, 500, (6, 4))
base[:, 2:] = base[:, :2] + rng.uniform(20, 120, (6, 2))
for f in range(5000):
    k = int(rng.integers(0, 7))
    boxes = base[rng.permutation(6)[:k]] + rng.normal(0, 4, (k, 4))
    if f % 50 == 0 and k > 1:
        boxes[1] = boxes[0]
    assert np.array_equal(ta.update(boxes), tb.update(boxes)) and ta.expired == tb.expired, f
print("box_iou and tracker identical")
