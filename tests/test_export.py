"""EmoNet → ONNX: the exported graph and its metadata, the parity machinery, `emopipe export-onnx`."""

from __future__ import annotations

import dataclasses
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import emopipe
from emopipe.cli import app as cli
from emopipe.engines import export, parity
from emopipe.errors import InputNotFoundError, InputUnreadableError, OnnxModelError, UsageError
from emopipe.model.weights import sha256_of
from emopipe.types import LABELS, EngineOutput

REPO = Path(__file__).resolve().parents[1]


def test_exported_graph_and_metadata(ort_fp32, checkpoints):
    import onnx

    path = ort_fp32.model_file
    onnx.checker.check_model(str(path), full_check=True)
    model = onnx.load(str(path))
    props = {p.key: p.value for p in model.metadata_props}
    assert props["emopipe.checkpoint_sha256"] == sha256_of(checkpoints[8])
    assert props["emopipe.classes"] == "8"
    assert props["emopipe.labels"] == ",".join(LABELS[8])
    assert props["emopipe.precision"] == "fp32"
    assert props["emopipe.batch_size"] == "1"
    assert props["emopipe.landmarks"] == "false"
    assert props["emopipe.version"] == emopipe.__version__
    assert "dynamo" in props["emopipe.exporter"]

    def described(values):
        return [(v.name, v.type.tensor_type.elem_type, [d.dim_value for d in v.type.tensor_type.shape.dim])
                for v in values]

    float32 = onnx.TensorProto.FLOAT
    assert described(model.graph.input) == [("crops", float32, [1, 3, 256, 256])]
    assert described(model.graph.output) == [("probabilities", float32, [1, 8]), ("valence", float32, [1]),
                                             ("arousal", float32, [1])]
    assert export.OnnxSpec.from_metadata(props, path) == export.OnnxSpec(sha256_of(checkpoints[8]), 8, 1, "fp32")


def test_spec_metadata_round_trip_and_file_name():
    spec = export.OnnxSpec("ab" * 32, 5, 32, "fp16", landmarks=True)
    assert export.OnnxSpec.from_metadata(spec.metadata(), "x.onnx") == spec
    assert spec.file_name == f"emonet5-{'ab' * 8}-b32-fp16-landmarks.onnx"
    assert list(spec.outputs) == ["probabilities", "valence", "arousal", "landmarks"]
    assert spec.outputs["landmarks"] == (32, 68, 2)
    digest_spec = export.OnnxSpec("state-dict:" + "cd" * 32, 8, 1, "fp32")
    assert digest_spec.file_name == f"emonet8-sd-{'cd' * 8}-b1-fp32.onnx"
    other = export.OnnxSpec("ef" * 32, 8, 1, "fp32")
    assert spec.differences(spec) == []
    assert len(spec.differences(other)) == 5


@pytest.mark.parametrize(("fields", "message"), [
    ({"classes": 6}, "8 or 5 expression classes"),
    ({"batch_size": 0}, "batch size must be 1 to 4096, got 0"),
    ({"batch_size": 4097}, "batch size must be 1 to 4096, got 4097"),
    ({"precision": "bf16"}, "fp32 or fp16, not 'bf16'"),
])
def test_spec_rejects(fields, message):
    values = {"checkpoint_sha256": "a" * 64, "classes": 8, "batch_size": 1, "precision": "fp32", **fields}
    with pytest.raises(UsageError, match=message):
        export.OnnxSpec(**values)


@pytest.mark.parametrize(("change", "message"), [
    (lambda m: m.clear(), "was not exported by emopipe"),
    (lambda m: m.update({"emopipe.batch_size": "many"}), "unusable emopipe metadata"),
    (lambda m: m.update({"emopipe.labels": "a,b,c,d,e,f,g,h"}), "declares labels"),
    (lambda m: m.update({"emopipe.format": "99", "emopipe.version": "0.0.1-ancient"}),
     r"in emopipe's ONNX format 99 \(exported by emopipe 0.0.1-ancient\); emopipe .* reads format 1$"),
    (lambda m: m.pop("emopipe.format"), r"ONNX format \(none\)"),
])
def test_bad_metadata(change, message):
    metadata = export.OnnxSpec("a" * 64, 8, 1, "fp32").metadata()
    change(metadata)
    with pytest.raises(OnnxModelError, match=message):
        export.OnnxSpec.from_metadata(metadata, "m.onnx")


