"""One source through built models: open it, warm what its frame size needs, run the pipeline, summarise.

The steps every way of running emopipe shares: the command line (rows, annotated video and summary
written to files) and :meth:`emopipe.Analyzer.analyze` (records handed to the caller) differ only
in the sinks they pass.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from emopipe.config import RunConfig
from emopipe.errors import EmopipeError, OutputError, SourceUnavailableError
from emopipe.io.nvdec import open_input
from emopipe.io.records import open_writer, partial_path, remove_earlier
from emopipe.io.sources import Source
from emopipe.pipeline.live import LiveMode
from emopipe.pipeline.models import Models
from emopipe.pipeline.runner import Observer, Pipeline, PipelineSettings, Sink
from emopipe.pipeline.sinks import FaceRecorder, RecordSink, TrackWatcher
from emopipe.pipeline.summary import RunSummary
from emopipe.report.outputs import (
    analyse,
    save_thumbnails,
    thumbnails_folder,
    write_html,
    write_segments_csv,
    write_tracks_csv,
)
from emopipe.types import FrameResult
from emopipe.vision.annotate import AnnotatedVideoWriter

logger = logging.getLogger(__name__)


@dataclass
class Outcome:
    """How a source's run ended: its summary, and whether it was interrupted or its stream lost for good."""

    summary: RunSummary
    interrupted: bool = False
    lost: SourceUnavailableError | None = None


