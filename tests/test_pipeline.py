"""The streaming pipeline with real sources, real BlazeFace and a stand-in engine: order, completeness, memory."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import numpy as np
import pytest
import torch

from emopipe.config import RunConfig
from emopipe.engines.base import PendingOutput
from emopipe.errors import WeightsError
from emopipe.io.records import open_writer
from emopipe.io.sources import open_source
from emopipe.model.emonet import build_emonet
from emopipe.pipeline import runner as pipeline_module
from emopipe.pipeline.batcher import StaticBatcher
from emopipe.pipeline.hooks import Observer
from emopipe.pipeline.runner import Pipeline, PipelineSettings
from emopipe.pipeline.sinks import FaceRecorder, RecordSink
from emopipe.types import Detections, EngineOutput, FaceResult, FrameResult, HostFrame
from emopipe.vision.crop import FaceCropper
from emopipe.vision.detectors import create_detector
from tests.support.checkpoints import random_state
from tests.support.fakes import PixelEngine
from tests.support.synth import moving_face_video


class ListSink:
    def __init__(self) -> None:
        self.results: list[FrameResult] = []
        self.closed = False

    def write(self, result: FrameResult) -> None:
        self.results.append(result)

    def close(self) -> None:
        self.closed = True


class FailingSink(ListSink):
    def write(self, result: FrameResult) -> None:
        if result.frame.index == 5:
            raise OSError("disk full")
        super().write(result)


class ErrorCounter(Observer):
    def __init__(self) -> None:
        self.kinds: list[str] = []

    def error(self, kind: str) -> None:
        self.kinds.append(kind)


def _pipeline(video: Path, sink: ListSink, batch_size: int = 3, **settings: object) -> tuple[Pipeline, PixelEngine]:
    engine = PixelEngine(batch_size=batch_size)
    detector = create_detector("blazeface", device="cpu", batch_size=int(settings.get("detect_batch", 1)))
    return Pipeline(open_source(video), detector, FaceCropper(device=torch.device("cpu")), engine, [sink],
                    settings=PipelineSettings(**settings)), engine


@pytest.fixture(scope="module")
def two_face_clip(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("clips") / "two.mp4"
    moving_face_video(path, frames=24, size=(400, 240), empty=(10, 14), two_faces=True)
    return path


def test_every_frame_comes_out_once_in_order_with_its_own_results(models_home, two_face_clip):
    sink = ListSink()
    pipeline, engine = _pipeline(two_face_clip, sink)
    pipeline.run()
    assert [r.frame.index for r in sink.results] == list(range(24)) and sink.closed
    assert engine.shapes_seen == {(3, 3, 256, 256)}  # only the static shape reached the engine
    for r in sink.results:
        assert len(r.faces) == len(r.detections) == len(r.crop_boxes)
        expected = 0 if 10 <= r.frame.index < 14 else 2
        assert len(r.faces) == expected, r.frame.index
        for face, box in zip(r.faces, r.crop_boxes):
            # the stand-in engine's valence is the crop's mean pixel: recompute it from the frame
            x1, y1, x2, y2 = box.astype(int)
            crop = FaceCropper(device=torch.device("cpu")).crop(
                torch.from_numpy(r.frame.bgr[None]), [np.array([[x1, y1, x2, y2]], np.float32)]).crops
            assert face.valence == pytest.approx(float(crop.mean()), abs=1e-5)


def _log_detector_calls(pipeline: Pipeline, events: list[tuple[str, int]],
                        on_finish=None) -> None:  # type: ignore[no-untyped-def]
    """Record the order of launch / finish per detector batch (numbered in launch order)."""
    detector = pipeline.detector
    launch, finish = detector.launch, detector.finish
    launched = iter(range(1_000_000))

    def logged_launch(frames: torch.Tensor):  # type: ignore[no-untyped-def]
        pending = launch(frames)
        pending.batch_number = next(launched)
        events.append(("launch", pending.batch_number))
        return pending

    def logged_finish(pending):  # type: ignore[no-untyped-def]
        events.append(("finish", pending.batch_number))
        done = finish(pending)
        if on_finish is not None:
            on_finish()
        return done

    detector.launch, detector.finish = logged_launch, logged_finish  # type: ignore[method-assign]


def test_detection_of_the_next_batch_overlaps_the_host_work_on_this_one(models_home, two_face_clip):
    sink = ListSink()
    pipeline, _ = _pipeline(two_face_clip, sink, queue_frames=64)
    events: list[tuple[str, int]] = []
    _log_detector_calls(pipeline, events)
    _all_decoded_first(pipeline)  # frames are waiting behind every batch, whatever the machine's speed
    pipeline.run()
    assert [r.frame.index for r in sink.results] == list(range(24))
    assert [len(r.faces) for r in sink.results] == [0 if 10 <= i < 14 else 2 for i in range(24)]
    launched = [b for kind, b in events if kind == "launch"]
    finished = [b for kind, b in events if kind == "finish"]
    assert launched == finished == list(range(24))  # every batch once, in order
    # batch k+1 was on its way before batch k was finished (its NMS, crops and inference ran meanwhile)
    overlapped = [k for k in range(23) if events.index(("launch", k + 1)) < events.index(("finish", k))]
    assert len(overlapped) >= 12, events


class _Gated:
    """A source that yields each frame after the first only once the test opens the gate for it: the
    interleaving is set by explicit synchronisation, whatever the machine's speed."""

    def __init__(self, source) -> None:  # type: ignore[no-untyped-def]
        self.source, self.info = source, source.info
        self.gate = threading.Semaphore(0)

    def open(self) -> None:
        self.gate.release()

    def __iter__(self):  # type: ignore[no-untyped-def]
        for i, frame in enumerate(self.source):
            if i and not self.gate.acquire(timeout=120):
                raise TimeoutError(f"frame {i}: the gate was never opened")
            yield frame


