"""One source through built models: open it, warm what its frame size needs, run the pipeline, summarise.

The steps every way of running emopipe shares: the command line (rows, annotated video and summary
written to files) and :meth:`emopipe.Analyzer.analyze` (records handed to the caller) differ only
in the sinks they pass.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from emopipe.config import RunConfig
from emopipe.errors import EmopipeError, OutputError, SourceUnavailableError
from emopipe.io.nvdec import open_input
from emopipe.io.records import open_writer, partial_path, remove_earlier, written_whole
from emopipe.io.sources import Source
from emopipe.pipeline.hooks import Observer, Sink
from emopipe.pipeline.live import LiveMode
from emopipe.pipeline.models import Models, RunStart
from emopipe.pipeline.progress import ProgressBar
from emopipe.pipeline.runner import Pipeline, PipelineSettings
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
    aside: bool = False  # the run did not complete and its files went beside an earlier run's (which stay)
    earlier: list[str] | None = None  # the earlier run's files that kept this one's aside (decided: not None)
    rows_at: str | None = None  # where the rows are, once committed
    cancel: threading.Event = field(default_factory=threading.Event)  # set when the caller stops it (analyze())
    began: float = field(default_factory=time.perf_counter)  # when the run began: a later run's start-up counts from it
    since: RunStart | None = None  # where its start-up counts from (Models.begin_run; None: the models' first run)

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
        self.since = models.begin_run(self.began)
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
        # final name; failed, cut short or interrupted, they do too unless an earlier run's output is there (then
        # they stay beside it, and nothing this run writes replaces the earlier run's files: _takes_names).
        writer.commit_on_close = False
        self.stack.callback(self._commit_rows, writer)  # (a run that raised: its finishers never ran)
        self.finishers.append(lambda summary: self._commit_rows(writer, summary))
        video = None
        if config.annotate:
            video = AnnotatedVideoWriter(config.annotate, info.fps or 1.0, (info.width, info.height), partial=True,
                                         writer=config.video_writer)
            self.stack.callback(lambda: video.commit(self._takes_names(None)))
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

    def _takes_names(self, summary: RunSummary | None) -> bool:
        """Whether this run's files take their final names, decided once, before the first of them is renamed: a
        complete run's do; an incomplete one's (cut short, interrupted, or failed: no ``summary``) only when none of
        the run's outputs is there yet. Otherwise every file it writes stays under a partial name (``aside``) and
        the earlier run's files stay as they are, together: never a new file under a final name beside an earlier
        run's, nor a good result replaced by an incomplete one."""
        if self.earlier is None:
            complete = summary is not None and summary.complete
            # (a live run writes its rows and recording in place, and never starts over an earlier run's files)
            self.earlier = [] if complete or self.config.live else self.config.earlier_outputs()
            self.aside = bool(self.earlier)
        return not self.aside

    def _track_outputs(self, tracks: TrackWatcher, summary: RunSummary) -> None:
        config = self.config
        if self._takes_names(summary):
            _track_outputs_or_warn(config, tracks, summary)
            return
        # beside an earlier run's files: no tracks or segments (named after the rows, they would replace the earlier
        # run's), the report and its thumbnails under partial names
        for role in ("tracks", "segments"):
            summary.outputs.pop(role, None)
        if config.report:
            config = replace(config, report=str(partial_path(Path(config.report), keep_suffix=True)))
            logger.warning("the run did not complete: its report is %s", config.report)
        _track_outputs_or_warn(config, tracks, summary, beside_rows=False)

    def _commit_rows(self, writer: Any, summary: RunSummary | None = None) -> None:
        """The rows under their final name if the run's files take theirs (:meth:`_takes_names`), else beside the
        earlier run's (``aside``). Once only: after the finisher's call, the stack's is none."""
        if self.rows_at is not None:
            return
        takes_names = self._takes_names(summary)
        if summary is not None and summary.complete and writer.takes_name(True):
            # Crash-safe at every instant (even SIGKILL): the earlier run's files that this one's replace go before
            # its rows take their name, so the new rows never stand beside another run's (complete) files; the
            # new tracks, segments, report and summary follow the rows. (An incomplete run takes its names only where
            # none is there; one that raised may have renamed its video already.)
            remove_earlier(self._companions())
        self.rows_at = where = writer.commit(takes_names)
        if where != str(writer.path) and summary is not None:
            summary.outputs["rows"] = where
        if self.aside:
            logger.warning("the run did not complete: its %d rows are in %s, its other files under partial names too, "
                           "beside an earlier run's (%s), which are unchanged", writer.rows_written, where,
                           ", ".join(self.earlier or ()))

    def _companions(self) -> list[str]:
        """The earlier files a complete run's replace once its rows take their name: the tracks, segments, report,
        summary and annotated video."""
        roles = ("tracks", "segments", "summary", "report", "annotated_video")
        outputs = self.config.outputs()
        return [outputs[role] for role in roles if role in outputs]

    def _finish_video(self, video: AnnotatedVideoWriter, summary: RunSummary) -> None:
        where = video.commit(self._takes_names(summary))
        if where != video.path:
            summary.outputs["annotated_video"] = str(where)
            logger.warning("the run did not complete: its annotated video is %s", where)

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
        load_s, warmup_s = models.load_and_warmup_s(self.since)
        summary = pipeline.summary(load_s=load_s, warmup_s=warmup_s, interrupted=interrupted,
                                   outputs=dict(self.outputs),
                                   live=self.live.summary(pipeline) if self.live is not None else None,
                                   startup=models.startup(pipeline.first_written_at, self.since),
                                   skipped_files=[str(p) for p in getattr(self.source, "skipped_files", ())])
        summary.start_s = self.config.start
        for finish in self.finishers:
            finish(summary)
        return Outcome(summary, interrupted, lost)


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