@dataclass
class SourceRun:
    """The parts of one source's run, opened in order inside ``stack`` (closed with it)."""

    config: RunConfig
    device: Any  # torch.device the models run on (NVDEC decodes there)
    stack: ExitStack
    models: Models | None = None  # built after the source opens, so a bad input fails before weights load
    metrics: Any = None  # PipelineMetrics, or None for no metrics
    live: LiveMode | None = None
    source: Source | None = None
    sinks: list[Sink] = field(default_factory=list)
    observers: list[Observer] = field(default_factory=list)
    finishers: list[Callable[[RunSummary], None]] = field(default_factory=list)
    outputs: dict[str, str] = field(default_factory=dict)
    warmup_s: float = 0.0
    aside: bool = False  # the run did not complete and its rows went beside an earlier run's (which stay)
    rows_at: str | None = None  # where the rows are, once committed
    cancel: threading.Event = field(default_factory=threading.Event)  # set when the caller stops it (analyze())

    def open(self) -> Source:
        """Open the source (live: serve the page and open the window first)."""
        config = self.config
        if config.live:
            self.live = LiveMode(config)
            self.source = self.live.open(self.stack, None if self.metrics is None else self.metrics.registry)
        else:
            self.source = self.stack.enter_context(open_input(config.uri, decoder=config.decoder, device=self.device,
                                                              start_s=config.start, end_s=config.end,
                                                              max_frames=config.max_frames))
        return self.source

    def warm(self, models: Models) -> None:
        """Use ``models``, warming the detector for this source's frame size (once per size)."""
        assert self.source is not None
        self.models = models
        if not self.config.no_warmup:
            self.warmup_s = models.warm_detector(self.source.info.height, self.source.info.width)

    def write_files(self) -> None:
        """The command line's sinks: the rows file, the annotated video (or the live recording and views)."""
        config, source = self.config, self.source
        assert source is not None and config.output is not None and self.models is not None
        info = source.info
        writer = open_writer(config.output, fmt=config.format, labels=self.models.labels,
                             landmarks=config.landmarks, detected=config.detect_every > 1,
                             files=info.kind == "images", in_place=config.live)
        # The rows (and the annotated video) go under a partial name until the run ends: complete, they take the
        # final name; failed, cut short or interrupted, they do too unless that would replace an earlier file
        # (then they stay beside it, and nothing derived from them replaces the earlier run's files either).
        writer.commit_on_close = False
        self.stack.callback(self._commit_rows, writer)  # (a run that raised: its finishers never ran)
        self.finishers.append(lambda summary: self._commit_rows(writer, summary))
        video = None
        if config.annotate:
            video = AnnotatedVideoWriter(config.annotate, info.fps or 1.0, (info.width, info.height), partial=True)
            self.stack.callback(video.commit, None)
            self.finishers.append(lambda summary: self._finish_video(video, summary))
        tracks = TrackWatcher(thumbnails=bool(config.report))
        recorder = FaceRecorder(info.uri, self.models.labels, smoothing=config.smooth, precision=config.precision)
        sink: Sink = RecordSink(recorder, writer, video,
                                watchers=[tracks], hold_rows=self.live is None)  # (live: each frame's rows at once)
        if self.live is not None:
            sink = self.live.sink(sink)  # the annotated stream for --record, --show, --serve
        self.sinks.append(sink)
        # (the thumbnails folder is written only when a track has a picture: the summary names the files)
        self.outputs.update({role: path for role, path in config.outputs().items() if role != "thumbnails"})
        self.finishers.append(lambda summary: self._track_outputs(tracks, summary))

    def _track_outputs(self, tracks: TrackWatcher, summary: RunSummary) -> None:
        if self.aside:  # (rows kept beside an earlier run's: its tracks, segments and report stay too)
            return
        config = self.config
        if config.report and not summary.complete and (
                Path(config.report).exists() or thumbnails_folder(config.report).exists()):
            # an earlier report is never replaced by an incomplete run's: this one (and its thumbnails) go beside it
            config = replace(config, report=str(partial_path(Path(config.report), keep_suffix=True)))
            logger.warning("the run did not complete: its report is %s (%s, from an earlier run, is unchanged)",
                           config.report, self.config.report)
        _track_outputs_or_warn(config, tracks, summary)

    def _commit_rows(self, writer: Any, summary: RunSummary | None = None) -> None:
        """The rows under their final name if the run completed; if not (or it raised: no ``summary``), only if no
        earlier file is there, else beside it (``aside``). Once only: after the finisher's call, the stack's is none."""
        if self.rows_at is not None:
            return
        complete = summary is not None and summary.complete
        if writer.takes_name(True if complete else None):
            # Crash-safe at every instant (even SIGKILL): the earlier run's files that this one's replace go before
            # its rows take their name, so the new rows never stand beside another run's (complete) files; the
            # new tracks, segments, report and summary follow the rows.
            remove_earlier(self._companions(complete))
        self.rows_at = where = writer.commit(True if complete else None)
        if where != str(writer.path):
            self.aside = True
            if summary is not None:
                summary.outputs["rows"] = where
            logger.warning("the run did not complete: its %d rows are in %s (%s, from an earlier run, is unchanged; "
                           "so are its track summaries and report)", writer.rows_written, where, writer.path)

    def _companions(self, complete: bool) -> list[str]:
        """The earlier files this run's replace once its rows take their name: the tracks and segments, and for a
        complete run its report, summary and annotated video (one cut short puts those under partial names)."""
        roles = ("tracks", "segments", *(("summary", "report", "annotated_video") if complete else ()))
        outputs = self.config.outputs()
        return [outputs[role] for role in roles if role in outputs]

    @staticmethod
    def _finish_video(video: AnnotatedVideoWriter, summary: RunSummary) -> None:
        where = video.commit(True if summary.complete else None)
        if where != video.path:
            summary.outputs["annotated_video"] = str(where)
            logger.warning("the run did not complete: its annotated video is %s (%s, from an earlier run, is "
                           "unchanged)", where, video.path)

    def observe(self, progress: bool) -> None:
        if progress:
            bar = ProgressBar(self.source.expected_frames if self.source is not None else None)
            self.observers.append(bar)
            self.finishers.append(lambda summary: bar.close())
        if self.metrics is not None:
            names = [self.source.info.uri] if self.source is not None else []
            self.observers.append(MetricsObserver(self.metrics, names))
            if self.live is not None:
                self.observers += self.live.observers(self.metrics)  # (its state as the camera comes and goes)
            elif self.source is not None:  # a file: up while it is read, ended once its frames are all read
                metrics, name = self.metrics, self.source.info.uri
                metrics.set_source_state(name, "up")
                self.finishers.append(lambda summary: metrics.set_source_state(name, "ended"))

                def failed() -> None:  # the run failed: its finishers never ran (the stack closes this before
                    if metrics.source_state_of(name) == "up":  # the exporter, entered earlier, pushes)
                        metrics.set_source_state(name, "failed")

                self.stack.callback(failed)

    def settings(self) -> PipelineSettings:
        if self.live is not None:
            return self.live.settings()
        assert self.models is not None
        detector = self.models.detector
        frames_per_batch = detector.batch_size * self.config.detect_every
        return PipelineSettings(detect_batch=detector.batch_size, queue_frames=max(4, 2 * frames_per_batch),
                                detect_every=self.config.detect_every)

    def run(self, on_pipeline: Callable[[Pipeline], None] | None = None) -> Outcome:
        """Run the pipeline to the end (or Ctrl-C / a lost stream) and summarise. ``on_pipeline`` sees the
        pipeline before it starts (to stop it from another thread)."""
        assert self.source is not None and self.models is not None
        models = self.models
        pipeline = Pipeline(self.source, models.detector, models.cropper, models.engine, sinks=self.sinks,
                            observers=self.observers, settings=self.settings())
        if on_pipeline is not None:
            on_pipeline(pipeline)
        interrupted = False
        lost: SourceUnavailableError | None = None
        try:
            pipeline.run()
        except KeyboardInterrupt:
            interrupted = True
        except SourceUnavailableError as exc:  # a stream lost for good: its rows are written; so is the summary
            lost = exc
        summary = pipeline.summary(load_s=models.load_s, warmup_s=models.warmup_s, interrupted=interrupted,
                                   outputs=dict(self.outputs),
                                   live=self.live.summary(pipeline) if self.live is not None else None,
                                   startup=models.startup(pipeline.first_written_at),
                                   skipped_files=[str(p) for p in getattr(self.source, "skipped_files", ())])
        for finish in self.finishers:
            finish(summary)
        return Outcome(summary, interrupted, lost)