class GatingSink(ListSink):
    """Opens the source's gate once each frame's results are written (a camera no faster than the pipeline)."""

    def __init__(self) -> None:
        super().__init__()
        self.source: _Gated | None = None

    def write(self, result: FrameResult) -> None:
        super().write(result)
        if self.source is not None:
            self.source.open()


def test_without_a_next_frame_waiting_a_batch_is_finished_at_once(models_home, two_face_clip):
    sink = ListSink()
    pipeline, _ = _pipeline(two_face_clip, sink)
    events: list[tuple[str, int]] = []
    # decoding is the bottleneck: the next frame comes only once this one's detection is finished, so
    # when the GPU thread looks for a next batch to overlap with, there is none (and overlapping would
    # only delay each frame)
    gated = _Gated(pipeline.source)
    _log_detector_calls(pipeline, events, on_finish=gated.open)
    pipeline.source = gated  # type: ignore[assignment]
    pipeline.run()
    assert [r.frame.index for r in sink.results] == list(range(24))
    assert events == [(kind, k) for k in range(24) for kind in ("launch", "finish")]


class LaunchingEngine(PixelEngine):
    """A stand-in engine that returns before its batch is done (as CUDA graphs do): logs launch and collect."""

    def __init__(self, batch_size: int, fail_at: int | None = None) -> None:
        super().__init__(batch_size=batch_size)
        self.events: list[tuple[str, int]] = []
        self.fail_at = fail_at

    def launch(self, crops: torch.Tensor) -> PendingOutput:
        number = sum(kind == "launch" for kind, _ in self.events)
        self.events.append(("launch", number))
        output = self.infer(crops)

        def collect() -> EngineOutput:
            self.events.append(("collect", number))
            if number == self.fail_at:
                raise RuntimeError("CUDA error: an illegal memory access was encountered")
            return output

        return PendingOutput(collect)


def _all_decoded_first(pipeline: Pipeline) -> None:
    """The GPU thread starts once every frame is decoded and queued: frames are always waiting behind a batch
    (explicit synchronisation, whatever the machine's speed)."""
    read, batches, decoded = pipeline._read, pipeline._frame_batches, threading.Event()

    def read_all() -> None:
        read()
        decoded.set()

    def after_decoding(batcher):  # type: ignore[no-untyped-def]
        assert decoded.wait(120)
        yield from batches(batcher)

    pipeline._read, pipeline._frame_batches = read_all, after_decoding  # type: ignore[method-assign]


