"""Detection on key frames only: which frames are detected, and the boxes the others get."""

from __future__ import annotations

import numpy as np
import pytest

from emopipe.errors import UsageError
from emopipe.types import Detections
from emopipe.vision.keyframes import Bridge, KeyframeSchedule, StreamKeyframes

SIZE = (240, 320)


def dets(*boxes: tuple[float, float, float, float], scores: tuple[float, ...] | None = None) -> Detections:
    b = np.array(boxes, np.float32).reshape(-1, 4)
    s = np.array(scores if scores is not None else [0.9] * len(b), np.float32)
    return Detections(b, s)


def moving_box(i: int) -> tuple[float, float, float, float]:
    """A face moving at a constant 3 px/frame right and 1 px/frame down, growing 2 px/frame."""
    return (10 + 3 * i, 20 + i, 60 + 5 * i, 70 + 3 * i)


def run(schedule: KeyframeSchedule, frames: int, truth, sizes=None) -> tuple[list, list[int]]:
    """Every frame through the schedule in order, key frames answered from ``truth``; (located, keys)."""
    out, keys = [], []
    for i in range(frames):
        size = sizes[i] if sizes else SIZE
        key = schedule.is_key(size)
        if key:
            keys.append(i)
        out += schedule.add(i, size, truth(i) if key else None)
    return out + schedule.flush(), keys


def test_every_kth_frame_is_a_key_frame_and_a_new_size_starts_over():
    schedule = KeyframeSchedule(3)
    sizes = [SIZE] * 5 + [(480, 640)] * 5
    assert [schedule.is_key(s) for s in sizes] == [True, False, False, True, False,
                                                    True, False, False, True, False]
    every_frame = KeyframeSchedule(1)
    assert all(every_frame.is_key(SIZE) for _ in range(5))
    # a live stream that came back (its reconnection count grew, even if the frame that came back first was
    # dropped) starts on a key frame: boxes from before the outage are stale
    live = KeyframeSchedule(3, interpolate=False)
    reconnects = [0, 0, 0, 0, 2, 2, 2, 2]
    assert [live.is_key(SIZE, n) for n in reconnects] == [True, False, False, True, True, False, False, True]


def test_constant_motion_is_interpolated_exactly_and_frames_come_out_in_order():
    located, keys = run(KeyframeSchedule(4), 10, lambda i: dets(moving_box(i), scores=(0.5 + 0.04 * i,)))
    assert keys == [0, 4, 8]
    assert [x.item for x in located] == list(range(10))
    for x in located:
        assert x.detected == (x.item in keys)
        if x.item <= 8:  # between two key frames: on the line between their boxes
            np.testing.assert_allclose(x.detections.boxes, [moving_box(x.item)], atol=1e-4)
            np.testing.assert_allclose(x.detections.scores, [0.5 + 0.04 * x.item], atol=1e-6)
        else:  # after the last key frame: its boxes
            np.testing.assert_allclose(x.detections.boxes, [moving_box(8)])


def test_frames_wait_for_the_next_key_frame_only_when_interpolating():
    files = KeyframeSchedule(3)
    assert files.is_key(SIZE) and len(files.add("a", SIZE, dets(moving_box(0)))) == 1
    assert not files.is_key(SIZE) and files.add("b", SIZE, None) == [] and files.waiting == 1
    live = KeyframeSchedule(3, interpolate=False)
    live.is_key(SIZE)
    live.add("a", SIZE, dets(moving_box(0)))
    live.is_key(SIZE)
    carried = live.add("b", SIZE, None)
    assert [x.item for x in carried] == ["b"] and not carried[0].detected and live.waiting == 0
    np.testing.assert_array_equal(carried[0].detections.boxes, [moving_box(0)])


def test_live_carries_the_last_key_frames_boxes():
    located, keys = run(KeyframeSchedule(3, interpolate=False), 7, lambda i: dets(moving_box(i)))
    assert keys == [0, 3, 6]
    for x in located:
        np.testing.assert_array_equal(x.detections.boxes, [moving_box(x.item - x.item % 3)])


def test_a_face_seen_at_one_key_frame_goes_to_the_frames_nearer_it():
    leaving = (200, 20, 260, 80)
    arriving = (10, 150, 50, 190)

    def truth(i: int) -> Detections:
        return dets(moving_box(i), leaving) if i == 0 else dets(moving_box(i), arriving)

    located, _ = run(KeyframeSchedule(5), 6, truth)
    counts = {x.item: len(x.detections) for x in located}
    assert counts == {0: 2, 1: 2, 2: 2, 3: 2, 4: 2, 5: 2}
    for x in located[1:5]:  # the moving face is matched and interpolated in every frame
        t = x.item / 5
        expected_other = leaving if t < 0.5 else arriving
        boxes = x.detections.boxes.tolist()
        assert any(np.allclose(b, moving_box(x.item), atol=1e-4) for b in boxes)
        assert any(np.allclose(b, expected_other) for b in boxes), (x.item, boxes)


