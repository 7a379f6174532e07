"""session 35: how long reading the kept cuDNN plans back takes in one process, when several processes read at once.

python plan_read_probe.py FOLDER START_AT  (START_AT: a time.time() at which to begin, so processes begin together)
"""
import json
import os
import sys
import time
from pathlib import Path

import cudnn
import torch

from emopipe.model import cudnn_plans

folder, start_at = Path(sys.argv[1]), float(sys.argv[2])
torch.zeros(1, device="cuda")
handle = cudnn.create_handle()
files = sorted(folder.glob("*.plan"))
while time.time() < start_at:
    time.sleep(0.001)
began = time.perf_counter()
each = []
for path in files:
    t = time.perf_counter()
    graph = cudnn_plans.read(handle, path)
    each.append((round(time.perf_counter() - t, 4), graph is not None))
total = time.perf_counter() - began
print(json.dumps({"pid": os.getpid(), "plans": len(files), "read": sum(ok for _, ok in each),
                  "seconds": round(total, 3), "slowest": sorted(s for s, _ in each)[-3:],
                  "cache": os.environ.get("CUDA_CACHE_PATH"),
                  "cache_disabled": os.environ.get("CUDA_CACHE_DISABLE")}))
