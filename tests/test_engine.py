"""The PyTorch engine: option resolution, warmup report, input handling, slot independence."""

from __future__ import annotations

import os

import pytest
import torch

import emopipe
from emopipe.engines.base import EngineOptions, landmarks_from_heatmaps
from emopipe.engines.registry import create_engine
from emopipe.engines.torch_engine import TorchEngine
from emopipe.errors import UsageError
from emopipe.model.devices import resolve_device
from emopipe.pipeline.batcher import StaticBatcher


@pytest.fixture(scope="module")
def model(checkpoints):
    return emopipe.load_emonet(checkpoints[8])


def test_cpu_defaults_are_the_exact_path():
    o = EngineOptions().resolved(torch.device("cpu"))
    assert (o.precision, o.channels_last, o.cuda_graphs, o.cudnn_benchmark) == ("fp32", False, False, True)
    fast = EngineOptions().resolved(torch.device("cuda"))
    assert (fast.precision, fast.channels_last, fast.cuda_graphs) == ("fp16", True, True)
    assert fast.kernels and not o.kernels  # the Triton glue kernels: CUDA only, and reported so
    assert fast.branch_streams and not o.branch_streams  # concurrent branches: CUDA streams, likewise
    # half precision on the CPU runs NHWC: oneDNN's fp16/bf16 convolutions need it (NCHW fp16 is a slow loop)
    for precision in ("fp16", "bf16"):
        assert EngineOptions(precision=precision).resolved(torch.device("cpu")).channels_last
    assert not EngineOptions(precision="fp16", channels_last=False).resolved(torch.device("cpu")).channels_last


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"precision": "fp8"}, "unknown precision"),
        ({"batch_size": 0}, "batch size"),
        ({"cuda_graphs": True}, "CUDA graphs need a CUDA device"),
        ({"compile": "fastest"}, "unknown compile mode 'fastest'"),
    ],
)
def test_bad_options(kwargs, message):
    with pytest.raises(UsageError, match=message):
        EngineOptions(**kwargs).resolved(torch.device("cpu"))


@pytest.mark.parametrize("name", ["gpu", "cuda:7", "tpu"])
def test_bad_devices(name):
    if torch.cuda.is_available() and name == "cuda:7" and torch.cuda.device_count() > 7:
        pytest.skip("this machine has 8 GPUs")
    with pytest.raises(UsageError):
        resolve_device(name)


def test_auto_device_and_unknown_backend(model):
    assert resolve_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")
    with pytest.raises(UsageError, match="choose from torch, onnxruntime"):
        create_engine("tensorflow", model, EngineOptions(device="cpu"))


def test_warmup_report_and_uint8_equals_float(model):
    engine = TorchEngine(model, EngineOptions(device="cpu", batch_size=2))
    report = engine.warmup()
    assert report.shapes == [(2, 3, 256, 256)] and report.seconds > 0
    assert "warmed up 1 shape(s)" in report.describe() and "cudnn_benchmark=True" in report.describe()
    u8 = torch.randint(0, 256, (2, 3, 256, 256), dtype=torch.uint8)
    a, b = engine.infer(u8), engine.infer(u8.float() / 255)
    torch.testing.assert_close(a.probabilities, b.probabilities)
    assert a.probabilities.shape == (2, 8) and torch.allclose(a.probabilities.sum(1), torch.ones(2))
    assert a.landmarks is None and a.valence.dtype == torch.float32
    with pytest.raises(ValueError, match="N×3×256×256"):
        engine.infer(torch.zeros(2, 3, 128, 128))


def test_a_face_result_does_not_depend_on_its_batch_or_slot(model):
    engine = TorchEngine(model, EngineOptions(device="cpu", batch_size=3, landmarks=True))
    faces = torch.rand(4, 3, 256, 256)
    batcher: StaticBatcher[int] = StaticBatcher(3)
    # face 3 lands in slot 0 of a padded second batch; alone, it is slot 0 of its own batch of padding
    results = {}
    for batch in batcher.add(faces, 0) + batcher.flush():
        out = engine.infer(batch.crops)
        for i, slot in enumerate(batch.slots):
            results[slot.face] = (out.probabilities[i], out.valence[i], out.landmarks[i])
    alone = engine.infer(torch.cat([faces[1:2], torch.zeros(2, 3, 256, 256)]))
    torch.testing.assert_close(results[1][0], alone.probabilities[0], atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(results[1][1], alone.valence[0], atol=1e-5, rtol=1e-4)
    shuffled = engine.infer(torch.stack([faces[2], faces[3], faces[1]]))
    torch.testing.assert_close(results[1][0], shuffled.probabilities[2], atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(results[1][2], shuffled.landmarks[2])


def test_landmarks_from_heatmaps_finds_the_peaks():
    heatmap = torch.zeros(1, 68, 64, 64)
    for k in range(68):
        heatmap[0, k, k % 60 + 2, (3 * k) % 60 + 2] = 1.0
    heatmap[0, 0, 2, 3] = 0.5  # a higher right neighbour pulls landmark 0 a quarter cell right
    points = landmarks_from_heatmaps(heatmap)[0]
    assert points.shape == (68, 2)
    for k in range(1, 68):
        assert points[k].tolist() == [((3 * k) % 60 + 2.5) * 4, (k % 60 + 2.5) * 4]
    assert points[0].tolist() == [(2 + 0.25 + 0.5) * 4, (2 + 0.5) * 4]


@pytest.mark.parametrize("fp32_head", [True, False])
def test_half_precision_keeps_the_final_linear_layers_in_float32(model, fp32_head):
    engine = TorchEngine(model, EngineOptions(device="cpu", precision="fp16", batch_size=2, fp32_head=fp32_head))
    fused = engine.model
    head = torch.float32 if fp32_head else torch.float16
    assert fused.fc1.weight.dtype == fused.fc2.weight.dtype == head
    assert fused.stem.conv.weight.dtype == torch.float16  # the convolutions stay in half precision
    assert engine.info()["fp32_head"] == str(fp32_head).lower()
    # (tests/test_accuracy.py runs this fp16 path, head included, against fp32 on real faces)


def test_compiled_kernels_are_cached_beside_the_weights(model, tmp_path, monkeypatch):
    """Triton's and Inductor's caches go to <models>/cache, so a restarted container skips compiling."""
    for name in ("TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR"):
        monkeypatch.setenv(name, "")  # recorded, so what the engine sets is undone after the test
        monkeypatch.delenv(name)
    create_engine("torch", model, EngineOptions(device="cpu", batch_size=1), models_dir=tmp_path)
    assert os.environ["TRITON_CACHE_DIR"] == str(tmp_path / "cache" / "triton")
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / "cache" / "inductor")
    monkeypatch.setenv("TRITON_CACHE_DIR", "/elsewhere")  # the user's own setting wins
    create_engine("torch", model, EngineOptions(device="cpu", batch_size=1), models_dir=tmp_path)
    assert os.environ["TRITON_CACHE_DIR"] == "/elsewhere"
