"""Per-frame checksums of what NvdecVideoSource gives for a file (run under each tree): index, timestamp and a
weighted sum of every pixel (a frame aliased by another would change it)."""
import json
import sys

import torch

from emopipe.io.nvdec import NvdecVideoSource

torch.manual_seed(0)
out = []
weights = None
with NvdecVideoSource(sys.argv[1]) as source:
    for frame in source:
        p = frame.pixels
        if weights is None or weights.shape != p.shape:
            weights = torch.randint(1, 1000, p.shape, device=p.device, dtype=torch.int64)
        out.append((frame.index, round(frame.timestamp_s, 6), int((p.to(torch.int64) * weights).sum())))
print(json.dumps(out))
