"""Soak the default engine's CUDA graphs: many replays per static shape, watched for hangs and drift.

    python3 scripts/graph_soak.py [--sizes 1,32,256] [--seconds 40]

The graphs run cuDNN's fused epilogue kernels beside each other on the side streams. Two engines
doing so at once hang the GPU (docs/benchmarks.md, "Engines side by side"); this checks that one
engine alone does not, over many replays: per batch size it replays the graph on one fixed input for
``--seconds``, in chunks of 200 with a watchdog (30 s without a finished chunk ends the process with
its stack), and compares every chunk's outputs bit for bit with the first replay's.
"""

from __future__ import annotations

import argparse
import faulthandler
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from emopipe.engines.base import EngineOptions  # noqa: I001

from emopipe.engines.torch_engine import TorchEngine
from emopipe.model.emonet import build_emonet


@torch.inference_mode()  # (the engine's buffers are inference tensors)
def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1,32,256")
    ap.add_argument("--seconds", type=float, default=40.0, help="replaying time per batch size")
    ap.add_argument("--models-dir", default=None, help="the engine's caches under <models>/cache")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    engine = TorchEngine(build_emonet(classes=8), EngineOptions(device="cuda", batch_size=max(sizes)),
                         cache_dir=Path(args.models_dir) / "cache" if args.models_dir else None)
    engine.warmup(sizes)
    print(f"{torch.cuda.get_device_name()}; {engine.info()}", flush=True)
    generator = torch.Generator(device="cuda").manual_seed(1)
    failed = False
    for n in sizes:
        captured = engine._graphs[n]
        captured.static_input.copy_(torch.rand(captured.static_input.shape, generator=generator, device="cuda"))
        captured.graph.replay()
        reference = captured.packed.clone()
        replays, differing, start = 0, 0, time.perf_counter()
        while time.perf_counter() - start < args.seconds:
            faulthandler.dump_traceback_later(30, exit=True)
            for _ in range(200):
                captured.graph.replay()
            torch.cuda.synchronize()
            faulthandler.cancel_dump_traceback_later()
            replays += 200
            differing += int(not torch.equal(captured.packed, reference))
        seconds = time.perf_counter() - start
        failed |= differing > 0
        print(f"batch {n}: {replays} replays in {seconds:.1f} s ({replays * n / seconds:.0f} faces/s), "
              f"{differing} of {replays // 200} chunks with outputs other than the first replay's", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
