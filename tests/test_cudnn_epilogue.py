"""The ConvBlocks' cuDNN epilogue path (emopipe.cudnn_epilogue): wiring, fallback and when it is on.

cuDNN's fused kernels need a GPU (scripts/kernels_parity.py compares them there). Here the block
wiring is checked on the CPU against the function's documented contract, written in PyTorch: every
convolution's residual slice, next activation and the consumer's prepared input must land where the
published network would put them.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from conftest import random_state

from emopipe import cudnn_epilogue, engine
from emopipe.emonet import build_emonet
from emopipe.engine import EngineOptions
from emopipe.fusion import FusedConvBlock, fuse


def contract(x, weight, residual, out, first, scale=None, shift=None, next_act=None):  # type: ignore[no-untyped-def]
    """What conv_add_slice promises, in plain PyTorch."""
    y = F.conv2d(x, weight, padding=1)
    part = slice(first, first + y.shape[1])
    out[:, part] = y + residual[:, part]
    if next_act is not None:
        buffer, next_scale, next_shift = next_act
        buffer[:, part] = torch.relu(out[:, part] * next_scale[:, part] + next_shift[:, part])
    return torch.relu(y * scale + shift) if scale is not None else None


def _blocks(model: torch.nn.Module) -> int:
    return sum(isinstance(m, FusedConvBlock) for m in model.modules())


def test_blocks_through_the_epilogue_compute_the_published_function(monkeypatch):
    calls: list[int] = []

    def counted(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(int(kwargs.get("next_act") is not None or (len(args) > 7 and args[7] is not None)))
        return contract(*args, **kwargs)

    monkeypatch.setattr(cudnn_epilogue, "applicable", lambda x, weight: True)
    monkeypatch.setattr(cudnn_epilogue, "conv_add_slice", counted)
    reference = build_emonet(random_state(8, seed=4))
    fused = fuse(reference)
    x = torch.rand(2, 3, 256, 256).contiguous(memory_format=torch.channels_last)
    with torch.inference_mode():
        want = reference(x)
        got = fused.to(memory_format=torch.channels_last)(x)
    assert len(calls) == 3 * _blocks(fused)  # every block's three convolutions went through it
    assert sum(calls) > 0  # and blocks with one consumer prepared its input in the same call
    for name in ("expression", "valence", "arousal", "heatmap"):
        torch.testing.assert_close(getattr(got, name), getattr(want, name), atol=2e-5, rtol=1e-4)


def test_a_shape_cudnn_cannot_run_falls_back_to_the_two_pass_path(monkeypatch):
    attempts: list[int] = []

    def unsupported(*args, **kwargs):  # type: ignore[no-untyped-def]
        attempts.append(1)
        raise cudnn_epilogue.Unsupported("No valid engine configs")

    monkeypatch.setattr(cudnn_epilogue, "applicable", lambda x, weight: True)
    monkeypatch.setattr(cudnn_epilogue, "conv_add_slice", unsupported)
    reference = build_emonet(random_state(5, seed=5))
    fused = fuse(reference)
    x = torch.rand(1, 3, 256, 256)
    with torch.inference_mode():
        want, got = reference(x), fused(x)
    assert len(attempts) == _blocks(fused)  # tried once per block, then the block ran as before
    torch.testing.assert_close(got.expression, want.expression, atol=2e-5, rtol=1e-4)
    torch.testing.assert_close(got.valence, want.valence, atol=2e-5, rtol=1e-4)


def test_on_only_for_cuda_half_precision_with_the_frontend_installed(monkeypatch):
    cuda, cpu = torch.device("cuda"), torch.device("cpu")
    monkeypatch.setattr(engine, "cudnn_epilogue_installed", lambda: True)
    assert EngineOptions().resolved(cuda).cudnn_epilogue  # fp16 on CUDA by default
    assert EngineOptions(precision="bf16").resolved(cuda).cudnn_epilogue
    assert not EngineOptions(precision="fp32").resolved(cuda).cudnn_epilogue
    assert not EngineOptions(cudnn_epilogue=False).resolved(cuda).cudnn_epilogue
    assert not EngineOptions().resolved(cpu).cudnn_epilogue
    monkeypatch.setattr(engine, "cudnn_epilogue_installed", lambda: False)
    assert not EngineOptions().resolved(cuda).cudnn_epilogue  # the report says what runs


def test_not_applicable_to_cpu_tensors():
    x = torch.zeros(1, 8, 4, 4, dtype=torch.float16).contiguous(memory_format=torch.channels_last)
    w = torch.zeros(4, 8, 3, 3, dtype=torch.float16)
    assert not cudnn_epilogue.applicable(x, w)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (cuDNN's fused kernels)")
@pytest.mark.skipif(not cudnn_epilogue.installed(), reason="needs nvidia-cudnn-frontend")
def test_the_cudnn_kernel_keeps_the_contract():
    torch.manual_seed(0)
    cl = torch.channels_last
    x = torch.rand(2, 32, 16, 16, device="cuda", dtype=torch.half).contiguous(memory_format=cl)
    w = (torch.randn(16, 32, 3, 3, device="cuda") / 20).half().contiguous(memory_format=cl)
    residual = torch.randn(2, 64, 16, 16, device="cuda", dtype=torch.half).contiguous(memory_format=cl)
    scale, shift = torch.rand(1, 16, 1, 1, device="cuda") + 0.5, torch.randn(1, 16, 1, 1, device="cuda")
    outs = [torch.zeros_like(residual) for _ in range(2)]
    got = cudnn_epilogue.conv_add_slice(x, w, residual, outs[0], 16, scale, shift)
    want = contract(x.float(), w.float(), residual.float(), outs[1], 16, scale, shift)
    torch.testing.assert_close(outs[0].float(), outs[1].float(), atol=4e-3, rtol=4e-3)
    torch.testing.assert_close(got.float(), want, atol=4e-3, rtol=4e-3)


class _Stop(Exception):
    pass


@pytest.mark.parametrize("flag, expected", [([], True), (["--no-cudnn-epilogue"], False)])
def test_the_cli_switch_reaches_the_engine(flag, expected, monkeypatch, tmp_path, checkpoints):
    from synth import moving_face_video

    from emopipe import run

    seen: list[EngineOptions] = []

    def capture(backend, model, options, **kwargs):  # type: ignore[no-untyped-def]
        seen.append(options)
        raise _Stop

    monkeypatch.setattr(engine, "create_engine", capture)
    video = moving_face_video(tmp_path / "v.mp4", frames=2).path
    args = run.build_parser().parse_args([str(video), "--weights", str(checkpoints[8]), "--device", "cpu",
                                          "-o", str(tmp_path / "rows.csv"), *flag])
    with pytest.raises(_Stop):
        run.run(args)
    assert seen[0].cudnn_epilogue is expected


def test_a_graph_the_frontend_refuses_is_remembered_as_unsupported(monkeypatch):
    """Any failure to build a shape's plan sends that shape to the two-pass path, once and for all."""
    import sys
    import types

    built: list[int] = []

    def refuse(**kwargs):  # type: ignore[no-untyped-def]
        built.append(1)
        raise RuntimeError("cudnnGraphNotSupportedError: No valid engine configs")

    fake = types.SimpleNamespace(pygraph=refuse, data_type=types.SimpleNamespace(HALF=1, BFLOAT16=2, FLOAT=3))
    monkeypatch.setitem(sys.modules, "cudnn", fake)
    monkeypatch.setattr(cudnn_epilogue, "_handle", lambda device: None)
    monkeypatch.setattr(cudnn_epilogue, "_plans", {})
    x = torch.zeros(1, 8, 4, 4, dtype=torch.float16).contiguous(memory_format=torch.channels_last)
    w = torch.zeros(4, 8, 3, 3, dtype=torch.float16)
    residual = torch.zeros(1, 8, 4, 4, dtype=torch.float16).contiguous(memory_format=torch.channels_last)
    for _ in range(2):
        with pytest.raises(cudnn_epilogue.Unsupported, match="No valid engine configs"):
            cudnn_epilogue.conv_add_slice(x, w, residual, torch.empty_like(residual), 4)
    assert built == [1]  # the second call did not try again


def test_a_frontend_that_does_not_load_counts_as_absent(monkeypatch, tmp_path, caplog):
    package = tmp_path / "cudnn"
    package.mkdir()
    (package / "__init__.py").write_text("raise OSError('libcudnn.so.9: cannot open shared object file')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(__import__("sys").modules, "cudnn", raising=False)
    cudnn_epilogue.installed.cache_clear()
    try:
        assert not cudnn_epilogue.installed()
        assert "does not load" in caplog.text and "libcudnn.so.9" in caplog.text
    finally:
        cudnn_epilogue.installed.cache_clear()
