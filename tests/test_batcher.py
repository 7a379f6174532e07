"""The static batcher: one shape only, arrival order kept, padding never leaks into results."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from emopipe.errors import UsageError
from emopipe.pipeline.batcher import FaceBatch, FrameAssembler, Slot, StaticBatcher


def _crops(frame: int, k: int) -> torch.Tensor:
    """k crops whose pixels encode (frame, face) so any mix-up is visible."""
    x = torch.empty((k, 3, 4, 4))
    for face in range(k):
        x[face] = frame * 100 + face + 1  # never 0: padding is 0
    return x


def _run(counts: list[int], batch_size: int) -> tuple[list[FaceBatch[int]], dict[int, list[float]]]:
    """Batch the frames, 'infer' with a fake model that echoes each row, reassemble per frame."""
    batcher: StaticBatcher[int] = StaticBatcher(batch_size)
    assembler: FrameAssembler[int, int, float] = FrameAssembler()
    batches, released = [], {}

    def consume(new: list[FaceBatch[int]]) -> None:
        for batch in new:
            batches.append(batch)
            outputs = batch.crops[:, 0, 0, 0]  # the fake model's per-row output, padding rows included
            for slot, value in zip(batch.slots, outputs):
                assembler.deliver(slot, float(value))
        released.update({frame: results for frame, results in assembler.ready()})

    for frame, k in enumerate(counts):
        assembler.expect(frame, frame, k)
        consume(batcher.add(_crops(frame, k), frame))
    consume(batcher.flush())
    return batches, released


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 9), min_size=1, max_size=40), st.integers(1, 8))
def test_static_shape_order_and_no_padding_leak(counts, batch_size):
    batches, released = _run(counts, batch_size)
    assert all(b.crops.shape == (batch_size, 3, 4, 4) for b in batches)  # only the static shape
    assert all(len(b.slots) == batch_size for b in batches[:-1])  # only the last batch may be partial
    slots = [s for b in batches for s in b.slots]
    expected = [Slot(f, i) for f, k in enumerate(counts) for i in range(k)]
    assert slots == expected  # arrival order
    assert list(released) == list(range(len(counts)))  # every frame, in order
    for frame, k in enumerate(counts):
        assert released[frame] == [frame * 100 + i + 1 for i in range(k)]  # own results, no padding (0)
    for b in batches:
        assert torch.all(b.crops[b.real:] == 0) and b.mask.sum() == b.real


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.integers(0, 6), min_size=1, max_size=8), min_size=1, max_size=8), st.integers(1, 8))
def test_several_frames_added_at_once_batch_as_one_at_a_time(runs, batch_size):
    """add_many (a detector call's frames, their crops in one tensor) gives the batches add gives frame by frame."""
    one: StaticBatcher[int] = StaticBatcher(batch_size)
    many: StaticBatcher[int] = StaticBatcher(batch_size)
    expected, got, frame = [], [], 0
    for counts in runs:
        keys = list(range(frame, frame + len(counts)))
        frame += len(counts)
        for key, k in zip(keys, counts):
            expected += one.add(_crops(key, k), key)
        crops = torch.cat([_crops(key, k) for key, k in zip(keys, counts)])
        got += many.add_many(crops, list(zip(keys, counts)))
        assert many.pending == one.pending
    expected += one.flush()
    got += many.flush()
    assert [b.slots for b in got] == [b.slots for b in expected]
    assert all(torch.equal(a.crops, b.crops) for a, b in zip(got, expected))


def test_a_batch_of_consecutive_frames_is_a_slice_of_their_crops_not_a_copy():
    batcher: StaticBatcher[int] = StaticBatcher(4)
    crops = torch.cat([_crops(0, 1), _crops(1, 2), _crops(2, 3)])
    (batch,) = batcher.add_many(crops, [(0, 1), (1, 2), (2, 3)])
    assert batch.slots == (Slot(0, 0), Slot(1, 0), Slot(1, 1), Slot(2, 0))
    assert batch.crops.data_ptr() == crops.data_ptr()  # one view of the frames' rows: nothing concatenated
    (rest,) = batcher.flush()
    assert rest.slots == (Slot(2, 1), Slot(2, 2)) and torch.equal(rest.crops[:2], crops[4:])


def test_counts_that_do_not_match_the_crops_are_refused():
    with pytest.raises(ValueError, match="add up to 3 crops, got 2"):
        StaticBatcher(4).add_many(_crops(0, 2), [(0, 1), (1, 2)])


def test_frames_are_released_only_when_complete_and_in_order():
    batcher: StaticBatcher[int] = StaticBatcher(4)
    assembler: FrameAssembler[int, str, int] = FrameAssembler()
    assembler.expect(0, "f0", 3)
    assembler.expect(1, "f1", 0)  # no faces: must wait for frame 0
    assert batcher.add(_crops(0, 3), 0) == []
    assert list(assembler.ready()) == []
    (batch,) = batcher.flush()
    assert batch.real == 3 and batch.fill_ratio == 0.75
    for slot in batch.slots:
        assembler.deliver(slot, slot.face)
    assert list(assembler.ready()) == [("f0", [0, 1, 2]), ("f1", [])]
    assert len(assembler) == 0


def test_a_frame_with_more_faces_than_the_batch_spans_batches():
    batcher: StaticBatcher[str] = StaticBatcher(2)
    batches = batcher.add(_crops(7, 5), "a") + batcher.flush()
    assert [b.real for b in batches] == [2, 2, 1]
    assert [s.face for b in batches for s in b.slots] == [0, 1, 2, 3, 4]


def test_max_wait_flushes_a_partial_batch_for_live_use():
    now = [0.0]
    batcher: StaticBatcher[int] = StaticBatcher(8, max_wait_s=0.010, clock=lambda: now[0])
    assert batcher.add(_crops(0, 1), 0) == []
    assert batcher.seconds_until_due() == pytest.approx(0.010)
    now[0] = 0.005
    assert batcher.due() == []
    now[0] = 0.011
    (batch,) = batcher.due()
    assert batch.crops.shape[0] == 8 and batch.real == 1
    assert batcher.pending == 0 and batcher.seconds_until_due() is None


def test_bad_arguments():
    with pytest.raises(UsageError):
        StaticBatcher(0)
    with pytest.raises(UsageError):
        StaticBatcher(4, max_wait_s=-1)
    batcher: StaticBatcher[int] = StaticBatcher(4)
    batcher.add(torch.zeros(1, 3, 4, 4), 0)
    with pytest.raises(ValueError, match="crops must all be"):
        batcher.add(torch.zeros(1, 3, 5, 5), 1)
    with pytest.raises(ValueError, match="k×C×H×W"):
        batcher.add(torch.zeros(3, 4, 4), 2)
    with pytest.raises(ValueError, match="real slots"):
        FaceBatch(crops=torch.zeros(1, 3, 4, 4), slots=(Slot(0, 0), Slot(0, 1)))
    assembler: FrameAssembler[int, int, int] = FrameAssembler()
    assembler.expect(0, 0, 1)
    assembler.deliver(Slot(0, 0), 1)
    with pytest.raises(ValueError, match="twice"):
        assembler.deliver(Slot(0, 0), 1)


def test_batcher_scales_to_long_videos():
    batcher: StaticBatcher[int] = StaticBatcher(32)
    crops = torch.zeros(3, 3, 8, 8)
    total = sum(len(batcher.add(crops, i)) for i in range(20_000)) + len(batcher.flush())
    assert total == (20_000 * 3 + 31) // 32
