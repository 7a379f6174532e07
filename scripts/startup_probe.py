"""Where process start → ready goes: one phase at a time, each ended by a device synchronisation.

    T0=$(date +%s.%N) python3 scripts/startup_probe.py [--batch 32] [--no-benchmark]

Phases: interpreter start (from T0, taken by the shell just before), ``import torch``, emopipe's
imports (Triton included), the CUDA context, building and moving the model, then the warmup split
as the engine runs it: the first eager forward (cuDNN autotuning, lazy kernel loading, Triton's
kernels loaded from its cache), two more eager forwards, the CUDA graph capture, and the four
calls through the graph. Prints one line per phase and the total.
"""

from __future__ import annotations

import os
import time

T0 = float(os.environ.get("T0", time.time()))
marks: list[tuple[str, float]] = [("interpreter start", time.time())]


def mark(name: str) -> None:
    marks.append((name, time.time()))


import argparse  # noqa: E402
import cProfile  # noqa: E402
import pstats  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import torch  # noqa: E402

mark("import torch")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from emopipe.engines import torch_engine as engine_module  # noqa: E402
from emopipe.engines.base import EngineOptions  # noqa: E402
from emopipe.engines.torch_engine import TorchEngine  # noqa: E402
from emopipe.model.emonet import build_emonet  # noqa: E402
from emopipe.model.fusion import SideStreams  # noqa: E402,F401  (the fused network's imports, Triton's among them)
from emopipe.types import INPUT_SIZE  # noqa: E402

mark("import emopipe")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--no-benchmark", action="store_true")
    parser.add_argument("--no-kernels", action="store_true", help="without the Triton glue kernels")
    parser.add_argument("--profile", action="store_true", help="cProfile the first eager forward")
    args = parser.parse_args()
    torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    mark("CUDA context")
    torch.manual_seed(0)
    engine = TorchEngine(build_emonet(classes=8), EngineOptions(device="cuda", batch_size=args.batch,
                                                                cudnn_benchmark=not args.no_benchmark,
                                                                kernels=not args.no_kernels))
    torch.cuda.synchronize()
    mark("model built, fused, on the GPU")
    # The warmup's steps, one by one (what TorchEngine.warmup and _CapturedGraph do together).
    with torch.inference_mode():
        example = torch.rand((args.batch, 3, INPUT_SIZE, INPUT_SIZE)).cuda()
        x = engine._prepare(example).clone()
        profiler = cProfile.Profile() if args.profile else None
        if profiler:
            profiler.enable()
        engine._compute(x)
        torch.cuda.synchronize()
        if profiler:
            profiler.disable()
        mark("first eager forward (tuning, kernel loading)")
        for _ in range(2):
            engine._compute(x)
        torch.cuda.synchronize()
        mark("two more eager forwards")
        engine._graphs[args.batch] = engine_module._CapturedGraph(engine, example)
        torch.cuda.synchronize()
        mark("graph capture (with its own 3 eager forwards)")
        for crops in (example, (example * 255).to(torch.uint8)) * 2:
            engine.infer(crops)
        mark("4 calls through the graph")
    previous = T0
    for name, t in marks:
        print(f"{name:48s} {t - previous:6.2f} s")
        previous = t
    print(f"{'total (process start → ready)':48s} {marks[-1][1] - T0:6.2f} s")
    if profiler:
        pstats.Stats(profiler).sort_stats("tottime").print_stats(18)
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(25)


if __name__ == "__main__":
    main()
