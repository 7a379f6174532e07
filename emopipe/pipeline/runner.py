"""The streaming pipeline: reader thread → detection, crops, batches, EmoNet → writer thread.

Queues between the threads are bounded and the frames waiting for an incomplete batch are capped,
so memory does not grow with the video's length. The GPU work runs on the calling thread; frames
are decoded ahead of it on a reader thread and results are tracked, written and drawn behind it on
a writer thread. Frames leave in the order they came. Ctrl-C (or a fault in any stage) stops
the reader, lets the writer finish everything already computed, and closes the files.
"""

from __future__ import annotations

import logging
import os
import queue
import sys
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Hashable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from itertools import groupby, pairwise
from typing import Any

import numpy as np
import torch

from emopipe.engines.base import Engine, PendingOutput, launch
from emopipe.errors import InputNotFoundError, InputUnreadableError, SourceUnavailableError, WeightsError
from emopipe.io.sources import Source
from emopipe.pipeline.batcher import FaceBatch, FrameAssembler, StaticBatcher
from emopipe.pipeline.hooks import Observer, Sink
from emopipe.pipeline.summary import RunSummary
from emopipe.pipeline.timing import StageClock, percentile
from emopipe.types import Detections, EngineOutput, FaceResult, Frame, FrameResult
from emopipe.vision.crop import FaceCropper
from emopipe.vision.detectors import FaceDetector, PendingDetections
from emopipe.vision.keyframes import Located, StreamKeyframes

logger = logging.getLogger(__name__)

# a source that could not be opened or was lost, rather than a decoder that failed on its data
SOURCE_ERRORS = (InputNotFoundError, InputUnreadableError, SourceUnavailableError)

_END = object()  # sentinel closing a queue
_DUE = object()  # live: no frame came before a partial face batch was due


@dataclass(frozen=True)
class _StreamRead:
    """In the frame queue after a source's last frame (a chain of sources says when one is read to its end)."""

    stream: int


@dataclass
class _FrameBatch:
    """Frames read, in order, and which of them go to the detector (all but with --detect-every)."""

    frames: list[Frame] = field(default_factory=list)
    keys: list[bool] = field(default_factory=list)
    read: int | None = None  # (no frames) a stream read to its end: its frames after its last key frame go on


@dataclass
class _InFlight:
    """A batch of frames on the device whose detection has been launched but not collected."""

    frames: list[Frame]
    pixels: torch.Tensor  # N×H×W×3 uint8 BGR on the device (the crops are cut from it)
    keys: list[bool]  # which frames went to the detector (all but with --detect-every)
    detections: PendingDetections | None  # of the key frames, in order; None when there are none


@dataclass(frozen=True)
class _FrameOnDevice:
    """A frame and where its pixels are: a row of an uploaded batch (the crops are cut from it)."""

    frame: Frame
    pixels: torch.Tensor  # its batch, N×H×W×3
    row: int


def stack_frames(images: Sequence[np.ndarray], out: torch.Tensor | None = None) -> torch.Tensor:
    """The images as one N×H×W×3 tensor (into ``out`` when given), copied in one call that holds no GIL.

    ``np.stack`` gives up the GIL and takes it back for every image: beside any thread running Python (the
    writer, cameras' capture threads) each image's copy then waits for a switch interval to end, and the GPU
    thread's upload of a camera fleet's batch took most of its time (benchmark-log, session 19)."""
    tensors = []
    for image in images:
        try:
            tensors.append(torch.from_numpy(image))
        except ValueError:  # negative strides (a flipped view): PyTorch cannot view those
            tensors.append(torch.from_numpy(np.ascontiguousarray(image)))
    return torch.stack(tensors, out=out) if out is not None else torch.stack(tensors)