def test_emonet_batches_are_collected_after_the_next_is_launched_with_the_same_results(models_home, two_face_clip):
    """Files: the host goes on (crops, detection) while EmoNet runs; each batch is collected once, in order,
    and the rows are those of a run that waits for every batch."""
    runs = {}
    for overlap in (True, False):
        sink = ListSink()
        pipeline, _ = _pipeline(two_face_clip, sink, overlap=overlap, queue_frames=64)
        engine = pipeline.engine = LaunchingEngine(batch_size=3)
        _all_decoded_first(pipeline)
        pipeline.run()
        runs[overlap] = (sink.results, engine.events)
    (overlapped, events), (waited, waited_events) = runs[True], runs[False]
    assert [(r.frame.index, [f.valence for f in r.faces]) for r in overlapped] == \
        [(r.frame.index, [f.valence for f in r.faces]) for r in waited]
    batches = sum(kind == "launch" for kind, _ in events)
    assert batches == 14  # 20 frames with two faces, batches of 3
    assert [k for kind, k in events if kind == "collect"] == list(range(batches))  # each once, in order
    assert waited_events == [(kind, k) for k in range(batches) for kind in ("launch", "collect")]
    later = [k for k in range(batches - 1) if events.index(("launch", k + 1)) < events.index(("collect", k))]
    assert len(later) >= batches - 3, events  # all but the batches of the last frames


def test_a_batch_that_fails_on_collection_fails_the_run_and_the_launched_ones_are_still_collected(
        models_home, two_face_clip):
    sink = ListSink()
    pipeline, _ = _pipeline(two_face_clip, sink, queue_frames=64)
    engine = pipeline.engine = LaunchingEngine(batch_size=3, fail_at=4)
    _all_decoded_first(pipeline)
    errors = ErrorCounter()
    pipeline.observers.append(errors)
    with pytest.raises(RuntimeError, match="illegal memory access"):
        pipeline.run()
    assert errors.kinds == ["infer"]  # counted once, as the stage that failed (the metrics' errors_total)
    launched = [k for kind, k in engine.events if kind == "launch"]
    assert sorted(k for kind, k in engine.events if kind == "collect") == launched  # none left holding a turn
    assert sink.closed and all(len(r.faces) == len(r.detections) for r in sink.results)


def test_a_failing_sink_stops_the_run_and_still_closes(models_home, two_face_clip):
    sink = FailingSink()
    pipeline, _ = _pipeline(two_face_clip, sink)
    errors = ErrorCounter()
    pipeline.observers.append(errors)
    with pytest.raises(OSError, match="disk full"):
        pipeline.run()
    assert errors.kinds == ["write"]
    assert sink.closed and [r.frame.index for r in sink.results] == [0, 1, 2, 3, 4]


class FlushingSink(ListSink):
    """A sink that holds what it writes until flushed; says each call, in order."""

    def __init__(self, hold: int | None = None) -> None:
        super().__init__()
        self.calls: list[str] = []
        self.flushed = threading.Semaphore(0)
        self.hold, self.held, self.release = hold, threading.Event(), threading.Event()

    def write(self, result: FrameResult) -> None:
        if result.frame.index == self.hold:  # stays in this write until the test says go on
            self.held.set()
            assert self.release.wait(timeout=60)
        super().write(result)
        self.calls.append(f"write {result.frame.index}")

    def flush(self) -> None:
        self.calls.append("flush")
        self.flushed.release()


def _frame_results(count: int, faces: int = 1, seed: int = 0) -> list[FrameResult]:
    """Frames with moving boxes and EmoNet-like outputs, as the writer thread receives them."""
    rng = np.random.default_rng(seed)
    pixels = np.zeros((120, 160, 3), np.uint8)
    results = []
    for i in range(count):
        boxes = np.array([[10 + 40 * f + i, 20, 40 + 40 * f + i, 60] for f in range(faces)], np.float32)
        outputs = [FaceResult(rng.dirichlet(np.ones(8)).astype(np.float32), float(rng.normal()),
                              float(rng.normal()), None) for _ in range(faces)]
        results.append(FrameResult(frame=HostFrame(i, i / 30, pixels, 0.0), faces=outputs, crop_boxes=boxes,
                                   detections=Detections(boxes, np.full(faces, 0.9, np.float32))))
    return results


