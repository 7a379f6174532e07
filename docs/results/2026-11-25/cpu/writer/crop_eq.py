import importlib.util
import sys

import numpy as np
import torch

sys.path.insert(0, "/work/main")
from emopipe.vision.crop import torch_crops

spec = importlib.util.spec_from_file_location("crop_old", "/tmp/crop_old.py")
old = importlib.util.module_from_spec(spec)
sys.modules["crop_old"] = old
spec.loader.exec_module(old)
rng = np.random.default_rng(0)
worst = 0
for _trial in range(30):
    h, w = (int(v) for v in rng.integers(8, 400, 2))
    n = int(rng.integers(1, 4))
    frames = torch.from_numpy(rng.integers(0, 256, (n, h, w, 3), dtype=np.uint8))
    k = int(rng.integers(1, 150))
    fo = rng.integers(0, n, k)
    x1 = rng.integers(0, w - 1, k)
    y1 = rng.integers(0, h - 1, k)
    x2 = np.minimum(w, x1 + rng.integers(1, w, k))
    y2 = np.minimum(h, y1 + rng.integers(1, h, k))
    b = np.stack([x1, y1, x2, y2], 1)
    size = int(rng.choice([256, 64, 17]))
    a = torch_crops(frames, fo, b, size)
    o = old.torch_crops(frames, torch.from_numpy(fo), torch.from_numpy(b), size)
    worst = max(worst, (a - o).abs().max().item())
print("max |new - old| over 30 random batches:", worst)
