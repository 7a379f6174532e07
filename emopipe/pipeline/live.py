"""Live mode of ``emopipe SOURCE``: a camera (``--webcam N``) or a network stream, results for *now*.

What changes from a file run (everything else — detection, crops, EmoNet, rows — is the same code):

* the source is an :class:`~emopipe.live.LiveSource` (newest frame only, reconnection);
* low-latency defaults: BlazeFace (faces near a camera; ``--detector`` overrides), one frame per
  detector call, a static face batch of 1 (``--batch-size`` overrides) that runs at once, or after
  ``--max-wait-ms`` when a larger batch is not full; warmup before the first frame as for files;
* the pipeline hands its GPU thread only the newest frame (:class:`~emopipe.pipeline.PipelineSettings`
  ``live``); frames it could not take are dropped and counted;
* rows carry wall-clock capture times (``timestamp_s`` = Unix time); ``--show``, ``--serve`` and
  ``--record`` watch and record the annotated stream; ``/metrics`` is served on 9478 unless told
  otherwise; the summary adds the capture rate, drops and reconnections;
* SIGTERM (``docker stop``) ends a run like Ctrl-C: everything computed is written, files are
  closed, exit code 130.
"""

from __future__ import annotations

import logging
import threading
import time
from array import array
from collections import deque
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import numpy as np

from emopipe.config import RunConfig
from emopipe.io.live import LiveOptions, LiveSource
from emopipe.pipeline.hooks import Observer, Sink
from emopipe.pipeline.runner import Pipeline, PipelineSettings
from emopipe.pipeline.timing import percentile
from emopipe.types import FrameResult

logger = logging.getLogger(__name__)

_WINDOW_S = 5.0  # the page's and the window's "current" numbers cover this many seconds (and ≥ 2 frames)


class LiveStats(Observer):
    """The numbers of the moment (page, window) and of the whole run (summary), from the writer thread."""

    def __init__(self, source_name: str) -> None:
        self.source_name = source_name
        self.source: LiveSource | None = None
        self._lock = threading.Lock()
        self._recent: deque[tuple[float, float, int]] = deque(maxlen=1000)  # (written at, latency, faces)
        self._latencies = array("d")  # every frame's capture → result latency, for the summary
        self.frames = 0
        self.faces_total = 0
        self.faces = 0  # in the newest frame
        self.pipeline_dropped = 0
        self.started = time.perf_counter()

    def frame(self, result: FrameResult, latency_s: float) -> None:
        now = time.perf_counter()
        with self._lock:
            self._recent.append((now, latency_s, len(result.faces)))
            while len(self._recent) > 2 and self._recent[0][0] < now - _WINDOW_S:
                self._recent.popleft()
            self._latencies.append(latency_s)
            self.frames += 1
            self.faces = len(result.faces)
            self.faces_total += len(result.faces)

    def dropped(self, n: int) -> None:
        with self._lock:
            self.pipeline_dropped += n

    @property
    def frames_dropped(self) -> int:
        return self.pipeline_dropped + (self.source.dropped if self.source is not None else 0)

    def numbers(self) -> dict[str, Any]:
        """What the page, its /stats.json and the window show."""
        now = time.perf_counter()
        with self._lock:
            recent = list(self._recent)  # the last _WINDOW_S seconds, or the last two frames when slower
            frames, faces = self.frames, self.faces
        fps = None
        if len(recent) >= 2 and recent[-1][0] > recent[0][0]:
            fps = (len(recent) - 1) / (recent[-1][0] - recent[0][0])
        latencies = sorted(r[1] for r in recent)
        source = self.source
        silent = None if source is None else source.seconds_since_frame
        state = "starting" if frames == 0 else "live"
        lost = source is not None and source.captured > 0 and not source.up
        if source is not None and source.state == "ended":
            state = "ended"  # (its last frames may still be finishing: no outage, nothing to reconnect)
        elif lost or (source is not None and silent is not None and frames and
                      silent > max(1.0, source.options.read_timeout_s / 2)):
            state = "reconnecting"
            fps = None  # the rate of frames that stopped coming would be stale
        return {
            "source": self.source_name,
            "state": state,
            "fps": fps,
            "latency_p50_s": percentile(latencies, 0.5),
            "latency_p99_s": percentile(latencies, 0.99),
            "latency_last_s": recent[-1][1] if recent else None,
            "faces": faces,
            "frames": frames,
            "frames_dropped": self.frames_dropped,
            "capture_fps": None if source is None else source.measured_fps,
            "reconnects": 0 if source is None else source.reconnects,
            "reopen_failures": 0 if source is None else source.reopen_failures,
            # while reconnecting, the frame shown is this old (the page marks it stale)
            "outage_s": silent if state == "reconnecting" else None,
            "uptime_s": now - self.started,
        }

    def run_latencies(self) -> np.ndarray:
        with self._lock:
            return np.frombuffer(self._latencies, dtype=np.float64).copy()


