"""The Python API: :func:`analyze` a source into :class:`~emopipe.types.FaceRecord`\\ s, or keep an
:class:`Analyzer` whose engines are built and warmed once for many sources.

Options are the command line's long options with underscores (``detector=``, ``weights=``,
``models_dir=``, ``device=``, ``max_frames=``, ``landmarks=``…) or ``config=RunConfig(...)``.
Errors are :class:`~emopipe.errors.EmopipeError` subclasses, each with the exit code the command
line uses for it.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import numbers
import queue
import signal
import threading
import time
import weakref
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar, cast

from emopipe.config import DEFAULT_OUTPUT_DIR, RunConfig, StrPath, path_items
from emopipe.engines.base import check_compile_mode
from emopipe.errors import InputTruncatedError, Interrupted, UsageError
from emopipe.io.nvdec import decoded_frame_size, open_input
from emopipe.io.records import STDOUT, hold_outputs, partial_path, written_timestamp
from emopipe.model.devices import resolve_device
from emopipe.observe.metrics import build_info
from emopipe.pipeline.analysis import MetricsObserver, Outcome, SourceRun, write_summary
from emopipe.pipeline.archive import (
    Manifest,
    PerSourceSink,
    PlannedSource,
    SourceChain,
    SourceResult,
)
from emopipe.pipeline.fleet import Fleet
from emopipe.pipeline.hooks import Observer, Sink
from emopipe.pipeline.live import CaptureLatencyMetrics
from emopipe.pipeline.many import (
    MANY_SOURCES,
    FleetOutcome,
    ManyOutcome,
    ManyPlan,
    finish_many,
    plan_fleet,
    plan_sources,
    report_many,
)
from emopipe.pipeline.models import MODEL_OPTIONS, Models, load_models, model_options, quick_handoff
from emopipe.pipeline.progress import ProgressBar
from emopipe.pipeline.runner import Pipeline, PipelineSettings
from emopipe.pipeline.sinks import FaceRecorder
from emopipe.pipeline.summary import RunSummary
from emopipe.report.outputs import check_report_outputs
from emopipe.types import FaceRecord, FrameResult

logger = logging.getLogger(__name__)

_END = object()
DEFAULT_PARALLEL = 2  # sources opened and decoded ahead at once
FrameSize = tuple[int, int]  # (height, width)
FED_MAX_WAIT_S = 0.25  # longer than a full EmoNet batch takes to fill at a GPU's rate (64 faces: ~0.1 s)


FILE_OPTIONS = ("output", "summary", "annotate", "report", "record")  # what Analyzer.run writes, analyze() not


def _refuse_file_options(config: RunConfig) -> None:
    """(Given as keywords or in the config — the analyzer's or ``config=`` — they would be silently unused.)"""
    files = sorted(name for name in FILE_OPTIONS if getattr(config, name) is not None)
    if files:
        raise UsageError(f"{', '.join(files)}: analyze() yields the records and writes no file; Analyzer.run() "
                         "writes them")
    served = [name for name, used in (("metrics_port", config.metrics_port is not None),
                                      ("pushgateway", config.pushgateway), ("metrics_linger", config.metrics_linger))
              if used]
    if served:
        raise UsageError(f"{', '.join(served)}: analyze() serves no metrics; Analyzer.run() does")

def run_metrics(config: RunConfig, *, batch_sizes: Sequence[int] = (), mode: str = "file") -> tuple[Any, Any]:
    """A run's metrics (:class:`~emopipe.observe.metrics.PipelineMetrics`, on a fresh registry) and the exporter
    that serves and pushes them as ``metrics_port``, ``metrics_host``, ``metrics_linger`` and ``pushgateway`` ask."""
    from prometheus_client import CollectorRegistry

    from emopipe.observe.exposition import MetricsExporter, grouping_key
    from emopipe.observe.metrics import PipelineMetrics

    registry = CollectorRegistry()
    metrics = PipelineMetrics(registry, queues=("frames", "results"), batch_sizes=batch_sizes, mode=mode,
                              max_sources=config.metrics_max_sources)
    exporter = MetricsExporter(registry, port=config.metrics_port, host=config.metrics_host,
                               linger_s=config.metrics_linger, pushgateway=config.pushgateway,
                               grouping_key=grouping_key(), run_state=metrics.set_run_state)
    return metrics, exporter


def _asked_metrics(given: RunConfig, resolved: RunConfig, metrics: Any, exporter: Any, **kinds: Any) -> tuple[Any, Any]:
    """The caller's metrics and exporter; or, where it gave none but ``metrics_port=``, ``pushgateway=`` or
    ``metrics_linger=`` (``given``: not resolved), the ones they ask for (:func:`run_metrics`). A live source's
    default port is the command line's: the API serves only a port it is given."""
    if metrics is not None or exporter is not None or not (
            given.metrics_port is not None or given.pushgateway or given.metrics_linger):
        return metrics, exporter
    return run_metrics(replace(resolved, metrics_port=given.metrics_port), **kinds)


RAY_OPTIONS = ("ray_workers", "ray_gpus_per_worker", "ray_retries", "ray_keep_warm")
# what only a run of several sources uses (run_many, the command line's collections, --processes, --ray)
MANY_OPTIONS = ("sources", "list_files", "recursive", "resume", "parallel", "processes", "split", "mps", "ray",
                *RAY_OPTIONS)


def _given(config: RunConfig, names: Sequence[str]) -> str:
    """The options among ``names`` that ``config`` sets (not at their defaults), as the command line spells them."""
    spelled = {"split": "--no-split", "list_files": "--list", "sources": "sources"}
    return ", ".join(spelled.get(name, "--" + name.replace("_", "-")) for name in names
                     if getattr(config, name) != getattr(RunConfig, name))


def _refuse_many_options(config: RunConfig) -> None:
    """Options of a run of several sources, given to a run of one (they would be silently unused)."""
    used = _given(config, MANY_OPTIONS)
    if used == "--no-split":  # (one video is cut into parts too, over workers: not an option of several sources)
        raise UsageError("--no-split: keeps each video whole in a run over worker processes (--processes, --ray, "
                         "which cut a long video into parts); this run is one process")
    if used:
        raise UsageError(f"{used}: for several sources in one run (a folder of videos, a glob, --list, several "
                         "files); this run has one source")


def _refuse_ray_options(config: RunConfig) -> None:
    """Options of a run over Ray, given to a run in this process (they would be silently unused)."""
    used = _given(config, RAY_OPTIONS)
    if used:
        raise UsageError(f"{used}: for a run over Ray (add --ray); this run is one process")
    if config.processes is not None:
        raise UsageError("--processes: a run over worker processes is emopipe.processes.run_on_processes (the "
                         "command line's --processes); this run is one process")
    if not config.split:  # (only workers cut a long video in parts: one process keeps every video whole)
        raise UsageError("--no-split: for a run over --processes or --ray workers; this run is one process, which "
                         "keeps each video whole")


Method = TypeVar("Method", bound=Callable[..., Any])


def _exclusive(method: Method) -> Method:
    """An Analyzer method that runs a source: one at a time (:meth:`Analyzer._one_at_a_time`)."""
    @functools.wraps(method)
    def one_at_a_time(self: Analyzer, *args: Any, **kwargs: Any) -> Any:
        with self._one_at_a_time(f"{method.__name__}()"):
            return method(self, *args, **kwargs)

    return cast(Method, one_at_a_time)


class Analyzer:
    """EmoNet and the face detector, built, tuned and warmed once; then any number of sources.

    >>> with emopipe.Analyzer(detector="blazeface_back", device="cuda") as analyzer:
    ...     for path in videos:
    ...         for record in analyzer.analyze(path):
    ...             print(record.track_id, record.label, record.valence)

    Per-source options (``max_frames``, ``start``, ``end``, ``smooth``, ``detect_every``…) may be given
    to :meth:`analyze` and :meth:`run`; options that shape the engines (``batch_size``, ``precision``,
    ``weights``, ``detector``…) are fixed when the analyzer opens. Not thread-safe: one source at a time.
    """

    def __init__(self, config: RunConfig | None = None, **options: Any) -> None:
        self.config = RunConfig.from_options(config, **options)
        self._device_type = resolve_device(self.config.device).type
        if self.config.compile:
            check_compile_mode(self.config.compile)
        # the engine-shaping options, resolved for this device and the kind of source (live or file). Made without
        # a source, the analyzer takes them from the source that starts running before its engines are built
        # (:meth:`_start_config`); once built, a live source after a file (or a file after a live source) runs on
        # them as they are
        self._made_for_source = bool(self.config.source or self.config.webcam is not None or self.config.fleet)
        self._base = self.config.resolved(self._device_type) if (self.config.source or self.config.webcam is not None) \
            else self._engines_for(self.config.sources[0] if self.config.fleet else "analyzer")
        self.models: Models | None = None
        self.summaries: list[RunSummary] = []
        self._busy = threading.Lock()
        self._readings: weakref.WeakSet[_Reading] = weakref.WeakSet()  # what analyze() returned: close() stops them
        self._readings_lock = threading.Lock()

    @contextlib.contextmanager
    def _one_at_a_time(self, what: str) -> Iterator[None]:
        """One source at a time: the engines' static buffers (CUDA graphs) serve one pipeline, so a second run
        beside the first would mix their faces — refused instead."""
        if not self._busy.acquire(blocking=False):
            raise UsageError(f"{what}: this Analyzer is already running a source (another run, or an analyze() not "
                             "read to its end or closed); finish or close() it first, or make another Analyzer")
        try:
            yield
        finally:
            self._busy.release()

    # -- life cycle ---------------------------------------------------------------------------

    def open(self, frame_size: FrameSize | Callable[[], FrameSize | None] | None = None) -> Analyzer:
        """Build the engines and warm every static shape now (otherwise the first source does). ``frame_size``: the
        (height, width) of the first source's frames, or a function that tells it (None: unknown) once the engines
        are built, before they warm (a worker reads its first source's container meanwhile): the detector is warmed
        for it too, its cuDNN plans found with EmoNet's, and the source's first frames do not wait for its warm-up.
        A size that is not two whole numbers above 0 is a UsageError: one given, before anything is built; one the
        function returns, when it returns it (engines it stopped from warming are let go of)."""
        if not callable(frame_size):  # (checked before the engines are built: a bad size failed in torch after them)
            frame_size = _checked_frame_size(frame_size, "frame_size")
        asked: list[FrameSize | None] = []

        def first_size() -> FrameSize | None:  # (asked once: before EmoNet's warm-up, or now if already open)
            if not asked:
                asked.append(_checked_frame_size(frame_size(), "frame_size() returned") if callable(frame_size)
                             else frame_size)
            return asked[0]

        self._open(first_size)
        size = first_size()
        if size and self.models is not None and not self._base.no_warmup:
            self.models.warm_detector(*size)
        return self

    def _open(self, frame_size: Callable[[], FrameSize | None] | None = None) -> Analyzer:
        """:meth:`open`, the detector left to the first source; ``frame_size`` tells the first source's (height,
        width) if it is known once the engines are built (EmoNet's warm-up then also finds the plans the detector's
        needs: :meth:`Models.warm_engine`)."""
        if self.models is None:
            with quick_handoff():  # (Triton's cache key is hashed on a thread beside the model's copy)
                self.models = models = load_models(self._base)
            if not self._base.no_warmup:
                try:
                    models.warm_engine(frame_size() if frame_size is not None else None)
                except BaseException:  # (a bad size told, Ctrl-C: engines never warmed are not kept as if they were)
                    self.models = None
                    models.close()
                    raise
        return self

    def close(self) -> None:
        """Free the engines and their GPU memory; the analyzer can be opened again.

        An :meth:`analyze` begun and not read to its end is stopped first, as ``break`` stops it (its summary kept),
        and then ends — from any thread: a step of it under way in another thread ends first, then the engines go.
        A :meth:`run`, :meth:`run_many` or :meth:`run_fleet` under way in another thread is refused (UsageError):
        its engines would go from under it."""
        with self._readings_lock:
            begun = [reading for reading in self._readings if reading.begun]
        for reading in begun:  # (one not begun runs when it is read: on the engines opened again)
            reading.close()
        if not self._busy.acquire(blocking=False):  # (every analyze() has ended: a run holds it)
            raise UsageError("close(): this Analyzer is running a source in another thread (run(), run_many() or "
                             "run_fleet()); close it once that has returned")
        try:
            if self.models is not None:
                self.models.close()
                self.models = None
        finally:
            self._busy.release()

    def __enter__(self) -> Analyzer:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def labels(self) -> tuple[str, ...]:
        return self.open().models.labels  # type: ignore[union-attr]

    def _engines_for(self, source: str) -> RunConfig:
        """The analyzer's options resolved as for ``source``, for the engines' options. Its outputs are left out:
        each run resolves its own (and a run of several sources or cameras writes in a folder, ``-o DIR``, which is
        no rows file: ``--format jsonl -o DIR.csv`` is refused as a folder named like a file, by that run)."""
        return replace(self.config, source=source, webcam=None, output=None, summary=None).resolved(self._device_type)

    # -- sources ------------------------------------------------------------------------------

    def _engines_as_for(self, source: StrPath | None) -> RunConfig:
        """The engine-shaping options a run of ``source`` would get (see __init__): the source's own while the
        analyzer made without one has not built its engines, else the analyzer's."""
        if source is None or self.models is not None or self._made_for_source:
            return self._base
        return self._engines_for(str(source))

    def source_config(self, source: StrPath | None = None, **options: Any) -> RunConfig:
        """The resolved configuration of one source's run (engine options as the analyzer's). A question only: the
        engines are shaped by the source that then starts running (:meth:`_start_config`), not by one asked about."""
        base = self._engines_as_for(source)
        changed = sorted(name for name in set(options) & MODEL_OPTIONS
                         if options[name] != getattr(base, name) and options[name] is not None)
        if changed:
            raise UsageError(f"{', '.join(changed)}: these options shape the engines and are fixed when the "
                             "Analyzer is made; make another Analyzer to change them")
        config = RunConfig.from_options(self.config, **options)
        if source is not None:
            if options.get("webcam") is not None:
                raise UsageError("webcam: a run has one source; give the file or the camera, not both")
            config = replace(config, source=str(source), webcam=None)
        resolved = config.resolved(self._device_type)
        return replace(resolved, **model_options(base))

    def _start_config(self, source: StrPath | None = None, **options: Any) -> RunConfig:
        """:meth:`source_config` for a source that starts running now: the engines the analyzer builds next (if it
        has none yet) are shaped as for it."""
        config = self.source_config(source, **options)
        self._base = self._engines_as_for(source)
        return config

    def analyze(self, source: StrPath, **options: Any) -> Iterator[FaceRecord]:
        """The faces of ``source``, frame by frame, as they are computed (an iterator, run as it is first read).

        The pipeline runs on a background thread; stopping early (``break``, the iterator's ``close()``, the
        analyzer's :meth:`close`, from any thread) stops it. :attr:`summaries` gets the run's summary when the
        iteration ends or is stopped. A file that ends before its stream says it should (truncated, damaged) gives
        every frame that decodes, then raises :class:`~emopipe.errors.InputTruncatedError`; a stream lost for good,
        :class:`SourceUnavailableError`.
        """
        reading = _Reading(lambda closing: self._read(source, closing, options))
        with self._readings_lock:
            self._readings.add(reading)
        return reading

    def _read(self, source: StrPath, closing: threading.Event, options: dict[str, Any]
              ) -> Generator[FaceRecord, None, None]:
        given = RunConfig.from_options(self.config, **options)
        _refuse_file_options(given)
        _refuse_many_options(given)
        with self._one_at_a_time("analyze()"):
            yield from self._analyze(source, closing, **options)

    def _analyze(self, source: StrPath, closing: threading.Event, **options: Any) -> Iterator[FaceRecord]:
        config = self._start_config(str(source), **options)
        stack = ExitStack()
        run = SourceRun(config, resolve_device(config.device), stack)
        try:
            opened = run.open()  # a missing or unreadable source fails here, before any weights load
            models = self.open().models
        except BaseException:
            stack.close()
            raise
        assert models is not None
        records: queue.Queue[Any] = queue.Queue(maxsize=256)
        pipelines: list[Pipeline] = []
        stop = run.cancel
        outcome: list[Outcome] = []
        failure: list[BaseException] = []

        def started(pipeline: Pipeline) -> None:
            pipelines.append(pipeline)
            if stop.is_set():  # the caller stopped while the detector warmed: this pipeline must not run on
                pipeline.stop()

        def work() -> None:
            try:
                with stack:
                    run.warm(models)
                    run.sinks.append(_QueueSink(FaceRecorder(opened.info.uri, models.labels, smoothing=config.smooth,
                                                             precision=config.precision),
                                                records, stop))
                    outcome.append(run.run(on_pipeline=started))
            except BaseException as exc:  # handed to the caller's thread
                failure.append(exc)
            finally:
                records.put(_END)

        thread = threading.Thread(target=work, name="emopipe-analyze", daemon=True)
        thread.start()
        read_to_end = False
        try:
            while not closing.is_set():  # (Analyzer.close() from another thread while this waits: it ends)
                try:
                    item = records.get(timeout=CLOSE_POLL_S)
                except queue.Empty:
                    continue
                if item is _END:
                    read_to_end = True
                    break
                yield from item
        finally:
            stop.set()
            for pipeline in pipelines:
                pipeline.stop()
            while thread.is_alive():  # let the writer finish; drain so it never blocks on a full queue
                with contextlib.suppress(queue.Empty):
                    records.get(timeout=0.05)
            thread.join()
            if outcome:  # (a caller that stopped early — break, close() — has the summary of what ran too)
                self.summaries.append(outcome[0].summary)
        if closing.is_set():  # closed: ended as a break ends it
            return
        if failure:
            raise failure[0]
        if outcome:
            if outcome[0].lost is not None:
                raise outcome[0].lost
            if outcome[0].summary.ended_early and read_to_end:  # every decodable frame's records came first
                raise InputTruncatedError(f"{opened.info.uri}: input ended early: {outcome[0].summary.ended_early}")

    @_exclusive
    def run(self, source: StrPath | None = None, *, metrics: Any = None, exporter: Any = None,
            progress: bool = False, **options: Any) -> Outcome:
        """The command line's run: rows, annotated video and summary written to the configured files.

        Outputs are checked first and held until the run ends (a second run that would write any of them meanwhile,
        in this process or another, is refused: OutputError, exit 5; :func:`~emopipe.io.records.hold_outputs`), then
        the source opens (a bad input fails before any weights load), then ``exporter`` starts serving metrics (so
        scrapes see start-up), then the engines are built and warmed. Ctrl-C (and, on the main thread, SIGTERM) ends
        it with every computed row written, then raises :class:`~emopipe.errors.Interrupted`; a stream lost for good and
        a truncated file raise their errors once the files are written (each with ``.outcome``). ``metrics`` is a
        :class:`~emopipe.observe.metrics.PipelineMetrics`.
        """
        began = time.perf_counter()  # (a later source's start-up counts from here: SourceRun.since)
        given = RunConfig.from_options(self.config, **options)
        _refuse_many_options(given)
        config = self._start_config(source, **options)
        config.check_outputs(earlier=False)
        metrics, exporter = _asked_metrics(given, config, metrics, exporter,
                                           batch_sizes=(int(config.batch_size or 1),),
                                           mode="live" if config.live else "file")
        with ExitStack() as stack:
            # the names are this run's until its last file is written; an earlier run's files are looked for once
            # they are (a run that held them until now has finished its files)
            stack.enter_context(hold_outputs(config.locked_outputs()))
            config.refuse_earlier_outputs()
            if config.report:  # a page or thumbnails folder emopipe did not write is never replaced
                check_report_outputs(config.report, without_thumbnails=None)
            _sigterm_as_ctrl_c(stack)
            run = SourceRun(config, resolve_device(config.device), stack, metrics=metrics, began=began)
            opened = run.open()
            if exporter is not None:
                stack.enter_context(exporter)
            models = self._open(lambda: (opened.info.height, opened.info.width)).models
            assert models is not None
            run.warm(models)
            if metrics is not None:
                metrics.observe_startup(*models.load_and_warmup_s(run.since))
                metrics.set_info(build_info(models.engine.info(), model=models.model_name))
                metrics.set_run_state("running")
            run.write_files()
            run.observe(progress)
            outcome = run.run()
            summary_path = config.summary
            if run.aside and summary_path not in (None, STDOUT):
                # an incomplete run beside an earlier run's files: its summary goes beside them too
                summary_path = outcome.summary.outputs["summary"] = str(partial_path(Path(summary_path)))
                logger.warning("the run did not complete: its summary is %s", summary_path)
            write_summary(outcome.summary, summary_path)
            if exporter is not None:  # push, then linger — unless the run was interrupted: then exit now
                state = "interrupted" if outcome.interrupted else "failed" if outcome.lost else "finished"
                exporter.finish(linger_after=not outcome.interrupted, state=state)
        self.summaries.append(outcome.summary)
        return _raised_if_incomplete(outcome, opened.info.uri)


    @_exclusive
    def run_fleet(self, sources: StrPath | Iterable[StrPath] | None = None, output_dir: StrPath | None = None, *,
                  metrics: Any = None, exporter: Any = None, progress: bool = False, **options: Any) -> FleetOutcome:
        """Several cameras and streams in one pipeline (emopipe.pipeline.fleet): a rows file and a summary per
        camera in ``output_dir``, ``manifest.jsonl`` (a line per camera as it ends) and ``summary.json`` with a
        ``cameras`` list. Runs until every camera has ended (``--end``, ``--max-frames``, or lost past
        ``--reconnect-timeout``), or Ctrl-C / SIGTERM: then :class:`~emopipe.errors.Interrupted` is raised once every
        camera's files are written, its ``outcome`` the FleetOutcome."""
        given = RunConfig.from_options(self.config, **options)
        _refuse_ray_options(given)
        if given.ray:
            raise UsageError("--ray: cameras over Ray are the command line's (emopipe CAMERAS --ray) or "
                             "emopipe.cluster_cameras.run_cameras_on_ray; this run is one process")
        wanted = path_items(sources) if sources is not None else given.sources
        if not wanted:
            raise UsageError("no camera or stream given")
        fleet_config = replace(given, sources=wanted)
        if not fleet_config.fleet:
            raise UsageError(f"{', '.join(wanted)}: not cameras or streams; run_many reads files")
        if self.models is None and not self.config.fleet:  # made without its cameras: give the engines live defaults
            self.config = replace(self.config, sources=wanted)
            self._base = replace(self.config, source=wanted[0], webcam=None).resolved(self._device_type)
        # each camera's options resolved as for one live source (the output folder is not a rows file)
        config = self._start_config(wanted[0], **{**options, "sources": wanted, "output": None, "summary": None})
        metrics, exporter = _asked_metrics(given, config, metrics, exporter, batch_sizes=(int(config.batch_size or 1),),
                                           mode="live")
        directory = Path(output_dir if output_dir is not None else (given.output or DEFAULT_OUTPUT_DIR))
        with ExitStack() as stack:
            # the folder is this run's until the stack closes: a second run into it now is refused
            planned, manifest = plan_fleet(replace(config, summary=given.summary, annotate=given.annotate,
                                                   record=given.record, report=given.report), wanted, directory, stack)
            started = time.perf_counter()
            fleet = Fleet(config, planned, directory, manifest)
            _sigterm_as_ctrl_c(stack)
            if exporter is not None:  # first: a metrics port in use is refused before any camera opens
                stack.enter_context(exporter)
            results, summary, interrupted = self.process_fleet(fleet, stack, metrics=metrics, progress=progress)
            wall_s = time.perf_counter() - started
            outcome = FleetOutcome(results, {}, interrupted)
            outcome.run = finish_many(
                ManyPlan(config, directory, manifest, planned, planned, []), results, summary, interrupted, wall_s,
                self.summaries, cameras=[c.facts for c in fleet.cameras],
                timestamps="wall-clock capture time, Unix seconds (UTC)",
                page=fleet.server.url if fleet.server is not None else None).run
            if exporter is not None:  # push, then linger — not after Ctrl-C/SIGTERM: then exit now
                state = "interrupted" if interrupted else "failed" if outcome.exit_code else "finished"
                exporter.finish(linger_after=not interrupted, state=state)
        if interrupted:  # (Ctrl-C, SIGTERM — a live run's usual end: every camera's files and line written)
            raise Interrupted(outcome)
        return outcome

    def process_fleet(self, fleet: Fleet, stack: ExitStack, *, metrics: Any = None,
                      progress: bool = False) -> tuple[list[SourceResult], RunSummary | None, bool]:
        """A planned fleet through one pipeline, as :meth:`run_fleet` runs it (a Ray worker runs its share of the
        cameras so): the cameras opened, the engines warmed for their frame sizes, then frames until every camera
        has ended, the fleet is stopped (``fleet.stop``: a Ray driver's word) or Ctrl-C / SIGTERM comes. Every
        camera is then finished (its result recorded). The cameras' results, the pipeline's summary, and whether the
        run was interrupted."""
        pipeline: Pipeline | None = None
        models = None
        since = None
        interrupted = False
        began = time.perf_counter()
        try:
            source = fleet.open(stack, None if metrics is None else metrics.registry)
            # each camera's series from now (at zero), not only once the models are warm
            watching: list[Any] = fleet.observers(metrics)
            models = self.open().models
            assert models is not None
            since = models.begin_run(began)
            if not fleet.config.no_warmup:
                for height, width in fleet.frame_sizes():
                    models.warm_detector(height, width)
            if metrics is not None:
                metrics.observe_startup(*models.load_and_warmup_s(since))
                metrics.set_info(build_info(models.engine.info(), model=models.model_name))
                watching += [MetricsObserver(metrics, [c.name for c in fleet.cameras]),
                             CaptureLatencyMetrics(metrics)]
                metrics.set_run_state("running")
            if progress:
                bar = ProgressBar(None)
                watching.append(bar)
                stack.callback(bar.close)
            pipeline = Pipeline(source, models.detector, models.cropper, models.engine,
                                sinks=[fleet.sink(models.labels)], observers=watching, settings=fleet.settings())
            pipeline.run()
        except KeyboardInterrupt:  # (also while the cameras opened or the models loaded: each gets its line)
            interrupted = True
        except Exception:  # a stage failed: each camera's rows so far are kept, its manifest line says so
            # (not when nothing was computed and no line written — the page's address taken, the weights unreadable:
            # no manifest is left, as a file run leaves none, so the run put right may use the folder; a Ray
            # worker's fleet has no manifest, and its driver takes every camera's result)
            if pipeline is not None or fleet.manifest is None or any(c.result is not None for c in fleet.cameras):
                with contextlib.suppress(Exception):
                    fleet.finish_all(interrupted=True)
            raise
        interrupted = interrupted or (fleet.stop is not None and fleet.stop.is_set())
        results = fleet.finish_all(interrupted)
        summary = None
        if pipeline is not None and models is not None:
            load_s, warmup_s = models.load_and_warmup_s(since)
            summary = pipeline.summary(load_s=load_s, warmup_s=warmup_s, interrupted=interrupted,
                                       startup=models.startup(pipeline.first_written_at, since))
        return results, summary, interrupted

    @_exclusive
    def run_many(self, sources: StrPath | Iterable[StrPath] | None = None, output_dir: StrPath | None = None, *,
                 metrics: Any = None, exporter: Any = None, on_result: Callable[[SourceResult], None] | None = None,
                 progress: bool = False, **options: Any) -> ManyOutcome:
        """Many sources in one pipeline, warmed once: a rows file and a summary per source in ``output_dir``,
        ``manifest.jsonl`` (a line per source as it finishes) and ``summary.json`` for the run.

        ``sources`` are files, folders, quoted globs or URLs as the command line takes them (also
        ``list_files=``, ``recursive=``); ``resume=True`` skips those an earlier run into the same folder
        finished. A source that cannot be read is recorded as failed and the others go on.
        """
        given = RunConfig.from_options(self.config, **options)
        _refuse_ray_options(given)
        metrics, exporter = _asked_metrics(given, given, metrics, exporter)  # (a bad pushgateway: before the folder)
        with self.plan_many(sources, output_dir, **options) as plan:  # the folder is this run's until it ends
            started = time.perf_counter()
            results: list[SourceResult] = []
            summary: RunSummary | None = None
            interrupted = False
            if plan.todo:
                results, summary, interrupted = self.process(plan.todo, plan.config, manifest=plan.manifest,
                                                             on_result=on_result, metrics=metrics, exporter=exporter,
                                                             progress=progress)
            elif exporter is not None:  # a resumed run with every source done loads no model; its metrics: ended
                with exporter:
                    exporter.finish(linger_after=True, state="finished")
            outcome = finish_many(plan, plan.skipped + results, summary, interrupted, time.perf_counter() - started,
                                  self.summaries)
            report_many(plan, outcome)
        if outcome.interrupted:  # (Ctrl-C, SIGTERM: every file and the manifest written)
            raise Interrupted(outcome)
        return outcome

    def plan_many(self, sources: StrPath | Iterable[StrPath] | None = None, output_dir: StrPath | None = None, *,
                  folder_held: bool = False, **options: Any) -> ManyPlan:
        """What a many-source run will do, checked before anything loads: the sources (expanded), their
        output files, the manifest, and which sources an earlier run finished (``resume``: recorded
        ``skipped`` now).

        The output folder is the plan's alone from before an earlier run's manifest is looked for until
        :meth:`ManyPlan.close` (``with analyzer.plan_many(...) as plan:``): a second run planned into it meanwhile,
        in this process or another, is refused (OutputError, exit 5) and writes nothing
        (:func:`~emopipe.io.records.hold_folder`; the kernel releases it should the process end first). So is one
        that would write the same ``report`` page, whatever its folder: the plan holds the page as a one-source run
        does (:func:`~emopipe.io.records.hold_outputs`), once it holds the folder.
        ``folder_held``: the caller holds the folder already (the Ray driver takes it before Ray starts), so the
        plan neither takes nor releases it (it still takes the page, released by :meth:`ManyPlan.close`)."""
        given = RunConfig.from_options(self.config, **options)
        # per-source options resolved as for a file (the output folder is not a rows file: kept apart)
        config = self._start_config(MANY_SOURCES, **{**options, "output": None, "summary": None})
        return plan_sources(sources, output_dir, config, given, folder_held=folder_held)

    def source_chain(self, todo: Sequence[PlannedSource], config: RunConfig, feeding: bool = False) -> SourceChain:
        """The chain :meth:`process` reads ``todo`` through; ``feeding``: one that takes more sources while it
        runs (:meth:`SourceChain.extend`), as a cluster worker's does."""
        device = resolve_device(config.device)

        def open_one(uri: str, start_s: float | None = config.start, end_s: float | None = config.end) -> Any:
            return open_input(uri, decoder=config.decoder, device=device, start_s=start_s, end_s=end_s,
                              max_frames=config.max_frames)

        # (fed: held until process() has warmed the detector for its first source, before anything decodes)
        return SourceChain([replace(p, position=i) for i, p in enumerate(todo)], open_one,
                           parallel=config.parallel or DEFAULT_PARALLEL, feeding=feeding, held=feeding)

    def process(self, todo: Sequence[PlannedSource] | SourceChain, config: RunConfig, *,
                manifest: Manifest | None = None, on_result: Callable[[SourceResult], None] | None = None,
                metrics: Any = None, exporter: Any = None, progress: bool = False, observers: Sequence[Observer] = (),
                ) -> tuple[list[SourceResult], RunSummary | None, bool]:
        """Run planned sources through one pipeline: (a result per source finished, the pipeline's summary — None
        when it was cut off before it ran —, whether it was interrupted). ``todo`` may be a fed
        :meth:`source_chain` (a cluster worker's: the run lasts until its feed ends). ``observers`` see every frame
        as it is written (a cluster worker counts them for the driver's progress bar).

        Ctrl-C (and, on the main thread, SIGTERM) while the models load raises: no source was begun, no line is
        written. Once they are loaded it ends the run as it ends a running pipeline, also while the first source
        opens or the detector warms for its frame size: the source begun (its reading started) is ``interrupted``
        with the frames written so far, none then — as a Ray run's driver records the source its worker was in."""
        interrupted = False
        pipeline: Pipeline | None = None
        began = time.perf_counter()
        with ExitStack() as stack:
            _sigterm_as_ctrl_c(stack)
            chain = stack.enter_context(todo if isinstance(todo, SourceChain) else self.source_chain(todo, config))
            chain.start()  # the first sources open while the engines load
            if exporter is not None:
                stack.enter_context(exporter)
            models = self._open(chain.opened_frame_size).models
            assert models is not None
            since = models.begin_run(began)
            if metrics is not None:  # each source that fails counts as an error (errors_total, its alert)
                on_result = _counting_failures(metrics, on_result)
            # before the first source is waited for and the detector warmed: a signal then finishes that source too
            sink = PerSourceSink(chain, config, models.labels, manifest, on_result=on_result)
            try:
                if chain.held:  # a cluster worker's: its detector is warmed before its first source decodes
                    try:
                        first = chain.first_planned()  # (waits for the first share)
                        size = first and decoded_frame_size(first.uri, decoder=config.decoder,
                                                            device=resolve_device(config.device))
                        if size and not config.no_warmup:
                            models.warm_detector(*size)
                    finally:
                        chain.release_reading()
                info = chain.first_info()
                if info is not None and not config.no_warmup:
                    models.warm_detector(info.height, info.width)
                sink.begin()  # (the first source's time runs from the end of the warm-ups)
                if metrics is not None:
                    metrics.observe_startup(*models.load_and_warmup_s(since))
                    metrics.set_info(build_info(models.engine.info(), model=models.model_name))
                    metrics.set_run_state("running")  # (the alerts on a running run's rates and sources watch from now)
                chain.on_idle = sink.settle  # a fed chain waiting for sources: those written meanwhile finish
                # (by position, growing with a fed chain; redacted by the metrics; past --metrics-max-sources: "other")
                names = chain.uris
                # the metrics first: an observer that has heard of a frame (a cluster worker's counter, which its
                # reply and its push wait for) knows the metrics have counted it too
                watching: list[Any] = [*([MetricsObserver(metrics, names)] if metrics is not None else []),
                                       *observers]
                if progress:
                    bar = ProgressBar(None)
                    watching.append(bar)
                    stack.callback(bar.close)
                frames_per_batch = models.detector.batch_size * config.detect_every
                settings = PipelineSettings(detect_batch=models.detector.batch_size,
                                            queue_frames=max(4, 2 * frames_per_batch),
                                            detect_every=config.detect_every,
                                            # a fed chain may wait for its next share: the last faces' unfilled
                                            # batch then runs after this, not when the feed ends
                                            max_wait_s=FED_MAX_WAIT_S if chain.feeding else None)
                pipeline = Pipeline(chain, models.detector, models.cropper, models.engine, sinks=[sink],
                                    observers=watching, settings=settings)
                pipeline.run()
            except KeyboardInterrupt:
                interrupted = True
                sink.close()  # (once: a pipeline that ran closed it; before it ran, the source begun gets its line)
            load_s, warmup_s = models.load_and_warmup_s(since)
            summary = None if pipeline is None else \
                pipeline.summary(load_s=load_s, warmup_s=warmup_s, interrupted=interrupted,
                                 startup=models.startup(pipeline.first_written_at, since))
            if exporter is not None:  # push, then linger — not after Ctrl-C/SIGTERM: then exit now
                exporter.finish(linger_after=not interrupted, state="interrupted" if interrupted else "finished")
        return sink.results, summary, interrupted


def _checked_frame_size(size: object, what: str) -> FrameSize | None:
    """``size`` as a (height, width) of whole pixels above 0, or None; anything else a UsageError naming ``what``."""
    if size is None:
        return None
    if isinstance(size, tuple | list) and len(size) == 2 and all(
            isinstance(n, numbers.Integral) and not isinstance(n, bool) and int(n) > 0 for n in size):
        return int(size[0]), int(size[1])
    raise UsageError(f"{what} {size!r}: give the frames' (height, width), two whole numbers of pixels above 0, or None")


def _counting_failures(metrics: Any, then: Callable[[SourceResult], None] | None) -> Callable[[SourceResult], None]:
    def on_result(result: SourceResult) -> None:
        if result.status == "failed":
            metrics.error("decode" if result.kind == InputTruncatedError.__name__ else "source")
        if then is not None:
            then(result)

    return on_result


CLOSE_POLL_S = 0.1  # how often an analyze() waiting for its next frame looks whether the analyzer was closed


class _Reading(Iterator[FaceRecord]):
    """What :meth:`Analyzer.analyze` returns: its generator, stepped one at a time (a lock), so that a close() from
    any thread — the analyzer's or its own — comes between two steps, never beside one, and no record follows it.
    (A bare generator closed while another thread was inside it raised "generator already executing"; one paused
    kept its pipeline running under the engines the analyzer freed.)"""

    def __init__(self, steps: Callable[[threading.Event], Generator[FaceRecord, None, None]]) -> None:
        self.closing = threading.Event()  # set by close(): a step waiting for records ends
        self.begun = False
        self._steps = steps(self.closing)
        self._step = threading.Lock()

    def __iter__(self) -> _Reading:
        return self

    def __next__(self) -> FaceRecord:
        self.begun = True
        with self._step:
            if self.closing.is_set():  # (closed while this waited for its turn)
                self._steps.close()
                raise StopIteration
            return next(self._steps)

    def close(self) -> None:
        """Stop the run as ``break`` does (its pipeline stopped, its summary kept); then it ends."""
        self.closing.set()
        with self._step:
            self._steps.close()


class _QueueSink(Sink):
    """Hands each frame's tracked records to the caller's thread (bounded: the pipeline waits for it)."""

    def __init__(self, recorder: FaceRecorder, records: queue.Queue[Any], stop: threading.Event) -> None:
        self.recorder = recorder
        self.records = records
        self.stop = stop

    def write(self, result: FrameResult) -> None:
        found = self.recorder.records(result)
        if found:  # the time as the rows file writes it: the caller's records are the rows, read back or not
            at = written_timestamp(result.frame.timestamp_s)
            if at != found[0].timestamp_s:
                found = [replace(record, timestamp_s=at) for record in found]
        while found and not self.stop.is_set():
            try:
                self.records.put(found, timeout=0.1)
                return
            except queue.Full:
                continue

    def close(self) -> None:
        pass


def _raised_if_incomplete(outcome: Outcome, uri: str) -> Outcome:
    """A run's outcome, once its files are written: raised as what ended it early — Ctrl-C or SIGTERM
    (:class:`Interrupted`), a stream lost for good, a file that ended before its stream said (as ``analyze()`` raises
    them) — each carrying it as ``outcome``."""
    if outcome.interrupted:
        raise Interrupted(outcome)
    if outcome.lost is not None:
        outcome.lost.outcome = outcome
        raise outcome.lost
    if outcome.summary.ended_early:
        error = InputTruncatedError(f"{uri}: input ended early: {outcome.summary.ended_early}")
        error.outcome = outcome
        raise error
    return outcome


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt  # SIGTERM ends a run as Ctrl-C does: results written, files closed, exit 130


def _sigterm_as_ctrl_c(stack: ExitStack) -> None:
    """`docker stop`, systemd, kill: SIGTERM ends the run as Ctrl-C does, for the run's duration — unless the
    program already handles SIGTERM (the command line does, and also exits at once on a second signal)."""
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
        stack.callback(signal.signal, signal.SIGTERM, signal.signal(signal.SIGTERM, _interrupt))


def analyze(source: StrPath, *, config: RunConfig | None = None, **options: Any) -> Iterator[FaceRecord]:
    """The faces of one source as :class:`~emopipe.types.FaceRecord`\\ s: an :class:`Analyzer` opened for it
    and closed when the iteration ends."""
    _refuse_file_options(RunConfig.from_options(config, **options))
    analyzer = Analyzer(config, **options)
    try:
        yield from analyzer.analyze(source)
    finally:
        analyzer.close()
