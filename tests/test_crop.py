"""Face crops: the batched torch path against OpenCV's reference preparation, box rules, colour order."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
import torch

from emopipe.vision.crop import CROP_CHUNK, CropBatch, FaceCropper, integer_boxes, opencv_crop, torch_crops
from tests.support import synth

TOLERANCE = 1 / 255 + 1e-6  # OpenCV rounds its uint8 result (and its fixed-point weights); torch does not


def random_boxes(rng: np.random.Generator, k: int, width: int, height: int) -> np.ndarray:
    """Boxes of all sizes (down- and up-scaling), many touching or crossing the frame's edges."""
    w = rng.uniform(1, 1.5 * width, k)
    h = rng.uniform(1, 1.5 * height, k)
    x1 = rng.uniform(-0.5 * width, width, k)
    y1 = rng.uniform(-0.5 * height, height, k)
    return np.stack([x1, y1, x1 + w, y1 + h], axis=1).astype(np.float32)


@pytest.mark.parametrize("seed", range(6))
def test_torch_path_matches_opencv_reference_on_random_boxes(seed):
    rng = np.random.default_rng(seed)
    width, height = (int(v) for v in rng.integers(8, 700, 2))
    frames = torch.from_numpy(rng.integers(0, 256, (3, height, width, 3), dtype=np.uint8))
    boxes = [random_boxes(rng, int(rng.integers(0, 12)), width, height) for _ in range(3)]
    fast = FaceCropper(method="torch").crop(frames, boxes)
    reference = FaceCropper(method="opencv").crop(frames, boxes)
    assert len(fast) == len(reference) > 0
    np.testing.assert_array_equal(fast.boxes_used, reference.boxes_used)
    np.testing.assert_array_equal(fast.frame_of_crop, reference.frame_of_crop)
    assert (fast.crops - reference.crops).abs().max().item() <= TOLERANCE


@pytest.mark.parametrize("size", [(1, 1), (1, 40), (2, 2), (128, 128), (512, 512), (255, 257), (300, 97), (4000, 3)])
def test_torch_path_matches_opencv_for_exact_scale_factors_and_slivers(size):
    w, h = size
    rng = np.random.default_rng(w * 7 + h)
    frame = rng.integers(0, 256, (h + 10, w + 10, 3), dtype=np.uint8)
    box = np.array([[5, 5, 5 + w, 5 + h]], np.float32)
    fast = FaceCropper(method="torch").crop(torch.from_numpy(frame[None]), [box])
    assert (fast.crops[0].numpy() - opencv_crop(frame, box[0].astype(int))).__abs__().max() <= TOLERANCE


def test_opencv_path_is_the_reference_preparation_on_a_real_face():
    frame = synth.astronaut_bgr()
    box = np.array(synth.ASTRONAUT_FACE, np.float32)
    batch = FaceCropper().crop(torch.from_numpy(frame[None]), [box[None]])
    x1, y1, x2, y2 = synth.ASTRONAUT_FACE
    rgb = cv2.cvtColor(frame, cv2.COLOR_BGR2RGB)
    expected = cv2.resize(rgb[y1:y2, x1:x2], (256, 256), interpolation=cv2.INTER_LINEAR).transpose(2, 0, 1) / 255
    np.testing.assert_allclose(batch.crops[0].numpy(), expected, atol=1e-6)
    assert batch.crops.shape == (1, 3, 256, 256) and batch.crops.dtype == torch.float32


def test_colour_order_is_rgb():
    blue_bgr = np.zeros((50, 60, 3), np.uint8)
    blue_bgr[:, :, 0] = 255
    for method in ("torch", "opencv"):
        crop = FaceCropper(method=method, size=32).crop(torch.from_numpy(blue_bgr[None]),
                                                         [np.array([[10, 10, 40, 40]], np.float32)]).crops[0]
        assert crop[2].min().item() == 1.0 and crop[:2].abs().max().item() == 0.0


