"""Programmatic dependent launch for the Triton glue kernels: on against off, same process.

    python3 scripts/pdl_probe.py

Builds the default engine (CUDA graphs) at batch 1 and 256 twice — glue kernels launched plainly, then
as programmatic dependent launches (``emopipe.kernels.PDL``) — checks that the outputs are
bit-identical on 10 inputs, then times graph replays of both, interleaved (CUDA events, medians).
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from emopipe.engines.base import EngineOptions  # noqa: I001

from emopipe.engines.torch_engine import TorchEngine
from emopipe.model import kernels
from emopipe.model.emonet import build_emonet


def replay_ms(engine: TorchEngine, batch: int) -> float:
    graph = engine._graphs[batch].graph
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    graph.replay()
    end.record()
    end.synchronize()
    return start.elapsed_time(end)


def main() -> int:
    model = build_emonet(classes=8)
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, capability "
          f"{torch.cuda.get_device_capability()}")
    ok = True
    for batch, repeats in ((1, 300), (256, 40)):
        engines = {}
        for pdl in (False, True):
            kernels.PDL = pdl
            engines[pdl] = TorchEngine(model, EngineOptions(device="cuda", batch_size=batch))
            engines[pdl].warmup()
        kernels.PDL = None
        inputs = [torch.rand(batch, 3, 256, 256, generator=torch.Generator().manual_seed(s)).cuda() for s in range(10)]
        d = max(float((getattr(engines[True].infer(x), n) - getattr(engines[False].infer(x), n)).abs().max())
                for x in inputs for n in ("probabilities", "valence", "arousal"))
        ok &= d == 0.0
        times: dict[bool, list[float]] = {False: [], True: []}
        for _ in range(repeats):
            for pdl in (False, True):
                times[pdl].append(replay_ms(engines[pdl], batch))
        off, on = statistics.median(times[False]), statistics.median(times[True])
        print(f"batch {batch}: graph replay median {off:.3f} ms plain, {on:.3f} ms with PDL "
              f"({(on / off - 1) * 100:+.1f} %; {batch / off * 1000:.0f} → {batch / on * 1000:.0f} faces/s); "
              f"outputs max |Δ| {d:g}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
