"""The Triton glue kernels on the GPU: same outputs as the PyTorch expressions they replace.

    python3 scripts/kernels_parity.py

EmoNet (random official-format weights) on 64 random crops through the product's engine with
``kernels`` on and off, fp32 (TF32 off), fp16 and bf16, without CUDA graphs; prints the largest
differences of probabilities, valence and arousal, and how many slices the kernels wrote per batch.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from checkpoints import random_state  # noqa: E402

from emopipe import kernels  # noqa: E402
from emopipe.emonet import build_emonet  # noqa: E402
from emopipe.engine import EngineOptions, TorchEngine  # noqa: E402


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
                                                      cuda_graphs=False))
            outs[on] = engine.infer(crops)
            slices[on] = len(calls)
        d = {name: float((getattr(outs[True], name) - getattr(outs[False], name)).abs().max())
             for name in ("probabilities", "valence", "arousal")}
        same_class = float((outs[True].probabilities.argmax(1) == outs[False].probabilities.argmax(1)).float().mean())
        print(f"{precision}: kernels on vs off, max |Δ| {d}, same class {same_class:.2%}, "
              f"kernel calls writing residual slices, on / off: {slices[True]} / {slices[False]}")
        worst = max(worst, max(d.values()) / {"fp32": 1e-4, "fp16": 1e-2, "bf16": 5e-2}[precision])
    return 0 if worst <= 1 else 1


if __name__ == "__main__":
    raise SystemExit(main())
