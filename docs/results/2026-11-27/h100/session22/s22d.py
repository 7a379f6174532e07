"""Session 22: the detector's first pass in a process whose cuDNN is already initialised (a small convolution
first), profiled by PyTorch's profiler (CPU time per op, which includes cuDNN's tuning and kernel loading)."""
import sys
import time

import torch

torch.backends.cudnn.benchmark = sys.argv[1] == "bench"
from emopipe.vision.detectors import DETECTORS  # noqa: E402

x = torch.randn(8, 64, 64, 64, device="cuda", dtype=torch.float16)
w = torch.randn(64, 64, 3, 3, device="cuda", dtype=torch.float16)
s = time.perf_counter()
torch.nn.functional.conv2d(x, w, padding=1)
torch.cuda.synchronize()
print(f"first cuDNN convolution of the process: {time.perf_counter() - s:.3f} s")
det = DETECTORS.get("blazeface_back")(sys.argv[2], None, device="cuda", precision="fp16", batch_size=32,
                                      cuda_graphs=True, fuse=True)
frames = torch.full((32, 720, 1280, 3), 127, dtype=torch.uint8, device="cuda")
from torch.profiler import ProfilerActivity, profile  # noqa: E402

s = time.perf_counter()
with profile(activities=[ProfilerActivity.CPU]) as prof:
    det.detect(frames)
    torch.cuda.synchronize()
print(f"detector's first pass: {time.perf_counter() - s:.3f} s")
print(prof.key_averages(group_by_input_shape=True).table(sort_by="self_cpu_time_total", row_limit=18,
                                                         max_name_column_width=40, max_shapes_column_width=60))