@pytest.mark.parametrize(("box", "margin", "expected", "valid"), [
    ((10.2, 20.5, 30.49, 40.51), 0.0, (10, 21, 30, 41), True),  # round half up
    ((-5, -5, 20, 20), 0.0, (0, 0, 20, 20), True),  # clipped to the frame
    ((90, 40, 130, 80), 0.0, (90, 40, 100, 50), True),  # the frame is 100×50
    ((10, 10, 30, 20), 0.5, (0, 5, 40, 25), True),  # half the width / height added on each side
    ((40, 20, 60, 30), 0.1, (38, 19, 62, 31), True),
    ((110, 10, 150, 30), 0.0, (100, 10, 100, 30), False),  # entirely right of the frame
    ((10, -30, 30, -5), 0.0, (10, 0, 30, 0), False),  # entirely above it
    ((20, 20, 20.4, 30), 0.0, (20, 20, 20, 30), False),  # rounds to zero width
    ((20, 20, np.nan, 30), 0.0, (0, 0, 0, 0), False),
])
def test_box_rounding_clipping_and_margin(box, margin, expected, valid):
    rounded, ok = integer_boxes(np.array([box], np.float32), 100, 50, margin)
    assert tuple(rounded[0]) == expected and bool(ok[0]) is valid


def test_empty_boxes_are_dropped_and_reported():
    frames = torch.from_numpy(np.random.default_rng(0).integers(0, 256, (2, 50, 100, 3), dtype=np.uint8))
    boxes = [np.array([[10, 10, 30, 30], [200, 10, 240, 30]], np.float32),  # the second is off the frame
             np.array([[-50, -50, -10, -10], [50, 20, 70, 45], [0, 0, 100, 50]], np.float32)]
    for method in ("torch", "opencv"):
        batch = FaceCropper(method=method).crop(frames, boxes)
        assert len(batch) == 3
        assert batch.dropped == ((0, 1), (1, 0))
        assert batch.frame_of_crop.tolist() == [0, 1, 1]
        assert batch.face_of_crop.tolist() == [0, 1, 2]
        assert batch.boxes_used.tolist() == [[10, 10, 30, 30], [50, 20, 70, 45], [0, 0, 100, 50]]
        assert batch.boxes_used.dtype == np.float32


@pytest.mark.parametrize("seed", range(4))
def test_a_batch_of_frames_crops_as_each_frame_alone(seed):
    """The boxes of every frame are rounded and clipped together: the same crops, boxes, face indices and
    dropped boxes as frame by frame, whatever the mix (frames without boxes, boxes off the frame, NaN)."""
    rng = np.random.default_rng(seed)
    width, height = 60, 40
    frames = torch.from_numpy(rng.integers(0, 256, (6, height, width, 3), dtype=np.uint8))
    boxes = [random_boxes(rng, int(rng.integers(0, 5)), width, height) for _ in range(6)]
    boxes[2] = np.zeros((0, 4), np.float32)
    if len(boxes[4]):
        boxes[4][0, 1] = np.nan
    cropper = FaceCropper(size=16, margin=0.1, method="torch")
    together = cropper.crop(frames, boxes)
    alone = [cropper.crop(frames[i:i + 1], [b]) for i, b in enumerate(boxes)]
    assert together.frame_of_crop.tolist() == [i for i, one in enumerate(alone) for _ in range(len(one))]
    assert together.face_of_crop.tolist() == [f for one in alone for f in one.face_of_crop.tolist()]
    assert together.dropped == tuple((i, face) for i, one in enumerate(alone) for _, face in one.dropped)
    np.testing.assert_array_equal(together.boxes_used, np.concatenate([one.boxes_used for one in alone]))
    assert torch.equal(together.crops, torch.cat([one.crops for one in alone]))


def test_more_crops_than_one_gather_are_cut_in_parts_with_the_same_result():
    """Past CROP_CHUNK crops the device gathers them in parts (bounded memory): each crop as if cut alone."""
    rng = np.random.default_rng(7)
    frames = torch.from_numpy(rng.integers(0, 256, (3, 50, 70, 3), dtype=np.uint8))
    k = 2 * CROP_CHUNK + 5
    frame_of = rng.integers(0, 3, k)
    x1, y1 = rng.integers(0, 60, k), rng.integers(0, 40, k)
    boxes = np.stack((x1, y1, x1 + rng.integers(1, 11, k), y1 + rng.integers(1, 11, k)), axis=1)
    together = torch_crops(frames, frame_of, boxes, 12)
    alone = torch.cat([torch_crops(frames, frame_of[i:i + 1], boxes[i:i + 1], 12) for i in range(k)])
    assert together.shape == (k, 3, 12, 12)
    assert torch.equal(together, alone)
    for i in (0, CROP_CHUNK, k - 1):  # and each is the reference crop of its own frame
        reference = opencv_crop(frames[frame_of[i]].numpy(), boxes[i], 12)
        assert np.abs(together[i].numpy() - reference).max() <= TOLERANCE


