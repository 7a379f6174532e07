"""OrtEngine on the CPU provider: parity with TorchEngine, the export cache, bad ONNX files, options."""

from __future__ import annotations

import contextlib
import re
import shutil
from pathlib import Path

import pytest
import torch

from emopipe.engines import export, parity
from emopipe.engines.base import EngineOptions
from emopipe.engines.onnxruntime_engine import CPU_PROVIDER, CUDA_PROVIDER, TENSORRT_PROVIDER, OrtEngine, plan_providers
from emopipe.engines.registry import create_engine
from emopipe.engines.torch_engine import TorchEngine
from emopipe.errors import OnnxModelError, OutputError, UsageError
from emopipe.model.emonet import build_emonet, read_checkpoint
from emopipe.model.weights import sha256_of
from emopipe.types import LABELS

# ONNX Runtime's CPU kernels against PyTorch's on the same machine: measured ~1e-7.
CPU_TOLERANCE = 1e-4


@pytest.fixture(scope="module")
def model8(checkpoints):
    return build_emonet(read_checkpoint(checkpoints[8]))


@pytest.fixture(scope="module")
def model5(checkpoints):
    return build_emonet(read_checkpoint(checkpoints[5]))


@pytest.fixture(scope="module")
def faces() -> torch.Tensor:
    """The astronaut's face and a random crop (float, [0, 1])."""
    _, real = parity.real_face_crops()
    assert real is not None
    return torch.cat([real[:1], parity.random_crops(1, seed=3)])


def _assert_close(found, expected, tolerance: float) -> None:
    assert found.probabilities.shape == expected.probabilities.shape
    assert float((found.probabilities - expected.probabilities).abs().max()) <= tolerance
    assert float((found.valence - expected.valence).abs().max()) <= tolerance
    assert float((found.arousal - expected.arousal).abs().max()) <= tolerance


def test_first_start_exported_into_the_cache(ort_fp32, checkpoints, onnx_home):
    sha = sha256_of(checkpoints[8])
    path = onnx_home / "cache" / "onnx" / f"emonet8-{sha[:16]}-b1-fp32.onnx"
    assert ort_fp32.exported == [path]
    assert path.is_file()
    assert ort_fp32.model_file == path and ort_fp32.info()["onnx"] == path.name
    assert ort_fp32.active_providers == [CPU_PROVIDER]


def test_parity_with_torch_engine(ort_fp32, model8, faces):
    torch_engine = TorchEngine(model8, EngineOptions(device="cpu", batch_size=1))
    assert ort_fp32.labels == torch_engine.labels == LABELS[8]
    outputs = []
    for crops in (faces[:1], faces[1:], (faces[:1] * 255).round().to(torch.uint8)):
        expected, found = torch_engine.infer(crops), ort_fp32.infer(crops)
        assert found.probabilities.dtype == torch.float32 and found.landmarks is None
        _assert_close(found, expected, CPU_TOLERANCE)
        assert torch.allclose(found.probabilities.sum(dim=1), torch.ones(1), atol=1e-5)
        outputs.append(found)
    # The crops differ, so the outputs must too: parity is not two constant functions agreeing.
    assert float((outputs[0].valence - outputs[1].valence).abs()) > 10 * CPU_TOLERANCE


def test_second_start_reuses_the_export(ort_fp32, model8, checkpoints, onnx_home):
    path = ort_fp32.model_file
    before = path.stat().st_mtime_ns
    files = sorted(path.parent.iterdir())
    engine = create_engine("onnxruntime", model8, EngineOptions(device="cpu", batch_size=1),
                           checkpoint_sha256=sha256_of(checkpoints[8]), models_dir=onnx_home)
    assert isinstance(engine, OrtEngine)
    assert engine.exported == []
    assert engine.model_file == path and engine.info()["backend"] == "onnxruntime"
    assert path.stat().st_mtime_ns == before
    assert sorted(path.parent.iterdir()) == files


