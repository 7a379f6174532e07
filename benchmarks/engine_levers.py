"""Ablation of EmoNet engine levers on one GPU: each variant's warmup, batch-1 latency and throughput.

Every variant runs in a fresh process (cuDNN's autotuning cache is per process), builds the engine the
product builds (emopipe.engines.torch_engine.TorchEngine) and times ``engine.infer`` — crops already on the GPU,
results back on the host — with the host clock, which is what the pipeline sees.

    python3 benchmarks/engine_levers.py --out levers.json [--variants a,b,...] [--throughput-batch 256] \
        [--models-dir DIR]

Prints a markdown table last; full results go to --out as JSON. Compiling variants start from an
empty Inductor cache (beside --out); a variant named ``…-warm`` finds what the one before it left there.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

VARIANTS: dict[str, dict] = {
    "fp32-eager": dict(precision="fp32", channels_last=False, cuda_graphs=False, fuse=False),
    "fp32-graph": dict(precision="fp32", channels_last=True, cuda_graphs=True, fuse=False),
    "fp16-cl-eager": dict(precision="fp16", channels_last=True, cuda_graphs=False, fuse=False),
    "fp16-cl-graph": dict(precision="fp16", channels_last=True, cuda_graphs=True, fuse=False),
    "fp16-cl-graph-fuse": dict(precision="fp16", channels_last=True, cuda_graphs=True, fuse=True),
    "fp16-cl-graph-fuse-nokernels": dict(precision="fp16", channels_last=True, cuda_graphs=True, fuse=True,
                                         kernels=False),
    "fp16-cl-graph-fuse-nostreams": dict(precision="fp16", channels_last=True, cuda_graphs=True, fuse=True,
                                         branch_streams=False),
    "fp16-cl-graph-fuse-nocudnn": dict(precision="fp16", channels_last=True, cuda_graphs=True, fuse=True,
                                       cudnn_epilogue=False),
    "fp16-cl-graph-fuse-nobenchmark": dict(precision="fp16", channels_last=True, cuda_graphs=True, fuse=True,
                                           cudnn_benchmark=False),
    "bf16-cl-graph-fuse": dict(precision="bf16", channels_last=True, cuda_graphs=True, fuse=True),
    "fp16-cl-fuse-compile": dict(precision="fp16", channels_last=True, cuda_graphs=True, fuse=True,
                                 compile="default"),
    "fp16-cl-fuse-compile-warm": dict(precision="fp16", channels_last=True, cuda_graphs=True, fuse=True,
                                      compile="default"),
    "fp16-cl-fuse-autotune": dict(precision="fp16", channels_last=True, cuda_graphs=True, fuse=True,
                                  compile="max-autotune-no-cudagraphs"),
}
DEFAULT = "fp32-eager,fp32-graph,fp16-cl-eager,fp16-cl-graph,fp16-cl-graph-fuse,bf16-cl-graph-fuse"


def _worker(name: str, batches: list[int], t0: float, iters: int) -> dict:
    import torch

    repo = Path(__file__).resolve().parents[1]
    sys.path.insert(0, str(repo))
    from emopipe.engines.base import EngineOptions  # noqa: I001

    from emopipe.engines.torch_engine import TorchEngine
    from emopipe.model.emonet import build_emonet

    torch.manual_seed(0)
    models = os.environ.get("LEVERS_MODELS_DIR")
    cache_dir = Path(models) / "cache" if models else None  # as the product: its caches beside the weights
    t_import = time.time() - t0
    model = build_emonet(classes=8)
    result: dict = {"variant": name, "import_s": t_import, "batches": {}}
    t_load = time.time()
    engines = {}
    for b in batches:
        engines[b] = TorchEngine(model, EngineOptions(device=os.environ.get("LEVERS_DEVICE", "cuda"), batch_size=b,
                                                     **VARIANTS[name]), cache_dir=cache_dir)
    result["load_s"] = time.time() - t_load
    t_warm = time.time()
    for engine in engines.values():
        engine.warmup()
    result["warmup_s"] = time.time() - t_warm
    result["start_to_ready_s"] = time.time() - t0
    if cache_dir is not None:
        result["cudnn_plans_on_disk"] = len(list((cache_dir / "cudnn").glob("*.plan")))
    if torch.cuda.is_available():  # both engines, their graphs and the warmup's transients
        result["peak_gpu_memory_mib"] = torch.cuda.max_memory_allocated() / 2**20
    for b, engine in engines.items():
        crops = torch.randint(0, 256, (b, 3, 256, 256), dtype=torch.uint8, device="cuda")
        host = []
        first = None
        for i in range(iters + 1):
            t = time.perf_counter()
            engine.infer(crops)
            dt = time.perf_counter() - t
            if i == 0:
                first = dt
            else:
                host.append(dt)
        host.sort()
        result["batches"][b] = {
            "first_ms": first * 1000,
            "host_p50_ms": statistics.median(host) * 1000,
            "host_p99_ms": host[min(len(host) - 1, round(0.99 * (len(host) - 1)))] * 1000,
            "faces_per_s_host": b / statistics.median(host),
        }
    result["gpu"] = torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"
    result["torch"] = torch.__version__
    result["cuda"] = torch.version.cuda
    result["cudnn"] = torch.backends.cudnn.version()
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--variants", default=DEFAULT)
    parser.add_argument("--latency-batch", type=int, default=1)
    parser.add_argument("--throughput-batch", type=int, default=256)
    parser.add_argument("--iters", type=int, default=30)
    parser.add_argument("--timeout", type=int, default=400, help="seconds per variant")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--models-dir", type=Path,
                        help="keep the engine's caches in <dir>/cache as the product does (cuDNN plans, Triton)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    batches = [args.latency_batch, args.throughput_batch]
    if args.worker:
        print(json.dumps(_worker(args.worker, batches, float(os.environ["LEVERS_T0"]), args.iters)))
        return 0
    results = []
    cache = args.out.resolve().parent / "inductor-cache"
    for name in args.variants.split(","):
        if not name.endswith("-warm"):
            shutil.rmtree(cache, ignore_errors=True)  # a cold start compiles everything
        env = {**os.environ, "LEVERS_T0": str(time.time()), "PYTHONUNBUFFERED": "1",
               "TORCHINDUCTOR_CACHE_DIR": str(cache)}
        if args.models_dir:
            env["LEVERS_MODELS_DIR"] = str(args.models_dir.resolve())
        cmd = [sys.executable, __file__, "--worker", name, "--out", str(args.out), "--iters", str(args.iters),
               "--latency-batch", str(args.latency_batch), "--throughput-batch", str(args.throughput_batch)]
        print(f"== {name}", file=sys.stderr, flush=True)
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=args.timeout)
        except subprocess.TimeoutExpired:
            results.append({"variant": name, "error": f"timed out after {args.timeout} s"})
            continue
        if done.returncode != 0:
            results.append({"variant": name, "error": done.stderr.strip().splitlines()[-1:]})
            print(done.stderr[-3000:], file=sys.stderr)
            continue
        results.append(json.loads(done.stdout.strip().splitlines()[-1]))
        args.out.write_text(json.dumps(results, indent=1))
    args.out.write_text(json.dumps(results, indent=1))
    lb, tb = (str(b) for b in batches)
    print(f"\n| variant | start→ready s | warmup s | b{lb} first ms | b{lb} p50 ms (host) "
          f"| b{tb} first ms | b{tb} faces/s (host) |")
    print("|---|---|---|---|---|---|---|")
    for r in results:
        if "error" in r:
            print(f"| {r['variant']} | failed: {r['error']} |")
            continue
        a, b = r["batches"][lb], r["batches"][tb]
        print(f"| {r['variant']} | {r['start_to_ready_s']:.1f} | {r['warmup_s']:.1f} | {a['first_ms']:.2f} | "
              f"{a['host_p50_ms']:.2f} | {b['first_ms']:.1f} | "
              f"{b['faces_per_s_host']:.0f} |")
    if results and "gpu" in results[0]:
        r = results[0]
        print(f"\n{r['gpu']}, torch {r['torch']}, CUDA {r['cuda']}, cuDNN {r['cudnn']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