def _track_outputs_or_warn(config: RunConfig, tracks: TrackWatcher, summary: RunSummary,
                           beside_rows: bool = True) -> None:
    """The per-track files are derived from the rows, which are already written: their failure (a disk that
    filled up, a library missing from a hand-made install) is a warning, never the loss of the run."""
    try:
        write_track_outputs(config, tracks, summary, beside_rows=beside_rows)
    except (EmopipeError, ImportError, OSError) as exc:
        if config.report:  # asked for by name: its failure is the run's (the rows are complete all the same)
            raise
        logger.warning("track summaries not written (the rows are complete): %s", exc)


def write_track_outputs(config: RunConfig, tracks: TrackWatcher, summary: RunSummary,
                        beside_rows: bool = True) -> None:
    """After the run: the track summaries into ``summary``; ``tracks.csv`` and ``segments.csv`` beside a rows
    file (``beside_rows``); the HTML report and its thumbnails when asked for."""
    outputs = {role: path for role, path in config.outputs().items()
               if beside_rows or role not in ("tracks", "segments")}
    thumbnails = tracks.picker.thumbnails() if tracks.picker is not None else None
    reports = analyse(tracks.collector, thumbnails)
    if config.report:
        reports = save_thumbnails(thumbnails_folder(config.report), reports,
                                  relative_to=Path(outputs.get("tracks", config.report)).parent)
        video = summary.outputs.get("annotated_video") or outputs.get("annotated_video")  # (where it went)
        # (named even where no face was found: its section says so, and plays its annotated video)
        source = reports[0].summary.source if reports else summary.source
        size = write_html(config.report, reports, sources_run=[source], videos={source: video} if video else None,
                          start_s=config.start or 0.0)
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
    try:  # whole or not at all: never a half-written summary over an earlier one
        with written_whole(Path(path)) as file:
            file.write(text.encode())
    except OSError as exc:
        raise OutputError(f"cannot write the summary {path}: {exc.strerror or exc}") from None