def _writer_of(video: Path, sinks: list) -> Pipeline:
    engine = PixelEngine(batch_size=8)  # a results queue of 16
    return Pipeline(open_source(video), create_detector("blazeface", device="cpu"),
                    FaceCropper(device=torch.device("cpu")), engine, sinks)


def test_the_writer_flushes_when_nothing_is_waiting_and_not_between_waiting_frames(models_home, two_face_clip):
    sink = FlushingSink(hold=11)
    pipeline = _writer_of(two_face_clip, [sink])
    results = _frame_results(12)
    for result in results[:10]:  # ten frames done while the writer was busy
        pipeline._results.put(result)
    writer = threading.Thread(target=pipeline._write)
    writer.start()
    assert sink.flushed.acquire(timeout=60)  # once the ten are written: nothing waits any more
    assert sink.calls == [f"write {i}" for i in range(10)] + ["flush"]
    pipeline._results.put(results[10])  # then frames one at a time: each flushed at once
    assert sink.flushed.acquire(timeout=60)
    pipeline._results.put(results[11])
    assert sink.held.wait(timeout=60)  # the writer is in frame 11's write …
    pipeline._results.put(pipeline_module._END)  # … and the end waits behind it: no flush between them
    sink.release.set()
    writer.join(timeout=60)
    assert sink.calls[11:] == ["write 10", "flush", "write 11", "flush"]  # (11 flushed at the end)
    assert len(pipeline._latencies) == 12 and pipeline.first_written_at is not None


def test_rows_held_back_and_flushed_are_the_rows_written_frame_by_frame(tmp_path):
    labels = PixelEngine().labels
    results = _frame_results(40, faces=2, seed=1)
    files = []
    for name, flush_after in (("one-by-one", None), ("held", {0, 32})):
        writer = open_writer(tmp_path / f"{name}.csv", labels=labels)
        seen: list[tuple[int, int]] = []

        def watch(result: FrameResult, records: list, seen: list = seen) -> None:
            seen.append((result.frame.index, len(records)))

        sink = RecordSink(FaceRecorder("clip.mp4", labels, smoothing=0.5), writer, watchers=[watch],
                          hold_rows=flush_after is not None)
        flushed_frames = 0
        for result in results:
            sink.write(result)
            if flush_after is None:
                assert writer.rows_written == 2 * (result.frame.index + 1)  # each frame's rows at once
            else:
                assert writer.rows_written == 2 * flushed_frames  # held back until the flush
                if result.frame.index in flush_after:
                    sink.flush()
                    flushed_frames = result.frame.index + 1
        sink.close()  # (held: the last 7 frames' rows, written now)
        writer.commit()
        files.append((tmp_path / f"{name}.csv").read_bytes())
        assert seen == [(i, 2) for i in range(40)]  # watchers still see every frame, in order
        assert [r.frame for r in sink.last_records] == [39, 39]
    assert files[0] == files[1] and files[0].count(b"\n") == 1 + 80  # the same tracks, smoothing and values


@pytest.mark.parametrize(("precision", "advice"), [("fp32", False), ("fp16", True), ("bf16", True), (None, True)])
def test_outputs_that_are_not_numbers_suggest_fp32_only_to_a_run_that_is_not_fp32(precision, advice):
    (result,) = _frame_results(1)
    result.faces[0] = FaceResult(result.faces[0].probabilities, float("inf"), 0.0, None)
    recorder = FaceRecorder("clip.mp4", PixelEngine().labels, precision=precision)
    with pytest.raises(WeightsError, match="not a number") as failure:
        recorder.records(result)
    assert ("try --precision fp32" in str(failure.value)) == advice, failure.value


def test_faceless_frames_behind_an_unfilled_batch_are_bounded(models_home, two_face_clip):
    sink = ListSink()
    pipeline, _ = _pipeline(two_face_clip, sink, batch_size=64, max_pending_frames=4)
    pipeline.run()
    assert [r.frame.index for r in sink.results] == list(range(24))


