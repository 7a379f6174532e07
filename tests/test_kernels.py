"""emopipe.kernels: the Triton kernels, run by Triton's interpreter on the CPU (the GPU run times them)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from emopipe.model import kernels

HERE = Path(__file__).resolve().parent

needs_triton = pytest.mark.skipif(not kernels.triton_installed(), reason="Triton is not installed (pip install triton)")


@needs_triton
@pytest.mark.parametrize("check", ["affine_relu", "slices", "pool_upsample", "attention", "network"])
def test_kernels_under_tritons_interpreter(check):
    env = {**os.environ, "TRITON_INTERPRET": "1",
           "PYTHONPATH": os.pathsep.join([str(HERE.parent), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-m", "tests.support.kernels_interpreted", check], capture_output=True,
                          text=True, env=env, timeout=600)
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr[-3000:]


CONSTEXPRS = {"BLOCK_ROWS": 32, "BLOCK_PIXELS": 16, "BLOCK_CHANNELS": 256, "WITH_ACT": True, "WITH_NEXT": True,
              "USE_PDL": None}


@needs_triton
@pytest.mark.parametrize("capability", [80, 90])  # A100, H100/H200
def test_kernels_compile_for_the_gpu(capability):
    """Triton's interpreter runs Python, not the compiler: what only the compiler refuses (a value that
    must be a compile-time constant, say) shows here, compiled to a cubin for the GPU without one."""
    import inspect

    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from emopipe.model import _triton_kernels

    compiled = []
    for name, kernel in vars(_triton_kernels).items():
        if not isinstance(kernel, triton.runtime.JITFunction) or name.startswith("_"):
            continue  # (the _helpers are inlined into the kernels that call them)
        signature = {}
        for arg in inspect.signature(kernel.fn).parameters:
            if arg in CONSTEXPRS:
                signature[arg] = "constexpr"
            elif arg.endswith("_ptr"):
                signature[arg] = "*fp32" if arg.startswith(("scale", "shift")) else "*fp16"
            else:
                signature[arg] = "i32"
        # programmatic dependent launch where the GPU has it (Hopper: sm_90)
        constexprs = {k: (capability >= 90 if k == "USE_PDL" else v) for k, v in CONSTEXPRS.items() if k in signature}
        binary = triton.compile(ASTSource(fn=kernel, signature=signature, constexprs=constexprs),
                                target=GPUTarget("cuda", capability, 32),
                                options={"enable_fp_fusion": True})  # as emopipe.kernels launches them
        assert binary.asm["cubin"], name
        compiled.append(name)
    assert sorted(compiled) == ["add_upsampled_kernel", "affine_relu_kernel", "attention_input_kernel",
                                "max_pool2x2_kernel", "max_pool_mean_kernel", "residual_slice_kernel"]


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
        with caplog.at_level("WARNING", logger="emopipe.model.kernels"):
            assert not kernels.kernels_run_on(torch.device("cpu"))
            assert not kernels.kernels_run_on(torch.device("cpu"))  # decided once
    finally:
        kernels.kernels_run_on.cache_clear()
    warnings = [r.getMessage() for r in caplog.records]
    assert warnings == ["Triton kernels do not run on cpu (Failed to find C compiler. Please specify via CC "
                        "environment variable.): the PyTorch path runs instead"]


@needs_triton
def test_tritons_cache_key_is_computed_once_on_a_thread(monkeypatch):
    """The engine starts it early so the warmup's first kernel call does not hash Triton's library itself."""
    import threading

    from triton.runtime import cache

    calls: list[str] = []
    monkeypatch.setattr(cache, "triton_key", lambda: calls.append(threading.current_thread().name))
    monkeypatch.setattr(kernels, "_triton_key_thread", None)
    kernels.start_triton_key()
    kernels.start_triton_key()  # a second engine in the same process starts nothing more
    kernels._triton_key_thread.join(timeout=30)
    assert calls == ["triton-key"]


@needs_triton
def test_a_cuda_engine_with_the_kernels_starts_it(monkeypatch):
    from emopipe.engines import torch_engine as engine
    from emopipe.model.emonet import build_emonet

    started: list[int] = []
    monkeypatch.setattr(kernels, "start_triton_key", lambda: started.append(1))
    monkeypatch.setattr(engine.TorchEngine, "_apply_backend_flags", lambda self: None)
    monkeypatch.setattr(engine, "resolve_device", lambda device: torch.device("cuda"))
    monkeypatch.setattr(engine.EngineOptions, "resolved", lambda self, device: self)
    monkeypatch.setattr(torch.nn.Module, "to", lambda self, *args, **kwargs: self)  # no GPU here
    options = engine.EngineOptions(device="cuda", precision="fp32", cuda_graphs=False, cudnn_epilogue=False)
    engine.TorchEngine(build_emonet(classes=8), options)
    engine.TorchEngine(build_emonet(classes=8), engine.EngineOptions(device="cuda", precision="fp32", kernels=False,
                                                                       cuda_graphs=False, cudnn_epilogue=False))
    assert started == [1]  # only the engine that runs the Triton kernels


class _FakeKernel:
    """A Triton kernel's two ways in: ``kernel[grid](...)`` launches; ``warmup(...)`` compiles (here: records)."""

    def __init__(self, fails: bool = False) -> None:
        self.fails, self.launched, self.compiled, self.loaded = fails, [], [], []

    def __getitem__(self, grid):  # type: ignore[no-untyped-def]
        return lambda *args, **options: self.launched.append((grid, args, options))

    def warmup(self, *args, grid, **options):  # type: ignore[no-untyped-def]
        import threading
        import types

        if self.fails:
            raise RuntimeError("ptxas fatal: this GPU has no such instruction")
        self.compiled.append((grid, args[1:], options, threading.current_thread().name))
        return types.SimpleNamespace(_init_handles=lambda: self.loaded.append(args[1]))