def test_warmup_reports_the_static_shape(ort_fp32):
    report = ort_fp32.warmup([1])
    assert ort_fp32.warmup_report is report
    assert report.shapes == [(1, 3, 256, 256)]
    assert len(report.seconds_per_shape) == 1 and report.seconds > 0
    assert report.settings["providers"] == "CPU"
    assert report.settings["precision"] == "fp32"
    assert "conv_algo_search=n/a" in report.describe()


def test_infer_rejects_crops_of_the_wrong_size(ort_fp32):
    with pytest.raises(ValueError, match=r"N×3×256×256"):
        ort_fp32.infer(torch.zeros(1, 3, 128, 128))


def test_landmarks_and_five_classes_at_batch_two(model5, checkpoints, onnx_home, faces):
    options = EngineOptions(device="cpu", batch_size=2, landmarks=True)
    engine = OrtEngine(model5, options, checkpoint_sha256=sha256_of(checkpoints[5]), models_dir=onnx_home)
    assert engine.labels == LABELS[5]
    assert engine.exported and engine.exported[0].name.endswith("-b2-fp32-landmarks.onnx")
    expected = TorchEngine(model5, options).infer(faces)
    found = engine.infer(faces)
    assert found.probabilities.shape == (2, 5)
    _assert_close(found, expected, CPU_TOLERANCE)
    assert found.landmarks is not None and found.landmarks.shape == (2, 68, 2)
    assert float((found.landmarks - expected.landmarks).norm(dim=-1).mean()) <= 0.5
    assert float(found.landmarks.min()) >= 0 and float(found.landmarks.max()) <= 256


# -- bad files -------------------------------------------------------------------------------------

def _tiny_onnx(path: Path, input_shape: tuple[int, ...], metadata: dict[str, str] | None) -> Path:
    """A valid ONNX graph that is not EmoNet: crops → Identity."""
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Identity", ["crops"], ["probabilities"])], "tiny",
        [helper.make_tensor_value_info("crops", TensorProto.FLOAT, list(input_shape))],
        [helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, list(input_shape))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    for key, value in (metadata or {}).items():
        entry = model.metadata_props.add()
        entry.key, entry.value = key, value
    onnx.save(model, path)
    return path


def _spec(checkpoints, classes=8, batch=1) -> export.OnnxSpec:
    return export.OnnxSpec(sha256_of(checkpoints[classes]), classes, batch, "fp32")


BAD_FILES = {
    "not ONNX": (lambda tmp, real, cp: tmp.write_bytes(b"this is not a model\n" * 100), 8, 1,
                 "is not a usable ONNX model"),
    "truncated": (lambda tmp, real, cp: tmp.write_bytes(real.read_bytes()[:1_000_000]), 8, 1,
                  "is not a usable ONNX model"),
    "missing": (lambda tmp, real, cp: None, 8, 1, "ONNX model not found"),
    "a folder": (lambda tmp, real, cp: tmp.mkdir(), 8, 1, r"model\.onnx is a directory, not an ONNX model file"),
    "no emopipe metadata": (lambda tmp, real, cp: _tiny_onnx(tmp, (1, 3, 256, 256), None), 8, 1,
                            "was not exported by emopipe"),
    "wrong input shape": (lambda tmp, real, cp: _tiny_onnx(tmp, (1, 3, 128, 128), _spec(cp).metadata()), 8, 1,
                          r"has input crops fp32 \(1, 3, 128, 128\), expected fp32 \(1, 3, 256, 256\)"),
    "wrong class count": (lambda tmp, real, cp: shutil.copy(real, tmp), 5, 1,
                          r"8 expression classes \(the checkpoint has 5\)"),
    "wrong batch": (lambda tmp, real, cp: shutil.copy(real, tmp), 8, 2, r"static batch 1 \(this run uses 2\)"),
}


@pytest.mark.parametrize("case", list(BAD_FILES))
def test_bad_onnx_file_gives_one_clear_line(case, tmp_path, ort_fp32, checkpoints, model8, model5):
    make, classes, batch, message = BAD_FILES[case]
    target = tmp_path / "model.onnx"
    make(target, ort_fp32.model_file, checkpoints)
    model = model8 if classes == 8 else model5
    with pytest.raises(OnnxModelError, match=message) as caught:
        OrtEngine(model, EngineOptions(device="cpu", batch_size=batch), onnx_path=target,
                  checkpoint_sha256=sha256_of(checkpoints[classes]))
    assert "\n" not in str(caught.value)
    assert caught.value.exit_code == 6