RSS_SCRIPT = textwrap.dedent("""
    import json, resource, sys
    sys.path[:0] = [{repo!r}]
    import torch
    from emopipe.vision.crop import FaceCropper
    from emopipe.vision.detectors import create_detector
    from emopipe.pipeline.runner import Pipeline
    from emopipe.io.sources import open_source
    from tests.support.fakes import PixelEngine
    from tests.test_pipeline import ListSink

    class CountSink(ListSink):
        def write(self, result):
            self.n = getattr(self, "n", 0) + 1

    sink = CountSink()
    Pipeline(open_source(sys.argv[1]), create_detector("blazeface", device="cpu"),
             FaceCropper(device=torch.device("cpu")), PixelEngine(batch_size=8), [sink]).run()
    print(json.dumps({{"frames": sink.n, "max_rss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}}))
""")


def test_memory_does_not_grow_with_video_length(models_home, tmp_path):
    """Peak RSS for 3 000 frames within 10 % of 300 frames (same pipeline, a stand-in engine)."""
    from tests.support.synth import background, paste_head, write_video

    frames = []
    for i in range(150):  # 150 distinct frames, repeated: a long video without a long synthesis
        frame = background(320, 240, seed=i)
        paste_head(frame, 100 + i % 120, 120, 0.5)
        frames.append(frame)
    short, long_ = tmp_path / "short.avi", tmp_path / "long.avi"
    write_video(short, frames * 2, 25.0)
    write_video(long_, frames * 20, 25.0)
    script = tmp_path / "rss.py"
    script.write_text(RSS_SCRIPT.format(repo=str(Path(__file__).parents[1])))
    peaks = {}
    for name, path, count in (("short", short, 300), ("long", long_, 3000)):
        out = subprocess.run([sys.executable, str(script), str(path)], capture_output=True, text=True, check=True)
        result = json.loads(out.stdout.strip().splitlines()[-1])
        assert result["frames"] == count
        peaks[name] = result["max_rss_kb"]
    assert peaks["long"] <= 1.10 * peaks["short"], peaks


def _iou(a: np.ndarray, b: np.ndarray) -> float:
    from emopipe.vision.track import box_iou

    return float(box_iou(a[None], b[None])[0, 0])


def test_frame_batches_end_on_key_frames(models_home, two_face_clip):
    """With --detect-every, a frame batch ends on its detector-batch-th key frame: the frames between key
    frames then get their boxes, and their crops, with the batch that holds them (not with the next one)."""
    pipeline, _ = _pipeline(two_face_clip, ListSink(), detect_batch=2, detect_every=3, queue_frames=32)
    with open_source(two_face_clip) as source:
        for frame in source:  # all decoded ahead, so no batch is cut short by an empty queue
            pipeline._frames.put(frame)
    pipeline._frames.put(pipeline_module._END)
    batches = list(pipeline._frame_batches(StaticBatcher(3)))
    indexes = [[frame.index for frame in batch.frames] for batch in batches]
    assert indexes == [[0, 1, 2, 3], [4, 5, 6, 7, 8, 9], [10, 11, 12, 13, 14, 15], [16, 17, 18, 19, 20, 21],
                       [22, 23]]
    assert [batch.keys for batch in batches][:2] == [[True, False, False, True],
                                                     [False, False, True, False, False, True]]
    assert batches[-1].keys == [False, False]  # the frames after the last key frame keep its boxes