def test_parity_verdicts():
    tolerance = parity.TOLERANCES["fp32"]
    ok = parity.Parity("random crops", 4, 1e-6, 2e-6, 3e-6, tolerance)
    assert ok.ok and ok.describe().endswith("— ok") and "≤ 1e-03" in ok.describe()
    bad = parity.Parity("real faces", 4, 1e-6, 5e-3, 3e-6, tolerance, landmarks_px=0.7)
    assert bad.failures() == ["valence 5.00e-03 > 1e-03", "landmarks 0.70 px > 0.5 px"]
    assert "EXCEEDED" in bad.describe()
    assert not parity.Parity("x", 1, math.nan, 0, 0, tolerance).ok


def test_run_in_batches_keeps_every_call_at_the_static_shape():
    seen = []

    def infer(crops: torch.Tensor) -> EngineOutput:
        seen.append(crops.shape[0])
        mean = crops.mean(dim=(1, 2, 3))
        return EngineOutput(probabilities=mean[:, None].repeat(1, 8), valence=mean, arousal=-mean)

    crops = parity.random_crops(5)
    out = parity.run_in_batches(infer, crops, batch=2)
    assert seen == [2, 2, 2]
    assert len(out) == 5
    assert torch.equal(out.valence, crops.mean(dim=(1, 2, 3)))


def test_real_face_crops(shared_dir):
    names, crops = parity.real_face_crops(shared_dir / "data" / "faces")
    assert names == ["astronaut", "1face.png", "3faces.png", "4faces.png"]
    assert crops is not None and crops.shape == (4, 3, 256, 256) and crops.dtype == torch.float32
    assert float(crops.min()) >= 0 and float(crops.max()) <= 1
    assert float(crops.std(dim=(1, 2, 3)).min()) > 0.05  # photos, not blank frames
    only_astronaut, one = parity.real_face_crops(None)
    assert only_astronaut == ["astronaut"] and one is not None and torch.equal(one[0], crops[0])


def test_face_photos_of_any_suffix_case_are_checked(tmp_path, shared_dir, caplog):
    photo = (shared_dir / "data" / "faces" / "1face.png").read_bytes()
    faces = tmp_path / "faces"
    faces.mkdir()
    for name in ("a.PNG", "b.Png", "c.png", ".hidden.png"):
        (faces / name).write_bytes(photo)
    (faces / "d.JPEG").write_bytes(_jpeg(shared_dir))
    (faces / "broken.jpg").write_bytes(b"not an image")
    (faces / "notes.txt").write_text("not a photo")
    names, crops = parity.real_face_crops(faces)
    assert names == ["astronaut", "a.PNG", "b.Png", "c.png", "d.JPEG"]
    assert crops is not None and crops.shape == (5, 3, 256, 256)
    assert any("broken.jpg" in r.getMessage() and "left out of the check" in r.getMessage() for r in caplog.records)
    sets = parity.verification_crops(1, faces)
    assert list(sets) == ["random crops", "real faces [astronaut, a.PNG, b.Png, c.png, d.JPEG]"]


def _jpeg(shared_dir: Path) -> bytes:
    import cv2

    ok, data = cv2.imencode(".jpg", cv2.imread(str(shared_dir / "data" / "faces" / "1face.png")))
    assert ok
    return data.tobytes()


def test_faces_folder_that_is_missing_empty_or_a_file_is_an_error(tmp_path):
    with pytest.raises(InputNotFoundError, match=r"--faces: folder not found: .*nowhere"):
        parity.real_face_crops(tmp_path / "nowhere")
    with pytest.raises(InputUnreadableError, match="no image files in"):
        parity.real_face_crops(tmp_path)
    (tmp_path / "x.png").write_bytes(b"not an image")
    with pytest.raises(InputUnreadableError, match="none of its images could be read"):
        parity.real_face_crops(tmp_path)
    with pytest.raises(InputUnreadableError, match="is not a folder"):
        parity.real_face_crops(tmp_path / "x.png")


# -- the command -----------------------------------------------------------------------------------