def test_export_of_other_weights_is_refused(ort_fp32, model8):
    other = "0" * 64
    with pytest.raises(OnnxModelError, match=f"checkpoint sha256 .* \\(expected {other}\\)"):
        OrtEngine(model8, EngineOptions(device="cpu", batch_size=1), onnx_path=ort_fp32.model_file,
                  checkpoint_sha256=other)


def _outdated(path: Path, real: Path) -> None:
    """The session's export, as an emopipe of another ONNX format would have left it."""
    import onnx

    model = onnx.load(str(real))
    for entry in model.metadata_props:
        if entry.key in ("emopipe.format", "emopipe.version"):
            entry.value = "99" if entry.key == "emopipe.format" else "0.0.1-ancient"
    onnx.save(model, path)


DAMAGED = {
    "garbage": (lambda path, real: path.write_bytes(b"\x00garbage" * 64), "is not a usable ONNX model"),
    "empty": (lambda path, real: path.write_bytes(b""), "is not a usable ONNX model"),
    "truncated": (lambda path, real: path.write_bytes(real.read_bytes()[:1_000_000]), "is not a usable ONNX model"),
    "another format": (_outdated, r"in emopipe's ONNX format 99 \(exported by emopipe 0.0.1-ancient\); emopipe .* "
                                  "reads format 1"),
}


@pytest.mark.parametrize("case", list(DAMAGED))
def test_damaged_or_outdated_cache_file_is_exported_again(case, tmp_path, ort_fp32, checkpoints, model8,
                                                          monkeypatch, caplog):
    make, reason = DAMAGED[case]
    spec = _spec(checkpoints)
    cached = export.cache_dir(tmp_path) / spec.file_name
    cached.parent.mkdir(parents=True)
    make(cached, ort_fp32.model_file)
    exports = []

    def exported(model, spec, path, check=None):  # the session's good export stands in for a new one (~20 s here)
        import onnx

        exports.append(path)
        export.save_onnx(onnx.load(str(ort_fp32.model_file)), path, check)
        return path

    monkeypatch.setattr(export, "export_emonet", exported)
    engine = OrtEngine(model8, EngineOptions(device="cpu", batch_size=1), checkpoint_sha256=spec.checkpoint_sha256,
                       models_dir=tmp_path, verify_exports=False)
    assert exports == [cached] and engine.exported == [cached] and engine.model_file == cached
    assert cached.read_bytes() == ort_fp32.model_file.read_bytes()
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warned) == 1 and str(cached) in warned[0] and warned[0].endswith("; exporting it again")
    assert re.search(reason, warned[0])