@pytest.mark.parametrize("live", [False, True])
def test_detecting_every_third_frame(models_home, two_face_clip, live):
    """The detector sees only every third frame; the others get boxes close to what it would have found,
    and their crops are cut from their own pixels."""
    every_frame = ListSink()
    _pipeline(two_face_clip, every_frame)[0].run()
    sink = GatingSink()
    # live: a partial face batch runs once its first face waited 5 ms (the product's default), so each
    # frame's results come out before the gated camera sends the next
    pipeline, _ = _pipeline(two_face_clip, sink, detect_batch=2, detect_every=3, live=live,
                            max_wait_s=0.005 if live else None)
    seen: list[int] = []
    launch = pipeline.detector.launch

    def counted_launch(frames: torch.Tensor):  # type: ignore[no-untyped-def]
        seen.append(int(frames.shape[0]))
        return launch(frames)

    pipeline.detector.launch = counted_launch  # type: ignore[method-assign]
    if live:  # a camera no faster than the pipeline, so that live mode (newest frame only) drops nothing
        gated = _Gated(pipeline.source)
        sink.source = gated
        pipeline.source = gated  # type: ignore[assignment]
    pipeline.run()
    assert [r.frame.index for r in sink.results] == list(range(24)) and sink.closed
    keys = list(range(0, 24, 3))
    assert sum(seen) == len(keys) == pipeline.summary().frames_detected and max(seen) <= 2
    assert [r.detected for r in sink.results] == [i in keys for i in range(24)]
    overlaps = []  # of each box given to a frame between key frames with the detector's box for that frame
    for r, full in zip(sink.results, every_frame.results):
        if r.detected:  # the detector's own answer
            np.testing.assert_allclose(r.detections.boxes, full.detections.boxes, atol=1e-3)  # batch 2 vs 1
        elif len(r.detections) and len(full.detections):
            overlaps += [max(_iou(box, other) for other in full.detections.boxes) for box in r.detections.boxes]
    # BlazeFace's own boxes overlap the true ones by 0.70–0.96 on these small faces: that jitter dominates.
    assert min(overlaps) > (0.65 if live else 0.75) and np.mean(overlaps) > (0.85 if live else 0.9), overlaps
    for r in sink.results:
        for face, box in zip(r.faces, r.crop_boxes):  # the crop comes from this frame's pixels
            x1, y1, x2, y2 = box.astype(int)
            crop = FaceCropper(device=torch.device("cpu")).crop(
                torch.from_numpy(r.frame.bgr[None]), [np.array([[x1, y1, x2, y2]], np.float32)]).crops
            assert face.valence == pytest.approx(float(crop.mean()), abs=1e-5)
    # Faces come and go (frames 10–13 have none): the frames nearer a key frame follow it.
    faces = [len(r.faces) for r in sink.results]
    assert faces[9] == 2 and faces[12] == 0 and faces[15] == 2
    if live:  # carried from frame 9 (two faces) until the key frame 12
        assert faces[10:12] == [2, 2]
    else:  # between frame 9 (two faces) and 12 (none): kept up to half-way
        assert faces[10:12] == [2, 0]


def test_the_progress_bar_counts_to_the_total_ends_its_line_and_shows_the_final_faces():
    import io

    from emopipe.pipeline.progress import ProgressBar
    from emopipe.types import Detections, FaceResult, HostFrame

    out = io.StringIO()
    bar = ProgressBar(total=5, file=out)
    frame = HostFrame(0, 0.0, np.zeros((4, 4, 3), np.uint8), 0.0)
    face = FaceResult(np.ones(8) / 8, 0.0, 0.0, None)
    for faces in (2, 0, 1, 3, 1):
        bar.frame(FrameResult(frame=frame, detections=Detections(np.zeros((faces, 4), np.float32),
                                                                   np.zeros(faces, np.float32)),
                              crop_boxes=np.zeros((faces, 4), np.float32), faces=[face] * faces), 0.01)
    bar.close()
    text = out.getvalue()
    last = text.rsplit("\r", 1)[-1]
    assert "5/5" in last and "faces=7" in last and text.endswith("\n")


def test_the_progress_bar_moves_to_counts_from_elsewhere_back_too_and_keeps_what_it_was_given():
    import io

    from emopipe.pipeline.progress import ProgressBar

    out = io.StringIO()
    bar = ProgressBar(total=None, file=out)
    bar.show(4, 3, None, workers=2)  # a Ray run: the total not probed yet
    bar.show(2, 1, 10, workers=1)  # a worker died: its share's frames come off
    assert bar.bar.n == 2 and bar.bar.total == 10
    bar.show(10, 9, 10, workers=2)
    bar.close()
    last = out.getvalue().rsplit("\r", 1)[-1]
    assert "10/10" in last and "faces=9" in last and "workers=2" in last and last.endswith("\n")


def test_frames_are_stacked_as_numpy_stacks_them_flipped_views_and_a_given_buffer_too():
    rng = np.random.default_rng(3)
    images = [rng.integers(0, 256, (6, 10, 3), dtype=np.uint8) for _ in range(4)]
    images[2] = images[2][:, ::-1]  # a flipped view: negative strides, which torch.from_numpy refuses
    expected = np.stack(images)
    assert np.array_equal(pipeline_module.stack_frames(images).numpy(), expected)
    out = torch.zeros((6, 6, 10, 3), dtype=torch.uint8)
    staged = out[:4]
    returned = pipeline_module.stack_frames(images, out=staged)
    assert returned.data_ptr() == out.data_ptr()  # written in place, as the pinned buffers need
    assert np.array_equal(out[:4].numpy(), expected) and not out[4:].any()


