"""Session 22: where BlazeFace back's warm-up goes — fused (cuDNN conv+bias+add+ReLU, runtime fusion) or plain
convolutions, cuDNN autotuning on or off; one variant per fresh process; each step timed after a synchronisation."""
import json
import sys
import time

T0 = time.perf_counter()
import torch  # noqa: E402

fuse, bench = sys.argv[1] == "fused", sys.argv[2] == "bench"
torch.backends.cudnn.benchmark = bench
from emopipe.vision.detectors import DETECTORS  # noqa: E402

t = {"import_s": time.perf_counter() - T0}
s = time.perf_counter()
torch.zeros(1, device="cuda")
torch.cuda.synchronize()
t["context_s"] = time.perf_counter() - s
s = time.perf_counter()
det = DETECTORS.get("blazeface_back")(sys.argv[3], None, device="cuda", precision="fp16", batch_size=32,
                                      cuda_graphs=True, fuse=fuse)
torch.cuda.synchronize()
t["build_s"] = time.perf_counter() - s
frames = torch.full((32, 720, 1280, 3), 127, dtype=torch.uint8, device="cuda")
for k in range(3):
    s = time.perf_counter()
    det.detect(frames)
    torch.cuda.synchronize()
    t[f"eager{k}_s"] = time.perf_counter() - s
s = time.perf_counter()
det.warmup(720, 1280)
t["warmup_after_s"] = time.perf_counter() - s
for _ in range(20):
    det.detect(frames)
torch.cuda.synchronize()
s = time.perf_counter()
for _ in range(100):
    det.detect(frames)
torch.cuda.synchronize()
t["detect32_ms"] = (time.perf_counter() - s) * 10
print(json.dumps({"variant": f"{sys.argv[1]}-{sys.argv[2]}", **{k: round(v, 3) for k, v in t.items()}}))
