"""Session 24 probe: do cuDNN frontend plan builds (NVRTC) run side by side on threads? Builds distinct
conv → add epilogue graphs (no plan cache), one thread against a pool, each set of shapes new to the process."""
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import torch

from emopipe.model import cudnn_epilogue as ce

dev = torch.device("cuda")
torch.zeros(1, device=dev)
ce.use_plan_cache(None)
import cudnn  # noqa: E402

handles = threading.local()


def handle():
    if not hasattr(handles, "h"):
        handles.h = cudnn.create_handle()
    return handles.h


def tensors(n, cin, cout, s):
    cl = torch.channels_last
    x = torch.randn(n, cin, s, s, device=dev, dtype=torch.half).contiguous(memory_format=cl)
    w = torch.randn(cout, cin, 3, 3, device=dev, dtype=torch.half).contiguous(memory_format=cl)
    r = torch.randn(n, cout, s, s, device=dev, dtype=torch.half).contiguous(memory_format=cl)
    o = torch.empty_like(r)
    return x, w, r, o


def build(args):
    t = time.perf_counter()
    x, w, r, o = tensors(*args)
    try:
        ce._build_graph(handle(), x, w, r, o, None, None)
        ok = True
    except ce.Unsupported:
        ok = False
    return time.perf_counter() - t, ok


shapes = [(c_in, c_out, s) for c_in, c_out in ((256, 128), (128, 64), (64, 64)) for s in (64, 32, 16, 8, 4)]
workers = [int(v) for v in sys.argv[1:]] or [1, 8, 1, 4]
for round_, pool in enumerate(workers):
    batch = 2 + round_  # new shapes each round: nothing built before
    jobs = [(batch, *s) for s in shapes]
    t = time.perf_counter()
    if pool == 1:
        out = [build(j) for j in jobs]
    else:
        with ThreadPoolExecutor(pool) as ex:
            out = list(ex.map(build, jobs))
    wall = time.perf_counter() - t
    each = sorted(s for s, _ in out)
    print(f"threads {pool}: {len(jobs)} plans (batch {batch}) wall {wall:.2f} s; each median {each[len(each)//2]:.3f} "
          f"max {each[-1]:.3f} s; built {sum(ok for _, ok in out)}", flush=True)
