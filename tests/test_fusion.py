"""The fused inference rewrite computes the published function (eval mode), in both memory formats."""

from __future__ import annotations

import pytest
import torch
from conftest import random_state

from emopipe.emonet import build_emonet
from emopipe.fusion import FusedEmoNet, fuse


@pytest.mark.parametrize("classes", [8, 5])
def test_fused_model_matches_the_reference(classes):
    reference = build_emonet(random_state(classes, seed=3))
    fused = fuse(reference)
    assert isinstance(fused, FusedEmoNet) and fused.labels == reference.labels
    x = torch.rand(2, 3, 256, 256)
    with torch.inference_mode():
        want = reference(x)
        for memory_format in (torch.contiguous_format, torch.channels_last):
            got = fused.to(memory_format=memory_format)(x.contiguous(memory_format=memory_format))
            for name in ("expression", "valence", "arousal", "heatmap"):
                torch.testing.assert_close(getattr(got, name), getattr(want, name), atol=2e-5, rtol=1e-4)


def test_fusion_leaves_the_source_model_untouched():
    reference = build_emonet(random_state(8))
    before = {k: v.clone() for k, v in reference.state_dict().items()}
    fuse(reference)
    after = reference.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)


def test_fused_model_has_no_batchnorm_left_to_run():
    fused = fuse(build_emonet(classes=8))
    assert not any(isinstance(m, (torch.nn.BatchNorm1d, torch.nn.BatchNorm2d)) for m in fused.modules())
