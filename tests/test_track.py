"""IouTracker and TrackSmoother: ids that follow faces, smoothing that stays within a face."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import linear_sum_assignment

from emopipe.errors import UsageError
from emopipe.vision import track
from emopipe.vision.track import IouTracker, TrackSmoother, best_pairs, box_iou


def square(cx: float, cy: float, side: float = 60.0) -> list[float]:
    return [cx - side / 2, cy - side / 2, cx + side / 2, cy + side / 2]


# -- IoU ---------------------------------------------------------------------------------------


def test_box_iou_matches_hand_computation():
    a = np.array([[0, 0, 10, 10], [0, 0, 2, 2]], dtype=np.float32)
    b = np.array([[5, 0, 15, 10], [20, 20, 30, 30], [0, 0, 10, 10]], dtype=np.float32)
    # overlap 5×10 of two 10×10 boxes: 50 / (100 + 100 - 50); a 2×2 box inside a 10×10 one: 4 / 100
    expected = np.array([[50 / 150, 0, 1], [0, 0, 4 / 100]])
    np.testing.assert_allclose(box_iou(a, b), expected, rtol=1e-12)
    assert box_iou(np.zeros((0, 4)), b).shape == (0, 3)
    assert box_iou(a, np.zeros((0, 4))).shape == (2, 0)


def test_box_iou_degenerate_boxes_are_zero_not_nan():
    point = np.array([[5, 5, 5, 5]])
    assert box_iou(point, point)[0, 0] == 0.0


# -- ids ---------------------------------------------------------------------------------------


def test_ids_count_from_one_in_order_of_appearance():
    tracker = IouTracker()
    first = tracker.update(np.array([square(100, 100), square(300, 100)]))
    assert first.tolist() == [1, 2]
    assert first.dtype == np.int64
    second = tracker.update(np.array([square(300, 100), square(500, 100), square(100, 100)]))
    assert second.tolist() == [2, 3, 1]  # ids follow the faces, not the order of the boxes


def test_two_faces_moving_keep_their_ids():
    tracker = IouTracker()
    for t in range(50):
        boxes = np.array([square(100 + 4 * t, 100 + 2 * t), square(400 - 3 * t, 300, side=80 + t)])
        assert tracker.update(boxes).tolist() == [1, 2]


@pytest.mark.parametrize("dy", [0.0, 20.0])
def test_two_faces_crossing_keep_their_ids(dy):
    """Two faces walk through each other (fully overlapping at dy=0); each keeps its id after."""
    tracker = IouTracker()
    history: list[tuple[int, int]] = []
    for t in range(41):
        a = square(100 + 10 * t, 200)  # left → right
        b = square(500 - 10 * t, 200 + dy)  # right → left; they coincide at t = 20
        swapped = t % 2 == 1  # the detector's order of boxes does not matter
        ids = tracker.update(np.array([b, a] if swapped else [a, b])).tolist()
        history.append((ids[1], ids[0]) if swapped else (ids[0], ids[1]))
    assert history[0] == (1, 2)
    assert history[-1] == (1, 2)
    assert all(h == (1, 2) for h in history[:19] + history[22:]), history
    assert len(tracker) == 2


def test_face_hidden_for_up_to_max_age_frames_keeps_its_id():
    tracker = IouTracker(max_age=5)
    assert tracker.update(np.array([square(100, 100)])).tolist() == [1]
    for _ in range(5):
        assert tracker.update(np.zeros((0, 4))).tolist() == []
        assert tracker.expired == ()
    assert tracker.update(np.array([square(102, 101)])).tolist() == [1]


def test_face_hidden_longer_than_max_age_gets_a_new_id_and_old_id_is_never_reused():
    tracker = IouTracker(max_age=5)
    tracker.update(np.array([square(100, 100)]))
    expired = []
    for _ in range(6):
        tracker.update(np.zeros((0, 4)))
        expired.extend(tracker.expired)
    assert expired == [1]
    assert len(tracker) == 0
    assert tracker.update(np.array([square(100, 100)])).tolist() == [2]


def test_max_age_zero_drops_a_track_at_its_first_unseen_frame():
    tracker = IouTracker(max_age=0)
    tracker.update(np.array([square(100, 100)]))
    tracker.update(np.zeros((0, 4)))
    assert tracker.expired == (1,)
    assert tracker.update(np.array([square(100, 100)])).tolist() == [2]


def test_distant_box_starts_a_new_track_instead_of_stealing_one():
    tracker = IouTracker(iou_threshold=0.3)
    tracker.update(np.array([square(100, 100)]))
    ids = tracker.update(np.array([square(400, 400)]))  # no overlap with track 1
    assert ids.tolist() == [2]
    assert tracker.active_ids == (1, 2)


def test_ids_are_unique_within_a_frame_and_never_reused():
    rng = np.random.default_rng(0)
    tracker = IouTracker(max_age=3)
    seen_ever: set[int] = set()
    live_previous: set[int] = set()
    for _ in range(300):
        k = int(rng.integers(0, 6))
        centres = rng.uniform(50, 950, size=(k, 2))
        ids = tracker.update(np.array([square(x, y) for x, y in centres]).reshape(k, 4)).tolist()
        assert len(set(ids)) == k
        fresh = set(ids) - live_previous
        assert not fresh & seen_ever, "an expired id came back"
        seen_ever |= set(ids)
        live_previous = set(tracker.active_ids)
    assert max(seen_ever) == len(seen_ever)  # 1..N, no gaps


@pytest.mark.parametrize("bad", [np.zeros((2, 3)), np.zeros(4), np.array([[0, 0, np.nan, 1]])])
def test_bad_boxes_are_rejected(bad):
    with pytest.raises(ValueError):
        IouTracker().update(bad)


@pytest.mark.parametrize("kwargs", [{"iou_threshold": 0}, {"iou_threshold": 1.5}, {"max_age": -1}])
def test_bad_tracker_settings_are_usage_errors(kwargs):
    with pytest.raises(UsageError):
        IouTracker(**kwargs)


def test_five_faces_keep_their_ids_over_ten_thousand_frames():
    tracker = IouTracker()  # (its speed is a benchmark's business: docs/results/2026-11-25/cpu/tracker/)
    for t in range(10_000):
        boxes = np.array([square(100 + 150 * j + 20 * np.sin(t / 30 + j), 300 + 10 * np.cos(t / 20), 80)
                          for j in range(5)])
        ids = tracker.update(boxes)
        assert ids.tolist() == [1, 2, 3, 4, 5], t
    assert len(tracker) == 5 and tracker.expired == ()


def test_the_iou_of_two_boxes_is_box_ious_value_to_the_bit():
    rng = np.random.default_rng(3)
    a = rng.uniform(0, 100, size=(5000, 4))
    b = rng.uniform(0, 100, size=(5000, 4))  # (half of them inside out: degenerate, IoU 0)
    b[::7] = a[::7]  # identical boxes
    b[1::7, :2] = a[1::7, 2:]  # touching corners
    for x, y in zip(a.tolist(), b.tolist()):
        assert track.pair_iou(x, y) == box_iou(np.array([x]), np.array([y]))[0, 0]


def test_small_frames_worked_out_in_python_track_as_numpys_iou_matrix_does(monkeypatch):
    """The same ids, expired ids and predictions with every frame's IoU from box_iou (the crowd path)."""
    rng = np.random.default_rng(5)
    for scene in range(60):
        faces = int(rng.integers(1, 5))
        scenes = []
        for cut in (track.SMALL_FRAME_PAIRS, 0):
            monkeypatch.setattr(track, "SMALL_FRAME_PAIRS", cut)
            local = np.random.default_rng(scene)
            tracker = IouTracker(iou_threshold=0.3, max_age=2)
            centres = local.uniform(50, 500, size=(faces, 2))
            speeds = local.normal(0, 15, size=(faces, 2))
            seen = []
            for _ in range(40):
                centres += speeds + local.normal(0, 3, size=centres.shape)
                shown = local.permutation(np.flatnonzero(local.random(faces) < 0.8))
                ids = tracker.update(np.array([square(*centres[j], 70) for j in shown]).reshape(-1, 4))
                seen.append((ids.tolist(), tracker.expired, tracker.predicted_boxes().tolist()))
            scenes.append(seen)
        assert scenes[0] == scenes[1], scene