# Threads that gather a batch's host frames beside the GPU thread: a fleet of 32 cameras at 720p30 is 2.6 GB/s of
# frames, and one thread copying them took a quarter of the GPU thread's time (session 19). A quarter of the cores
# at most (the rest decode and capture), none where there are fewer than eight.
FRAME_COPIERS = max(1, min(4, (os.cpu_count() or 1) // 4))
_BYTES_A_COPIER = 8 << 20  # (a smaller share is not worth a thread's hand-over)
_copy_pool: ThreadPoolExecutor | None = None
_copy_pool_lock = threading.Lock()


def gather_frames(images: Sequence[np.ndarray], out: torch.Tensor, copiers: int = FRAME_COPIERS) -> torch.Tensor:
    """``stack_frames`` into ``out``, the images shared out between up to ``copiers`` threads (this one among them)."""
    global _copy_pool
    parts = min(copiers, len(images), max(1, out.nbytes // _BYTES_A_COPIER))
    if parts <= 1:
        return stack_frames(images, out=out)
    with _copy_pool_lock:  # (one pool for every pipeline of the process; its threads start as they are needed)
        if _copy_pool is None:
            _copy_pool = ThreadPoolExecutor(max_workers=3, thread_name_prefix="emopipe-copy")
        pool = _copy_pool
    bounds = [len(images) * i // parts for i in range(parts + 1)]
    others = [pool.submit(stack_frames, images[a:b], out[a:b]) for a, b in pairwise(bounds[1:])]
    stack_frames(images[:bounds[1]], out=out[:bounds[1]])
    for copied in others:
        copied.result()
    return out


class PinnedBatches:
    """Page-locked host buffers, one batch of frames each, reused in turn by the GPU thread.

    A batch is gathered into one with a single host copy per frame and sent to the device as one
    asynchronous copy (the CPU does not wait for it); a buffer is refilled only once the copy that
    last read it has run.
    """

    def __init__(self, buffers: int = 3, frames: int = 1) -> None:
        self._ring: list[tuple[torch.Tensor | None, Any]] = [(None, None)] * buffers
        self._next = 0
        self.frames = frames  # rows a buffer holds at least: the largest batch, so no buffer grows in steps

    def reserve(self, height: int, width: int) -> None:
        """Allocate every buffer not yet allocated, for frames of this size: page-locked memory is slow to get (the
        first batch of a 24-camera fleet waited 47 ms for it on an H100), so a live run gets it before its first
        frame is taken, not on it."""
        shape = (self.frames, height, width, 3)
        self._ring = [(buffer, copied) if buffer is not None else (self._allocate(shape), None)
                      for buffer, copied in self._ring]

    def _allocate(self, shape: tuple[int, ...]) -> torch.Tensor:
        return torch.empty((max(shape[0], self.frames), *shape[1:]), dtype=torch.uint8, pin_memory=True)

    def upload(self, images: Sequence[np.ndarray], device: torch.device) -> tuple[torch.Tensor, Any]:
        """The images as one N×H×W×3 device tensor, and the event marking its copy (on the current stream)."""
        slot = self._next
        self._next = (self._next + 1) % len(self._ring)
        buffer, copied = self._ring[slot]
        if copied is not None:
            copied.synchronize()
        shape = (len(images), *images[0].shape)
        if buffer is None or buffer.shape[0] < shape[0] or tuple(buffer.shape[1:]) != shape[1:]:
            buffer = self._allocate(shape)
        staged = buffer[: shape[0]]
        gather_frames(images, staged)
        pixels = staged.to(device, non_blocking=True)
        copied = torch.cuda.Event()  # type: ignore[no-untyped-call]
        copied.record()
        self._ring[slot] = (buffer, copied)
        return pixels, copied


class NewestPerStream:
    """Live: one waiting item per stream, handed out in the order the streams started waiting.

    A newer frame of a stream replaces its waiting one (a drop) and keeps its place in line, so with
    several cameras each keeps only its newest frame and none waits behind another's stream of frames;
    with one camera it is a one-frame slot. ``put`` (the end sentinel) never replaces and never blocks.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._waiting: OrderedDict[Hashable, Any] = OrderedDict()
        self._ends = 0

    def offer(self, stream: Hashable, item: Any) -> Any | None:
        """Hand over ``item`` as ``stream``'s newest; returns the item it replaced (None when there was none)."""
        with self._cond:
            replaced = self._waiting.get(stream)
            self._waiting[stream] = item  # (an existing key keeps its position)
            self._cond.notify()
            return replaced

    def put(self, item: Any, timeout: float | None = None) -> None:
        with self._cond:
            self._ends += 1
            self._waiting[("end", self._ends)] = item
            self._cond.notify()

    def get(self, timeout: float | None = None) -> Any:
        with self._cond:
            if not self._cond.wait_for(lambda: bool(self._waiting), timeout):
                raise queue.Empty
            return self._waiting.popitem(last=False)[1]

    def qsize(self) -> int:
        with self._cond:
            return len(self._waiting)

    def empty(self) -> bool:
        return self.qsize() == 0


FrameKey = tuple[int, int]  # (stream, index): a frame's identity in a run


@dataclass
class PipelineSettings:
    detect_batch: int = 1  # frames per detector call (its static batch)
    max_pending_frames: int = 0  # frames waiting for an unfilled batch before it is flushed (0: 2 × batch)
    queue_frames: int = 16  # decoded frames buffered ahead of the GPU thread
    pin_memory: bool = True  # CUDA: frames reach the GPU through page-locked buffers (asynchronous copies)
    copy_stream: bool = True  # CUDA: those copies run on a side stream, beside the kernels already queued
    overlap: bool = True  # detect batch k+1 on the device while the host finishes batch k (when frames are waiting)
    gil_switch_interval_s: float = 0.0005  # CUDA: how soon a thread back from C code (decoding, a GPU wait) runs
    # Detect on every K-th frame only; the frames in between get boxes from the key frames around them
    # (interpolated; live: carried from the last one). Frame batches hold detect_batch × K frames.
    detect_every: int = 1
    # Live sources: the GPU thread always gets the newest frame (one waiting is replaced: dropped and
    # counted, never queued), and a partial face batch runs once its oldest face waited max_wait_s.
    live: bool = False
    max_wait_s: float | None = None


class Pipeline:
    """Runs one source through detector, cropper, batcher and engine into the sinks."""

    def __init__(self, source: Source, detector: FaceDetector, cropper: FaceCropper, engine: Engine,
                 sinks: Sequence[Sink], observers: Sequence[Observer] = (),
                 settings: PipelineSettings | None = None) -> None:
        self.source = source
        self.detector = detector
        self.cropper = cropper
        self.engine = engine
        self.sinks = list(sinks)
        self.observers = list(observers)
        self.settings = settings or PipelineSettings()
        self.device = engine.device
        self._stop = threading.Event()
        # live: each stream's newest frame only (one slot per camera); files: frames decoded ahead, in order
        self._frames: Any = (NewestPerStream() if self.settings.live else
                             queue.Queue(maxsize=max(2, self.settings.queue_frames)))
        self._results: queue.Queue[Any] = queue.Queue(maxsize=max(2, 2 * engine.batch_size))
        self._latencies: list[float] = []
        self._taken: dict[FrameKey, float] = {}  # when the GPU thread took each frame (until it is written)
        self._faces = 0
        self._errors: list[BaseException] = []
        self.clock = StageClock(self.device, self._observe_stage)
        self._stage_totals: dict[str, float] = {}
        # EmoNet batches launched, not yet collected: (batch, its pending outputs, seconds its launch took)
        self._inferring: deque[tuple[FaceBatch[FrameKey], PendingOutput, float]] = deque()
        self._pinned = (PinnedBatches(frames=self.settings.detect_batch * self.settings.detect_every)
                        if self.device.type == "cuda" and self.settings.pin_memory else None)
        self._copy_stream = (torch.cuda.Stream(self.device)  # type: ignore[no-untyped-call]
                             if self._pinned is not None and self.settings.copy_stream
                             else None)
        self._started = 0.0
        self._finished = 0.0
        self.first_written_at: float | None = None  # time.perf_counter() when the first frame's results were out
        self.frames_dropped = 0  # live: frames replaced before the GPU thread took them
        self.frames_detected = 0
        self._keyframes: StreamKeyframes[_FrameOnDevice] | None = None  # each source its own key frames
        if self.settings.detect_every > 1:
            self._keyframes = StreamKeyframes(self.settings.detect_every, interpolate=not self.settings.live)

    # -- observers ---------------------------------------------------------------------------

    def _observe_stage(self, stage: str, seconds: float) -> None:
        self._stage_totals[stage] = self._stage_totals.get(stage, 0.0) + seconds
        for o in self.observers:
            o.stage(stage, seconds)

    def _observe_queues(self) -> None:
        for o in self.observers:
            o.queue_depth("frames", self._frames.qsize())
            o.queue_depth("results", self._results.qsize())

    # -- threads ---------------------------------------------------------------------------

    def _read(self) -> None:
        """Reader thread: decode ahead into the bounded frame queue."""
        try:
            if self._keyframes is not None and hasattr(self.source, "on_read"):
                # (--detect-every: a stream's last frames wait for a key frame after them, or for its end; a fed
                # chain of sources may wait a long time for the next one, and its worker for these frames' rows)
                self.source.on_read = lambda stream: self._put(self._frames, _StreamRead(stream))
            frames = iter(self.source)
            while not self._stop.is_set():
                t = time.perf_counter()
                frame = next(frames, None)
                if frame is None:
                    break
                if self.settings.live:  # next() waited for the camera; its capture thread decodes
                    self._put_newest(frame)
                    continue
                if frame.read_time < self._started:  # decoded before the run (a source checks its first
                    frame = replace(frame, read_time=self._started)  # type: ignore[type-var]  # (frames are dataclasses)
                self._observe_stage("decode", time.perf_counter() - t)
                self._put(self._frames, frame)
        except BaseException as exc:  # handed to the GPU thread, which raises it
            self._errors.append(exc)
            self._count_error(exc, "source" if isinstance(exc, SOURCE_ERRORS) else "decode")
        finally:
            self._put(self._frames, _END)

    def _write(self) -> None:
        """Writer thread: sinks in frame order; latency is measured when a frame's results are out.

        A sink with ``flush`` may hold the rows of a few frames and write them in one go: it is flushed
        whenever no further result is waiting (so a writer that keeps up writes every frame at once, and one
        that falls behind writes several frames' rows per call) and at the end."""
        flushing = [sink for sink in self.sinks if hasattr(sink, "flush")]
        ended = False
        try:
            while True:
                item = self._results.get()
                if item is _END:
                    ended = True
                    for sink in flushing:
                        sink.flush()
                    return
                t = time.perf_counter()
                for sink in self.sinks:
                    sink.write(item)
                if self._results.empty():  # nothing waiting: hand the rows held back to the OS now
                    for sink in flushing:
                        sink.flush()
                done = time.perf_counter()
                if self.first_written_at is None:
                    self.first_written_at = done
                self._observe_stage("write", done - t)
                latency = done - item.frame.read_time
                self._latencies.append(latency)
                self._faces += len(item.faces)
                taken = self._taken.pop((item.frame.stream, item.frame.index), item.frame.read_time)
                for o in self.observers:
                    o.frame(item, latency)
                    o.frame_split(max(0.0, taken - item.frame.read_time), done - taken)
        except BaseException as exc:
            self._errors.append(exc)
            # the recorder refuses the model's NaN/inf outputs (a WeightsError): the model failed, not the writing
            self._count_error(exc, "infer" if isinstance(exc, WeightsError) else "write")
            self._stop.set()
            while not ended and self._results.get() is not _END:  # keep the GPU thread from blocking on a full queue
                pass

    def _put(self, q: queue.Queue[Any], item: Any) -> bool:
        """Blocking put that gives up (False) only once the pipeline is stopping; nothing is discarded."""
        while not self._stop.is_set():
            try:
                q.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def _put_newest(self, frame: Frame) -> None:
        """Live: hand the GPU thread only each stream's newest frame; one still waiting is dropped and counted."""
        if self._frames.offer(frame.stream, frame) is None:
            return
        self.frames_dropped += 1
        for o in self.observers:
            o.dropped(1)
            o.stream_dropped(frame.stream, 1)

    def _next_frame(self, due_in: float | None = None) -> Any:
        """The next frame; _DUE once ``due_in`` seconds passed without one (a partial batch is due)."""
        deadline = None if due_in is None else time.monotonic() + due_in
        while True:
            wait = 0.1 if deadline is None else min(0.1, max(0.0, deadline - time.monotonic()))
            try:
                return self._frames.get(timeout=wait)
            except queue.Empty:
                if self._stop.is_set():
                    return _END
                if deadline is not None and time.monotonic() >= deadline:
                    return _DUE

    # -- the GPU thread -----------------------------------------------------------------------

    def _frame_batches(self, batcher: StaticBatcher[FrameKey]) -> Iterator[_FrameBatch]:
        """Frames from the reader, in batches of one frame size holding up to the detector's batch of
        key frames; an empty batch when the batcher's partial batch fell due before another frame came (live)."""
        batch = _FrameBatch()
        while True:
            if batch.frames and self._frames.empty():
                # Don't hold frames back waiting for a full batch when decoding is the bottleneck.
                yield batch
                batch = _FrameBatch()
            item = self._next_frame(batcher.seconds_until_due())
            if item is _DUE:
                yield _FrameBatch()
                continue
            if item is _END:
                break
            if isinstance(item, _StreamRead):
                if batch.frames:
                    yield batch
                    batch = _FrameBatch()
                yield _FrameBatch(read=item.stream)
                continue
            self._taken[(item.stream, item.index)] = time.perf_counter()
            if batch.frames and (item.height, item.width) != (batch.frames[0].height, batch.frames[0].width):
                yield batch
                batch = _FrameBatch()
            batch.frames.append(item)
            batch.keys.append(self._keyframes is None
                              or self._keyframes.is_key(item.stream, (item.height, item.width), item.reconnects))
            # A batch ends on a key frame, so the frames before it have their boxes once it is detected
            # and are cropped with it, in one call (with --detect-every; otherwise every frame is a key).
            if sum(batch.keys) == self.detector.batch_size:
                yield batch
                batch = _FrameBatch()
            self._observe_queues()
        if batch.frames:
            yield batch

    def _upload(self, batch: list[Frame]) -> torch.Tensor:
        """The batch's pixels on the device, N×H×W×3 uint8 BGR."""
        device_pixels = [frame.device_pixels for frame in batch]
        if any(pixels is not None for pixels in device_pixels):  # decoded on the GPU, copied out on its stream
            if self.device.type == "cuda":
                main = torch.cuda.current_stream(self.device)
                for pixels in device_pixels:  # the decoder's memory: not reused before this stream is done with it
                    if pixels is not None:
                        pixels.record_stream(main)
            if all(pixels is not None for pixels in device_pixels):
                return torch.stack(device_pixels)  # type: ignore[arg-type]
            # A batch across a source NVDEC decodes and one it cannot (decoded by OpenCV): those frames are uploaded
            # here, in their places (the device frames were once stacked alone: fewer rows than frames).
            on_host = [frame.bgr for frame, pixels in zip(batch, device_pixels) if pixels is None]
            uploaded = iter(stack_frames(on_host).to(self.device).unbind(0))
            return torch.stack([pixels if pixels is not None else next(uploaded) for pixels in device_pixels])
        images = [frame.bgr for frame in batch]
        if self.device.type != "cuda":
            return stack_frames(images)
        if self._pinned is None:
            return stack_frames(images).to(self.device)  # waits for the queued work, then copies
        if self._copy_stream is None:
            return self._pinned.upload(images, self.device)[0]
        # Copied on a side stream, so the upload overlaps the kernels still queued on the main stream
        # (the previous batch's detection, crops, EmoNet) instead of waiting behind them.
        main = torch.cuda.current_stream(self.device)
        with torch.cuda.stream(self._copy_stream):
            pixels, copied = self._pinned.upload(images, self.device)
        main.wait_event(copied)
        pixels.record_stream(main)  # side-stream memory: not reused before the main stream is done with it
        return pixels

    def _infer(self, batches: list[FaceBatch[FrameKey]],
               assembler: FrameAssembler[FrameKey, FrameResult, FaceResult]) -> None:
        """Launch EmoNet on each batch; with overlap, the newest batch is collected only once the next is launched
        or nothing is waiting, so the host crops and detects while EmoNet runs (live: only while frames wait, so a
        camera that is kept up with gets its results at once)."""
        depth = 1 if self.settings.overlap and not self.settings.live else 0
        for batch in batches:
            t = time.perf_counter()
            pending = launch(self.engine, batch.crops)
            self._inferring.append((batch, pending, time.perf_counter() - t))
            while len(self._inferring) > depth:
                self._deliver_oldest(assembler)

    def _deliver_oldest(self, assembler: FrameAssembler[FrameKey, FrameResult, FaceResult]) -> None:
        batch, pending, launch_s = self._inferring.popleft()
        t = time.perf_counter()
        out: EngineOutput = pending.collect()  # waits for the GPU if it has not finished yet
        seconds = launch_s + time.perf_counter() - t
        self._stage_totals["infer"] = self._stage_totals.get("infer", 0.0) + seconds
        for o in self.observers:
            o.batch(batch.size, batch.real, seconds)
        probabilities = out.probabilities.numpy()
        valence, arousal = out.valence.tolist(), out.arousal.tolist()  # Python floats, one call each
        landmarks = out.landmarks.numpy() if out.landmarks is not None else None
        for i, slot in enumerate(batch.slots):  # padding slots have no entry here: dropped
            assembler.deliver(slot, FaceResult(probabilities[i], valence[i], arousal[i],
                                               None if landmarks is None else landmarks[i]))
        self.clock.collect()

    def _deliver_all(self, assembler: FrameAssembler[FrameKey, FrameResult, FaceResult]) -> None:
        while self._inferring:
            self._deliver_oldest(assembler)

    def _abandon_inferring(self) -> None:
        """After a failure: collect what is still launched (an engine holds its turn until then), keep nothing."""
        while self._inferring:
            _, pending, _ = self._inferring.popleft()
            try:
                pending.collect()
            except Exception:  # the failure being raised is the one to report
                logger.debug("a launched EmoNet batch failed while stopping", exc_info=True)

    def _release(self, assembler: FrameAssembler[FrameKey, FrameResult, FaceResult]) -> None:
        for result, faces in assembler.ready():
            result.faces = faces
            self._put(self._results, result)

    def run(self) -> None:
        """Process the whole source. Raises what a stage raised, after the files are closed."""
        batcher: StaticBatcher[FrameKey] = StaticBatcher(self.engine.batch_size, max_wait_s=self.settings.max_wait_s)
        assembler: FrameAssembler[FrameKey, FrameResult, FaceResult] = FrameAssembler()
        max_pending = self.settings.max_pending_frames or 2 * self.engine.batch_size
        self._started = time.perf_counter()
        threads, switch = torch.get_num_threads(), sys.getswitchinterval()
        if self.device.type == "cuda":
            # The host's cores belong to the video decoder: PyTorch's few CPU ops here (box decoding,
            # NMS) gain nothing from a thread pool whose spinning workers starve FFmpeg's threads.
            torch.set_num_threads(min(threads, 2))
            # The GPU thread releases the GIL at every wait on the GPU; with the default 5 ms switch
            # interval it can then wait that long to get it back from the reader or writer thread.
            sys.setswitchinterval(self.settings.gil_switch_interval_s)
        info = self.source.info
        if self.settings.live and self._pinned is not None and info.height and info.width:
            self._pinned.reserve(info.height, info.width)  # (before the reader starts the cameras)
        reader = threading.Thread(target=self._read, name="emopipe-reader", daemon=True)
        writer = threading.Thread(target=self._write, name="emopipe-writer", daemon=True)
        reader.start()
        writer.start()
        in_flight: _InFlight | None = None  # detection launched, not yet collected
        try:
            for batch in self._frame_batches(batcher):
                if self._stop.is_set():
                    break
                if batch.read is not None and self._keyframes is not None:  # its last frames, boxes as at an end
                    if in_flight is not None:
                        self._complete(in_flight, batcher, assembler)
                        in_flight = None
                    self._cut(self._keyframes.end(batch.read), batcher, assembler)
                if batch.frames:
                    # Software pipelining: the device detects this batch while the host finishes the
                    # previous one (NMS, crops, EmoNet), so the GPU does not wait for Python.
                    launched = self._launch(batch)
                    if in_flight is not None:
                        self._complete(in_flight, batcher, assembler)
                    in_flight = launched
                    if self.settings.live or not self.settings.overlap or self._frames.empty():
                        # No next batch is ready to overlap with: finish now rather than add latency. (Live
                        # too: frames waiting are a backlog, which overlapping clears sooner — a camera fleet
                        # the GPU thread could not keep up with in turn, session 19.)
                        self._complete(in_flight, batcher, assembler)
                        in_flight = None
                self._infer(batcher.due(), assembler)  # nothing unless max_wait_s is set (live)
                if len(assembler) > max_pending:  # many faceless frames behind an unfilled batch
                    self._infer(batcher.flush(), assembler)
                    self._deliver_all(assembler)
                elif self._inferring and self._frames.empty():  # nothing to overlap with: results out now
                    self._deliver_all(assembler)
                self._release(assembler)
            if not self._stop.is_set():
                if in_flight is not None:
                    self._complete(in_flight, batcher, assembler)
                if self._keyframes is not None:  # the frames after the last key frame
                    self._cut(self._keyframes.flush(), batcher, assembler)
                self._infer(batcher.flush(), assembler)
                self._deliver_all(assembler)
                self._release(assembler)
            self.clock.collect(wait=True)
        except BaseException as exc:
            self._count_error(exc, self.clock.current or "infer")
            raise
        finally:
            self._abandon_inferring()
            self._stop.set()  # the reader stops; the writer still drains what was computed
            self._finish(writer, reader)
            self._finished = time.perf_counter()
            torch.set_num_threads(threads)
            sys.setswitchinterval(switch)
        if self._errors:
            raise self._errors[0]

    def _count_error(self, exc: BaseException, kind: str) -> None:
        """The observers hear of a stage's failure (the metrics' errors_total); Ctrl-C is not one."""
        if isinstance(exc, Exception):
            for o in self.observers:
                try:
                    o.error(kind)
                except Exception:  # counting must not hide the failure being raised
                    logger.debug("an observer failed to count an error", exc_info=True)

    def _finish(self, writer: threading.Thread, reader: threading.Thread) -> None:
        # The writer gets its sentinel even if the queue is full of results (they are written first).
        while writer.is_alive():
            try:
                self._results.put(_END, timeout=0.1)
                break
            except queue.Full:
                continue
        writer.join()
        # it sees the stop flag after its current frame; a live source that stalled is closed after us
        reader.join(timeout=0.5 if self.settings.live else 5.0)
        for sink in self.sinks:
            try:
                sink.close()
            except BaseException as exc:
                self._errors.append(exc)

    def _launch(self, batch: _FrameBatch) -> _InFlight:
        """Upload a batch of frames and queue its key frames' detection on the device; returns without waiting."""
        keys = batch.keys
        with self.clock.stage("detect"):
            pixels = self._upload(batch.frames)
            pending = None
            if all(keys):
                pending = self.detector.launch(pixels)
            elif any(keys):
                pending = self.detector.launch(torch.stack([pixels[i] for i, key in enumerate(keys) if key]))
        self.frames_detected += sum(keys)
        return _InFlight(batch.frames, pixels, keys, pending)

    def _complete(self, launched: _InFlight, batcher: StaticBatcher[FrameKey],
                  assembler: FrameAssembler[FrameKey, FrameResult, FaceResult]) -> None:
        """Finish a launched batch: detections on the host, crops, and into the face batches."""
        t = time.perf_counter()
        found = iter(launched.detections.collect() if launched.detections is not None else [])
        self._observe_stage("nms", time.perf_counter() - t)
        located: list[Located[_FrameOnDevice]] = []
        for row, (frame, key) in enumerate(zip(launched.frames, launched.keys)):
            detections = next(found) if key else None
            where = _FrameOnDevice(frame, launched.pixels, row)
            if self._keyframes is None:
                assert detections is not None
                located.append(Located(where, detections, detected=True))
            else:
                located += self._keyframes.add(frame.stream, where, (frame.height, frame.width), detections)
        self._cut(located, batcher, assembler)

    def _cut(self, located: list[Located[_FrameOnDevice]], batcher: StaticBatcher[FrameKey],
             assembler: FrameAssembler[FrameKey, FrameResult, FaceResult]) -> None:
        """Crop located frames (in frame order) and add their faces to the face batches: one batched
        crop per run of frames from the same upload."""
        for _, run in groupby(located, key=lambda entry: id(entry.item.pixels)):
            self._crop_run(list(run), batcher, assembler)

    def _crop_run(self, located: list[Located[_FrameOnDevice]], batcher: StaticBatcher[FrameKey],
                  assembler: FrameAssembler[FrameKey, FrameResult, FaceResult]) -> None:
        pixels = located[0].item.pixels
        boxes = [np.zeros((0, 4), np.float32)] * pixels.shape[0]
        for entry in located:
            boxes[entry.item.row] = entry.detections.boxes
        with self.clock.stage("crop"):
            crops = self.cropper.crop(pixels, boxes)
        per_row = np.bincount(crops.frame_of_crop, minlength=pixels.shape[0])
        counts: list[tuple[FrameKey, int]] = []
        first = 0
        for entry in located:  # rows in increasing order, as the crops are grouped
            frame = entry.item.frame
            count = int(per_row[entry.item.row])
            faces = crops.face_of_crop[first:first + count]
            found = entry.detections
            if count != len(found):  # a box left nothing to crop once clipped to the frame: not a face row
                found = Detections(found.boxes[faces], found.scores[faces])
            result = FrameResult(frame=frame, detections=found,
                                 crop_boxes=crops.boxes_used[first:first + count], detected=entry.detected)
            key = (frame.stream, frame.index)  # unique in a run, also over several sources
            assembler.expect(key, result, count)
            counts.append((key, count))
            first += count
        self._infer(batcher.add_many(crops.crops, counts), assembler)

    def stop(self) -> None:
        """Stop reading (from any thread); what was already computed is still written, then :meth:`run` returns."""
        self._stop.set()

    def summary(self, **fields: Any) -> RunSummary:
        """The run's figures; ``seconds`` and the rates cover processing, start-up is reported apart."""
        elapsed = (self._finished or time.perf_counter()) - self._started
        frames = len(self._latencies)
        steady = sorted(self._latencies[1:])
        return RunSummary(
            source=self.source.info.uri,
            decoder=getattr(self.source, "decoder", "opencv"),
            frames=frames,
            detect_every=self.settings.detect_every,
            frames_detected=self.frames_detected,
            faces=self._faces,
            seconds=elapsed,
            fps=frames / elapsed if elapsed else 0.0,
            faces_per_s=self._faces / elapsed if elapsed else 0.0,
            first_frame_latency_s=self._latencies[0] if self._latencies else None,
            steady_latency_p50_s=percentile(steady, 0.5),
            steady_latency_p99_s=percentile(steady, 0.99),
            stage_seconds={k: round(v, 4) for k, v in self._stage_totals.items()},
            ended_early=getattr(self.source, "ended_early", None),
            damaged=getattr(self.source, "damaged", None),
            frames_skipped=getattr(self.source, "frames_skipped", 0),
            engine=self.engine.info(),
            **fields,
        )