@pytest.mark.parametrize("case", list(DAMAGED))
def test_ensure_onnx_exports_a_damaged_or_outdated_cache_file_again(case, tmp_path, monkeypatch, checkpoints, model8,
                                                                   caplog):
    """ensure_onnx (benchmarks/ort_vs_torch.py's exports) used any file of the right name; it treats the cache as the
    engine does: a damaged or outdated file is exported again, with one warning that says why."""
    spec = _fake_exporter(tmp_path, monkeypatch, checkpoints)
    good = export.export_emonet(model8, spec, tmp_path / "good" / spec.file_name)
    make, reason = DAMAGED[case]
    cached = tmp_path / "cache" / spec.file_name
    cached.parent.mkdir()
    make(cached, good)
    if case == "truncated":  # (this graph is smaller than the session's export: cut it in half)
        cached.write_bytes(good.read_bytes()[:good.stat().st_size // 2])
    assert export.ensure_onnx(model8, spec, cached.parent) == (cached, True)
    assert export.read_spec(cached) == spec
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warned) == 1 and str(cached) in warned[0] and warned[0].endswith("; exporting it again")
    assert re.search(reason, warned[0])
    assert export.ensure_onnx(model8, spec, cached.parent) == (cached, False)  # a good one is used as it is


def test_a_new_export_that_fails_its_check_never_takes_the_cache_name(tmp_path, ort_fp32, checkpoints, model8,
                                                                     monkeypatch):
    """The engine's cache export took its final name before it was compared with PyTorch: a failing export sat there
    while it was checked (a run killed then left it for the next to reuse unchecked). It is checked under its
    temporary name now, as `emopipe export-onnx`'s is; only one that passes takes the name."""
    import onnx

    spec = _spec(checkpoints)
    cached = export.cache_dir(tmp_path) / spec.file_name
    # the session's good export stands in for a new one (~20 s on this CPU)
    monkeypatch.setattr(export, "emonet_proto", lambda model, spec: onnx.load(str(ort_fp32.model_file)))
    seen = []

    def differs(infer, model, spec, crops, tolerance=None):  # the new export's outputs differ from PyTorch's
        seen.append(cached.exists())
        return [parity.Parity("random crops", 2, 0.5, 0.0, 0.0, parity.TOLERANCES["fp32"])]

    monkeypatch.setattr(parity, "check_parity", differs)
    options = EngineOptions(device="cpu", batch_size=1)
    with pytest.raises(OnnxModelError, match=r"the new ONNX export differs from PyTorch on random crops: "
                                             r"probabilities 5.00e-01 > 1e-03 \(the export was not kept\)$") as caught:
        OrtEngine(model8, options, checkpoint_sha256=spec.checkpoint_sha256, models_dir=tmp_path)
    assert "\n" not in str(caught.value) and caught.value.exit_code == 6
    assert seen == [False]  # checked before it had the cache's name
    assert list(cached.parent.iterdir()) == []  # nothing under the final name, no temporary file left
    monkeypatch.undo()  # the same export, checked for real, takes its name
    monkeypatch.setattr(export, "emonet_proto", lambda model, spec: onnx.load(str(ort_fp32.model_file)))
    engine = OrtEngine(model8, options, checkpoint_sha256=spec.checkpoint_sha256, models_dir=tmp_path)
    assert engine.exported == [cached] and engine.model_file == cached and engine.info()["onnx"] == cached.name
    assert [p.name for p in cached.parent.iterdir()] == [cached.name]
    assert torch.equal(engine.infer(torch.zeros(1, 3, 256, 256)).probabilities,
                       ort_fp32.infer(torch.zeros(1, 3, 256, 256)).probabilities)


def test_an_outdated_file_given_by_path_is_refused(tmp_path, ort_fp32, checkpoints, model8):
    target = tmp_path / "model.onnx"
    _outdated(target, ort_fp32.model_file)
    with pytest.raises(OnnxModelError, match=r"ONNX format 99 .*; export it again with `emopipe export-onnx --force`"):
        OrtEngine(model8, EngineOptions(device="cpu", batch_size=1), onnx_path=target,
                  checkpoint_sha256=sha256_of(checkpoints[8]))


def _fake_exporter(tmp_path: Path, monkeypatch, checkpoints) -> export.OnnxSpec:
    """torch.onnx.export gives a tiny graph at once: these tests are about how the file is written."""
    import onnx

    tiny = _tiny_onnx(tmp_path / "tiny.onnx", (1, 3, 256, 256), None)

    def exported(*args, **kwargs):  # a new program each time: the export adds its metadata to the proto
        return type("Program", (), {"model_proto": onnx.load(str(tiny))})

    monkeypatch.setattr(torch.onnx, "export", exported)
    return _spec(checkpoints)


def test_export_replaces_the_file_whole_while_another_writer_races(tmp_path, monkeypatch, checkpoints, model8):
    import onnx

    spec = _fake_exporter(tmp_path, monkeypatch, checkpoints)
    target = tmp_path / "cache" / spec.file_name
    real_save, raced = onnx.save, []

    def save(proto, f):  # while this writer's file is half done, a second export of the same file runs to its end
        real_save(proto, f)
        if not raced:
            raced.append(True)
            export.export_emonet(model8, spec, target)

    monkeypatch.setattr(onnx, "save", save)
    assert export.export_emonet(model8, spec, target) == target
    assert raced and export.read_spec(target) == spec
    assert sorted(p.name for p in target.parent.iterdir()) == [target.name]  # no part file left behind


def test_what_a_killed_export_left_in_the_cache_goes_with_the_next_export(tmp_path, monkeypatch, checkpoints, model8):
    """An export killed while it wrote (SIGKILL, out of memory) left its temporary file (~56 MB) in the cache, which
    nothing removed; the next export of that file removes it (one a live process holds stays: test_records.py)."""
    spec = _fake_exporter(tmp_path, monkeypatch, checkpoints)
    target = tmp_path / "cache" / spec.file_name
    target.parent.mkdir()
    left = target.with_name(f".{target.name}.1.part")  # (unlocked: its writer is gone)
    left.write_bytes(b"half a model")
    assert export.export_emonet(model8, spec, target) == target
    assert [p.name for p in target.parent.iterdir()] == [target.name] and export.read_spec(target) == spec


def test_a_failed_write_leaves_no_file_under_the_final_name(tmp_path, monkeypatch, checkpoints, model8):
    import onnx

    spec = _fake_exporter(tmp_path, monkeypatch, checkpoints)

    def full_disk(proto, f):
        with open(f, "ab") if isinstance(f, (str, Path)) else contextlib.nullcontext(f) as out:
            out.write(b"half a model")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(onnx, "save", full_disk)
    target = tmp_path / "cache" / spec.file_name
    with pytest.raises(OutputError, match="No space left"):
        export.export_emonet(model8, spec, target)
    assert list(target.parent.iterdir()) == []


def test_a_folder_at_the_caches_name_is_said_before_exporting(tmp_path, monkeypatch, checkpoints, model8):
    # (was: the whole export and its check, then "cannot write …: Is a directory")
    def no_export(*args, **kwargs):
        raise AssertionError("exported before the folder in the way was found")

    monkeypatch.setattr(export, "export_emonet", no_export)
    sha = sha256_of(checkpoints[8])
    folder = tmp_path / "models" / "cache" / "onnx" / export.OnnxSpec(sha, 8, 1, "fp32").file_name
    folder.mkdir(parents=True)
    monkeypatch.delenv("EMOPIPE_CACHE", raising=False)
    with pytest.raises(OutputError, match=rf"^cannot write {re.escape(str(folder))}: a folder has its name in the ONNX "
                                          r"cache; move it away"):
        OrtEngine(model8, EngineOptions(device="cpu", batch_size=1), checkpoint_sha256=sha,
                  models_dir=tmp_path / "models")
    assert folder.is_dir()


def test_a_cache_it_cannot_write_is_said_before_the_export(tmp_path, monkeypatch, checkpoints, model8):
    # a read-only models volume whose cache/onnx is there: was said only after the whole export (~20-40 s on a CPU)
    def read_only(path, **kwargs):
        raise OSError(30, "Read-only file system")

    def no_export(*args, **kwargs):
        raise AssertionError("exported before the cache was found unwritable")

    monkeypatch.setattr(export, "written_whole", read_only)
    monkeypatch.setattr(export, "emonet_proto", no_export)
    monkeypatch.delenv("EMOPIPE_CACHE", raising=False)
    (tmp_path / "models" / "cache" / "onnx").mkdir(parents=True)
    with pytest.raises(OutputError, match=r"cannot write .*\.onnx: Read-only file system; set EMOPIPE_CACHE"):
        OrtEngine(model8, EngineOptions(device="cpu", batch_size=1), checkpoint_sha256=sha256_of(checkpoints[8]),
                  models_dir=tmp_path / "models")


def test_emopipe_cache_moves_the_cache_off_a_read_only_models_dir(tmp_path, ort_fp32, checkpoints, model8,
                                                                 monkeypatch):
    models = tmp_path / "models"
    models.mkdir()
    (models / "cache").write_text("")  # as unwritable as a read-only folder, for root too
    options = EngineOptions(device="cpu", batch_size=1)
    sha = sha256_of(checkpoints[8])
    with pytest.raises(OutputError, match=r"cannot create .*cache/onnx: .*; set EMOPIPE_CACHE to a writable folder"):
        OrtEngine(model8, options, checkpoint_sha256=sha, models_dir=models)
    elsewhere = tmp_path / "cache"
    monkeypatch.setenv("EMOPIPE_CACHE", str(elsewhere))
    assert export.cache_dir(models) == elsewhere / "onnx"
    (elsewhere / "onnx").mkdir(parents=True)
    shutil.copy(ort_fp32.model_file, elsewhere / "onnx" / ort_fp32.model_file.name)
    engine = OrtEngine(model8, options, checkpoint_sha256=sha, models_dir=models)
    assert engine.exported == [] and engine.model_file == elsewhere / "onnx" / ort_fp32.model_file.name


# -- options ---------------------------------------------------------------------------------------

@pytest.mark.parametrize(("kwargs", "options", "message"), [
    ({}, {"precision": "bf16"}, "runs fp32 or fp16, not bf16"),
    ({"io_binding": True}, {}, "IO binding keeps crops on the GPU"),
    ({"conv_algo_search": "fastest"}, {}, "unknown cuDNN algorithm search 'fastest'"),
    ({"tensorrt": True}, {}, "TensorRT runs on a CUDA device"),
    ({}, {"compile": "default"}, "--compile .* is for the torch backend"),
])
def test_option_errors(kwargs, options, message, model8):
    with pytest.raises(UsageError, match=message):
        OrtEngine(model8, EngineOptions(device="cpu", batch_size=1, **options), checkpoint_sha256="x" * 64, **kwargs)


def test_provider_plan_cpu():
    assert plan_providers(torch.device("cpu"), [TENSORRT_PROVIDER, CUDA_PROVIDER, CPU_PROVIDER],
                          conv_algo_search="EXHAUSTIVE", cuda_graphs=False, tensorrt=False, precision="fp32",
                          tensorrt_cache=Path("/c")) == [(CPU_PROVIDER, {})]


def test_provider_plan_cuda():
    plan = plan_providers(torch.device("cuda", 1), [TENSORRT_PROVIDER, CUDA_PROVIDER, CPU_PROVIDER],
                          conv_algo_search="HEURISTIC", cuda_graphs=True, tensorrt=False, precision="fp16",
                          tensorrt_cache=Path("/c"), prefer_nhwc=True)
    assert [name for name, _ in plan] == [CUDA_PROVIDER, CPU_PROVIDER]
    cuda = plan[0][1]
    assert cuda["device_id"] == "1" and cuda["cudnn_conv_algo_search"] == "HEURISTIC"
    assert cuda["enable_cuda_graph"] == "1" and cuda["prefer_nhwc"] == "1"


def test_provider_plan_tensorrt_first_with_its_cache():
    plan = plan_providers(torch.device("cuda"), [TENSORRT_PROVIDER, CUDA_PROVIDER, CPU_PROVIDER],
                          conv_algo_search="EXHAUSTIVE", cuda_graphs=True, tensorrt=True, precision="fp16",
                          tensorrt_cache=Path("/models/cache/tensorrt"))
    assert [name for name, _ in plan] == [TENSORRT_PROVIDER, CUDA_PROVIDER, CPU_PROVIDER]
    trt, cuda = plan[0][1], plan[1][1]
    assert trt["trt_engine_cache_enable"] == "1" and trt["trt_engine_cache_path"] == "/models/cache/tensorrt"
    assert trt["trt_fp16_enable"] == "1" and trt["trt_cuda_graph_enable"] == "1"
    assert cuda["enable_cuda_graph"] == "0"  # TensorRT takes the graph; the CUDA provider gets leftovers


def test_provider_plan_without_cuda_provider_says_what_to_install():
    with pytest.raises(UsageError, match="install onnxruntime-gpu"):
        plan_providers(torch.device("cuda"), [CPU_PROVIDER], conv_algo_search="EXHAUSTIVE", cuda_graphs=False,
                       tensorrt=False, precision="fp32", tensorrt_cache=Path("/c"))


def test_state_digest_identifies_the_weights(model8):
    import copy

    digest = export.state_digest(model8)
    assert digest.startswith("state-dict:") and len(digest) == len("state-dict:") + 64
    assert export.state_digest(copy.deepcopy(model8)) == digest
    changed = copy.deepcopy(model8)
    with torch.no_grad():
        changed.conv1.bias[0] += 1e-3
    assert export.state_digest(changed) != digest


# -- the video pipeline, unchanged, on this backend ---------------------------------------------------

def _run_pipeline(video: Path, out: Path, checkpoint: Path, backend: str):
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "emopipe", str(video), "--detector", "blazeface", "--weights",
                           str(checkpoint), "--device", "cpu", "--batch-size", "1", "--backend", backend,
                           "-o", str(out)], cwd=Path(__file__).resolve().parents[1], capture_output=True, text=True,
                          timeout=600)


