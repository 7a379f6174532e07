"""Camera fleets: several cameras and streams in one process, through one pipeline (``emopipe rtsp://a
http://b --webcam 0 -o DIR``, or ``--list cameras.txt``).

Each camera is a :class:`~emopipe.io.live.LiveSource` of its own: its capture thread keeps only its newest
frame, counts its drops and reconnects on its own with backoff, so a lost camera never stops the others. A
forwarding thread per camera hands that newest frame to the fleet's inbox (:class:`NewestPerStream`: one
frame per camera, a newer one replacing it), and the pipeline's GPU thread takes the cameras' frames in
turn: frames of all cameras share the detector's and EmoNet's small static batches, a partial batch runs
after ``--max-wait-ms``, and no camera's frames queue behind another's.

On the writer thread, :class:`FleetSink` hands each frame to its camera's tracker and rows file (in
``DIR``, named as a many-source run names them, written in place as the rows come) and its view for
``--serve`` / ``--show``. A camera that has ended (lost past ``--reconnect-timeout``, or at ``--end`` /
``--max-frames``) is finished once its last frame is out: its summary is written and its line appended
to ``DIR/manifest.jsonl``. The run ends when every camera has ended, or on Ctrl-C / SIGTERM; then
``DIR/summary.json`` gets the run and a ``cameras`` list. ``DIR`` is the run's alone while it runs (a lock on
``DIR/.emopipe.lock``): a second run started into it at the same time is refused, not interleaved.

Over Ray (:mod:`emopipe.cluster_cameras`) each worker runs a fleet of its share of the cameras the same way, without a
manifest (its driver writes the lines and ``summary.json``); a camera moved to it from a worker that died goes on in
its rows file (:class:`~emopipe.pipeline.many.CameraSoFar`).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from emopipe.config import RunConfig
from emopipe.errors import EmopipeError, OutputError, SourceUnavailableError
from emopipe.io.live import LiveOptions, LiveSource
from emopipe.io.records import RecordWriter, open_writer, rows_so_far
from emopipe.pipeline.archive import Manifest, PlannedSource, SourceResult, _write_json
from emopipe.pipeline.hooks import Observer, Sink
from emopipe.pipeline.live import LiveStats, _metrics_page, watch_source
from emopipe.pipeline.many import CameraSoFar
from emopipe.pipeline.runner import NewestPerStream, PipelineSettings
from emopipe.pipeline.sinks import FaceRecorder, RecordSink
from emopipe.pipeline.timing import percentile
from emopipe.types import Frame, FrameResult, SourceInfo

logger = logging.getLogger(__name__)

TILE_WIDTH = 1280  # --show: the tiled window's width in pixels
CLOSE_WAIT_S = 2.0  # how long closing a fleet waits for its cameras' capture threads, all together


@dataclass
class Camera:
    """One camera of a fleet: its source, its numbers, its files, and how far its frames have got."""

    planned: PlannedSource
    stats: LiveStats
    so_far: CameraSoFar | None = None  # moved from a Ray worker that died: what that worker (and any before) did
    rows_before: int = 0  # (moved) its rows file's rows when it came: the earlier workers' faces
    source: LiveSource | None = None  # None when it could not be opened
    error: EmopipeError | None = None  # could not be opened, or lost for good
    ended: bool = False  # its frames stopped coming for good (lost, --end, --max-frames, stopped)
    completed: bool = False  # it ended as asked (--end, --max-frames, a finite stream's end), not lost or stopped
    offered: int = 0  # frames handed to the fleet's inbox (each is written or dropped, unless the run stops)
    written: int = 0  # frames whose rows were written
    observed: int = 0  # of them, frames the observers have seen too (its latencies, for its summary)
    faces: int = 0
    # replaced before they were taken: in the fleet's inbox (counted by its forwarding thread) and in the
    # pipeline's slot (by the reader thread); each counter has one writer, so no increment is lost
    inbox_dropped: int = 0
    slot_dropped: int = 0
    on_drop: Callable[[int], None] | None = None  # drops in the fleet's inbox, to the metrics
    hub: Any = None  # its FrameHub (--serve)
    view: np.ndarray | None = None  # its newest annotated frame (--show tiles them)
    sink: RecordSink | None = None
    writer: RecordWriter | None = None
    recording: Any = None  # its TimedVideoWriter (--record mp4|mkv|avi)
    recording_error: OutputError | None = None  # its recording stopped (FFmpeg failed): it fails, its rows go on
    result: SourceResult | None = None  # once finished
    facts: dict[str, Any] = field(default_factory=dict)  # its figures when it finished (its summary)
    started_s: float = field(default_factory=time.perf_counter)

    @property
    def video_part(self) -> int:
        """Which part of its recording this fleet writes: 1, or (moved from Ray workers that died) one more than
        its moves; the earlier parts are the earlier workers' files."""
        return (self.so_far.moves if self.so_far is not None else 0) + 1

    @property
    def position(self) -> int:
        return self.planned.position

    @property
    def name(self) -> str:
        return self.planned.shown_as

    @property
    def dropped(self) -> int:
        return self.inbox_dropped + self.slot_dropped + (self.source.dropped if self.source is not None else 0)

    @property
    def done(self) -> bool:
        """Ended, and every frame it offered is out (written and seen by the observers, or dropped)."""
        return self.ended and self.observed + self.inbox_dropped + self.slot_dropped >= self.offered

    def numbers(self) -> dict[str, Any]:
        """Its numbers of the moment (the page's cell, /stats.json), with its state."""
        numbers = self.stats.numbers()
        numbers["frames_dropped"] = self.dropped
        numbers["up"] = self.source is not None and self.source.up
        if self.error is not None:
            numbers["state"] = "lost"
            numbers["error"] = str(self.error)
        elif self.ended:
            numbers["state"] = "ended"
        return numbers


