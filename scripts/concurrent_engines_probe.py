"""Several engines' CUDA graphs replayed at once, one CUDA stream each: faster than one graph?

    python3 scripts/concurrent_engines_probe.py --engines 2 --batch 128 [--variant noepilogue]

Builds ``--engines`` default engines of batch ``--batch`` (each its own fused network, side streams
and graph), then replays all their graphs together, each on a stream of its own, 30 times, and
prints faces per second (engines × batch per round, median of the last 25 rounds). The graphs are
replayed directly, around the engines' turn-taking (``emopipe.engine._EPILOGUE_TURN``), which is what
is probed: with the cuDNN epilogue on, such a replay never finishes, so a watchdog prints the stack
and ends the process after 40 s. ``--variant`` turns one part off to find which one hangs:
``noepilogue``, ``nopdl``, ``nostreams``, ``nokernels``; ``sepplans`` gives each engine its own
cuDNN plans (read back from the cache), ``sephandle`` its own cuDNN handle too. Results:
docs/benchmarks.md, "Engines side by side".
"""

from __future__ import annotations

import argparse
import faulthandler
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from emopipe.engines.base import EngineOptions  # noqa: I001

from emopipe.engines.torch_engine import TorchEngine
from emopipe.model import cudnn_epilogue, kernels
from emopipe.model.emonet import build_emonet

VARIANTS = ("default", "noepilogue", "nopdl", "nostreams", "nokernels", "sepplans", "sephandle")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--engines", type=int, default=2)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--variant", default="default", choices=VARIANTS)
    ap.add_argument("--cache", default="/tmp/pm/cache", help="the engines' cache folder (cuDNN plans, Triton)")
    args = ap.parse_args()
    options = {"noepilogue": {"cudnn_epilogue": False}, "nostreams": {"branch_streams": False},
               "nokernels": {"kernels": False}}.get(args.variant, {})
    if args.variant == "nopdl":
        kernels.PDL = False
    model = build_emonet(classes=8)
    engines = []
    for _ in range(args.engines):
        if args.variant in ("sepplans", "sephandle"):
            cudnn_epilogue._plans.clear()  # this engine reads its own plans back from the cache
        if args.variant == "sephandle":
            cudnn_epilogue._handle.cache_clear()
        engine = TorchEngine(model, EngineOptions(device="cuda", batch_size=args.batch, **options),
                             cache_dir=args.cache)
        engine.warmup()
        engines.append(engine)
    graphs = [e._graphs[args.batch].graph for e in engines]
    streams = [torch.cuda.Stream() for _ in engines]
    faulthandler.dump_traceback_later(40, exit=True)
    seconds = []
    for _ in range(30):
        torch.cuda.synchronize()
        start = time.perf_counter()
        main_stream = torch.cuda.current_stream()
        for graph, stream in zip(graphs, streams, strict=True):
            stream.wait_stream(main_stream)
            with torch.cuda.stream(stream):
                graph.replay()
        for stream in streams:
            main_stream.wait_stream(stream)
        torch.cuda.synchronize()
        seconds.append(time.perf_counter() - start)
    faulthandler.cancel_dump_traceback_later()
    median = statistics.median(seconds[5:])
    faces = args.engines * args.batch
    print(f"{args.variant} k={args.engines} b={args.batch}: {faces / median:.0f} faces/s "
          f"({median * 1000:.2f} ms per {faces})", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