class CaptureLatencyMetrics(Observer):
    """Each frame's capture → result latency into ``emopipe_capture_latency_seconds``."""

    def __init__(self, metrics: Any) -> None:
        self.metrics = metrics

    def frame(self, result: FrameResult, latency_s: float) -> None:
        self.metrics.observe_capture_latency(latency_s)


class LiveSink(Sink):
    """The rows as for files, then the annotated frame for the recording and the views."""

    def __init__(self, rows: Any, stats: LiveStats, hub: Any | None, recording: Any | None) -> None:
        self.rows = rows  # a RecordSink (rows only: its video is None)
        self.stats = stats
        self.hub = hub
        self.recording = recording

    def write(self, result: FrameResult) -> None:
        self.rows.write(result)
        if self.hub is None and self.recording is None:
            return
        from emopipe.observe.livepage import draw_numbers
        from emopipe.vision.annotate import draw

        image = draw(result.frame.bgr, self.rows.last_records)
        if self.recording is not None:
            self.recording.write(image, result.frame.timestamp_s)
        if self.hub is not None:
            view = image.copy() if self.recording is not None else image
            self.hub.publish(draw_numbers(view, self.stats.numbers()))

    def close(self) -> None:
        try:
            self.rows.close()
        finally:
            if self.recording is not None:
                self.recording.close()


