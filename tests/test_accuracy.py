"""Accuracy guard on the CPU: the fp16 path computes the fp32 function on real-face crops.

The checkpoint's head is refitted on other real-face crops so that predictions vary between faces
(a plain random checkpoint predicts one class for everything, which would make agreement trivial).
The GPU test (tests/test_gpu.py) repeats this with hundreds of faces, fp16 and bf16, on the
product's fast path (channels_last, CUDA graphs, fused network).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import cv2
import pytest
import torch

from emopipe.engines.accuracy import AGREEMENT, MAX_DELTA_P99, compare_precisions, face_photos, jittered_crops
from emopipe.model.emonet import build_emonet
from tests.support.checkpoints import calibrated_state


def _photos(shared_dir):
    extra = []
    for name in ("1face", "3faces"):
        image = cv2.cvtColor(cv2.imread(str(shared_dir / "data" / "faces" / f"{name}.png")), cv2.COLOR_BGR2RGB)
        extra.append((image, (0, 0, image.shape[1], image.shape[0])))
    return face_photos(extra)


def test_crops_are_real_faces_with_variety(shared_dir):
    crops = jittered_crops(_photos(shared_dir), 12, seed=5)
    assert crops.shape == (12, 3, 256, 256) and crops.min() >= 0 and crops.max() <= 1
    assert len({round(float(c.mean()), 3) for c in crops}) == 12  # all different


def test_fp16_agrees_with_fp32_on_real_faces(shared_dir):
    photos = _photos(shared_dir)
    model = build_emonet(calibrated_state(8, jittered_crops(photos, 12, seed=1)))
    (report,) = compare_precisions(model, jittered_crops(photos, 24, seed=2), ["fp16"], batch_size=8)
    assert report.classes_predicted >= 3, report.describe()  # not degenerate
    assert report.clear_faces >= report.faces // 2, report.describe()  # the clear-decision check has faces to check
    assert report.clear_changed == 0 and report.agreement >= AGREEMENT, report.describe()
    assert report.valence_p99 <= MAX_DELTA_P99 and report.arousal_p99 <= MAX_DELTA_P99, report.describe()
    assert report.passed


def test_the_guard_can_fail():
    """A model that differs from the reference beyond the tolerances is reported as failing."""
    from emopipe.engines.accuracy import PrecisionReport

    def report(**fields):
        return PrecisionReport(**{"precision": "fp16", "faces": 100, "agreement": 0.99, "valence_p99": 0.001,
                                  "arousal_p99": 0.001, "probability_max": 0.01, "classes_predicted": 5,
                                  "flip_margin_max": 0.004, "clear_faces": 80, "clear_changed": 0, **fields})

    assert report().passed and "pass" in report().describe()  # one near-tie in a hundred may flip
    assert report(agreement=0.98).passed
    clear_flip = report(agreement=0.99, flip_margin_max=0.3, clear_changed=1)  # a clear decision changed
    many_ties = report(agreement=0.97)  # more near-ties flipped than rounding explains
    drift = report(agreement=1.0, valence_p99=0.03)
    assert not clear_flip.passed and not many_ties.passed and not drift.passed
    assert "FAIL" in clear_flip.describe() and "1 of 80 clear decisions changed" in clear_flip.describe()


@pytest.mark.parametrize("classes", [5])
def test_calibrated_checkpoint_is_official_format(classes):
    state = calibrated_state(classes, torch.rand(4, 3, 256, 256))
    assert all(k.startswith("module.") for k in state) and state["module.emo_fc_2.3.weight"].shape == (7, 128)


def _accuracy_command(*args: object) -> subprocess.CompletedProcess:
    script = Path(__file__).resolve().parents[1] / "benchmarks" / "accuracy.py"
    return subprocess.run([sys.executable, str(script), *map(str, args)], capture_output=True, text=True,
                          timeout=600)


def test_the_accuracy_command_checks_a_users_checkpoint(shared_dir, checkpoints, tmp_path):
    """benchmarks/accuracy.py: the guard on a given checkpoint, its verdict in the exit code and the JSON."""
    common = ["--faces-dir", shared_dir / "data" / "faces", "--faces", 4, "--batch-size", 4, "--device", "cpu"]
    done = _accuracy_command("--weights", checkpoints[8], *common, "--json", tmp_path / "ok.json")
    assert done.returncode == 0, done.stderr
    (report,) = json.loads((tmp_path / "ok.json").read_text())
    assert report["precision"] == "fp16" and report["faces"] == 4 and report["passed"] is True
    assert "— pass" in done.stdout
    # first convolution scaled far past fp16's range: fp16 overflows where fp32 does not, and the guard says so
    state = torch.load(checkpoints[8], weights_only=True)
    state["module.conv1.weight"] = state["module.conv1.weight"] * 1e6
    torch.save(state, tmp_path / "overflows.pth")
    done = _accuracy_command("--weights", tmp_path / "overflows.pth", *common, "--json", tmp_path / "bad.json")
    assert done.returncode == 1, done.stderr
    assert json.loads((tmp_path / "bad.json").read_text())[0]["passed"] is False and "FAIL" in done.stdout


@pytest.mark.parametrize(("args", "code", "message"), [
    (["--weights", "missing.pth"], 6, "checkpoint not found"),
    (["--weights", "missing.pth", "--precisions", "fp8"], 2, "--precisions takes fp16 and/or bf16"),
])
def test_the_accuracy_command_refuses_bad_input_in_one_line(args, code, message, tmp_path):
    done = _accuracy_command(*[str(tmp_path / a) if a.endswith(".pth") else a for a in args])
    assert done.returncode == code and message in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
