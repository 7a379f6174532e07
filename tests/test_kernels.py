"""emopipe.kernels: the Triton kernels, run by Triton's interpreter on the CPU (the GPU run times them)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from emopipe import kernels

HERE = Path(__file__).resolve().parent

needs_triton = pytest.mark.skipif(not kernels.triton_installed(), reason="Triton is not installed (pip install triton)")


@needs_triton
@pytest.mark.parametrize("check", ["affine_relu", "slices", "pool_upsample", "network"])
def test_kernels_under_tritons_interpreter(check):
    env = {**os.environ, "TRITON_INTERPRET": "1",
           "PYTHONPATH": os.pathsep.join([str(HERE), str(HERE.parent), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, str(HERE / "kernels_interpreted.py"), check], capture_output=True,
                          text=True, env=env, timeout=600)
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr[-3000:]


def test_kernels_only_take_dense_channels_last_cuda_tensors():
    x = torch.rand(1, 8, 4, 4).contiguous(memory_format=torch.channels_last)
    assert not kernels.applicable(x)  # a CPU tensor: the PyTorch expressions run
    assert not kernels.applicable(torch.rand(1, 8, 4, 4, device="meta"))


def test_a_triton_that_cannot_build_falls_back_with_one_warning(monkeypatch, caplog):
    """A missing C compiler or Python headers makes Triton fail at its first launch: the run goes on."""
    def broken(*args, **kwargs):
        raise RuntimeError("Failed to find C compiler. Please specify via CC environment variable.\nmore")

    monkeypatch.setattr(kernels, "affine_relu", broken)
    kernels.kernels_run_on.cache_clear()
    try:
        with caplog.at_level("WARNING", logger="emopipe.kernels"):
            assert not kernels.kernels_run_on(torch.device("cpu"))
            assert not kernels.kernels_run_on(torch.device("cpu"))  # decided once
    finally:
        kernels.kernels_run_on.cache_clear()
    warnings = [r.getMessage() for r in caplog.records]
    assert warnings == ["Triton kernels do not run on cpu (Failed to find C compiler. Please specify via CC "
                        "environment variable.): the PyTorch path runs instead"]