def test_faces_are_matched_to_themselves_not_by_position_in_the_list():
    # The detector lists faces largest first; the two faces swap sizes between the key frames.
    before = dets((0, 0, 100, 100), (200, 0, 260, 60))
    after = dets((196, 0, 296, 100), (4, 0, 64, 60))
    mid = Bridge(before, after).at(0.5)
    np.testing.assert_allclose(sorted(mid.boxes.tolist()), [[2, 0, 82, 80], [198, 0, 278, 80]])


def test_no_faces_at_either_key_frame_gives_no_faces_between():
    located, _ = run(KeyframeSchedule(3), 4, lambda i: Detections.empty())
    assert all(len(x.detections) == 0 for x in located) and len(located) == 4


def test_a_new_frame_size_releases_the_waiting_frames_with_the_old_boxes():
    sizes = [SIZE] * 3 + [(480, 640)] * 2
    located, keys = run(KeyframeSchedule(4), 5, lambda i: dets(moving_box(i)), sizes=sizes)
    assert keys == [0, 3] and [x.item for x in located] == list(range(5))
    for x in located[1:3]:  # not interpolated towards a key frame of another size
        np.testing.assert_array_equal(x.detections.boxes, [moving_box(0)])


def test_misuse_is_refused():
    with pytest.raises(UsageError, match="K ≥ 1"):
        KeyframeSchedule(0)
    with pytest.raises(ValueError, match="first frame must be a key frame"):
        KeyframeSchedule(2).add("a", SIZE, None)


def test_each_source_starts_on_its_own_key_frame_and_takes_no_boxes_from_the_one_before():
    """Two files of one size in a run, K = 3: the second's first frame would be the first's 6th frame in one
    schedule (not a key frame: it took the first file's boxes, and the first file's last frame interpolated
    towards the second's). Each source gets what it gets alone; the first's tail comes out first, carried."""
    streams: StreamKeyframes[tuple[int, int]] = StreamKeyframes(3)
    frames = [(0, i) for i in range(5)] + [(1, i) for i in range(4)]
    keys = [streams.is_key(stream, SIZE) for stream, _ in frames]  # (the pipeline plans keys ahead of results)
    assert keys == [True, False, False, True, False, True, False, False, True]  # 5 frames, then 4
    truth = {0: lambda i: dets(moving_box(i)), 1: lambda i: dets((200, 50, 240, 90))}
    located = []
    for (stream, i), key in zip(frames, keys):
        located += streams.add(stream, (stream, i), SIZE, truth[stream](i) if key else None)
    located += streams.flush()
    assert [x.item for x in located] == frames  # in frame order
    tail = located[4]  # the first file's last frame: its last key frame's boxes, not a step towards the next file
    np.testing.assert_array_equal(tail.detections.boxes, [moving_box(3)])
    for x in located[5:]:
        np.testing.assert_allclose(x.detections.boxes, [(200, 50, 240, 90)], atol=1e-4)  # its own source's only
    alone = [x.detections.boxes.tolist() for x in run(KeyframeSchedule(3), 5, truth[0])[0]]
    assert alone == [x.detections.boxes.tolist() for x in located[:5]]  # the first file: as alone


def test_interleaved_cameras_each_keep_their_own_schedule_and_boxes():
    streams: StreamKeyframes[str] = StreamKeyframes(2, interpolate=False)
    out = []
    for i in range(4):
        for camera, box in ((0, (0, 0, 10, 10)), (1, (50, 50, 70, 70))):
            key = streams.is_key(camera, SIZE)
            assert key == (i % 2 == 0)  # a camera's frames count for its own schedule only
            out += streams.add(camera, f"{camera}:{i}", SIZE, dets(box) if key else None)
    assert [x.item for x in out] == ["0:0", "1:0", "0:1", "1:1", "0:2", "1:2", "0:3", "1:3"]  # nothing waits
    for x in out:
        expected = (0, 0, 10, 10) if x.item.startswith("0") else (50, 50, 70, 70)
        np.testing.assert_array_equal(x.detections.boxes, [expected])
    with pytest.raises(UsageError, match="K ≥ 1"):
        StreamKeyframes(0)