class FleetSource:
    """The cameras' frames as one live source: each camera's newest frame, the cameras in turn.

    Iteration ends once every camera has ended; a camera lost for good is recorded on its :class:`Camera`
    (``error``) and the others go on.
    """

    decoder = "opencv"
    ended_early: str | None = None  # (never set: a camera lost for good is said by its Camera, not as a file's end)

    def __init__(self, cameras: Sequence[Camera], stop: threading.Event | None = None) -> None:
        self.cameras = list(cameras)
        self._inbox = NewestPerStream()
        self._stop = stop or threading.Event()  # (a Ray worker's: its driver stops it)
        self._threads: list[threading.Thread] = []
        self.on_idle: Callable[[], None] | None = None  # called while no camera has a new frame
        first = next(c.source for c in self.cameras if c.source is not None)
        self.info = SourceInfo(uri=f"{len(self.cameras)} cameras", kind=first.info.kind, fps=None, frame_count=None,
                               width=first.info.width, height=first.info.height)
        for camera in self.cameras:
            if camera.source is None:
                camera.ended = True

    def _start(self) -> None:
        """Start forwarding when the pipeline starts reading: frames replaced while the models load are skipped,
        not dropped, and each camera's --end counts from then (its capture thread keeps it drained till then)."""
        for camera in self.cameras:
            if camera.source is None:
                continue
            thread = threading.Thread(target=self._forward, args=(camera,), name=f"emopipe-camera-{camera.position}",
                                      daemon=True)
            self._threads.append(thread)
            thread.start()

    @property
    def expected_frames(self) -> int | None:
        return None

    def _forward(self, camera: Camera) -> None:
        assert camera.source is not None
        try:
            for frame in camera.source:
                camera.offered += 1  # (before the frame is in the inbox: a check never counts it done too early)
                if self._inbox.offer(camera.position, replace(frame, stream=camera.position)) is not None:  # type: ignore[type-var]
                    camera.inbox_dropped += 1
                    camera.stats.dropped(1)
                    if camera.on_drop is not None:
                        camera.on_drop(1)
                if self._stop.is_set():
                    break
            else:
                camera.completed = not self._stop.is_set()
        except SourceUnavailableError as exc:  # lost for good: this camera ends, the others go on
            camera.error = exc
            logger.warning("%s; the other cameras go on", exc)
        except Exception as exc:  # a decoder's own failure: likewise
            camera.error = SourceUnavailableError(f"reading {camera.name} failed: {exc}")
            logger.warning("%s; the other cameras go on", camera.error)
        finally:
            camera.ended = True

    def __iter__(self) -> Iterator[Frame]:
        if not self._threads:
            self._start()
        while not self._stop.is_set():
            try:
                frame: Frame = self._inbox.get(timeout=0.1)
            except queue.Empty:  # nothing new from any camera yet
                over = all(c.ended for c in self.cameras) and self._inbox.empty()
                if self.on_idle is not None:  # (after the check: cameras that ended by then are settled)
                    self.on_idle()
                if over:
                    return
                continue
            yield frame

    def stop(self) -> None:
        """End the run after the current frames (the window's q key)."""
        self._stop.set()
        for camera in self.cameras:
            if camera.source is not None:
                camera.source.stop()

    def close(self) -> None:
        self.stop()
        # each capture thread gets a share of a short wait: one stuck opening a stream that never answers must not
        # hold the exit (a container's stop gives 10 s); it is a daemon and ends on its own
        deadline = time.perf_counter() + CLOSE_WAIT_S
        for camera in self.cameras:
            if camera.source is not None:
                camera.source.close(wait_s=max(0.0, deadline - time.perf_counter()))
        for thread in self._threads:
            thread.join(timeout=5.0)

    def __enter__(self) -> FleetSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class FleetObserver(Observer):
    """Each frame's numbers to its camera (latency, faces), and drops in the pipeline to the camera they hit."""

    def __init__(self, fleet: Fleet) -> None:
        self.fleet = fleet

    def frame(self, result: FrameResult, latency_s: float) -> None:
        camera = self.fleet.cameras[result.frame.stream]
        camera.stats.frame(result, latency_s)
        camera.observed += 1

    def stream_dropped(self, stream: int, n: int) -> None:
        camera = self.fleet.cameras[stream]
        camera.slot_dropped += n
        camera.stats.dropped(n)