# -- smoothing ---------------------------------------------------------------------------------


def test_smoothing_matches_hand_computation():
    smoother = TrackSmoother(alpha=0.25)
    p, v, a = smoother.smooth([7], [[0.2, 0.8]], [0.4], [-0.4])
    np.testing.assert_allclose(p, [[0.2, 0.8]])  # the first value is taken as is
    np.testing.assert_allclose(v, [0.4])
    p, v, a = smoother.smooth([7], [[1.0, 0.0]], [0.0], [0.4])
    # 0.25 * new + 0.75 * previous
    np.testing.assert_allclose(p, [[0.25 * 1.0 + 0.75 * 0.2, 0.25 * 0.0 + 0.75 * 0.8]])
    np.testing.assert_allclose(v, [0.75 * 0.4])
    np.testing.assert_allclose(a, [0.25 * 0.4 + 0.75 * -0.4])
    p, v, a = smoother.smooth([7], [[0.0, 1.0]], [1.0], [0.0])
    np.testing.assert_allclose(p, [[0.75 * 0.4, 0.25 + 0.75 * 0.6]])
    np.testing.assert_allclose(v, [0.25 + 0.75 * 0.3])
    np.testing.assert_allclose(p.sum(axis=1), [1.0])


def test_smoothing_never_leaks_between_tracks():
    smoother = TrackSmoother(alpha=0.5)
    smoother.smooth([1, 2], [[1.0, 0.0], [0.0, 1.0]], [1.0, -1.0], [0.5, -0.5])
    # Order within the frame changes and a third face appears: each row uses only its own history.
    p, v, a = smoother.smooth([2, 3, 1], [[1.0, 0.0], [0.5, 0.5], [1.0, 0.0]], [1.0, 0.3, 1.0], [0.0, 0.1, 0.5])
    np.testing.assert_allclose(p, [[0.5, 0.5], [0.5, 0.5], [1.0, 0.0]])
    np.testing.assert_allclose(v, [0.0, 0.3, 1.0])
    np.testing.assert_allclose(a, [-0.25, 0.1, 0.5])
    assert len(smoother) == 3


