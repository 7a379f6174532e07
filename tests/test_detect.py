"""Face detection: real BlazeFace weights on real faces, S3FD's decoding against face-alignment's own."""

from __future__ import annotations

import copy
import subprocess
import sys
import urllib.error
from pathlib import Path
from types import SimpleNamespace

import cv2
import numpy as np
import pytest
import torch
from torch import nn

from emopipe.config import DETECTOR_NAMES
from emopipe.errors import CheckpointError, UsageError, WeightsError
from emopipe.model.fusion import ConvReLU
from emopipe.types import Detections
from emopipe.vision.detectors import DETECTORS, create_detector
from emopipe.vision.detectors.base import (
    Letterbox,
    batched_nms,
    batched_weighted_nms,
    load_network_weights,
    nms,
    weighted_nms,
)
from emopipe.vision.detectors.blazeface import BlazeFaceDetector, FusedBlazeBlock, FusedFinalBlock
from emopipe.vision.detectors.s3fd import Float32L2Norm, S3FDDetector, decode_s3fd
from tests.support import synth


def tensor(*frames: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.stack(frames))


def iou(a, b) -> float:
    ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = ix * iy
    return inter / ((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter)


def centred_inside(boxes: np.ndarray, width: int, height: int) -> np.ndarray:
    cx, cy = (boxes[:, 0] + boxes[:, 2]) / 2, (boxes[:, 1] + boxes[:, 3]) / 2
    return (cx >= 0) & (cx <= width) & (cy >= 0) & (cy <= height)


def face_photo(shared_dir: Path, name: str) -> np.ndarray:
    return cv2.imread(str(shared_dir / "data" / "faces" / f"{name}.png"))


# -- the Detections record ---------------------------------------------------------------------

def test_detections_record():
    d = Detections(np.array([[0, 0, 10, 20]], np.float32), np.array([0.9], np.float32))
    assert len(d) == 1 and d.areas.tolist() == [200.0]
    empty = Detections.empty()
    assert len(empty) == 0 and empty.boxes.shape == (0, 4) and empty.scores.dtype == np.float32


@pytest.mark.parametrize(("boxes", "scores", "message"), [
    (np.zeros((2, 4), np.float64), np.zeros(2, np.float32), "k×4 float32"),
    (np.zeros((2, 5), np.float32), np.zeros(2, np.float32), "k×4 float32"),
    (torch.zeros(2, 4), np.zeros(2, np.float32), "k×4 float32"),
    (np.zeros((2, 4), np.float32), np.zeros((2, 1), np.float32), "1-D float32"),
    (np.zeros((2, 4), np.float32), np.zeros(3, np.float32), "2 boxes but 3 scores"),
    (np.full((1, 4), np.nan, np.float32), np.zeros(1, np.float32), "finite"),
])
def test_detections_validation(boxes, scores, message):
    with pytest.raises(ValueError, match=message):
        Detections(boxes, scores)


# -- geometry and suppression ------------------------------------------------------------------

@pytest.mark.parametrize(("frame", "net", "upscale", "expected"), [
    ((720, 1280), (384, 640), True, Letterbox(720, 1280, 360, 640, 12, 0)),
    ((1280, 720), (128, 128), True, Letterbox(1280, 720, 128, 72, 0, 28)),
    ((100, 80), (128, 128), True, Letterbox(100, 80, 128, 102, 0, 13)),
    ((100, 80), (128, 96), False, Letterbox(100, 80, 100, 80, 14, 8)),
])
def test_letterbox_keeps_the_aspect_ratio_and_centres(frame, net, upscale, expected):
    box = Letterbox.fit(*frame, *net, upscale=upscale)
    assert box == expected
    corners = np.array([[expected.pad_x, expected.pad_y, expected.pad_x + expected.resized_w,
                         expected.pad_y + expected.resized_h]], dtype=np.float32)
    assert box.to_frame(corners)[0].tolist() == pytest.approx([0, 0, frame[1], frame[0]])


def test_nms_matches_face_alignments():
    from face_alignment.detection.sfd.bbox import nms as fa_nms

    rng = np.random.default_rng(0)
    for _ in range(20):
        k = int(rng.integers(1, 60))
        xy = rng.uniform(0, 200, (k, 2))
        wh = rng.uniform(5, 80, (k, 2))
        dets = np.concatenate([xy, xy + wh, rng.uniform(0, 1, (k, 1))], axis=1).astype(np.float32)
        ours = nms(dets[:, :4], dets[:, 4], 0.3, pixel_inclusive=True)
        assert ours.tolist() == [int(i) for i in fa_nms(dets, 0.3)]


def test_weighted_nms_matches_blazefaces():
    from face_alignment.detection.blazeface.net_blazeface import BlazeFace

    reference = BlazeFace()  # only its suppression method is used
    rng = np.random.default_rng(1)
    for _ in range(20):
        k = int(rng.integers(1, 40))
        xy = rng.uniform(0, 1, (k, 2))
        wh = rng.uniform(0.05, 0.3, (k, 2))
        boxes = np.concatenate([xy, xy + wh], axis=1).astype(np.float32)
        scores = rng.uniform(0.5, 1, k).astype(np.float32)
        # face-alignment keeps (ymin, xmin, ymax, xmax), 6 keypoints, then the score
        fa_rows = np.concatenate([boxes[:, [1, 0, 3, 2]], np.zeros((k, 12), np.float32), scores[:, None]], axis=1)
        expected = torch.stack(reference._weighted_non_max_suppression(torch.from_numpy(fa_rows))).numpy()
        got_boxes, got_scores = weighted_nms(boxes, scores, 0.3)
        np.testing.assert_allclose(got_boxes, expected[:, [1, 0, 3, 2]], atol=1e-6)
        np.testing.assert_allclose(got_scores, expected[:, 16], atol=1e-6)
        assert got_boxes.dtype == got_scores.dtype == np.float32


@pytest.mark.parametrize("seed", range(5))
def test_nms_over_many_frames_at_once_equals_frame_by_frame(seed):
    """A detector call suppresses all its frames together; no box may suppress, join or reorder another frame's."""
    rng = np.random.default_rng(seed)
    per_frame = []
    for _ in range(int(rng.integers(1, 30))):
        k = int(rng.integers(0, 25))
        xy = rng.uniform(0, 100, (k, 2))  # one small area: frames' boxes overlap each other heavily
        boxes = np.concatenate([xy, xy + rng.uniform(5, 60, (k, 2))], axis=1).astype(np.float32)
        scores = rng.uniform(0.5, 1, k).astype(np.float32)
        if k > 2:
            scores[1] = scores[0]  # equal scores keep their order
        per_frame.append((boxes, scores))
    frame_of = np.concatenate([np.full(len(s), i) for i, (_, s) in enumerate(per_frame)])
    local = np.concatenate([np.arange(len(s)) for _, s in per_frame])  # a candidate's index in its frame
    # frames interleaved at random, each frame's candidates in their own order (equal scores keep it)
    position = np.argsort(rng.permutation(frame_of), kind="stable")
    boxes, scores = np.empty((frame_of.size, 4), np.float32), np.empty(frame_of.size, np.float32)
    boxes[position] = np.concatenate([b for b, _ in per_frame])
    scores[position] = np.concatenate([s for _, s in per_frame])
    frame_of[position], local[position] = frame_of.copy(), local.copy()
    for inclusive in (False, True):
        kept = batched_nms(frame_of, boxes, scores, 0.3, pixel_inclusive=inclusive)
        assert (np.diff(frame_of[kept]) >= 0).all()  # frame by frame
        for i, (b, s) in enumerate(per_frame):
            assert local[kept[frame_of[kept] == i]].tolist() == nms(b, s, 0.3, pixel_inclusive=inclusive).tolist()
    frames, blended, blended_scores = batched_weighted_nms(frame_of, boxes, scores, 0.3)
    assert (np.diff(frames) >= 0).all()
    for i, (b, s) in enumerate(per_frame):
        alone_boxes, alone_scores = weighted_nms(b, s, 0.3)
        np.testing.assert_array_equal(blended[frames == i], alone_boxes)
        np.testing.assert_array_equal(blended_scores[frames == i], alone_scores)


# -- S3FD: decoding, mapping, face-alignment parity --------------------------------------------

class ScriptedS3FD(nn.Module):
    """Emits S3FD-shaped outputs (6 scales) with chosen anchors firing; every batch slot alike."""

    def __init__(self, fire: list[tuple[int, int, int, tuple[float, float, float, float]]] = ()) -> None:
        super().__init__()
        self.fire = fire  # (level, row, col, (dx, dy, dw, dh))
        self.seen: list[torch.Size] = []

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        self.seen.append(x.shape)
        n, _, h, w = x.shape
        out = []
        for level in range(6):
            stride = 2 ** (level + 2)
            hh, ww = max(1, h // stride), max(1, w // stride)
            logits = torch.zeros(n, 2, hh, ww)
            logits[:, 0] = 10.0  # background everywhere…
            offsets = torch.zeros(n, 4, hh, ww)
            for lv, row, col, reg in self.fire:
                if lv == level:
                    logits[:, 0, row, col], logits[:, 1, row, col] = 0.0, 10.0  # …except here
                    offsets[:, :, row, col] = torch.tensor(reg)
            out += [logits.to(x.dtype), offsets.to(x.dtype)]
        return out


def test_a_known_s3fd_anchor_decodes_to_its_box():
    # stride 8 (level 1), row 3, col 5: centre (44, 28), size 32; offsets move and scale it
    outputs = ScriptedS3FD([(1, 3, 5, (0.0, 0.0, 0.0, 0.0)), (2, 1, 1, (0.5, -0.25, float(np.log(2) / 0.2), 0.0))])(
        torch.zeros(1, 3, 128, 128))
    boxes, scores = decode_s3fd(outputs)
    firing = (scores[0] > 0.99).nonzero().flatten()
    assert len(firing) == 2
    assert boxes[0, firing[0]].tolist() == pytest.approx([28, 12, 60, 44])
    # stride 16, cell (1, 1): centre (24, 24), size 64 → centre (27.2, 22.4), 128 wide, 64 high
    assert boxes[0, firing[1]].tolist() == pytest.approx([27.2 - 64, 22.4 - 32, 27.2 + 64, 22.4 + 32], abs=1e-4)


def test_s3fd_boxes_come_back_in_frame_pixels():
    network = ScriptedS3FD([(1, 3, 5, (0.0, 0.0, 0.0, 0.0))])
    detector = S3FDDetector(network, working_size=256, device="cpu")
    # 500×300 → scaled 0.512 into 256×160 (154 rows of picture, 3 rows of padding above)
    (found,) = detector.detect(tensor(np.zeros((300, 500, 3), np.uint8)))
    assert detector.input_size == (160, 256)
    assert network.seen[-1] == (1, 3, 160, 256)
    sx, sy = 256 / 500, 154 / 300
    expected = [28 / sx, (12 - 3) / sy, 60 / sx, (44 - 3) / sy]
    assert len(found) == 1
    assert found.boxes[0].tolist() == pytest.approx(expected, rel=1e-5)
    assert found.scores.tolist() == [pytest.approx(1.0, abs=1e-4)]


def test_s3fd_never_upscales_small_frames():
    network = ScriptedS3FD([(1, 3, 5, (0.0, 0.0, 0.0, 0.0))])
    detector = S3FDDetector(network, working_size=640, device="cpu")
    (found,) = detector.detect(tensor(np.zeros((100, 150, 3), np.uint8)))
    assert detector.input_size == (128, 160)  # the frame's own size, rounded up to multiples of 32
    assert len(found) == 1
    assert found.boxes[0].tolist() == pytest.approx([28 - 5, 12 - 14, 60 - 5, 44 - 14])  # centred: pads 5, 14


def test_padding_never_produces_detections():
    # anchors fire in every batch slot, also in the blank slots that pad a short batch
    network = ScriptedS3FD([(1, 3, 5, (0.0, 0.0, 0.0, 0.0)), (0, 1, 1, (0.0, 0.0, 0.0, 0.0))])
    detector = S3FDDetector(network, working_size=128, batch_size=4, device="cpu")
    results = detector.detect(tensor(np.zeros((64, 128, 3), np.uint8)))
    assert network.seen[-1] == (4, 3, 64, 128)  # the static batch shape
    assert len(results) == 1  # one frame in, one result out
    # and the letterbox padding: a 128×32 frame sits in rows 16..47 of the 64-row input; the anchor at
    # (44, 28) lies in the picture, the one centred at (6, 6) in the padding above it
    (found,) = detector.detect(tensor(np.zeros((32, 128, 3), np.uint8)))
    assert len(found) == 1
    assert found.boxes[0].tolist() == pytest.approx([28, 12 - 16, 60, 44 - 16])


def test_s3fd_decoding_matches_face_alignment_on_raw_outputs():
    from face_alignment.detection.sfd.bbox import nms as fa_nms
    from face_alignment.detection.sfd.detect import get_predictions

    generator = torch.Generator().manual_seed(0)

    class RandomOutputs(nn.Module):
        def forward(self, x):
            sizes = [32, 16, 8, 8, 4, 2]  # S3FD's maps for a 128×128 input
            out = []
            for s in sizes:
                logits = torch.randn(x.shape[0], 2, s, s, generator=generator) * 2
                out += [logits, torch.randn(x.shape[0], 4, s, s, generator=generator) * 0.5]
            self.last = [o.clone() for o in out]
            return out

    network = RandomOutputs()
    detector = S3FDDetector(network, working_size=128, device="cpu")
    (ours,) = detector.detect(tensor(np.zeros((128, 128, 3), np.uint8)))
    # face-alignment: softmax, get_predictions (candidates > 0.05), NMS 0.3, then the 0.5 threshold
    olist = [torch.softmax(o, dim=1).numpy() if i % 2 == 0 else o.numpy() for i, o in enumerate(network.last)]
    candidates = get_predictions(olist, 1)[0]
    kept = candidates[fa_nms(candidates, 0.3)]
    kept = kept[kept[:, 4] > 0.5]
    kept = kept[centred_inside(kept, 128, 128)]  # ours also drops boxes centred off the picture
    assert len(ours) == len(kept) > 5
    order = np.argsort(-(kept[:, 2] - kept[:, 0]) * (kept[:, 3] - kept[:, 1]), kind="stable")
    np.testing.assert_allclose(ours.boxes, kept[order, :4], atol=1e-3)
    np.testing.assert_allclose(ours.scores, kept[order, 4], atol=1e-5)


def random_s3fd(seed: int = 0) -> nn.Module:
    from face_alignment.detection.sfd.net_s3fd import s3fd

    torch.manual_seed(seed)
    return s3fd()


def test_s3fd_network_end_to_end_agrees_with_face_alignments_detector(tmp_path, shared_dir):
    from face_alignment.detection.sfd.sfd_detector import SFDDetector

    network = random_s3fd()
    torch.save(network.state_dict(), tmp_path / "s3fd.pth")
    reference = SFDDetector("cpu", path_to_detector=str(tmp_path / "s3fd.pth"))
    image = cv2.resize(face_photo(shared_dir, "3faces"), (64, 64), interpolation=cv2.INTER_AREA)  # no resizing
    expected = np.array(reference.detect_from_image(image[:, :, ::-1].copy()))  # it takes RGB
    detector = S3FDDetector(network, device="cpu")
    (ours,) = detector.detect(tensor(image))
    assert detector.input_size == (64, 64)
    expected = expected[centred_inside(expected, 64, 64)]
    assert len(ours) == len(expected) > 0
    order = np.argsort(-(expected[:, 2] - expected[:, 0]) * (expected[:, 3] - expected[:, 1]), kind="stable")
    np.testing.assert_allclose(ours.boxes, expected[order, :4], atol=1e-2)
    np.testing.assert_allclose(ours.scores, expected[order, 4], atol=1e-4)


def test_s3fd_with_its_conv_relu_pairs_fused_finds_the_same_faces(shared_dir):
    image = cv2.resize(face_photo(shared_dir, "3faces"), (64, 64), interpolation=cv2.INTER_AREA)
    plain = S3FDDetector(random_s3fd(), device="cpu", fuse=False)
    fused = S3FDDetector(random_s3fd(), device="cpu", fuse=True)
    assert sum(isinstance(m, ConvReLU) for m in fused.network.modules()) == 19  # all of VGG's pairs
    assert not any(isinstance(m, ConvReLU) for m in plain.network.modules())
    assert fused.info()["fuse"] == "true" and plain.info()["fuse"] == "false"
    (a,), (b,) = plain.detect(tensor(image)), fused.detect(tensor(image))
    assert len(a) > 0
    np.testing.assert_allclose(b.boxes, a.boxes, atol=1e-3)
    np.testing.assert_allclose(b.scores, a.scores, atol=1e-5)


def test_s3fd_batched_equals_one_at_a_time():
    frames = [synth.background(64, 48, seed=s) for s in range(2)]
    for frame, x in zip(frames, (10, 40), strict=True):
        synth.paste_head(frame, x, 24, 0.2)
    detector = S3FDDetector(random_s3fd(), working_size=64, batch_size=2, device="cpu", score_threshold=0.5)
    batched = detector.detect(tensor(*frames))
    single = [detector.detect(tensor(f))[0] for f in frames]
    assert sum(len(d) for d in batched) > 0
    for a, b in zip(batched, single, strict=True):
        np.testing.assert_allclose(a.boxes, b.boxes, atol=1e-3)
        np.testing.assert_allclose(a.scores, b.scores, atol=1e-5)


def test_s3fd_in_fp16_keeps_its_l2_norms_in_fp32():
    # VGG features as large as a trained network's: their squares overflow fp16 in L2Norm
    network = random_s3fd()
    with torch.no_grad():
        network.conv3_3.weight *= 100
    frame = tensor(cv2.resize(synth.astronaut_bgr(), (64, 64), interpolation=cv2.INTER_AREA))
    full = S3FDDetector(network, device="cpu", working_size=64)
    reference = [o.clone() for o in full.network(full.network_input(frame))]
    assert reference[0].abs().max() > 0
    half = S3FDDetector(copy.deepcopy(network), device="cpu", working_size=64, precision="fp16")
    assert isinstance(half.network.conv3_3_norm, Float32L2Norm)
    assert set(half.network.state_dict()) == set(full.network.state_dict())
    outputs = half.network(half.network_input(frame))
    for expected, got in zip(reference, outputs, strict=True):
        assert torch.isfinite(got).all()
        torch.testing.assert_close(got.float(), expected, atol=0.05, rtol=0.05)
    # plain fp16 norms lose these features: the overflow this guards against is real
    naive = copy.deepcopy(network).half()
    x = full.network_input(frame).half()
    assert not torch.allclose(naive(x)[0].float(), reference[0], atol=0.05, rtol=0.05)


def test_s3fd_warmup_fixes_the_input_shape_from_the_frame_size():
    network = ScriptedS3FD()
    detector = S3FDDetector(network, batch_size=2, device="cpu")
    report = detector.warmup(720, 1280)
    assert detector.input_size == (384, 640)
    assert report.shapes == [(2, 3, 384, 640)] and report.seconds > 0
    assert set(network.seen) == {torch.Size((2, 3, 384, 640))}
    detector.detect(tensor(np.zeros((480, 640, 3), np.uint8)))  # another size: letterboxed, same shape
    assert network.seen[-1] == (2, 3, 384, 640)



def test_cuda_graphs_are_kept_for_the_frame_sizes_used_last_and_a_size_let_go_of_is_warmed_again(monkeypatch):
    """A service fed videos of every size kept a CUDA graph for each (about 1 GiB reserved a size for
    blazeface_back on an H200, never given back): the detector keeps MAX_GRAPHS, the sizes used last."""
    from emopipe.pipeline.models import Models
    from emopipe.vision.detectors import base

    captured: list[tuple[int, int]] = []

    class Graph:  # (the capture needs CUDA: the device part run as it is, the sizes it was made for counted)
        def __init__(self, detector, example, box) -> None:
            self.detector, self.box = detector, box
            captured.append(tuple(example.shape[1:3]))

        def run(self, frames):
            return self.detector._device_part(frames, self.box)

    monkeypatch.setattr(base, "_DetectorGraph", Graph)
    monkeypatch.setattr(base.FaceDetector, "MAX_GRAPHS", 2)
    detector = S3FDDetector(ScriptedS3FD(), working_size=64, device="cpu", cuda_graphs=True)
    models = Models(engine=SimpleNamespace(device=torch.device("cpu")), detector=detector, cropper=None,
                    model_name="fake", load_s=0.0)
    monkeypatch.setattr(models, "_warm_cropper", lambda h, w: None)
    a, b, c = (48, 64), (64, 48), (32, 32)
    try:
        models.warm_detector(*a)
        models.warm_detector(*b)
        detector.detect(tensor(np.zeros((*a, 3), np.uint8)))  # a used since b: b is the one let go of next
        models.warm_detector(*c)
        assert list(detector._graphs) == [a, c] and captured == [a, b, c]
        assert detector.warmed_for(*a) and not detector.warmed_for(*b)
        assert models.warm_detector(*a) == 0.0 and models.detector_warmups == 3  # kept: not warmed again
        models.warm_detector(*b)  # let go of: warmed (captured) again, the size used longest ago let go of
        assert list(detector._graphs) == [c, b] and captured == [a, b, c, b] and models.detector_warmups == 4
    finally:
        models.close()  # (unfreezes what settle_heap froze)


# -- BlazeFace with the real weights -----------------------------------------------------------

@pytest.fixture(scope="module")
def front(shared_dir):
    """The front model, built once (straight from the read-only shared folder: verified, not copied)."""
    return create_detector("blazeface", device="cpu", models_dir=shared_dir / "models" / "blazeface")


@pytest.fixture
def blazeface(models_home):
    return create_detector("blazeface", device="cpu", models_dir=models_home)


@pytest.fixture
def fa_blazeface(shared_dir):
    from face_alignment.detection.blazeface.blazeface_detector import BlazeFaceDetector

    folder = shared_dir / "models" / "blazeface"

    def make(back: bool = False):
        return BlazeFaceDetector("cpu", back_model=back,
                                 path_to_detector=str(folder / ("blazefaceback.pth" if back else "blazeface.pth")),
                                 path_to_anchor=str(folder / ("anchorsback.npy" if back else "anchors.npy")))

    return make


@pytest.mark.parametrize(("photo", "faces"), [("1face", 1), ("3faces", 3), ("4faces", 1)])
def test_blazeface_finds_the_faces_face_alignment_finds(blazeface, fa_blazeface, shared_dir, photo, faces):
    image = face_photo(shared_dir, photo)
    (ours,) = blazeface.detect(tensor(image))
    expected = np.array(fa_blazeface().detect_from_image(image[:, :, ::-1].copy()))  # face-alignment takes RGB
    assert len(ours) == len(expected) == faces
    for box, score in zip(ours.boxes, ours.scores, strict=True):
        match = min(expected, key=lambda e: np.abs(e[:4] - box).max())
        assert np.abs(match[:4] - box).max() < 0.5
        assert score == pytest.approx(match[4], abs=1e-3)
    areas = ours.areas
    assert (areas[:-1] >= areas[1:]).all()  # largest first


def test_blazeface_back_model_matches_face_alignment_at_its_input_size(models_home, fa_blazeface, shared_dir):
    detector = create_detector("blazeface_back", device="cpu", models_dir=models_home)
    assert detector.input_size == (256, 256)
    image = cv2.resize(face_photo(shared_dir, "4faces"), (256, 256), interpolation=cv2.INTER_LINEAR)
    (ours,) = detector.detect(tensor(image))
    expected = np.array(fa_blazeface(back=True).detect_from_image(image[:, :, ::-1].copy()))
    assert len(ours) == len(expected) == 4  # the back model finds all four
    for box in ours.boxes:
        assert min(np.abs(e[:4] - box).max() for e in expected) < 0.5


def test_blazeface_finds_the_astronaut(front):
    (found,) = front.detect(tensor(synth.astronaut_bgr()))
    assert len(found) == 1
    assert np.abs(found.boxes[0] - np.array(synth.ASTRONAUT_FACE)).max() < 4


def test_letterbox_finds_a_face_at_the_side_of_a_wide_frame(front, fa_blazeface):
    frame = synth.background(640, 360)
    truth = synth.paste_head(frame, 545, 180, 0.8)  # right of the centred 360×360 square
    (found,) = front.detect(tensor(frame))
    assert len(found) == 1 and iou(found.boxes[0], truth) > 0.7
    # face-alignment's own path centre-crops the frame to a square and misses it
    assert len(fa_blazeface().detect_from_image(frame[:, :, ::-1].copy())) == 0


@pytest.mark.parametrize("size", [(320, 240), (640, 360), (360, 640), (1280, 720), (200, 500)])
def test_boxes_are_in_frame_pixels_for_any_frame_size(front, size):
    width, height = size
    frame = synth.background(width, height, seed=width)
    truth = synth.paste_head(frame, width * 0.4, height * 0.5, 0.3 * max(size) / 100)
    (found,) = front.detect(tensor(frame))
    assert len(found) == 1 and iou(found.boxes[0], truth) > 0.75


@pytest.mark.parametrize("kind", ["blank", "gradient"])
def test_no_face_no_detection(front, kind):
    frame = np.full((360, 640, 3), 128, np.uint8) if kind == "blank" else synth.background(640, 360)
    assert len(front.detect(tensor(frame))[0]) == 0


def test_blazeface_batched_equals_one_at_a_time_and_pads_short_batches(models_home):
    detector = create_detector("blazeface", device="cpu", models_dir=models_home, batch_size=4)
    frames = []
    for i, x in enumerate((100, 200, 300)):
        frame = synth.background(400, 300, seed=i)
        synth.paste_head(frame, x, 150, 0.9)
        frames.append(frame)
    frames.append(synth.background(400, 300, seed=9))  # no face
    batched = detector.detect(tensor(*frames))
    assert [len(d) for d in batched] == [1, 1, 1, 0]
    for frame, expected in zip(frames, batched, strict=True):
        (single,) = detector.detect(tensor(frame))  # one real frame, three blank padding slots
        np.testing.assert_allclose(single.boxes, expected.boxes, atol=1e-3)
        np.testing.assert_allclose(single.scores, expected.scores, atol=1e-5)


@pytest.mark.parametrize("threshold", [0.9, 0.999])
def test_score_threshold_applies_before_blending_as_in_face_alignment(models_home, fa_blazeface, shared_dir,
                                                                      threshold):
    image = face_photo(shared_dir, "3faces")
    (found,) = create_detector("blazeface", device="cpu", models_dir=models_home,
                               score_threshold=threshold).detect(tensor(image))
    reference = fa_blazeface()
    reference.face_detector.min_score_thresh = threshold
    expected = np.array(reference.detect_from_image(image[:, :, ::-1].copy())).reshape(-1, 5)
    assert len(found) == len(expected) == {0.9: 3, 0.999: 1}[threshold]
    assert (found.scores >= threshold).all()


def test_min_face_and_max_faces_keep_the_largest(front, shared_dir, models_home):
    image = tensor(face_photo(shared_dir, "3faces"))
    (all3,) = front.detect(image)
    sides = np.minimum(all3.boxes[:, 2] - all3.boxes[:, 0], all3.boxes[:, 3] - all3.boxes[:, 1])
    (largest,) = create_detector("blazeface", device="cpu", models_dir=models_home, max_faces=1).detect(image)
    np.testing.assert_array_equal(largest.boxes, all3.boxes[:1])
    (big,) = create_detector("blazeface", device="cpu", models_dir=models_home,
                             min_face=float(np.sort(sides)[1])).detect(image)
    assert len(big) == 2
    np.testing.assert_array_equal(big.boxes, all3.boxes[sides >= np.sort(sides)[1]])


def test_max_faces_applies_to_each_frame_of_a_batch(shared_dir, models_home):
    image = face_photo(shared_dir, "3faces")
    blank = synth.background(image.shape[1], image.shape[0], seed=3)
    detector = create_detector("blazeface", device="cpu", models_dir=models_home, batch_size=4, max_faces=2)
    found = detector.detect(tensor(image, blank, image[:, ::-1].copy()))
    assert [len(d) for d in found] == [2, 0, 2]  # two per frame, not two per call
    for frame, batched in zip((image, blank, image[:, ::-1].copy()), found, strict=True):
        (alone,) = detector.detect(tensor(frame))
        np.testing.assert_allclose(batched.boxes, alone.boxes, atol=1e-3)


def test_fp16_finds_the_same_faces(models_home, shared_dir):
    image = tensor(face_photo(shared_dir, "3faces"))
    (full,) = create_detector("blazeface", device="cpu", models_dir=models_home).detect(image)
    half = create_detector("blazeface", device="cpu", models_dir=models_home, precision="fp16")
    assert next(half.network.parameters()).dtype == torch.float16
    (found,) = half.detect(image)
    assert len(found) == len(full) == 3
    np.testing.assert_allclose(found.boxes, full.boxes, atol=1.0)


@pytest.mark.parametrize(("name", "blocks", "final"), [("blazeface", 16, 0), ("blazeface_back", 31, 1)])
def test_blazeface_with_its_blocks_fused_finds_the_same_faces(models_home, shared_dir, name, blocks, final):
    build = DETECTORS.get(name)
    plain, fused = (build(models_home, None, device="cpu", fuse=f) for f in (False, True))
    assert plain.info()["fuse"] == "false" and fused.info()["fuse"] == "true"
    assert sum(isinstance(m, FusedBlazeBlock) for m in fused.network.modules()) == blocks
    assert sum(isinstance(m, FusedFinalBlock) for m in fused.network.modules()) == final
    assert sum(isinstance(m, ConvReLU) for m in fused.network.modules()) == 1 + final  # the first convolution's too
    assert not any(isinstance(m, (FusedBlazeBlock, ConvReLU)) for m in plain.network.modules())
    image = face_photo(shared_dir, "4faces")
    (a,), (b,) = plain.detect(tensor(image)), fused.detect(tensor(image))
    assert len(a) == len(b) > 0
    np.testing.assert_allclose(b.boxes, a.boxes, atol=1e-3)
    np.testing.assert_allclose(b.scores, a.scores, atol=1e-5)
    frames = torch.rand(2, 3, *plain.input_size) * 2 - 1  # the raw outputs, not only what passes the threshold
    with torch.inference_mode():
        for want, got in zip(plain.network(frames), fused.network(frames), strict=True):
            torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("cudnn_runs", [True, False])
def test_the_fused_networks_convolutions_go_through_cudnns_kept_plans_where_it_has_one(models_home, monkeypatch,
                                                                                       cudnn_runs):
    """On CUDA in half precision each of the fused BlazeFace's convolutions asks emopipe.model.cudnn_epilogue.conv2d
    (plans kept on disk): the depthwise ones alone, the pointwise ones with their bias, the block's shortcut and the
    ReLU, the first with its bias and ReLU; where cuDNN has none PyTorch's convolution runs. Here on the CPU, conv2d
    stood in for by what it promises: the network's raw outputs are the plain network's either way."""
    from emopipe.model import cudnn_epilogue

    calls: list[tuple] = []

    def conv2d(x, weight, stride, padding, bias=None, residual=None, relu=False):  # type: ignore[no-untyped-def]
        calls.append((tuple(weight.shape), tuple(stride), tuple(padding), bias is not None, residual is not None,
                      relu))
        if not cudnn_runs:
            raise cudnn_epilogue.Unsupported("No valid engine configs")
        y = torch.nn.functional.conv2d(x, weight, bias, stride, padding, 1, x.shape[1] // weight.shape[1])
        y = y + residual if residual is not None else y
        return y.relu() if relu else y

    monkeypatch.setattr(cudnn_epilogue, "conv_applicable", lambda x, weight: True)
    monkeypatch.setattr(cudnn_epilogue, "conv2d", conv2d)
    build = DETECTORS.get("blazeface_back")
    plain, fused = (build(models_home, None, device="cpu", fuse=f) for f in (False, True))
    frames = torch.rand(2, 3, *plain.input_size) * 2 - 1
    with torch.inference_mode():
        for want, got in zip(plain.network(frames), fused.network(frames), strict=True):
            torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
    depthwise = [call for call in calls if call[0][1] == 1]
    assert len(depthwise) == 32  # 31 blocks and the final one
    assert all(shape[2:] == (3, 3) and not any(call[3:]) for shape, *call in depthwise)  # 3×3, nothing after
    assert {(stride, padding) for _, stride, padding, *_ in depthwise} == {((1, 1), (1, 1)), ((2, 2), (0, 0))}
    pointwise = [call for call in calls if call[0][2:] == (1, 1)]
    assert len(pointwise) == 32 and all(call[3] and call[5] for call in pointwise)  # bias and ReLU each
    assert sum(call[4] for call in pointwise) == 31  # the blocks' shortcuts; the final block has none
    (first,) = [call for call in calls if call not in depthwise and call not in pointwise]
    assert first[0][1:] == (3, 5, 5) and first[1] == (2, 2) and first[3] and not first[4] and first[5]


def test_blazeface_is_fused_by_default_on_cuda_only(models_home):
    assert create_detector("blazeface", device="cpu", models_dir=models_home).info()["fuse"] == "false"


def test_blazeface_warmup(models_home):
    detector = create_detector("blazeface", device="cpu", models_dir=models_home, batch_size=2)
    report = detector.warmup(720, 1280)
    assert report.shapes == [(2, 3, 128, 128)]
    assert detector.warmup_report is report and "2×3×128×128" in report.describe()


# -- inputs, options, weights ------------------------------------------------------------------

@pytest.mark.parametrize(("frames", "message"), [
    (torch.zeros(1, 32, 32, 3), "uint8"),
    (torch.zeros(1, 3, 32, 32, dtype=torch.uint8), "N×H×W×3"),
    (torch.zeros(32, 32, 3, dtype=torch.uint8), "N×H×W×3"),
    (torch.zeros(3, 32, 32, 3, dtype=torch.uint8), "more than the batch size 2"),
    (torch.zeros(1, 32, 32, 3, dtype=torch.uint8, device="meta"), "on meta"),
])
def test_bad_frames_are_refused(frames, message):
    detector = S3FDDetector(ScriptedS3FD(), batch_size=2, device="cpu")
    with pytest.raises(ValueError, match=message):
        detector.detect(frames)


def test_an_empty_batch_gives_no_results():
    assert S3FDDetector(ScriptedS3FD(), device="cpu").detect(torch.zeros(0, 32, 32, 3, dtype=torch.uint8)) == []


def test_registry_names_and_unknown_detector():
    assert list(DETECTORS) == ["sfd", "blazeface", "blazeface_back"] == list(DETECTOR_NAMES)  # config lists them too
    with pytest.raises(UsageError, match="unknown detector 'retina'; choose from sfd, blazeface, blazeface_back"):
        create_detector("retina", device="cpu")


@pytest.mark.parametrize(("options", "message"), [
    ({"precision": "int8"}, "precision"),
    ({"batch_size": 0}, "batch size"),
    ({"score_threshold": 1.5}, "threshold"),
    ({"min_face": -1}, "minimum face"),
    ({"max_faces": 0}, "maximum faces"),
    ({"device": "tpu"}, "device"),
])
def test_bad_options_are_usage_errors_before_any_download(tmp_path, monkeypatch, options, message):
    monkeypatch.setenv("EMOPIPE_HOME", str(tmp_path))  # empty: building would need a download
    with pytest.raises(UsageError, match=message):
        create_detector("sfd", **{"device": "cpu", **options})


def test_blazeface_has_no_working_size(models_home):
    with pytest.raises(UsageError, match="fixed 128×128"):
        create_detector("blazeface", device="cpu", models_dir=models_home, working_size=320)


@pytest.mark.parametrize(("name", "url", "file"), [
    ("sfd", "https://www.adrianbulat.com/downloads/python-fan/s3fd-619a316812.pth", "s3fd-619a316812.pth"),
    ("blazeface", "https://github.com/hollance/BlazeFace-PyTorch/raw/master/blazeface.pth", "blazeface.pth"),
])
def test_missing_weights_offline_name_the_url_and_the_path(tmp_path, monkeypatch, name, url, file):
    def offline(*args, **kwargs):
        raise urllib.error.URLError("network is unreachable")

    monkeypatch.setattr("urllib.request.urlopen", offline)
    with pytest.raises(WeightsError) as error:
        create_detector(name, device="cpu", models_dir=tmp_path)
    assert url in str(error.value) and str(tmp_path / file) in str(error.value)


def test_weights_that_do_not_fit_name_the_keys(tmp_path):
    from face_alignment.detection.blazeface.net_blazeface import BlazeFace

    state = BlazeFace().state_dict()
    state.pop("classifier_8.weight")
    state["extra.weight"] = torch.zeros(1)
    torch.save(state, tmp_path / "bad.pth")
    with pytest.raises(CheckpointError, match=r"missing keys \['classifier_8.weight'\].*\['extra.weight'\]"):
        load_network_weights(BlazeFace(), tmp_path / "bad.pth")
    (tmp_path / "junk.pth").write_bytes(b"not a checkpoint")
    with pytest.raises(CheckpointError, match="cannot read"):
        load_network_weights(BlazeFace(), tmp_path / "junk.pth")


def test_blazeface_anchor_table_is_checked():
    from face_alignment.detection.blazeface.net_blazeface import BlazeFace

    with pytest.raises(CheckpointError, match="896×4"):
        BlazeFaceDetector(BlazeFace(), np.zeros((10, 4)), device="cpu")


def test_a_batch_larger_than_the_resize_chunk_is_prepared_frame_by_frame_alike():
    # The network input is built a few frames at a time (PREPARE_FRAMES): every slot of a large batch must
    # be what that frame alone gives, the slots past the frames zero, whatever chunk a frame falls in.
    from emopipe.vision.detectors.base import PREPARE_FRAMES

    frames_n = 2 * PREPARE_FRAMES + 3
    detector = S3FDDetector(random_s3fd(), device="cpu", working_size=48, batch_size=frames_n + 2)
    rng = np.random.default_rng(5)
    frames = torch.from_numpy(rng.integers(0, 256, (frames_n, 60, 80, 3), dtype=np.uint8))
    batch = detector.network_input(frames)
    assert batch.shape[0] == frames_n + 2
    for i in range(frames_n):
        alone = detector.network_input(frames[i:i + 1])
        torch.testing.assert_close(batch[i], alone[0], rtol=0, atol=0)
    assert not batch[frames_n:].any()
    assert not torch.equal(batch[0], batch[PREPARE_FRAMES])  # (different frames: the check above can fail)


def test_the_detector_networks_load_without_face_alignments_landmark_api():
    # its package __init__ imports scikit-image, numba and imageio: half a second of every start, never used here
    script = (
        "import sys\n"
        "from emopipe.vision.detectors.base import face_alignment_network\n"
        "nets = [face_alignment_network('detection.blazeface.net_blazeface', 'BlazeFace')(back_model=True),\n"
        "        face_alignment_network('detection.sfd.net_s3fd', 's3fd')()]\n"
        "print(sorted(m for m in ('face_alignment', 'skimage', 'numba', 'imageio') if m in sys.modules))\n"
        "from face_alignment.detection.blazeface.net_blazeface import BlazeFace\n"
        "from face_alignment.detection.sfd.net_s3fd import s3fd\n"
        "print(list(nets[0].state_dict()) == list(BlazeFace(back_model=True).state_dict()),\n"
        "      list(nets[1].state_dict()) == list(s3fd().state_dict()))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.split("\n")[:2] == ["[]", "True True"], done.stdout + done.stderr


def test_the_detector_networks_come_from_the_package_when_its_files_cannot_be_found(monkeypatch):
    import importlib.util

    from emopipe.vision.detectors import base

    monkeypatch.delitem(sys.modules, "emopipe._face_alignment.detection.sfd.net_s3fd", raising=False)
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None)
    network = base.face_alignment_network("detection.sfd.net_s3fd", "s3fd")
    assert network.__module__ == "face_alignment.detection.sfd.net_s3fd"
