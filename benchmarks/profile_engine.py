"""Where EmoNet's GPU time goes on the product's default path: kernel time by kind, per face.

    python3 benchmarks/profile_engine.py [--batches 1,256] [--iters 20] [--variant default|nokernels|nostreams]

Builds the default engine (fp16, channels_last, fused network, Triton glue kernels, branch streams)
without CUDA graphs so that the profiler sees each kernel (a kernel takes as long inside a graph),
runs ``--iters`` forwards per batch size under torch.profiler and prints, per batch size, the GPU
time summed by kind (convolution, glue kernels, pooling, other elementwise, …) and the largest
kernels. Kernels of concurrent streams overlap, so the sum can exceed the wall time.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from emopipe.engines.base import EngineOptions  # noqa: E402
from emopipe.engines.torch_engine import TorchEngine  # noqa: E402
from emopipe.model.emonet import build_emonet  # noqa: E402

VARIANTS = {"default": {}, "nokernels": {"kernels": False}, "nostreams": {"branch_streams": False}}
KINDS = (  # first match wins; names are lower-cased kernel names
    ("convolution (cuDNN)", ("conv", "xmma", "implicit", "cudnn", "sm90", "sm80", "fprop", "cutlass", "wgrad")),
    ("glue: Triton", ("affine_relu", "residual_slice", "triton")),
    ("pooling", ("pool",)),
    ("linear (GEMM)", ("gemm", "gemv", "cublas")),
    ("copies (PyTorch)", ("direct_copy", "copy_kernel", "fill")),
    ("elementwise / reduction (PyTorch)", ("elementwise", "reduce", "vectorized", "softmax", "mul", "add")),
)


def kind_of(name: str) -> str:
    low = name.lower()
    for kind, keys in KINDS:
        if any(k in low for k in keys):
            return kind
    return "other"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batches", default="1,256")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--variant", default="default", choices=sorted(VARIANTS))
    args = ap.parse_args()
    model = build_emonet(classes=8)
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}, "
          f"variant {args.variant}")
    for batch in (int(b) for b in args.batches.split(",")):
        engine = TorchEngine(model, EngineOptions(device="cuda", batch_size=batch, cuda_graphs=False,
                                                  **VARIANTS[args.variant]))
        engine.warmup()
        x = torch.rand(batch, 3, 256, 256, device="cuda")  # crops as the pipeline hands them over
        with torch.inference_mode():
            for _ in range(3):
                engine.infer(x)
            torch.cuda.synchronize()
            t = time.perf_counter()
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
                for _ in range(args.iters):
                    engine.infer(x)
                torch.cuda.synchronize()
            wall = (time.perf_counter() - t) / args.iters
        by_kind: dict[str, float] = defaultdict(float)
        kernels = []
        for e in prof.key_averages():
            us = e.self_device_time_total
            if us <= 0:
                continue
            by_kind[kind_of(e.key)] += us
            kernels.append((us, e.count, e.key))
        total = sum(by_kind.values())
        per = args.iters * batch
        count = sum(c for _, c, _ in kernels) / args.iters
        print(f"\n## batch {batch}: {total / args.iters / 1000:.3f} ms of kernel time per forward "
              f"({count:.0f} kernels), {total / per:.1f} µs per face; wall {wall * 1000:.3f} ms per forward "
              "(eager, profiled)")
        print("| kind | µs per face | share |\n|---|---|---|")
        for kind, us in sorted(by_kind.items(), key=lambda kv: -kv[1]):
            print(f"| {kind} | {us / per:.1f} | {us / total:.1%} |")
        print("\n| kernel | calls per forward | µs per forward | share |\n|---|---|---|---|")
        for us, calls, name in sorted(kernels, reverse=True)[:18]:
            print(f"| `{name[:150]}` | {calls / args.iters:.0f} | {us / args.iters:.1f} | {us / total:.1%} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