def test_margin_widens_the_crop():
    frame = synth.astronaut_bgr()
    box = np.array([synth.ASTRONAUT_FACE], np.float32)
    tight = FaceCropper(margin=0.0).crop(torch.from_numpy(frame[None]), [box])
    wide = FaceCropper(margin=0.25).crop(torch.from_numpy(frame[None]), [box])
    assert wide.boxes_used.tolist() == [[149, 52, 299, 202]]
    np.testing.assert_allclose(wide.crops[0].numpy(), opencv_crop(frame, np.array([149, 52, 299, 202])), atol=1e-6)
    assert (tight.crops - wide.crops).abs().mean().item() > 0.05


def test_no_boxes_give_an_empty_batch_of_the_right_shape():
    frames = torch.zeros((2, 20, 20, 3), dtype=torch.uint8)
    for method in ("torch", "opencv"):
        batch = FaceCropper(method=method, size=64).crop(frames, [np.zeros((0, 4), np.float32), np.zeros((0, 4))])
        assert batch.crops.shape == (0, 3, 64, 64) and len(batch) == 0 and batch.boxes_used.shape == (0, 4)


def test_dtype_and_method_choice():
    frames = torch.from_numpy(synth.astronaut_bgr()[None])
    box = [np.array([synth.ASTRONAUT_FACE], np.float32)]
    half = FaceCropper(dtype=torch.float16, method="torch").crop(frames, box)
    full = FaceCropper(method="torch").crop(frames, box)
    assert half.crops.dtype == torch.float16
    assert (half.crops.float() - full.crops).abs().max().item() < 1e-3
    assert FaceCropper(device="cpu").method == "opencv"  # the reference on the host
    direct = torch_crops(frames, np.array([0]), np.array([synth.ASTRONAUT_FACE]))
    assert torch.equal(direct, full.crops)


@pytest.mark.parametrize(("frames", "boxes", "message"), [
    (torch.zeros((1, 8, 8, 3)), [np.zeros((0, 4))], "uint8"),
    (torch.zeros((1, 3, 8, 8), dtype=torch.uint8), [np.zeros((0, 4))], "N×H×W×3"),
    (torch.zeros((2, 8, 8, 3), dtype=torch.uint8), [np.zeros((0, 4))], "1 box lists for 2 frames"),
    (torch.zeros((1, 8, 8, 3), dtype=torch.uint8), [np.zeros((2, 3))], "k×4"),
    (torch.zeros((1, 8, 8, 3), dtype=torch.uint8, device="meta"), [np.zeros((0, 4))], "on meta"),
])
def test_bad_inputs_are_refused(frames, boxes, message):
    with pytest.raises(ValueError, match=message):
        FaceCropper().crop(frames, boxes)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"size": 0}, "size"), ({"margin": -0.5}, "margin"), ({"method": "pil"}, "method"),
    ({"dtype": torch.uint8}, "floating-point"),
])
def test_bad_options_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        FaceCropper(**kwargs)


def test_crop_batch_validation():
    good = {"crops": torch.zeros(2, 3, 8, 8), "frame_of_crop": np.zeros(2, np.int64),
            "face_of_crop": np.zeros(2, np.int64), "boxes_used": np.zeros((2, 4), np.float32)}
    assert len(CropBatch(**good)) == 2
    for change, message in [({"crops": torch.zeros(2, 3, 8, 9)}, "K×3×S×S"),
                            ({"frame_of_crop": np.zeros(3, np.int64)}, "frame_of_crop"),
                            ({"boxes_used": np.zeros((2, 4), np.float64)}, "float32")]:
        with pytest.raises(ValueError, match=message):
            CropBatch(**{**good, **change})