class FleetSink(Sink):
    """Each frame to its camera's rows and views; a camera that has ended is finished once its frames are out."""

    def __init__(self, fleet: Fleet, labels: Sequence[str]) -> None:
        self.fleet = fleet
        self.labels = tuple(labels)
        config = fleet.config
        for camera in fleet.cameras:
            if camera.source is None:
                continue
            # live rows are written in place, as they come: a file that grows while the camera runs
            camera.writer = open_writer(camera.planned.rows, fmt=config.format, labels=self.labels,
                                        landmarks=config.landmarks, detected=config.detect_every > 1, in_place=True,
                                        append=camera.so_far is not None)  # (moved: on after its rows so far)
            camera.sink = RecordSink(FaceRecorder(camera.source.info.uri, self.labels, smoothing=config.smooth,
                                                  precision=config.precision), camera.writer)
            video = camera.planned.video_part(camera.video_part)
            if video is not None:  # its annotated stream, in place, at its measured rate
                from emopipe.observe.recording import TimedVideoWriter

                camera.recording = TimedVideoWriter(video, _measured_fps(camera.source), writer=config.video_writer)

    def write(self, result: FrameResult) -> None:
        self.fleet.settle()  # (also called while no frame comes: see Fleet.open)
        camera = self.fleet.cameras[result.frame.stream]
        if camera.sink is None or camera.result is not None:
            return  # (never: a camera is finished only once all its frames are out)
        camera.sink.write(result)
        camera.written += 1
        camera.faces += len(result.faces)
        recording = camera.recording if camera.recording_error is None else None
        if recording is None and camera.hub is None and self.fleet.window_hub is None:
            return
        from emopipe.vision.annotate import draw

        drawn = draw(result.frame.bgr, camera.sink.last_records)
        if recording is not None:
            try:
                recording.write(drawn, result.frame.timestamp_s)
            except OutputError as exc:  # (FFmpeg stopped: a full disk) this camera fails at its end; the rest go on
                camera.recording_error = exc
                logger.warning("%s: its recording stopped (%s); its rows go on", camera.name, exc)
        if camera.hub is not None or self.fleet.window_hub is not None:
            self._show(camera, drawn.copy() if recording is not None else drawn)

    def _show(self, camera: Camera, drawn: np.ndarray) -> None:
        from emopipe.observe.livepage import draw_numbers, tile

        image = draw_numbers(drawn, camera.numbers())
        if camera.hub is not None:
            camera.hub.publish(image)
        if self.fleet.window_hub is not None:
            camera.view = image
            self.fleet.window_hub.publish(tile([c.view for c in self.fleet.cameras], TILE_WIDTH))

    def close(self) -> None:
        errors: list[BaseException] = []
        for camera in self.fleet.cameras:
            if camera.writer is not None:
                try:
                    camera.writer.commit(True)  # (in place: closes it)
                except BaseException as exc:
                    errors.append(exc)
            if camera.recording is not None:
                try:
                    camera.recording.close()  # (closed whole)
                except OutputError as exc:  # (FFmpeg failed) the camera's, said in its line
                    camera.recording_error = camera.recording_error or exc
        if errors:
            raise errors[0]


