"""Session 22: where EmoNet's warm-up goes (batch 64, fp16, the default engine, its caches in /tmp/emocache warm
from an earlier process): the warm-up under PyTorch's profiler, CPU time per op with input shapes."""
import sys
import time

import torch

from emopipe.engines.base import EngineOptions
from emopipe.engines.torch_engine import TorchEngine
from emopipe.model.emonet import build_emonet

torch.manual_seed(0)
engine = TorchEngine(build_emonet(classes=8), EngineOptions(device="cuda", precision="fp16", batch_size=64),
                     cache_dir="/tmp/emocache")
torch.zeros(1, device="cuda")
torch.cuda.synchronize()
if sys.argv[1] == "plain":
    s = time.perf_counter()
    engine.warmup()
    print(f"warm-up (caches being filled): {time.perf_counter() - s:.3f} s")
    sys.exit()
from torch.profiler import ProfilerActivity, profile  # noqa: E402

s = time.perf_counter()
with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
    engine.warmup()
print(f"warm-up, profiled: {time.perf_counter() - s:.3f} s")
print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=15, max_name_column_width=45))
print(prof.key_averages(group_by_input_shape=True).table(sort_by="self_cpu_time_total", row_limit=25,
                                                         max_name_column_width=40, max_shapes_column_width=90))