def test_smoothing_state_is_not_sized_by_the_first_batch():
    smoother = TrackSmoother(alpha=0.5)
    smoother.smooth([1], [[1.0, 0.0]], [0.0], [0.0])
    p, _, _ = smoother.smooth([1, 2, 3, 4], np.full((4, 2), 0.5), np.zeros(4), np.zeros(4))
    assert p.shape == (4, 2)
    np.testing.assert_allclose(p, [[0.75, 0.25], [0.5, 0.5], [0.5, 0.5], [0.5, 0.5]])


def test_forgotten_track_state_is_dropped():
    smoother = TrackSmoother(alpha=0.5)
    tracker = IouTracker(max_age=1)
    ids = tracker.update(np.array([square(100, 100)]))
    smoother.smooth(ids, [[1.0, 0.0]], [1.0], [1.0])
    for _ in range(2):
        tracker.update(np.zeros((0, 4)))
        smoother.smooth([], np.zeros((0, 2)), [], [])
        smoother.forget(tracker.expired)
    assert len(smoother) == 0
    ids = tracker.update(np.array([square(100, 100)]))
    assert ids.tolist() == [2]
    p, v, _ = smoother.smooth(ids, [[0.0, 1.0]], [-1.0], [0.0])
    np.testing.assert_allclose(p, [[0.0, 1.0]])  # fresh start, nothing of track 1
    np.testing.assert_allclose(v, [-1.0])


@pytest.mark.parametrize("alpha", [None, 0, 0.0])
def test_smoothing_off_returns_the_raw_values(alpha):
    smoother = TrackSmoother(alpha)
    assert not smoother.enabled
    smoother.smooth([1], [[1.0, 0.0]], [1.0], [1.0])
    p, v, a = smoother.smooth([1], [[0.0, 1.0]], [-1.0], [0.2])
    np.testing.assert_allclose(p, [[0.0, 1.0]])
    np.testing.assert_allclose(v, [-1.0])
    np.testing.assert_allclose(a, [0.2])
    assert len(smoother) == 0


def test_smoothing_does_not_modify_its_inputs():
    smoother = TrackSmoother(alpha=0.5)
    smoother.smooth([1], np.array([[1.0, 0.0]]), np.array([1.0]), np.array([1.0]))
    probabilities = np.array([[0.0, 1.0]])
    smoother.smooth([1], probabilities, np.array([0.0]), np.array([0.0]))
    assert probabilities.tolist() == [[0.0, 1.0]]


@pytest.mark.parametrize("alpha", [-0.1, 1.1])
def test_bad_alpha_is_a_usage_error(alpha):
    with pytest.raises(UsageError):
        TrackSmoother(alpha)


def test_smoother_rejects_mismatched_rows_and_duplicate_ids():
    smoother = TrackSmoother(alpha=0.5)
    with pytest.raises(ValueError, match="expected 2 rows"):
        smoother.smooth([1, 2], [[1.0, 0.0]], [0.0, 0.0], [0.0, 0.0])
    with pytest.raises(ValueError, match="distinct"):
        smoother.smooth([1, 1], [[1.0, 0.0]] * 2, [0.0, 0.0], [0.0, 0.0])


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 6), st.integers(0, 6), st.floats(0.0, 1.0), st.integers(0, 2**32 - 1))
def test_best_pairs_are_scipys_assignment_without_its_zero_worth_pairs(rows, cols, density, seed):
    # sparse (faces apart: found without SciPy) and crowded (rows or columns in conflict: SciPy's) matrices alike
    rng = np.random.default_rng(seed)
    worth = np.where(rng.random((rows, cols)) < density, rng.uniform(0.01, 1.0, (rows, cols)), 0.0)
    expected_rows, expected_cols = linear_sum_assignment(worth, maximize=True)
    kept = worth[expected_rows, expected_cols] > 0
    got_rows, got_cols = best_pairs(worth)
    assert got_rows.tolist() == expected_rows[kept].tolist() and got_cols.tolist() == expected_cols[kept].tolist()


def test_best_pairs_settle_a_conflict_for_the_larger_sum():
    # two tracks both overlap box 0; only track 1 overlaps box 1: the greedy pick (0, 0) would leave 0.5 on the table
    worth = np.array([[0.9, 0.0], [0.6, 0.5]])
    rows, cols = best_pairs(worth)
    assert list(zip(rows.tolist(), cols.tolist())) == [(0, 0), (1, 1)]
    worth = np.array([[0.9, 0.8], [0.7, 0.0]])  # here the larger sum pairs track 0 with box 1
    rows, cols = best_pairs(worth)
    assert list(zip(rows.tolist(), cols.tolist())) == [(0, 1), (1, 0)]