class ProgressBar(Observer):
    """tqdm on stderr: frames of the known total (``--max-frames`` and ``--end`` counted), frames/s, faces.

    The bar stays on its own line when the run ends (the summary starts on the next one) and shows the
    final face count."""

    def __init__(self, total: int | None, file: Any = None) -> None:
        from tqdm import tqdm

        self.bar = tqdm(total=total, unit="frame", file=file or sys.stderr, dynamic_ncols=True, leave=True,
                        mininterval=0.2)
        self.faces = 0
        self.extra: dict[str, Any] = {}  # shown after the faces (a Ray run: the workers alive)

    def frame(self, result: FrameResult, latency_s: float) -> None:
        self.faces += len(result.faces)
        self.bar.set_postfix(faces=self.faces, **self.extra, refresh=False)  # drawn with the next update
        self.bar.update(1)

    def show(self, frames: int, faces: int, total: int | None, **extra: Any) -> None:
        """Counts gathered elsewhere (a Ray run's workers): the bar moves to them. ``frames`` may go back
        (a dead worker's frames are done again elsewhere); ``total`` None while it is not known."""
        self.faces = faces
        self.extra = extra
        self.bar.total = total
        self.bar.set_postfix(faces=faces, **extra, refresh=False)
        if frames >= self.bar.n:
            self.bar.update(frames - self.bar.n)  # (tqdm's rate follows updates, not assignments)
        else:
            self.bar.n = frames
            self.bar.refresh()

    def close(self) -> None:
        self.bar.set_postfix(faces=self.faces, **self.extra, refresh=False)
        self.bar.close()


