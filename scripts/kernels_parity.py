"""The Triton glue kernels and the branch streams on the GPU: same outputs as the plain schedule.

    python3 scripts/kernels_parity.py

EmoNet (random official-format weights) on 64 random crops through the product's engine with
``kernels`` on and off, fp32 (TF32 off), fp16 and bf16, without CUDA graphs; prints the largest
differences of probabilities, valence and arousal, and how many slices the kernels wrote per batch.
Then ``branch_streams`` on and off (fp16, CUDA graphs, batches of 1 and 64, 20 different inputs
each; a race between the streams inside a replay would show as a difference): the outputs must
be bit-identical. Then, where cuDNN's frontend is installed, ``cudnn_epilogue`` on and off (fp16 and
bf16, CUDA graphs, batches of 1 and 64): the same function up to rounding (it rounds each sum once).
Last, CUDA graph replay against the eager engine (uint8 and float crops, landmarks on): bit-identical too.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from checkpoints import random_state  # noqa: E402

from emopipe.engines.base import EngineOptions  # noqa: E402
from emopipe.engines.torch_engine import TorchEngine  # noqa: E402
from emopipe.model import cudnn_epilogue, kernels  # noqa: E402
from emopipe.model.emonet import build_emonet  # noqa: E402


def main() -> int:
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    model = build_emonet(random_state(8, seed=2))
    crops = torch.rand(64, 3, 256, 256, generator=torch.Generator().manual_seed(0)).cuda()
    calls = []
    original = kernels.add_residual_slice
    kernels.add_residual_slice = lambda *a, **k: calls.append(1) or original(*a, **k)
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, Triton installed: {kernels.triton_installed()}")
    worst = 0.0
    for precision in ("fp32", "fp16", "bf16"):
        outs, slices = {}, {}
        for on in (True, False):
            calls.clear()
            engine = TorchEngine(model, EngineOptions(device="cuda", precision=precision, batch_size=64, kernels=on,
                                                      cuda_graphs=False, cudnn_epilogue=False))
            outs[on] = engine.infer(crops)
            slices[on] = len(calls)
        d = {name: float((getattr(outs[True], name) - getattr(outs[False], name)).abs().max())
             for name in ("probabilities", "valence", "arousal")}
        same_class = float((outs[True].probabilities.argmax(1) == outs[False].probabilities.argmax(1)).float().mean())
        print(f"{precision}: kernels on vs off, max |Δ| {d}, same class {same_class:.2%}, "
              f"kernel calls writing residual slices, on / off: {slices[True]} / {slices[False]}")
        worst = max(worst, max(d.values()) / {"fp32": 1e-4, "fp16": 1e-2, "bf16": 5e-2}[precision])
    identical = True
    for batch in (1, 64):
        engines = {on: TorchEngine(model, EngineOptions(device="cuda", batch_size=batch, branch_streams=on))
                   for on in (True, False)}
        for engine in engines.values():
            engine.warmup()
        inputs = [torch.rand(batch, 3, 256, 256, generator=torch.Generator().manual_seed(s)).cuda() for s in range(20)]
        runs = {on: [engine.infer(x) for x in inputs] for on, engine in engines.items()}
        d = max(float((getattr(a, name) - getattr(b, name)).abs().max())
                for a, b in zip(runs[True], runs[False]) for name in ("probabilities", "valence", "arousal"))
        identical &= d == 0.0
        print(f"fp16 CUDA graphs b{batch}: branch streams on vs off, 20 inputs, max |Δ| {d:g}")
    if cudnn_epilogue.installed():
        reference = TorchEngine(model, EngineOptions(device="cuda", precision="fp32", batch_size=64, cuda_graphs=False))
        want = reference.infer(crops)
        for precision in ("fp16", "bf16"):
            for batch in (1, 64):
                engines = {on: TorchEngine(model, EngineOptions(device="cuda", precision=precision, batch_size=batch,
                                                                cudnn_epilogue=on)) for on in (True, False)}
                for engine in engines.values():
                    engine.warmup()
                outs = {on: engine.infer(crops[:batch]) for on, engine in engines.items()}
                d = {name: float((getattr(outs[True], name) - getattr(outs[False], name)).abs().max())
                     for name in ("probabilities", "valence", "arousal")}
                err = {on: float((outs[on].valence - want.valence[:batch]).abs().max()) for on in (True, False)}
                print(f"{precision} b{batch} CUDA graphs: cuDNN epilogue on vs off, max |Δ| {d}; |Δvalence| against "
                      f"fp32, on / off: {err[True]:.4f} / {err[False]:.4f}; "
                      f"on: {engines[True].options.cudnn_epilogue}")
                worst = max(worst, max(d.values()) / {"fp16": 1e-2, "bf16": 5e-2}[precision])
    else:
        print("cuDNN frontend not installed: epilogue fusion not compared")
    # CUDA graph replay (input converted by one kernel, outputs packed into one host copy) against the
    # same engine settings without graphs: uint8 and float crops, with landmarks
    engines = {on: TorchEngine(model, EngineOptions(device="cuda", batch_size=8, cuda_graphs=on, landmarks=True))
               for on in (True, False)}
    for engine in engines.values():
        engine.warmup()
    floats = torch.rand(8, 3, 256, 256, generator=torch.Generator().manual_seed(7)).cuda()
    for crops in (floats, (floats * 255).to(torch.uint8)):
        a, b = engines[True].infer(crops), engines[False].infer(crops)
        d = max(float((getattr(a, name) - getattr(b, name)).abs().max())
                for name in ("probabilities", "valence", "arousal", "landmarks"))
        identical &= d == 0.0 and a.landmarks.shape == b.landmarks.shape == (8, 68, 2)
        print(f"fp16 b8 {crops.dtype}: CUDA graph vs eager, with landmarks, max |Δ| {d:g}")
    return 0 if worst <= 1 and identical else 1


if __name__ == "__main__":
    raise SystemExit(main())
