"""Accuracy guard on the CPU: the fp16 path computes the fp32 function on real-face crops.

The checkpoint's head is refitted on other real-face crops so that predictions vary between faces
(a plain random checkpoint predicts one class for everything, which would make agreement trivial).
The GPU run (scripts/accuracy_guard.py) repeats this with hundreds of faces, fp16 and bf16, on the
product's fast path (channels_last, CUDA graphs, fused network).
"""

from __future__ import annotations

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
    assert report.agreement >= AGREEMENT, report.describe()
    assert report.valence_p99 <= MAX_DELTA_P99 and report.arousal_p99 <= MAX_DELTA_P99, report.describe()
    assert report.passed


def test_the_guard_can_fail():
    """A model that differs from the reference beyond the tolerances is reported as failing."""
    from emopipe.engines.accuracy import PrecisionReport

    bad = PrecisionReport("fp16", 100, agreement=0.99, valence_p99=0.001, arousal_p99=0.001, probability_max=0.1,
                          classes_predicted=5)
    drift = PrecisionReport("fp16", 100, agreement=1.0, valence_p99=0.03, arousal_p99=0.001, probability_max=0.1,
                            classes_predicted=5)
    assert not bad.passed and not drift.passed and "FAIL" in bad.describe()


@pytest.mark.parametrize("classes", [5])
def test_calibrated_checkpoint_is_official_format(classes):
    state = calibrated_state(classes, torch.rand(4, 3, 256, 256))
    assert all(k.startswith("module.") for k in state) and state["module.emo_fc_2.3.weight"].shape == (7, 128)