@pytest.fixture
def isolated_logging(monkeypatch):
    """cli.main() points the "emopipe" logger at this test's stderr; later tests' caplog needs it back."""
    import logging

    emopipe_logger = logging.getLogger("emopipe")
    monkeypatch.setattr(emopipe_logger, "handlers", list(emopipe_logger.handlers))
    monkeypatch.setattr(emopipe_logger, "propagate", emopipe_logger.propagate)
    monkeypatch.setattr(emopipe_logger, "level", emopipe_logger.level)


@pytest.mark.parametrize(("argv", "message"), [
    (["--batch-size", "0"], "batch sizes must be 1 to 4096, got '0'"),
    # (were internal errors, exit 1, once the weights had loaded: an overflow in torch.zeros, an allocation of 786 GB)
    (["--batch-size", "1,99999999999999999999"], "batch sizes must be 1 to 4096"),
    (["--batch-size", "1000000"], "batch sizes must be 1 to 4096"),
    (["--batch-size", "1,x"], "--batch-size takes whole numbers"),
    (["--precision", "bf16"], "--precision takes fp32 and/or fp16"),
])
def test_cli_usage_errors(argv, message, capsys, isolated_logging):
    assert cli.main(["export-onnx", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("emopipe: error:") and message in err[-1]


@pytest.mark.parametrize(("argv", "code", "message"), [
    (["--tolerance", "-1"], 2, "--tolerance must be a finite number ≥ 0, got -1.0"),
    (["--tolerance", "nan"], 2, "--tolerance must be a finite number ≥ 0, got nan"),
    (["--faces", "/nonexistent/faces"], 3, "--faces: folder not found: /nonexistent/faces"),
])
def test_cli_refuses_options_before_any_export(argv, code, message, checkpoints, tmp_path, capsys, monkeypatch,
                                               isolated_logging):
    def no_export(*args, **kwargs):
        raise AssertionError("exported before the options were checked")

    monkeypatch.setattr("emopipe.cli.export.export_emonet", no_export)
    out = tmp_path / "out"
    argv = ["export-onnx", "--weights", str(checkpoints[8]), "--batch-size", "1", "--precision", "fp32",
            "--output", str(out), *argv]
    assert cli.main(argv) == code
    assert capsys.readouterr().err.strip().splitlines()[-1] == f"emopipe: error: {message}"
    assert not out.exists()


def _format_99(model) -> tuple[str, ...]:  # what the file's name is said with, and then
    next(p for p in model.metadata_props if p.key == "emopipe.format").value = "99"
    return "is in emopipe's ONNX format 99", "; exporting it again"


def _input_renamed(model) -> tuple[str, ...]:  # metadata as its name says; its graph's input renamed
    model.graph.input[0].name = "images"
    for node in model.graph.node:
        node.input[:] = ["images" if i == export.INPUT_NAME else i for i in node.input]
    return ("has inputs ['images'], expected ['crops']; exporting it again",)


@pytest.mark.parametrize("damage", [_format_99, _input_renamed])
def test_cli_exports_again_an_outdated_file_or_one_whose_graph_does_not_fit_its_metadata(
        damage, ort_fp32, checkpoints, tmp_path, capsys, monkeypatch, isolated_logging):
    # docs/backends.md: "export-onnx treats a file already at its destination the same way" as the engine its cache —
    # a graph that does not fit its name is exported again. It was exit 6, "export it again with --force".
    import onnx

    name = ort_fp32.model_file.name
    out = tmp_path / "out"
    out.mkdir()
    model = onnx.load(str(ort_fp32.model_file))
    first, *then = damage(model)
    onnx.save(model, out / name)
    exports = _good_export_stands_in(ort_fp32, monkeypatch)
    argv = ["export-onnx", "--weights", str(checkpoints[8]), "--batch-size", "1", "--precision", "fp32",
            "--output", str(out), "--random-crops", "1"]
    assert cli.main(argv) == 0
    captured = capsys.readouterr()
    assert [spec.file_name for spec in exports] == [name]
    assert f"{out / name} {first}" in captured.err and all(words in captured.err for words in then), captured.err
    assert "--force" not in captured.err
    assert f"{out / name} (exported in" in captured.out
    assert "checking on cpu with 1 random crop(s) and 1 real face(s)" in captured.out
    assert export.read_spec(out / name).checkpoint_sha256 == sha256_of(checkpoints[8])
    assert [i.name for i in onnx.load(str(out / name)).graph.input] == [export.INPUT_NAME]


def _good_export_stands_in(ort_fp32, monkeypatch, doc: str | None = None) -> list[export.OnnxSpec]:
    """The session's good export stands in for a new one (~20 s on this CPU): the graph's; the file is written (and
    checked) as any export's. ``doc``: the new graph's doc string, to tell it from the file it replaces. Returns the
    specs exported."""
    import onnx

    exports = []

    def graph(model, spec):
        exports.append(spec)
        proto = onnx.load(str(ort_fp32.model_file))
        proto.doc_string = doc or proto.doc_string
        return proto

    monkeypatch.setattr(export, "emonet_proto", graph)
    return exports


def _never_built(monkeypatch) -> None:
    def built(*args, **kwargs):
        raise AssertionError("a model was built before the outputs were checked")

    monkeypatch.setattr("emopipe.model.emonet.build_emonet", built)
    monkeypatch.setattr("emopipe.cli.export.export_emonet", built)


@pytest.mark.parametrize("case", ["the weights", "relative and absolute", "under the weights", "named as the file",
                                  "a link named as the file", "a hard link at a temporary name"])
def test_cli_never_writes_over_its_weights(case, checkpoints, tmp_path, capsys, monkeypatch, isolated_logging):
    # (was: --output WEIGHTS built the model, then failed to make a folder of the weights file, exit 5; weights named
    # as the export, or at one of its temporary names .NAME.k.part, were written over — the latter truncated first)
    monkeypatch.chdir(tmp_path)
    weights = tmp_path / "w.pth"
    weights.write_bytes(checkpoints[8].read_bytes())
    name = f"emonet8-{sha256_of(weights)[:16]}-b1-fp32.onnx"
    out = tmp_path / "out"
    out.mkdir()
    given, output, message = "w.pth", "out", None
    if case == "the weights":
        output, message = "w.pth", "--output w.pth is the weights file, an input of this run: give a folder"
    elif case == "relative and absolute":
        output, message = str(weights), f"--output {weights} is the weights file, an input of this run"
    elif case == "under the weights":
        output, message = "w.pth/onnx", "--output w.pth/onnx: w.pth is the weights file, an input of this run"
    elif case == "named as the file":
        weights = weights.rename(out / name)
        given, output = f"out/{name}", str(out)
        message = f"the ONNX model output {out / name} is out/{name}, an input of this run: choose another --output"
    elif case == "a link named as the file":
        (out / name).symlink_to(weights)
        message = f"the ONNX model output out/{name} is w.pth, an input of this run"
    else:
        (out / f".{name}.0.part").hardlink_to(weights)  # (the first: taken and emptied)
        message = f"the ONNX model's temporary name out/.{name}.0.part is w.pth, an input of this run"
    before = weights.read_bytes()
    _never_built(monkeypatch)
    argv = ["export-onnx", "--weights", given, "--batch-size", "1", "--precision", "fp32", "--output", output]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith(f"emopipe: error: {message}") and err[-1].endswith("(outputs never overwrite inputs)")
    assert weights.read_bytes() == before


def test_a_failed_export_keeps_what_was_there_and_no_unchecked_file_takes_the_name(
        ort_fp32, checkpoints, tmp_path, capsys, monkeypatch, isolated_logging):
    # (was: a new export took the final name before it was compared with PyTorch, then was deleted if it failed: an
    # earlier good export (--force) was lost, and an export killed during the check left an unchecked file there)
    import onnx

    out = tmp_path / "out"
    out.mkdir()
    final = out / ort_fp32.model_file.name
    real_check, seen, failing = parity.check_parity, [], [True]

    def check_parity(infer, model, spec, crop_sets, tolerance):  # the real comparison, failed on demand
        seen.append(final.read_bytes() if final.exists() else None)  # what the final name holds meanwhile
        reports = real_check(infer, model, spec, crop_sets, tolerance)
        return [dataclasses.replace(r, probabilities=1.0) if failing else r for r in reports]

    monkeypatch.setattr("emopipe.cli.export.check_parity", check_parity)
    _good_export_stands_in(ort_fp32, monkeypatch, doc="the new export")
    argv = ["export-onnx", "--weights", str(checkpoints[8]), "--batch-size", "1", "--precision", "fp32",
            "--output", str(out), "--random-crops", "1"]
    assert cli.main(argv) == 6  # nothing there: nothing is left there
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.endswith("(the new export was not kept)") and "differs from PyTorch" in err
    assert seen == [None] and list(out.iterdir()) == []
    earlier = ort_fp32.model_file.read_bytes()
    final.write_bytes(earlier)  # a good earlier export: --force exports anew, and the new one fails
    assert cli.main([*argv, "--force"]) == 6
    assert capsys.readouterr().err.strip().endswith("(the new export was not kept; the file there is unchanged)")
    assert seen[1] == earlier and final.read_bytes() == earlier and list(out.iterdir()) == [final]
    failing.clear()  # one that passes takes the name
    assert cli.main([*argv, "--force"]) == 0
    assert onnx.load(str(final)).doc_string == "the new export" and list(out.iterdir()) == [final]


def test_a_folder_at_an_exports_name_is_said_before_anything_is_exported(checkpoints, tmp_path, capsys, monkeypatch,
                                                                         isolated_logging):
    # (was: every file before it exported and checked, then this one exported, ~20 s each on a CPU, before
    # "cannot write …: Is a directory")
    out = tmp_path / "out"
    name = f"emonet8-{sha256_of(checkpoints[8])[:16]}-b2-fp32.onnx"
    (out / name).mkdir(parents=True)

    def no_export(*args, **kwargs):
        raise AssertionError("exported before the folder in the way was found")

    monkeypatch.setattr("emopipe.cli.export.export_emonet", no_export)
    argv = ["export-onnx", "--weights", str(checkpoints[8]), "--batch-size", "1,2", "--precision", "fp32",
            "--output", str(out)]
    assert cli.main(argv) == 5
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err == (f"emopipe: error: cannot write {out / name}: a folder has its name; move it away "
                   "(nothing was exported)")
    assert sorted(p.name for p in out.iterdir()) == [name]


def test_cli_missing_weights(tmp_path, capsys, isolated_logging):
    assert cli.main(["export-onnx", "--weights", str(tmp_path / "nope.pth"), "--output", str(tmp_path)]) == 6
    assert "weights file not found" in capsys.readouterr().err


def _export_onnx(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "emopipe", "export-onnx", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=600)


@pytest.mark.slow
def test_cli_exports_fp16_checks_it_and_fails_beyond_tolerance(checkpoints, tmp_path):
    import onnx

    common = ["--weights", str(checkpoints[5]), "--batch-size", "1", "--precision", "fp16", "--output", str(tmp_path),
              "--random-crops", "1"]
    done = _export_onnx(*common)
    assert done.returncode == 0, done.stderr
    path = tmp_path / f"emonet5-{sha256_of(checkpoints[5])[:16]}-b1-fp16.onnx"
    assert f"{path} (exported in" in done.stdout
    # (its log line counts the comparison too: it said "exported PATH in" a time other than the line above)
    assert f"exported and checked {path} in" in done.stderr
    assert "random crops (1): max |Δ| probabilities" in done.stdout
    assert "real faces [astronaut" in done.stdout
    assert done.stdout.count("(≤ 1e-02)") == 4 and done.stdout.count("— ok") == 2
    model = onnx.load(str(path))
    props = {p.key: p.value for p in model.metadata_props}
    assert props["emopipe.precision"] == "fp16" and props["emopipe.classes"] == "5"
    assert props["emopipe.labels"] == ",".join(LABELS[5])
    assert model.graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.FLOAT16

    # Again with an impossible tolerance: the file is reused (no export), the check fails, exit code 6.
    before = path.stat().st_mtime_ns
    failed = _export_onnx(*common, "--tolerance", "1e-12")
    assert failed.returncode == 6
    assert "already there" in failed.stdout and "EXCEEDED" in failed.stdout
    last = failed.stderr.strip().splitlines()[-1]
    assert last.startswith("emopipe: error: ONNX output differs from PyTorch beyond the tolerance: fp16 batch 1")
    assert path.stat().st_mtime_ns == before  # a file that was there before is reported, not deleted


def test_valence_arousal_tolerance_follows_the_outputs_scale():
    # a fine-tuned EmoNet with valence near -10: fp16 rounds to ~3 significant digits, so |Δ| 5e-2 is right there
    # (an absolute 1e-2 refused it), while the same |Δ| on published-range outputs is a real error
    fp16 = parity.TOLERANCES["fp16"]
    big = torch.tensor([-10.0, -9.5, 8.0])
    reference = EngineOutput(probabilities=torch.full((3, 8), 0.125), valence=big, arousal=big / 2)
    found = EngineOutput(probabilities=torch.full((3, 8), 0.125), valence=big + 0.05, arousal=big / 2 - 0.03)
    scaled = parity.compare(found, reference, "10× checkpoint", fp16)
    assert scaled.scale == 10.0 and scaled.valence_arousal_limit == pytest.approx(0.1)
    assert scaled.ok, scaled.describe()
    assert "= 1e-02 × scale 10" in scaled.describe()
    small = EngineOutput(probabilities=reference.probabilities, valence=big / 10, arousal=big / 20)
    off = EngineOutput(probabilities=reference.probabilities, valence=big / 10 + 0.05, arousal=big / 20)
    published = parity.compare(off, small, "published range", fp16)
    assert published.scale == 1.0 and published.failures() == ["valence 5.00e-02 > 1e-02"]
    way_off = EngineOutput(probabilities=reference.probabilities, valence=big + 0.5, arousal=big / 2)
    assert parity.compare(way_off, reference, "10× checkpoint", fp16).failures() == ["valence 5.00e-01 > 1e-01"]


@pytest.mark.slow
def test_fp16_export_keeps_the_head_in_float32_and_passes_on_a_checkpoint_with_10x_outputs(tmp_path):
    import onnx

    from tests.support.checkpoints import random_state

    state = random_state(8, seed=3)
    final = "module.emo_fc_2.3"  # 128 → 8 logits + valence + arousal: scale valence and arousal ten-fold
    state[f"{final}.weight"][8:] *= 10
    state[f"{final}.bias"][8:] = torch.tensor([-9.0, 7.0])
    weights = tmp_path / "tenfold.pth"
    torch.save(state, weights)
    done = _export_onnx("--weights", str(weights), "--batch-size", "1", "--precision", "fp16", "--output",
                        str(tmp_path), "--random-crops", "2")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "× scale" in done.stdout and done.stdout.count("— ok") == 2  # the relative tolerance was used
    (path,) = tmp_path.glob("*.onnx")
    graph = onnx.load(str(path)).graph
    # the last two layers of the graph compute in float32: a Cast to float feeds the head
    dtypes = {v.name: v.type.tensor_type.elem_type for v in [*graph.value_info, *graph.output]}
    heads = [n for n in graph.node if n.op_type in ("Gemm", "MatMul")]
    assert len(heads) >= 2
    assert all(dtypes.get(n.output[0], onnx.TensorProto.FLOAT) == onnx.TensorProto.FLOAT for n in heads[-2:])
    assert any(n.op_type == "Cast" and any(a.name == "to" and a.i == onnx.TensorProto.FLOAT for a in n.attribute)
               for n in graph.node)


@pytest.mark.parametrize(("missing", "said"), [(("onnxscript",), "onnxscript"),
                                                (("onnx", "onnxscript"), "onnx and onnxscript")])
def test_an_export_without_the_exporters_packages_is_a_usage_error_in_a_line(missing, said, tmp_path, monkeypatch):
    # (was: exit 1, "internal error: ModuleNotFoundError: No module named 'onnx'", once the export began)
    import types

    for package in missing:
        monkeypatch.setitem(sys.modules, package, None)  # (import then raises ImportError)
    spec = export.OnnxSpec("ab" * 32, 8, 1, "fp32")
    with pytest.raises(UsageError, match=rf"exporting EmoNet to ONNX needs {said}: pip install "
                                         rf"{said.replace(' and ', ' ')}$"):
        export.export_emonet(types.SimpleNamespace(num_classes=8), spec, tmp_path / "out" / spec.file_name)
    assert not (tmp_path / "out").exists()