@pytest.mark.parametrize("count", [1, 2, 5, 9])
def test_a_batch_gathered_by_several_threads_is_the_batch_numpy_stacks(count):
    rng = np.random.default_rng(count)
    images = [rng.integers(0, 256, (1024, 1366, 3), dtype=np.uint8) for _ in range(count)]  # 4 MiB each
    out = torch.empty((count, 1024, 1366, 3), dtype=torch.uint8)
    assert pipeline_module.gather_frames(images, out, copiers=3).data_ptr() == out.data_ptr()
    assert np.array_equal(out.numpy(), np.stack(images))
    if count >= 5:  # 8 MiB or more a share: the copy was shared out
        assert any(t.name.startswith("emopipe-copy") for t in threading.enumerate())


def test_the_models_warm_with_a_short_gil_switch_interval_and_give_the_callers_back():
    from emopipe.pipeline.models import QUICK_HANDOFF_S, Models

    seen = {}

    class Engine:
        device = torch.device("cpu")

        def warmup(self):
            seen["engine"] = sys.getswitchinterval()

    class Detector:
        def warmup(self, height, width):
            seen["detector"] = sys.getswitchinterval()

    class Cropper(FaceCropper):
        def crop(self, frames, boxes):
            seen["cropper"] = (tuple(frames.shape), sys.getswitchinterval())
            return super().crop(frames, boxes)

    models = Models(engine=Engine(), detector=Detector(), cropper=Cropper(device=torch.device("cpu")),
                    model_name="fake", load_s=0.0)
    callers = sys.getswitchinterval()
    sys.setswitchinterval(0.004)
    try:
        models.warm_engine()
        models.warm_detector(48, 64)
        assert sys.getswitchinterval() == pytest.approx(0.004)  # given back once warm
    finally:
        sys.setswitchinterval(callers)
        models.close()  # (unfreezes what settle_heap froze)
    assert seen == {"engine": pytest.approx(QUICK_HANDOFF_S), "detector": pytest.approx(QUICK_HANDOFF_S),
                    "cropper": ((1, 48, 64, 3), pytest.approx(QUICK_HANDOFF_S))}  # (its kernels load before frames)


@pytest.mark.parametrize("device", ["cuda", "cpu"])
def test_a_gpu_run_loads_and_warms_with_few_cpu_threads_and_gives_the_callers_back(monkeypatch, device):
    # A pool as large as the machine's cores spins between the loading's small CPU operations and starved the other
    # processes': four commands started together each loaded EmoNet in ~6 s instead of 0.5 s (H200, session 35).
    from emopipe.pipeline import models as models_module

    seen: dict[str, int] = {}

    class Engine:
        def __init__(self) -> None:
            self.device = torch.device(device)

        def warmup(self) -> None:
            seen["engine"] = torch.get_num_threads()

    class Detector:
        def warmup(self, height: int, width: int) -> None:
            seen["detector"] = torch.get_num_threads()

    def load(config, device):
        seen["load"] = torch.get_num_threads()
        cropper = FaceCropper(device=torch.device("cpu"))
        return models_module.Models(engine=Engine(), detector=Detector(), cropper=cropper, model_name="fake", load_s=0)

    monkeypatch.setattr(models_module, "resolve_device", torch.device)
    monkeypatch.setattr(models_module, "_load_models", load)
    callers = torch.get_num_threads()
    torch.set_num_threads(4)
    try:
        models = models_module.load_models(RunConfig(device=device))
        models.warm_engine()
        models.warm_detector(48, 64)
        models.close()
        assert torch.get_num_threads() == 4  # given back
    finally:
        torch.set_num_threads(callers)
    expected = models_module.GPU_RUN_CPU_THREADS if device == "cuda" else 4
    assert seen == {"load": expected, "engine": expected, "detector": expected}


