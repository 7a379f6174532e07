"""EmoNet matches the published facts and loads official-format checkpoints, strictly."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

import emopipe
from emopipe.errors import CheckpointError, WeightsError
from emopipe.model.emonet import EmoNet, build_emonet, load_state, read_checkpoint
from emopipe.types import LABELS
from tests.support.checkpoints import random_state


def test_key_set_parameter_count_and_layers_match_the_documentation():
    model = EmoNet(8)
    state = model.state_dict()
    assert len(state) == 682
    assert sum(p.numel() for p in model.parameters()) == pytest.approx(13.96e6, abs=0.005e6)
    assert sum(isinstance(m, torch.nn.Conv2d) for m in model.modules()) == 115
    # a sample of the documented key names
    for key in ("conv1.weight", "bn1.running_var", "conv2.downsample.0.weight", "conv2.downsample.2.weight",
                "m0.b1_4.conv1.weight", "m1.b2_plus_1.bn3.bias", "top_m_1.conv3.weight", "conv_last0.bias",
                "bn_end1.running_mean", "l1.weight", "bl0.weight", "al0.bias", "conv1x1_input_emo_2.weight",
                "emo_net_2.6.conv3.weight", "emo_fc_2.1.running_mean", "emo_fc_2.3.weight"):
        assert key in state, key
    assert not any(k.startswith(("bl1", "al1")) for k in state)  # bl/al exist for the first stack only
    assert state["emo_fc_2.3.weight"].shape == (10, 128)
    assert state["conv1x1_input_emo_2.weight"].shape == (256, 768, 1, 1)


@pytest.mark.parametrize("classes", [8, 5])
def test_output_shapes(classes):
    model = build_emonet(classes=classes)
    with torch.inference_mode():
        out = model(torch.rand(2, 3, 256, 256))
    assert out.expression.shape == (2, classes)
    assert out.valence.shape == (2,) and out.arousal.shape == (2,)
    assert out.heatmap.shape == (2, 68, 64, 64)
    assert model.labels == LABELS[classes] and len(model.labels) == classes


def test_label_orders_are_the_documented_ones():
    assert LABELS[8] == ("neutral", "happy", "sad", "surprise", "fear", "disgust", "anger", "contempt")
    assert LABELS[5] == ("neutral", "happy", "sad", "surprise", "anger")


@pytest.mark.parametrize("classes", [8, 5])
def test_official_format_checkpoint_loads_and_computes_the_stored_function(checkpoints, classes):
    model = emopipe.load_emonet(checkpoints[classes], device="cpu")
    assert not model.training
    assert model.num_classes == classes  # read from the checkpoint, not the classes argument
    reference = EmoNet(classes)
    reference.load_state_dict({k.removeprefix("module."): v for k, v in random_state(classes, classes).items()})
    reference.eval()
    x = torch.rand(1, 3, 256, 256)
    with torch.inference_mode():
        a, b = model(x), reference(x)
    torch.testing.assert_close(a.expression, b.expression)
    torch.testing.assert_close(a.valence, b.valence)


def test_num_batches_tracked_may_be_absent():
    state = {k: v for k, v in random_state(8).items() if not k.endswith("num_batches_tracked")}
    assert build_emonet(state).num_classes == 8


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda s: s.pop("module.m0.b1_4.conv2.weight"), "missing keys: m0.b1_4.conv2.weight"),
        (lambda s: s.__setitem__("module.extra.weight", torch.zeros(1)), "unexpected keys: extra.weight"),
        (lambda s: s.__setitem__("module.al0.bias", torch.zeros(7)), "wrong shapes: al0.bias (7,) (expected (256,))"),
        (lambda s: s.pop("module.emo_fc_2.3.weight"), "has no 'emo_fc_2.3.weight'"),
        (lambda s: s.__setitem__("module.emo_fc_2.3.weight", torch.zeros(9, 128)), "7 expression classes"),
    ],
)
def test_checkpoints_that_do_not_fit_name_the_keys_or_shapes(mutate, message):
    state = random_state(8)
    mutate(state)
    with pytest.raises(CheckpointError, match=message.replace("(", r"\(").replace(")", r"\)")):
        build_emonet(state)


def test_damaged_and_foreign_files_give_one_line_errors(tmp_path):
    garbage = tmp_path / "garbage.pth"
    garbage.write_bytes(b"not a checkpoint at all")
    with pytest.raises(CheckpointError, match="cannot read checkpoint") as info:
        read_checkpoint(garbage)
    assert "\n" not in str(info.value)
    assert "weights_only" not in str(info.value)  # PyTorch's advice to load it unsafely is not passed on
    not_a_dict = tmp_path / "list.pth"
    torch.save([torch.zeros(1)], not_a_dict)
    with pytest.raises(CheckpointError, match="not a state dict"):
        read_checkpoint(not_a_dict)
    with pytest.raises(WeightsError, match="not found"):
        emopipe.load_emonet(tmp_path / "absent.pth")
    assert issubclass(CheckpointError, WeightsError)


NOT_TORCH = "not a PyTorch checkpoint (torch.save writes a zip archive"


@pytest.mark.parametrize(("content", "said"), [(b"hello\n", NOT_TORCH), (b"", "the file is empty"),
                                               (b"<html>404</html>", NOT_TORCH)])
def test_a_file_that_is_no_pytorch_file_at_all_is_said_to_be_none(tmp_path, content, said):
    """Not torch's stray KeyError: 101 ('e', read as a pickle opcode) for a text file."""
    path = tmp_path / "w.pth"
    path.write_bytes(content)
    with pytest.raises(CheckpointError) as info:
        read_checkpoint(path)
    assert str(info.value).startswith(f"cannot read checkpoint {path}: ") and said in str(info.value)
    assert "Error:" not in str(info.value)
    damaged = tmp_path / "half.pth"  # a real one cut short is a damaged PyTorch file: torch's reason is kept
    torch.save(random_state(8), damaged)
    damaged.write_bytes(damaged.read_bytes()[:1000])
    with pytest.raises(CheckpointError) as info:
        read_checkpoint(damaged)
    assert "not a PyTorch checkpoint" not in str(info.value)
    # (was: PyTorch's 390 characters about miniz) its first sentence, and what it means
    assert str(info.value) == (f"cannot read checkpoint {damaged}: the file is damaged or incomplete (a download or "
                               "copy cut short?): PytorchStreamReader failed reading zip archive: failed finding "
                               "central directory.")
    # one that does not fit EmoNet is named (was: "checkpoint does not fit EmoNet: missing keys: …", which file?)
    state = random_state(8)
    state.pop("module.l1.bias")
    unfit = tmp_path / "unfit.pth"
    torch.save(state, unfit)
    with pytest.raises(CheckpointError, match=rf"^{re.escape(str(unfit))}: checkpoint does not fit EmoNet: missing"):
        emopipe.load_emonet(unfit)


def test_load_state_refuses_before_touching_the_model():
    model = EmoNet(8)
    before = model.conv1.weight.clone()
    state = {k.removeprefix("module."): v for k, v in random_state(8).items()}
    state.pop("l1.bias")
    with pytest.raises(CheckpointError):
        load_state(model, state)
    assert torch.equal(model.conv1.weight, before)


def test_importing_has_no_side_effects():
    import subprocess
    import sys

    code = ("import sys, torch.nn as nn; before = nn.InstanceNorm2d; "
            "import emopipe, emopipe.model.emonet, emopipe.engines.torch_engine;"
            "import torch; assert nn.InstanceNorm2d is before; assert torch.backends.cudnn.benchmark is False;"
            "print('clean')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "clean"


def test_faces_are_independent_of_their_batch_neighbours(checkpoints):
    model = emopipe.load_emonet(checkpoints[8])
    x = torch.rand(3, 3, 256, 256)
    with torch.inference_mode():
        together = model(x)
        alone = model(x[1:2])
    np.testing.assert_allclose(together.expression[1].numpy(), alone.expression[0].numpy(), atol=1e-4)