class LiveMode:
    """Everything live mode adds to a run, in the order the run needs it."""

    def __init__(self, config: RunConfig) -> None:
        """``config`` is resolved (:meth:`RunConfig.resolved`): live defaults applied, options checked."""
        from emopipe.io.records import ensure_writable
        from emopipe.observe.livepage import parse_address
        from emopipe.observe.window import check_display

        config = config
        self.config = config
        self.options = LiveOptions(open_timeout_s=config.open_timeout, read_timeout_s=config.read_timeout,
                                   reconnect_timeout_s=config.reconnect_timeout, max_frames=config.max_frames,
                                   duration_s=config.end)
        self.serve_address = parse_address(config.serve) if config.serve else None
        if config.record:
            ensure_writable(Path(config.record), "recording")
        if config.show:
            check_display()
        self.source: LiveSource | None = None
        self.stats: LiveStats | None = None
        self.hub: Any = None
        self.server: Any = None
        self.recording: Any = None

    @property
    def uri(self) -> str:
        return self.config.uri

    def open(self, stack: ExitStack, registry: Any = None) -> LiveSource:
        """Serve the page, open the window, handle SIGTERM, then open the camera or stream (fail fast)."""
        from emopipe.io.uris import redact_uri
        from emopipe.observe.livepage import FrameHub, LiveServer
        from emopipe.observe.window import WindowView

        self.stats = LiveStats(redact_uri(self.uri))
        if self.serve_address or self.config.show:
            self.hub = FrameHub()
            stack.callback(self.hub.close)
        if self.serve_address:
            self.server = LiveServer(*self.serve_address, self.hub, self.stats.numbers,
                                     metrics=None if registry is None else _metrics_page(registry))
            stack.callback(self.server.close)
            logger.info("live page on %s", self.server.url)
        self.source = stack.enter_context(LiveSource(self.uri, options=self.options))
        self.stats.source = self.source
        logger.info("%s: %d×%d, reading live (newest frame only)", self.source.info.uri, self.source.info.width,
                    self.source.info.height)
        if self.config.show:
            window = WindowView(self.hub, f"emopipe: {self.source.info.uri}", on_quit=self.source.stop)
            stack.callback(window.close)
        return self.source

    def settings(self) -> PipelineSettings:
        max_wait = self.config.max_wait_ms / 1000
        return PipelineSettings(detect_batch=self.config.detect_batch or 1, queue_frames=1, live=True,
                                max_wait_s=max_wait, detect_every=self.config.detect_every)

    def sink(self, rows: Any) -> Sink:
        from emopipe.observe.recording import TimedVideoWriter

        assert self.source is not None and self.stats is not None
        if self.config.record:
            source = self.source
            self.recording = TimedVideoWriter(self.config.record, lambda: source.measured_fps,
                                              writer=self.config.video_writer)
        return LiveSink(rows, self.stats, self.hub, self.recording)

    def observers(self, metrics: Any) -> list[Observer]:
        assert self.source is not None and self.stats is not None
        watch_source(self.source, metrics)
        return [self.stats, CaptureLatencyMetrics(metrics)]

    def summary(self, pipeline: Pipeline) -> dict[str, Any]:
        """The live part of the run summary."""
        assert self.source is not None and self.stats is not None
        source = self.source
        source.stop()  # the run is over (Ctrl-C leaves it capturing): a frame read from now on is not the run's
        latencies = np.sort(self.stats.run_latencies())
        processed = int(latencies.size)
        dropped = pipeline.frames_dropped + source.dropped
        offered = processed + dropped
        # captured, but neither processed nor dropped: waiting for the source's or the GPU thread's slot, or being
        # processed, when the run ended (Ctrl-C abandons those in flight), or captured after --end
        in_pipeline = max(0, source.yielded - pipeline.frames_dropped - processed)
        unprocessed = source.left + in_pipeline
        p50, p99 = percentile(latencies, 0.5), percentile(latencies, 0.99)
        fps = source.run_fps
        facts: dict[str, Any] = {
            "timestamps": "wall-clock capture time, Unix seconds (UTC)",
            "frames_captured": source.captured,
            "frames_processed": processed,
            "frames_dropped": dropped,
            "drop_rate": dropped / offered if offered else 0.0,
            "frames_skipped_at_start": source.skipped,
            "frames_unprocessed_at_end": unprocessed,
            "capture_fps": fps,
            "reconnects": source.reconnects,
            "capture_latency_p50_s": p50,
            "capture_latency_p99_s": p99,
            "capture_latency_max_s": float(latencies[-1]) if processed else None,
        }
        if self.recording is not None:
            facts["recording"] = {"path": str(self.recording.path), "fps": self.recording.fps,
                                  "frames": self.recording.frames_written}
        if self.server is not None:
            facts["page"] = self.server.url

        def ms(value: float | None) -> str:
            return "n/a" if value is None else f"{value * 1000:.1f} ms"

        facts["description"] = (
            f"live: {source.captured} frames captured at {fps or 0:.1f} fps, {processed} processed, {dropped} "
            f"dropped ({facts['drop_rate']:.1%}), {source.skipped} skipped while loading, {unprocessed} unprocessed "
            f"at the end, {source.reconnects} reconnection(s); "
            f"capture → result p50 {ms(p50)}, p99 {ms(p99)}")
        return facts


def watch_source(source: LiveSource, metrics: Any, name: str | None = None) -> None:
    """A live source's drops, reconnections and state (up, lost, failed, ended) into the run-level and per-source
    metrics, under ``name`` (a fleet's camera's; by default its URI without credentials)."""
    name = name or source.info.uri  # (redacted)

    def dropped(n: int) -> None:
        metrics.frames_dropped(n)
        metrics.source_frames_dropped(name, n)

    def reconnected() -> None:
        metrics.reconnect()
        metrics.source_reconnect(name)

    source.on_drop = dropped
    source.on_reconnect = reconnected
    source.on_reopen_failed = metrics.reopen_failed
    source.on_state = lambda state: metrics.set_source_state(name, state)
    metrics.set_source_state(name, source.state)


def _metrics_page(registry: Any) -> Any:
    from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

    def page() -> tuple[bytes, str]:
        return generate_latest(registry), CONTENT_TYPE_LATEST

    return page