def test_with_the_first_frame_size_known_both_networks_plans_are_found_in_the_warm_ups_one_window(monkeypatch):
    """On a machine without cuDNN plans, EmoNet's warm-up finds the detector's too (one wave of builder processes):
    the detector's pass and the engine's inside one window, the real warm-ups only after it has ended."""
    from emopipe.model import cudnn_epilogue
    from emopipe.pipeline.models import Models

    calls: list[object] = []

    @contextlib.contextmanager
    def window(device):
        calls.append(("window", device.type))
        yield True
        calls.append("window ends")

    monkeypatch.setattr(cudnn_epilogue, "plans_built_ahead", window)

    class Engine:
        device = torch.device("cuda", 0)  # (nothing runs on it: a stand-in)

        def compile_ahead(self, beside=None):
            calls.append("engine finds")
            beside()  # (EmoNet's Triton kernels compile on threads meanwhile)

        def warmup(self):
            calls.append("engine warms")

    class Detector:
        def find_plans(self, height, width):
            calls.append(("detector finds", height, width))

    models = Models(engine=Engine(), detector=Detector(), cropper=None, model_name="fake", load_s=0.0)
    try:
        models.warm_engine((720, 1280))
        assert calls == [("window", "cuda"), "engine finds", ("detector finds", 720, 1280), "window ends",
                         "engine warms"]
        calls.clear()
        models.warm_engine()  # (no frame size known: EmoNet's warm-up alone, which finds its own plans)
        assert calls == ["engine warms"]
    finally:
        models.close()


def test_an_engine_whose_plans_were_found_ahead_does_not_look_again_as_it_warms(monkeypatch):
    from emopipe.engines.base import EngineOptions
    from emopipe.engines.torch_engine import TorchEngine

    engine = TorchEngine(build_emonet(random_state(8, seed=3)), EngineOptions(device="cpu", batch_size=1),
                         owns_model=True)
    looked: list[tuple[int, ...]] = []
    monkeypatch.setattr(engine, "_compile_ahead", lambda example: looked.append(tuple(example.shape)))
    engine.compile_ahead()
    assert looked == [(1, 3, 256, 256)]
    engine.warmup([1, 2])  # batch 1 was looked at ahead: only batch 2 is
    assert looked == [(1, 3, 256, 256), (2, 3, 256, 256)]
    assert engine.warmup_report is not None and len(engine.warmup_report.shapes) == 2


def test_the_detectors_pass_runs_within_the_window_that_compiles_emonets_kernels(monkeypatch):
    """On a fresh machine Triton compiles EmoNet's kernels on threads while the detector's pass runs (they took
    turns before: ~1.5 s of a first command on the H200, session 29)."""
    import contextlib
    from dataclasses import replace as replaced

    from emopipe.engines.base import EngineOptions
    from emopipe.engines.torch_engine import TorchEngine
    from emopipe.model import kernels

    calls: list[object] = []

    @contextlib.contextmanager
    def window(device):
        calls.append("window")
        yield True
        calls.append("window ends")

    engine = TorchEngine(build_emonet(random_state(8, seed=3)), EngineOptions(device="cpu", batch_size=2),
                         owns_model=True)
    engine.options = replaced(engine.options, kernels=True, fuse=True, compile=None)
    monkeypatch.setattr(kernels, "compiling_ahead", window)
    monkeypatch.setattr(engine, "_compile_ahead", lambda example: calls.append(("emonet", example.shape[0])))
    engine.compile_ahead(beside=lambda: calls.append("detector"))
    assert calls == ["window", ("emonet", 2), "detector", "window ends"]
    calls.clear()
    engine.compile_ahead([4])  # (alone: its own pass opens its window, as before)
    assert calls == [("emonet", 4)]


def test_page_locked_buffers_are_reserved_at_the_largest_batch_once_and_never_replaced(monkeypatch):
    made: list[tuple[int, ...]] = []

    def allocate(shape):  # (page-locked memory needs CUDA: ordinary memory of the same shape here)
        made.append((max(shape[0], pinned.frames), *shape[1:]))
        return torch.empty(made[-1], dtype=torch.uint8)

    pinned = pipeline_module.PinnedBatches(buffers=3, frames=8)
    monkeypatch.setattr(pinned, "_allocate", allocate)
    pinned.reserve(72, 128)
    assert made == [(8, 72, 128, 3)] * 3
    buffers = [buffer for buffer, _ in pinned._ring]
    pinned.reserve(72, 128)  # (a second reserve keeps what is there)
    assert len(made) == 3 and all(a is b for a, (b, _) in zip(buffers, pinned._ring))