def test_launches_within_a_pass_are_compiled_on_threads_once_each_and_not_run(monkeypatch):
    import contextlib

    monkeypatch.setattr(torch.cuda, "device", lambda device: contextlib.nullcontext())
    kernel, broken = _FakeKernel(), _FakeKernel(fails=True)
    x = torch.zeros(4, 16)
    with kernels._compiled_ahead(torch.device("cuda")):
        kernels._run(kernel, (2,), x, 32, BLOCK=16)
        kernels._run(kernel, (3,), x, 48, BLOCK=16)  # specialised the same way (a multiple of 16): once
        kernels._run(kernel, (2,), x, 33, BLOCK=16)  # not a multiple of 16: compiled apart
        kernels._run(kernel, (2,), x, 32, BLOCK=32)  # another constant: apart
        kernels._run(broken, (1,), x, 1)  # a failure here is left to the launch, which compiles it again
        assert kernel.launched == []  # nothing runs in the pass
    assert sorted((args, options["BLOCK"]) for _, args, options, _ in kernel.compiled) == [
        ((32,), 16), ((32,), 32), ((33,), 16)]
    assert {name.startswith("emopipe-triton") for *_, name in kernel.compiled} == {True}
    assert sorted(kernel.loaded) == [32, 32, 33]  # loaded with their launchers there too, as a first launch would
    kernels._run(kernel, (2,), x, 32, BLOCK=16)  # after the pass: launched
    assert kernel.launched == [((2,), (x, 32), {"BLOCK": 16})]


def test_a_window_within_a_window_hands_its_launches_to_the_outer_one(monkeypatch):
    """EmoNet's pass within the engine's window around it and the detector's: compiled as the outer one ends."""
    import contextlib

    monkeypatch.setattr(torch.cuda, "device", lambda device: contextlib.nullcontext())
    kernel = _FakeKernel()
    x = torch.zeros(4, 16)
    with kernels._compiled_ahead(torch.device("cuda")):
        outer = kernels._compiler_here()
        with kernels.compiling_ahead(torch.device("cuda")) as ahead:
            assert ahead and kernels._compiler_here() is outer
            kernels._run(kernel, (2,), x, 32)
        assert kernels._compiler_here() is outer  # (the inner one ended without waiting or closing it)
        kernels._run(kernel, (2,), x, 33)  # (what runs beside: compiled in the same window)
        assert kernel.launched == []
    assert sorted(args for _, args, _, _ in kernel.compiled) == [(32,), (33,)]
    assert kernels._compiler_here() is None


def test_no_pass_compiles_ahead_off_cuda():
    with kernels.compiling_ahead(torch.device("cpu")) as ahead:
        assert not ahead
        assert kernels._compiler_here() is None


def test_another_threads_launches_run_while_a_pass_compiles_this_ones(monkeypatch):
    """A pass belongs to its thread: another engine's thread, launching meanwhile, runs its kernels as always."""
    import contextlib
    import threading

    monkeypatch.setattr(torch.cuda, "device", lambda device: contextlib.nullcontext())
    kernel = _FakeKernel()
    x = torch.zeros(4, 16)
    with kernels._compiled_ahead(torch.device("cuda")):
        thread = threading.Thread(target=lambda: kernels._run(kernel, (2,), x, 32))
        thread.start()
        thread.join(timeout=60)
        assert kernel.launched == [((2,), (x, 32), {})] and kernel.compiled == []
        kernels._run(kernel, (2,), x, 32)  # this thread's: compiled, not run
    assert len(kernel.launched) == 1 and len(kernel.compiled) == 1
