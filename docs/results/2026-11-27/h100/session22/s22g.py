"""Session 22: BlazeFace back's first pass and steady 32-frame call with its depthwise convolutions through
cuDNN plans kept on disk (emopipe.model.cudnn_epilogue.conv2d), the plan folder given; run twice in fresh
processes (the first builds and stores the plans, the next reads them back)."""
import json
import sys
import time
from pathlib import Path

import cv2
import numpy as np
import torch

torch.backends.cudnn.benchmark = True
from emopipe.model import cudnn_epilogue  # noqa: E402
from emopipe.vision.detectors import DETECTORS  # noqa: E402

models, faces, plans = sys.argv[1], sys.argv[2], sys.argv[3]
cudnn_epilogue.use_plan_cache(plans)
x = torch.randn(8, 64, 64, 64, device="cuda", dtype=torch.float16)
torch.nn.functional.conv2d(x, torch.randn(64, 64, 3, 3, device="cuda", dtype=torch.float16), padding=1)
torch.cuda.synchronize()
det = DETECTORS.get("blazeface_back")(models, None, device="cuda", precision="fp16", batch_size=32,
                                      cuda_graphs=True, fuse=True)
photos = [cv2.resize(cv2.imread(str(p)), (1280, 720)) for p in sorted(Path(faces).glob("*.png"))]
frames = torch.from_numpy(np.stack([photos[i % len(photos)] for i in range(32)])).cuda()
s = time.perf_counter()
det.detect(frames)
torch.cuda.synchronize()
first = time.perf_counter() - s
s = time.perf_counter()
det.warmup(720, 1280)
warm = time.perf_counter() - s
found = det.detect(frames)
for _ in range(20):
    det.detect(frames)
torch.cuda.synchronize()
s = time.perf_counter()
for _ in range(200):
    det.launch(frames)
torch.cuda.synchronize()
steady = (time.perf_counter() - s) / 200 * 1000
through = sum(1 for v in cudnn_epilogue._plans.values() if not isinstance(v, cudnn_epilogue.Unsupported))
print(json.dumps({"first_pass_s": round(first, 3), "warmup_after_s": round(warm, 3), "detect32_ms": round(steady, 3),
                  "plans": through, "unsupported": len(cudnn_epilogue._plans) - through,
                  "plan_files": len(list(Path(plans).glob("*.plan"))), "faces": sum(len(d) for d in found),
                  "boxes_sum": round(float(sum(d.boxes.sum() for d in found)), 2),
                  "scores_sum": round(float(sum(d.scores.sum() for d in found)), 4)}))