@pytest.mark.slow
def test_video_pipeline_end_to_end_matches_the_torch_backend(tmp_path, models_home, ort_fp32, checkpoints):
    import csv

    from tests.support.synth import moving_face_video

    # The session's export, seeded into this run's models dir as `emopipe export-onnx` would leave it.
    cache = export.cache_dir(models_home)
    cache.mkdir(parents=True)
    cached = cache / ort_fp32.model_file.name
    shutil.copy(ort_fp32.model_file, cached)
    before = cached.stat().st_mtime_ns

    video = moving_face_video(tmp_path / "clip.mp4", frames=8, empty=(4, 6))
    rows, logs = {}, {}
    for backend in ("onnxruntime", "torch"):
        out = tmp_path / f"{backend}.csv"
        done = _run_pipeline(video.path, out, checkpoints[8], backend)
        assert done.returncode == 0, done.stderr
        logs[backend] = done.stderr
        with out.open() as f:
            rows[backend] = list(csv.DictReader(f))
    assert f"onnxruntime {ort_fp32.info()['onnxruntime']}: {cached.name}" in logs["onnxruntime"]
    assert "providers CPUExecutionProvider" in logs["onnxruntime"]
    assert sorted(cache.iterdir()) == [cached] and cached.stat().st_mtime_ns == before  # used, not re-exported

    ort, reference = rows["onnxruntime"], rows["torch"]
    assert [r["frame"] for r in ort] == [str(i) for i in video.face_frames]
    assert [(r["frame"], r["x1"], r["y1"]) for r in ort] == [(r["frame"], r["x1"], r["y1"]) for r in reference]
    columns = [c for c in ort[0] if c.startswith("p_")] + ["valence", "arousal"]
    assert len(columns) == 10
    gap = max(abs(float(a[c]) - float(b[c])) for a, b in zip(ort, reference, strict=True) for c in columns)
    assert gap <= CPU_TOLERANCE


class _ReportedOptions:
    """Stands in for an InferenceSession: only the provider options it reports."""

    def __init__(self, options: dict[str, dict[str, str]]) -> None:
        self.options = options

    def get_provider_options(self) -> dict[str, dict[str, str]]:
        return self.options


@pytest.mark.parametrize(("reported", "tensorrt", "enabled"), [
    ({CUDA_PROVIDER: {"enable_cuda_graph": "1"}}, False, True),
    ({CUDA_PROVIDER: {"enable_cuda_graph": "0"}}, False, False),  # onnxruntime's silent retry without them
    ({CUDA_PROVIDER: {}}, False, True),  # a build that does not report the option: taken as asked
    ({TENSORRT_PROVIDER: {"trt_cuda_graph_enable": "True"}, CUDA_PROVIDER: {"enable_cuda_graph": "0"}}, True, True),
])
def test_cuda_graphs_are_read_back_from_the_session(reported, tensorrt, enabled):
    from emopipe.engines.onnxruntime_engine import _graphs_enabled

    assert _graphs_enabled(_ReportedOptions(reported), tensorrt) is enabled