class Fleet:
    """Everything a fleet run adds, in the order the run needs it (the counterpart of LiveMode for one camera)."""

    def __init__(self, config: RunConfig, planned: Sequence[PlannedSource], directory: Path,
                 manifest: Manifest | None, *, on_finished: Callable[[Camera], None] | None = None,
                 so_far: Mapping[int, CameraSoFar] | None = None, stop: threading.Event | None = None) -> None:
        """``config`` is resolved for a live source (live defaults applied, options checked). Each camera's result
        gets its line in ``manifest`` as the camera ends, and goes to ``on_finished`` (with its figures). A Ray
        worker's fleet has no manifest (its driver writes the lines); it also gives the cameras moved to it from a
        worker that died (``so_far``, by camera position) and the event its driver sets to stop it (``stop``)."""
        from emopipe.observe.livepage import parse_address
        from emopipe.observe.window import check_display

        self.config = config
        self.directory = directory
        self.manifest = manifest
        self.on_finished = on_finished
        self.stop = stop
        self.options = LiveOptions(open_timeout_s=config.open_timeout, read_timeout_s=config.read_timeout,
                                   reconnect_timeout_s=config.reconnect_timeout, max_frames=config.max_frames,
                                   duration_s=config.end)
        self.serve_address = parse_address(config.serve) if config.serve else None
        if config.show:
            check_display()
        so_far = so_far or {}
        self.cameras = [Camera(p, LiveStats(p.shown_as), so_far.get(p.position)) for p in planned]
        self.source: FleetSource | None = None
        self.server: Any = None
        self.window_hub: Any = None
        self.metrics: Any = None
        self._lock = threading.Lock()

    def open(self, stack: ExitStack, registry: Any = None) -> FleetSource:
        """Serve the page, open every camera at once (one that cannot be opened is recorded as failed; if none
        can, its error is raised before any model loads), then open the window."""
        from emopipe.observe.livepage import FrameHub, LiveServer
        from emopipe.observe.window import WindowView

        if self.serve_address:
            for camera in self.cameras:
                camera.hub = FrameHub()
                stack.callback(camera.hub.close)
            self.server = LiveServer(*self.serve_address, [c.hub for c in self.cameras], self.numbers,
                                     metrics=None if registry is None else _metrics_page(registry))
            stack.callback(self.server.close)
            logger.info("live page on %s (%d streams)", self.server.url, len(self.cameras))
        openers = [threading.Thread(target=self._open_camera, args=(c,), daemon=True) for c in self.cameras]
        for thread in openers:
            thread.start()
        for thread in openers:
            thread.join()
        for camera in self.cameras:
            if camera.source is not None:
                stack.callback(camera.source.close, wait_s=1.0)
        opened = [c for c in self.cameras if c.source is not None]
        if not opened:  # each camera's line says why (the error raised names the first)
            for camera in self.cameras:
                self.finish(camera, interrupted=False)
            raise self.cameras[0].error or SourceUnavailableError("no camera could be opened")
        for camera in self.cameras:
            if camera.source is None:  # its line now, not at the run's end
                logger.warning("%s; the other cameras go on without it", camera.error)
                self.finish(camera, interrupted=False)
        self.source = stack.enter_context(FleetSource(self.cameras, self.stop))
        self.source.on_idle = self.settle  # a camera that ended while the others send nothing is finished too
        if self.config.show:
            self.window_hub = FrameHub()
            stack.callback(self.window_hub.close)
            window = WindowView(self.window_hub, f"emopipe: {len(self.cameras)} streams", on_quit=self.source.stop)
            stack.callback(window.close)
        return self.source

    def _open_camera(self, camera: Camera) -> None:
        options = self.options
        try:
            if camera.so_far is not None:  # moved: its frames numbered on, its --end and --max-frames what is left
                camera.rows_before, last = rows_so_far(camera.planned.rows)
                so_far = camera.so_far
                options = replace(options, first_index=max(so_far.first_index, 0 if last is None else last + 1),
                                  duration_s=so_far.end_s, max_frames=so_far.max_frames)
            camera.source = LiveSource(camera.planned.uri, options=options)
            camera.stats.source = camera.source
            info = camera.source.info
            logger.info("camera %d, %s: %d×%d, reading live (newest frame only)", camera.position, info.uri,
                        info.width, info.height)
        except EmopipeError as exc:
            camera.error = exc

    def frame_sizes(self) -> list[tuple[int, int]]:
        """The cameras' frame sizes (height, width), each once: the detector is warmed for each."""
        sizes = [(c.source.info.height, c.source.info.width) for c in self.cameras if c.source is not None]
        return list(dict.fromkeys(sizes))

    def settings(self) -> PipelineSettings:
        # --detect-every K: each camera its own key frames, later frames carrying its last key frame's boxes
        return PipelineSettings(detect_batch=self.config.detect_batch or 1, queue_frames=1, live=True,
                                max_wait_s=self.config.max_wait_ms / 1000, detect_every=self.config.detect_every)

    def sink(self, labels: Sequence[str]) -> FleetSink:
        return FleetSink(self, labels)

    def observers(self, metrics: Any) -> list[Observer]:
        """The cameras' numbers; with ``metrics``, each camera's drops, reconnections and state into them."""
        found: list[Observer] = [FleetObserver(self)]
        self.metrics = metrics
        if metrics is not None:
            for camera in self.cameras:
                if camera.source is not None:
                    watch_source(camera.source, metrics, camera.name)  # its capture slot's drops, reconnections, state
                    camera.on_drop = _drop_counter(metrics, camera.name)  # its drops in the fleet's inbox
                else:
                    metrics.set_source_state(camera.name, "failed")
                    metrics.error("source")  # could not be opened (one lost later is counted as it is finished)
        return found

    def numbers(self) -> dict[str, Any]:
        """The page's /stats.json: every stream's numbers, in the cameras' order."""
        streams = [c.numbers() for c in self.cameras]
        return {"streams": streams, "cameras": len(streams), "live": sum(s["state"] == "live" for s in streams)}

    # -- each camera's end, and the run's ----------------------------------------------------------

    def settle(self) -> None:
        """Finish every camera that has ended and whose frames are all out."""
        for camera in self.cameras:
            if camera.result is None and camera.source is not None and camera.done:
                self.finish(camera, interrupted=False)

    def finish(self, camera: Camera, interrupted: bool) -> SourceResult:
        """Close the camera's rows, write its summary and its manifest line (once), and say it is finished."""
        with self._lock:
            if camera.result is not None:
                return camera.result
            if camera.source is not None:  # its part is over (Ctrl-C leaves it capturing): ended in the last
                camera.source.stop()      # metrics, not up (a camera lost for good stays failed)
            outputs: dict[str, str] = {}
            if camera.writer is not None:
                camera.writer.commit(True)
            if camera.writer is not None or camera.rows_before:  # (moved, not reopened here: its earlier rows)
                outputs["rows"] = str(camera.planned.rows)
            outputs.update(camera.planned.recorded_parts(camera.video_part - 1))  # (its earlier workers')
            if camera.recording is not None:
                try:
                    camera.recording.close()
                except OutputError as exc:  # (FFmpeg failed: a full disk) the camera's rows stand; it failed
                    camera.recording_error = camera.recording_error or exc
                if camera.recording.frames_written and camera.recording_error is None:
                    outputs[camera.planned.video_role(camera.video_part)] = str(camera.recording.path)
            error = camera.error or camera.recording_error
            status = "interrupted" if interrupted and error is None else "failed" if error is not None else "ok"
            facts = self.camera_facts(camera)
            result = SourceResult(source=camera.name, status=status, frames=facts["frames"], faces=facts["faces"],
                                  rows=facts["faces"],
                                  seconds=round(time.perf_counter() - camera.started_s, 4),
                                  error=str(error) if error else None,
                                  exit_code=error.exit_code if error else (130 if interrupted else None),
                                  kind=type(error).__name__ if error else None, outputs=outputs)
            camera.facts = {**facts, "status": status, "outputs": dict(outputs)}
            if outputs:
                _write_json(camera.planned.summary, camera.facts)
                result.outputs["summary"] = str(camera.planned.summary)
            if self.manifest is not None:
                self.manifest.append(result.as_dict())
            camera.result = result
            if self.on_finished is not None:
                self.on_finished(camera)
            if error is not None and camera.source is not None and self.metrics is not None:
                self.metrics.error("source")  # lost for good
            logger.info("%s %s — %d frames, %d faces, %d dropped, %d reconnection(s)%s", status, camera.name,
                        camera.written, camera.faces, camera.dropped,
                        camera.source.reconnects if camera.source is not None else 0,
                        f": {error}" if error else "")
            return result

    def finish_all(self, interrupted: bool) -> list[SourceResult]:
        """The run ended: every camera not finished yet is (interrupted, on Ctrl-C or SIGTERM, unless it had
        already ended as asked)."""
        return [self.finish(c, interrupted=interrupted and not c.completed) for c in self.cameras]

    def camera_facts(self, camera: Camera) -> dict[str, Any]:
        """A camera's figures for its summary and the run's ``cameras`` list."""
        source = camera.source
        latencies = np.sort(camera.stats.run_latencies())
        offered = camera.written + camera.dropped
        # a camera moved from a Ray worker that died counts its earlier workers' frames (as last told) and faces
        # (the rows they wrote) too; its other figures are this worker's
        moved = camera.so_far or CameraSoFar()
        # captured, but neither written nor dropped when it finished: waiting in its source or in the fleet (the
        # run stopped under it, say), or captured after --end — so captured = skipped + written + dropped + these
        in_fleet = max(0, camera.offered - camera.written - camera.inbox_dropped - camera.slot_dropped)
        unprocessed = (source.left if source is not None else 0) + in_fleet
        return {
            "source": camera.name,
            "rows_file": str(camera.planned.rows),
            "timestamps": "wall-clock capture time, Unix seconds (UTC)",
            "frames": moved.frames + camera.written,
            "faces": camera.rows_before + camera.faces,
            **({"moves": moved.moves} if camera.so_far is not None else {}),
            "frames_captured": source.captured if source is not None else 0,
            "frames_dropped": camera.dropped,
            "frames_skipped_at_start": source.skipped if source is not None else 0,  # while the models loaded
            "frames_unprocessed_at_end": unprocessed,
            "drop_rate": camera.dropped / offered if offered else 0.0,
            "reconnects": source.reconnects if source is not None else 0,
            "reopen_failures": source.reopen_failures if source is not None else 0,
            "capture_fps": source.run_fps if source is not None else None,
            "latency_p50_s": percentile(latencies, 0.5),
            "latency_p99_s": percentile(latencies, 0.99),
            "latency_max_s": float(latencies[-1]) if latencies.size else None,
            "error": str(camera.error) if camera.error is not None else None,
        }


def _measured_fps(source: LiveSource) -> Callable[[], float | None]:
    return lambda: source.measured_fps


def _drop_counter(metrics: Any, name: str) -> Callable[[int], None]:
    def dropped(n: int) -> None:
        metrics.frames_dropped(n)
        metrics.source_frames_dropped(name, n)

    return dropped