class MetricsObserver(Observer):
    """Feeds the pipeline's observations into the Prometheus metrics; with ``sources`` (each stream's name,
    by ``Frame.stream``) also the per-source series."""

    def __init__(self, metrics: Any, sources: Sequence[str] = ()) -> None:
        self.metrics = metrics
        self.sources = sources  # (not copied: a fed chain's list grows as sources are added)
        for name in self.sources:
            metrics.source_label(name)  # every source's series at zero from the first scrape

    def _source(self, stream: int) -> str | None:
        return self.sources[stream] if 0 <= stream < len(self.sources) else None

    def stage(self, stage: str, seconds: float) -> None:
        self.metrics.observe_stage(stage, seconds)

    def batch(self, size: int, real: int, seconds: float) -> None:
        self.metrics.observe_batch(size, real, seconds)  # also the "infer" stage

    def frame(self, result: FrameResult, latency_s: float) -> None:
        self.metrics.observe_frame(latency_s, len(result.faces), detected=result.detected)
        source = self._source(result.frame.stream)
        if source is not None:
            self.metrics.observe_source_frame(source, latency_s, len(result.faces))

    def frame_split(self, queued_s: float, processing_s: float) -> None:
        self.metrics.observe_frame_split(queued_s, processing_s)

    def queue_depth(self, name: str, depth: int) -> None:
        self.metrics.set_queue_depth(name, depth)

    def dropped(self, n: int) -> None:
        self.metrics.frames_dropped(n)

    def stream_dropped(self, stream: int, n: int) -> None:
        source = self._source(stream)
        if source is not None:
            self.metrics.source_frames_dropped(source, n)

    def error(self, kind: str) -> None:
        self.metrics.error(kind)


def _track_outputs_or_warn(config: RunConfig, tracks: TrackWatcher, summary: RunSummary) -> None:
    """The per-track files are derived from the rows, which are already written: their failure (a disk that
    filled up, a library missing from a hand-made install) is a warning, never the loss of the run."""
    try:
        write_track_outputs(config, tracks, summary)
    except (EmopipeError, ImportError, OSError) as exc:
        if config.report:  # asked for by name: its failure is the run's (the rows are complete all the same)
            raise
        logger.warning("track summaries not written (the rows are complete): %s", exc)


def write_track_outputs(config: RunConfig, tracks: TrackWatcher, summary: RunSummary) -> None:
    """After the run: the track summaries into ``summary``; ``tracks.csv`` and ``segments.csv`` beside a rows
    file; the HTML report and its thumbnails when asked for."""
    outputs = config.outputs()
    thumbnails = tracks.picker.thumbnails() if tracks.picker is not None else None
    reports = analyse(tracks.collector, thumbnails)
    if config.report:
        reports = save_thumbnails(thumbnails_folder(config.report), reports,
                                  relative_to=Path(outputs.get("tracks", config.report)).parent)
        size = write_html(config.report, reports)
        logger.info("report: %s (%.1f kB, %d track(s))", config.report, size / 1000, len(reports))
    if "tracks" in outputs:
        write_tracks_csv(outputs["tracks"], reports)
        write_segments_csv(outputs["segments"], reports)
    summary.tracks = [r.summary.as_dict() for r in reports]
    summary.outputs.update({role: outputs[role] for role in ("tracks", "segments", "report") if role in outputs})


def write_summary(summary: RunSummary, path: str | None) -> None:
    """The summary on stderr (log lines) and as JSON at ``path`` (``-``: stdout; None: nowhere)."""
    for line in summary.describe().splitlines():
        logger.info("%s", line)
    if path is None:
        return
    text = json.dumps(summary.as_dict(), indent=2) + "\n"
    if path == "-":
        sys.stdout.write(text)
        return
    target = Path(path)
    partial = partial_path(target)
    try:  # whole or not at all: never a half-written summary over an earlier one
        partial.write_text(text)
        os.replace(partial, target)
    except OSError as exc:
        raise OutputError(f"cannot write the summary {path}: {exc.strerror or exc}") from None
