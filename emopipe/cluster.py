"""The many-source command on a Ray cluster: each worker an :class:`emopipe.Analyzer`, warmed once.

The driver (the ``emopipe ... --ray`` process) takes the output folder (a lock on ``DIR/.emopipe.lock`` until the run
ends: a folder another run is writing is refused before Ray starts), plans the run exactly as one process does
(:func:`~emopipe.pipeline.many.plan_sources`: the sources, their output files, the manifest, ``--resume``; the driver
loads no PyTorch, so this is quick and an error is said before Ray starts), then connects to Ray and starts one actor
per GPU (``--ray-gpus-per-worker`` for fractions; CPU workers on a cluster without GPUs), and hands the sources out
dynamically, a few at a time (``DEPTH`` shares queued per worker), largest file first, so one long video never
leaves the other GPUs idle; with fewer videos than workers, long videos go out in parts, which the driver joins
(:mod:`emopipe.pipeline.parts`). Each
worker runs one pipeline for its whole life (:meth:`Analyzer.process` over a fed source chain): a share is added
to it as it comes, so the GPU does not drain and refill between shares. The worker writes each source's files
itself, under their partial names, and leaves them so: the driver appends the source's manifest line as the worker
tells it the source is finished (through a small board actor, as it finishes; also in its share's reply), then
renames the files (the rows last), as one process does; a driver killed at any instant leaves no file under a final
name that no line claims, so ``--resume`` goes on, and Ctrl-C keeps every source a worker had finished. The driver
writes ``summary.json``. A worker that dies (killed, out of memory, node lost) is replaced and its unfinished sources
go to another worker, up to ``--ray-retries`` times each; a source redone replaces its partial files, so no row is
ever duplicated. The output folder must be storage every worker (and the driver) sees at the same path
(docs/cluster.md).

Seeing it run: the driver draws one progress bar over all sources (frames done of the total their containers
declare, probed on the driver as the run starts; aggregate frames/s; workers alive), reading each busy worker's
frame counts from a small board actor the workers tell as their shares run. With
``--metrics-port P`` each worker serves its own metrics (worker N on P+1+N; P 0: a free port each) and with
``--pushgateway`` pushes them with its name as ``instance``; ``summary.json``'s ``ray`` section says where.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

# The driver loads no PyTorch (nor the pipeline that needs it): it plans, hands out sources and writes the manifest;
# only the workers build engines (:class:`Worker` imports the API in its own process).
from emopipe._heap import imports_uncollected
from emopipe.config import RunConfig
from emopipe.errors import EmopipeError, UsageError
from emopipe.io.records import hold_folder
from emopipe.model import cuda_context, cudnn_plans
from emopipe.model.cuda_context import mps_running
from emopipe.observe.exposition import MetricsExporter, MetricsServer, linger
from emopipe.observe.metrics import PipelineMetrics
from emopipe.pipeline.archive import expected_frames, frame_size_of
from emopipe.pipeline.drivers import (
    HeldSignals,
    as_left,
    failed_in_worker,
    largest_first,
    log_as_worker,
    perf_counter_at,
    reported,
    signals_held,
    worker_metrics_port,
)
from emopipe.pipeline.many import (
    MANY_SOURCES,
    ManyOutcome,
    ManyPlan,
    finish_many,
    many_config,
    plan_sources,
    report_many,
)
from emopipe.pipeline.parts import PartResults, plan_parts
from emopipe.pipeline.progress import ProgressBar

if TYPE_CHECKING:
    from emopipe.api import Analyzer
    from emopipe.pipeline.archive import PlannedSource, SourceResult
    from emopipe.types import FrameResult

logger = logging.getLogger(__name__)

LOCAL = "local"  # --ray local: start a Ray instance on this machine for the run
WORKER_NAME = "emopipe-worker-{}"  # actor names, as the Ray dashboard shows them
# --ray-keep-warm: workers outlive their run (detached actors) in one namespace, where the next run looks for them
WARM_NAMESPACE = "emopipe-warm"
WARM_NAME = "emopipe-warm-{}"
POLL_S = 0.5  # how often the driver asks the busy workers how far they are (only while a bar is drawn)
NO_ROOM_S = 30.0  # no worker warm and one not started this long: the driver says what it waits for (then every 5 min)
HEAD_CHECK_S = 5.0  # how often the driver asks whether the cluster's head (Ray's GCS) answers (at once after a death)
HEAD_LOST_S = 20.0  # its head silent this long, the run ends (Ray itself ends a driver 60 s after it lost its head)


@dataclass(frozen=True)
class RayOptions:
    address: str = "auto"  # a cluster's address, "auto" (RAY_ADDRESS or the local cluster), or "local"
    workers: int | None = None  # default: one per GPU of the cluster (per CPU, up to 8, without GPUs)
    gpus_per_worker: float | None = None  # default: 1 where the cluster has GPUs, else 0
    retries: int = 2  # times a source is given to another worker after its worker died
    chunk: int | None = None  # sources handed to a worker at a time (default: guided, up to 16, 1 at the end)
    keep_warm_s: float | None = None  # the workers wait this long warm on the cluster for the next run (None: end)

    @classmethod
    def from_config(cls, config: RunConfig) -> RayOptions:
        return cls(address=config.ray or "auto", workers=config.ray_workers,
                   gpus_per_worker=config.ray_gpus_per_worker, retries=config.ray_retries,
                   keep_warm_s=config.ray_keep_warm)


class ProgressBoard:
    """A small Ray actor the workers tell how far their running shares are, so the driver's bar moves within
    shares, and each source as it finishes, so the driver records it then, not when its whole share's reply comes,
    and the source each is in (pushed by the workers: the driver never waits on a busy worker to read it)."""

    def __init__(self) -> None:
        self.latest: dict[str, dict[int, tuple[int, int]]] = {}
        # (worker, share id, result), in the order told; kept, not taken: a driver cut off between the board's
        # answer and its recording reads them again (one per source: small)
        self.results: list[tuple[str, int, SourceResult]] = []
        self.inside: dict[str, tuple[int, str] | None] = {}  # worker → (share id, source) its pipeline is in
        self.placed: set[str] = set()  # the workers whose actor the cluster has started (the rest wait for room)

    def update(self, name: str, shares: dict[int, tuple[int, int]]) -> None:
        self.latest[name] = shares

    def read(self) -> dict[str, dict[int, tuple[int, int]]]:
        return dict(self.latest)

    def finished(self, name: str, share: int, result: SourceResult) -> None:
        self.results.append((name, share, result))

    def finished_since(self, start: int) -> list[tuple[str, int, SourceResult]]:
        """The results told after the first ``start`` (the driver's count of those it has recorded)."""
        return self.results[start:]

    def entered(self, name: str, source: tuple[int, str] | None) -> None:
        self.inside[name] = source

    def read_entered(self) -> dict[str, tuple[int, str] | None]:
        return dict(self.inside)

    def started(self, name: str) -> None:
        self.placed.add(name)

    def read_started(self) -> set[str]:
        return set(self.placed)


class _Counter:
    """What a worker's pipeline has written: frames and faces per share (told to the board at most every POLL_S),
    in all (frames, faces, stage seconds, EmoNet batches): the worker's summary.

    A pipeline observer (emopipe.pipeline.runner.Observer's hooks; not subclassed, so this module loads no
    PyTorch), called on the pipeline's threads."""

    def __init__(self, name: str, board: Any = None) -> None:
        self.name = name
        self.board = board
        self.share_of: list[int] = []  # by source position: the share it came in
        self.shares: dict[int, tuple[int, int]] = {}  # share id → (frames, faces) written, while it runs
        self.frames = self.faces = self.batches = self.padded = 0
        self.stage_seconds: dict[str, float] = {}
        self.first_frame_at: float | None = None  # (time.time(): the driver's timeline compares it with its own)
        self._told = -float("inf")
        self._counted = threading.Condition()

    def frame(self, result: FrameResult, latency_s: float) -> None:  # (the pipeline's one writer thread)
        share = self.share_of[result.frame.stream]
        with self._counted:
            if self.first_frame_at is None:
                self.first_frame_at = time.time()
            self.frames += 1
            self.faces += len(result.faces)
            frames, faces = self.shares.get(share, (0, 0))
            self.shares[share] = (frames + 1, faces + len(result.faces))
            self._counted.notify_all()
            if time.monotonic() - self._told >= POLL_S or frames == 0:  # (a share's first frame: at once)
                self._tell()

    def wait_for(self, share: int, frames: int, stopped: Callable[[], bool]) -> None:
        """Wait until ``frames`` of ``share`` are counted (or the pipeline stopped). A source is finished, and
        its result handed back, as its last frame is written; the observers hear of that frame just after, so
        without this a share's reply could leave its last frames out of the worker's summary."""
        with self._counted:
            while self.shares.get(share, (0, 0))[0] < frames and not stopped():
                self._counted.wait(timeout=0.1)

    def done(self, share: int) -> None:
        """A share's results go back to the driver (they count its frames from now): it is no longer running."""
        with self._counted:
            self.shares.pop(share, None)
            self._tell()

    def _tell(self) -> None:
        """Tell the board the running shares; called with the counter's lock held, so the board gets the views in
        the order they were taken (the board's calls from one process run in the order sent): a frame's view
        taken before a share's end cannot reach it after the end and bring the share back."""
        self._told = time.monotonic()
        if self.board is not None:
            self.board.update.remote(self.name, dict(self.shares))  # (no reply awaited)

    def stage(self, stage: str, seconds: float) -> None:
        self.stage_seconds[stage] = self.stage_seconds.get(stage, 0.0) + seconds

    def batch(self, size: int, real: int, seconds: float) -> None:
        self.batches += 1
        self.padded += size - real

    def frame_split(self, queued_s: float, processing_s: float) -> None: ...

    def queue_depth(self, name: str, depth: int) -> None: ...

    def dropped(self, n: int) -> None: ...


@dataclass
class _Feed:
    """One pipeline of a worker: its fed chain, the share of each source position, the results in order."""

    chain: Any  # emopipe.pipeline.archive.SourceChain, fed
    share_of: list[int] = field(default_factory=list)
    results: list[SourceResult] = field(default_factory=list)
    failure: BaseException | None = None
    stopped: bool = False


class Worker:
    """One Ray actor: an Analyzer built and warmed as the actor starts, then one pipeline for its whole life.

    Every share the driver sends is added to that pipeline's fed source chain, so the GPU does not drain
    between shares; :meth:`process` returns a share's results once its last source is finished. All the CUDA
    work (engines built, warmed and CUDA graphs captured, then the pipeline) runs on the worker's one serving
    thread; the actor's methods only add sources and wait (the actor takes a few calls at once for that). A
    pipeline that fails (a bug, the GPU out of memory, a rows file that cannot be written) fails the source it was
    in, and a new one takes the sources it never reached and the next shares.

    With ``metrics_port`` (0: a free one) it serves its Prometheus metrics for its whole life, over all its
    shares; with ``--pushgateway`` it pushes them after each share, grouped by its name as ``instance``."""

    def __init__(self, config: RunConfig, cwd: str | None = None, name: str = "emopipe-worker",
                 metrics_port: int | None = None, board: Any = None, run: str | None = None,
                 keep_s: float | None = None, frame_size: tuple[int, int] | None = None) -> None:
        began = time.perf_counter()
        if board is not None:  # (the driver tells a worker starting from one the cluster has no room for yet)
            board.started.remote(name)
        cuda_context.start(config.device)  # (made on a thread while PyTorch imports, where this process has none yet)
        # Where a worker's start goes (summary.json, ray.worker_summaries): had its process imported PyTorch already
        # (a cluster's RAY_preload_python_modules), how long it ran before this actor came, then the actor to warm.
        self.start: dict[str, Any] = {"torch_imported": "torch" in sys.modules, "process_age_s": _process_age_s()}
        # (said to the driver: workers sharing a GPU without it take turns on it; asked again before a warning)
        self.mps = mps_running(tries=3)
        # (a fresh machine's cuDNN plans are built by processes the warm-up starts: as many as this worker's cores,
        # not the host's — the host's other workers start theirs too)
        os.environ.setdefault(cudnn_plans.BUILDERS_VARIABLE, str(_cores_assigned()))
        self.start["plan_builders"] = cudnn_plans.builders_for()
        log_as_worker("emopipe worker", logging.INFO)
        if cwd and Path(cwd).is_dir():  # relative sources and outputs mean what they mean to the driver
            os.chdir(cwd)
        self.config = config
        self.name = name
        self.where = f"{socket.gethostname()}:{os.getpid()}"
        self._metrics_port = metrics_port
        self.error: EmopipeError | None = None  # a user error that stopped the engines (weights missing, …)
        self.failure: BaseException | None = None  # what stopped the engines otherwise (a bug)
        self.counter = _Counter(name, board)
        self.metrics: PipelineMetrics | None = None
        self.exporter: MetricsExporter | None = None
        self.feed: _Feed | None = None  # the running pipeline's, once the engines are ready
        self.sources = 0  # finished, over all its pipelines
        self.first_share_at: float | None = None
        self.last_result_at: float | None = None
        self._changed = threading.Condition()
        self._opened = threading.Event()
        self._replying = threading.Lock()
        self._snapshots = 0  # summaries taken for replies: each reply's number
        # --ray-keep-warm: the run holding this worker (a token), None while it waits warm for the next run; a
        # worker ending after its idle time takes no run (closing)
        self.cwd = os.getcwd()
        self._run: str | None = run
        self._released: _Feed | None = None  # the feed its run ended: the serving thread then waits for the next
        self._closing = False
        self._weights_stamp = _stamp(config.weights)
        self._keep_s = keep_s
        self._last_active = time.monotonic()  # (of a run: a claim, a share, a release)
        self._in_process = 0  # shares being processed now
        self.analyzer: Analyzer | None = None  # made on the serving thread: an option it refuses is the run's error
        self._began = began
        self._frame_size = frame_size  # (the run's largest source's: its detector warmed for it with EmoNet)
        threading.Thread(target=self._serve, name="emopipe-worker", daemon=True).start()
        if keep_s is not None:
            threading.Thread(target=self._watch, name="emopipe-keep-warm", daemon=True).start()

    def _serve(self) -> None:
        """The serving thread: engines built and warmed, then a pipeline fed shares until the actor ends."""
        try:
            if self.metrics_wanted():
                from prometheus_client import CollectorRegistry

                registry = CollectorRegistry()
                self.metrics = PipelineMetrics(registry, queues=("frames", "results"))
                self.exporter = MetricsExporter(registry, port=self._metrics_port, host=self.config.metrics_host,
                                                pushgateway=self.config.pushgateway,
                                                grouping_key={"instance": self.name},
                                                run_state=self.metrics.set_run_state)
                self.exporter.start()  # before the engines load, so scrapes see the start-up
            with imports_uncollected():
                from emopipe.api import Analyzer  # (PyTorch: in the worker's process)

            self.analyzer = Analyzer(self.config).open(frame_size=self._frame_size)
            config = self.analyzer.source_config(MANY_SOURCES, output=None, summary=None)
        except EmopipeError as exc:  # the driver reports it as one process would
            self.error = exc
        except BaseException as exc:
            self.failure = exc
        self.start["ready_s"] = round(time.perf_counter() - self._began, 3)  # the actor's start to engines warm
        if self.error is not None or self.failure is not None or self.analyzer is None:
            self._opened.set()
            return
        while True:
            feed = _Feed(self.analyzer.source_chain([], config, feeding=True))
            with self._changed:
                self.feed = feed
                self.counter.share_of = feed.share_of
            feed.chain.on_begin = lambda feed=feed: self._tell_entered(feed)
            self._opened.set()

            def finished(result: SourceResult, feed: _Feed = feed) -> None:  # (in position order)
                with self._changed:
                    share = feed.share_of[len(feed.results)]
                    feed.results.append(result)
                    self.sources += 1
                    self.last_result_at = time.perf_counter()
                    self._changed.notify_all()
                # the driver records a finished source now (its files complete, under their partial names), so a
                # Ctrl-C or this worker's death before its share's reply keeps it; the one a failing pipeline stopped
                # in (interrupted here) is said by the reply, as failed
                if self.counter.board is not None and result.status != "interrupted":
                    self.counter.board.finished.remote(self.name, share, result)  # (no reply awaited)
                self._tell_entered(feed)  # the next source, if begun (before its first frame is written)

            try:
                # (the exporter is not handed over: the pipeline's end would stop serving it)
                self.analyzer.process(feed.chain, config, metrics=self.metrics, observers=[self.counter],
                                      on_result=finished)
            except BaseException as exc:
                feed.failure = exc
                logger.error("%s: its pipeline failed (%s); the next shares get a new one", self.name, exc)
            finally:
                with self._changed:
                    feed.stopped = True
                    self._changed.notify_all()
            with self._changed:  # its run released it (--ray-keep-warm): warm, waiting for the next run
                while self._released is feed and not self._closing:
                    self._changed.wait()
                if self._closing:
                    return

    def _tell_entered(self, feed: _Feed) -> None:
        """Tell the board which source the pipeline is in: the first not finished, once its reading has begun (as
        one process, cut off, records that one ``interrupted`` even before any of its frames is written; the driver
        cannot tell it from the files then). Told as the state is, under the lock, whatever thread calls (a source
        finished, or one begun): the board gets the states in the order taken. Nothing once the pipeline stops in a
        source (its interrupted result): no later one is entered, and the share's reply says what became of it."""
        with self._changed:
            board = self.counter.board
            if board is None or feed is not self.feed or feed.stopped or \
                    (feed.results and feed.results[-1].status == "interrupted"):
                return
            position = len(feed.results)
            inside = (feed.share_of[position], feed.chain.readings[position].planned.key) \
                if position < feed.chain.started else None
            board.entered.remote(self.name, inside)  # (no reply awaited)

    def claim(self, config: RunConfig, cwd: str, board: Any, run: str) -> dict[str, Any] | None:
        """Take this warm worker for the run ``run`` (--ray-keep-warm), if no run holds it and the run's options are
        those it was started with, bar what each source's plan carries (sources, output names, --resume, the Ray
        options): then its engines and pipeline are the ones that run would build. Its identity, else None."""
        mine, theirs = _worker_options(self.config), _worker_options(config)
        if cwd != self.cwd and _relative_paths(config):  # (relative weights or models mean another file there)
            return None
        if mine != theirs or _stamp(config.weights) != self._weights_stamp:
            return None
        with self._changed:
            if self._run is not None or self._closing or self._released is None or not self.feed or \
                    not self.feed.stopped:
                return None
            self._run = run
            if cwd != self.cwd and Path(cwd).is_dir():  # (the pipeline is stopped: nothing reads paths now)
                os.chdir(cwd)
                self.cwd = cwd
            self.counter = _Counter(self.name, board)
            self.sources, self.first_share_at, self.last_result_at = 0, None, None
            self.start = {"warm_from_an_earlier_run": True, "process_age_s": _process_age_s()}
            self._opened.clear()  # ready() waits for the run's new pipeline
            self._released = None
            self._last_active = time.monotonic()
            self._changed.notify_all()
        return self._identity()

    def release(self, run: str, keep_s: float) -> bool:
        """The run ``run`` is over: the pipeline ends once its sources are done, and the worker waits warm for the
        next run with the same options for ``keep_s`` seconds, then ends (its GPU free again). False if another
        run holds it (nothing changed)."""
        self._keep_s = keep_s
        return self._free(run)

    def leave_if_idle(self) -> dict[str, float] | None:
        """A run whose options are not this worker's needs room on the cluster: a worker waiting warm with no run
        ends (its driver kills it; it takes nothing more) and says what it held (Ray's resources); None if a run
        holds it."""
        import ray

        with self._changed:
            if self._run is not None or self._closing:
                return None
            self._closing = True
            self._changed.notify_all()
        logger.info("%s: a run with other options needs its room; ending", self.name)
        return dict(ray.get_runtime_context().get_assigned_resources())

    def _free(self, run: str) -> bool:
        with self._changed:
            if self._run != run:
                return False
            self._run = None
            self._released = self.feed
            if self.feed is not None:
                self.feed.chain.end_feed()
            self._last_active = time.monotonic()
            self._changed.notify_all()
        return True

    def _watch(self) -> None:
        """--ray-keep-warm: the worker ends once no run has used it for its keep time — released by its run, or held
        by one whose driver is gone (killed before it could release it: the run's board, an actor of that driver,
        is gone with it), so a worker that outlives its run never holds its GPU for good."""
        import ray
        from ray.exceptions import RayActorError

        while True:
            time.sleep(WATCH_S)
            with self._changed:
                if self._closing:
                    return
                run, board, idle_s = self._run, self.counter.board, time.monotonic() - self._last_active
                busy = self._in_process > 0
                if run is None and idle_s >= (self._keep_s or 0):
                    self._closing = True
                    self._changed.notify_all()
                    break
            if run is None or busy or board is None:
                continue
            try:
                ray.get(board.read.remote(), timeout=30)
            except RayActorError:
                logger.warning("%s: the run holding it is gone (its driver ended without letting it go); it waits "
                               "%g s for another run", self.name, self._keep_s)
                self._free(run)
            except Exception:  # (a board slow to answer: asked again next time)
                logger.debug("the run's board did not answer", exc_info=True)
        logger.info("%s: no run came for %g s; ending (its GPU free)", self.name, self._keep_s)
        ray.kill(ray.get_runtime_context().current_actor, no_restart=True)

    def metrics_wanted(self) -> bool:
        return self._metrics_port is not None or bool(self.config.pushgateway)

    def ready(self) -> dict[str, Any]:
        """Who this worker is and where its metrics are, once its engines are built and warm; ``error`` is the
        user error that stopped them, else None."""
        self._opened.wait()
        if self.failure is not None:
            raise self.failure
        return {"error": self.error, **self._identity()}

    def progress(self) -> dict[int, tuple[int, int]]:
        """(frames, faces) written so far of each share still running, by share id."""
        return dict(self.counter.shares)

    def process(self, share: Sequence[PlannedSource], share_id: int = 0) -> dict[str, Any]:
        """Add ``share`` to the pipeline and wait for its sources to finish (their files written here, under their
        partial names); their results go back to the driver, each with the renames it is to do after the source's
        manifest line (:attr:`SourceResult.renames`)."""
        self.ready()
        if self.error is not None:
            raise self.error
        began = time.perf_counter()
        with self._changed:
            self._in_process += 1
            self._last_active = time.monotonic()
        try:
            return self._process(share, share_id, began)
        finally:
            with self._changed:
                self._in_process -= 1
                self._last_active = time.monotonic()

    def _process(self, share: Sequence[PlannedSource], share_id: int, began: float) -> dict[str, Any]:
        with self._changed:
            feed = self.feed
            assert feed is not None
            if self.first_share_at is None:
                self.first_share_at = began
            feed.share_of.extend([share_id] * len(share))
            positions = feed.chain.extend(share)
            # (a source is interrupted only when its pipeline stops under it: then wait for the failure, to say it)
            while not feed.stopped and (len(feed.results) < positions.stop or any(
                    r.status == "interrupted" for r in feed.results[positions.start:positions.stop])):
                self._changed.wait(timeout=1.0)
            results = feed.results[positions.start:positions.stop]
        if feed.failure is not None:
            # its pipeline failed under the share: each source as far as it went — those finished keep their
            # results, the one it failed in fails with the error, and those it never reached have no result here
            # (the driver gives them to a pipeline again)
            results = [failed_in_worker(r, feed.failure, self.name) if r.status == "interrupted" else r
                       for r in results]
        self.counter.wait_for(share_id, sum(r.frames for r in results), lambda: feed.stopped)
        # Two shares' replies are taken one at a time, each numbered: the driver keeps the summary taken last
        # (replies may reach it in either order), and the Pushgateway gets the pushes in the order their values
        # were read (one at a time: an earlier read cannot land after a later one and take back its counts).
        with self._replying:
            self.counter.done(share_id)
            if self.exporter is not None:
                self.exporter.finish(linger_after=False)  # --pushgateway: this worker's totals so far
            self._snapshots += 1
            summary, snapshot = self.summary(), self._snapshots
        return {"results": results, "summary": summary, "snapshot": snapshot, "interrupted": False,
                "worker": self.where, "seconds": time.perf_counter() - began, "busy_s": self.busy_s(),
                **self._identity()}

    def busy_s(self) -> float:
        """From its first share's arrival to its last source's end."""
        if self.first_share_at is None or self.last_result_at is None:
            return 0.0
        return max(0.0, self.last_result_at - self.first_share_at)

    def summary(self) -> dict[str, Any]:
        """The worker's pipeline so far: what the driver's summary shows for it."""
        counter, models = self.counter, self.analyzer.models if self.analyzer is not None else None
        busy = self.busy_s()
        return {"frames": counter.frames, "faces": counter.faces, "seconds": round(busy, 4),
                "fps": counter.frames / busy if busy else 0.0, "faces_per_s": counter.faces / busy if busy else 0.0,
                "sources": self.sources, "emonet_batches": counter.batches, "padded_faces": counter.padded,
                "stage_seconds": {k: round(v, 4) for k, v in counter.stage_seconds.items()},
                "load_s": round(models.load_s, 4) if models is not None else None,
                "warmup_s": round(models.warmup_s, 4) if models is not None else None, "start": self.start,
                "startup": models.startup(counter.first_frame_at and perf_counter_at(counter.first_frame_at))
                if models is not None else None,
                "mps": self.mps, "first_frame_at": counter.first_frame_at}

    def _identity(self) -> dict[str, Any]:
        server = self.exporter.server if self.exporter is not None else None
        return {"name": self.name, "where": self.where, "metrics": metrics_endpoint(server), "mps": self.mps}


PER_RUN_OPTIONS = ("sources", "list_files", "recursive", "resume", "output", "summary", "report", "no_progress",
                   "ray", "ray_workers", "ray_retries", "ray_keep_warm",
                   "split", "mps")  # what each run's plan carries to a worker (a part: its stretch)


def _worker_options(config: RunConfig) -> RunConfig:
    """A run's options as a worker's engines and pipeline use them: those each source's plan carries left out."""
    return replace(config, **{name: getattr(RunConfig, name) for name in PER_RUN_OPTIONS})


def _relative_paths(config: RunConfig) -> bool:
    return any(value and not Path(value).is_absolute() for value in (config.weights, config.models_dir))


def _stamp(path: str | None) -> tuple[int, int] | None:
    """A weights file's size and time: one replaced under the same name is another model."""
    try:
        stat = Path(path).stat() if path else None
    except OSError:
        return None
    return (stat.st_size, stat.st_mtime_ns) if stat else None


def _process_age_s() -> float | None:
    """How long this process has run (Linux): a Ray worker process started ahead is older than its actor."""
    try:
        started_ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
        uptime_s = float(Path("/proc/uptime").read_text().split()[0])
        return round(uptime_s - started_ticks / os.sysconf("SC_CLK_TCK"), 3)
    except (OSError, ValueError, IndexError):
        return None


def _cores_assigned() -> int:
    """The cores Ray gave this actor (``num_cpus``, at least 1); 1 where Ray cannot say."""
    import ray

    if not ray.is_initialized():  # (asked outside Ray, get_runtime_context would start a local Ray instance)
        return 1
    try:
        cores = float(ray.get_runtime_context().get_assigned_resources().get("CPU", 1))
    except Exception:  # (not in an actor: nothing assigned)
        return 1
    return max(1, round(cores))


def metrics_endpoint(server: MetricsServer | None) -> str | None:
    """The URL other machines scrape a worker's metrics at (its node's address when it listens on every one)."""
    if server is None:
        return None
    return reached_at(server.host, server.port, "/metrics") or server.url


def reached_at(host: str, port: int, path: str) -> str | None:
    """``http://NODE:PORT/PATH``, this Ray node's address, for a server of a worker's listening on every address
    (``host`` empty, ``0.0.0.0`` or ``::``); None for one on a single address (its own URL says it)."""
    if host not in ("", "0.0.0.0", "::"):
        return None
    import ray

    ip = ray.util.get_node_ip_address()
    return f"http://{f'[{ip}]' if ':' in ip else ip}:{port}{path}"


class _Progress:
    """The driver's view of the run for its bar: frames and faces of finished sources, of shares still running
    (as their workers last said), the sources' expected frames (probed on a thread; a finished source's
    real count replaces its estimate) and the workers alive."""

    def __init__(self, todo: Sequence[PlannedSource], config: RunConfig, bar: ProgressBar | None) -> None:
        self.bar = bar
        self.uris = [p.uri for p in todo]
        self.expected: dict[str, int | None] = {}
        self.actual: dict[str, int] = {}
        self.frames = self.faces = 0
        self.running: dict[int, tuple[int, int]] = {}  # share id → (frames, faces) so far
        self.recorded: dict[int, tuple[int, int]] = {}  # share id → of those, the frames and faces of sources recorded
        self.alive: set[str] = set()
        self._stop = threading.Event()
        if bar is not None:
            threading.Thread(target=self._probe, args=(config,), name="emopipe-probe", daemon=True).start()

    def _probe(self, config: RunConfig) -> None:
        for uri in self.uris:
            if self._stop.is_set():
                return
            self.expected[uri] = expected_frames(uri, config)

    def finished(self, result: SourceResult, share_id: int | None = None) -> None:
        if result.part is None:
            self.actual[result.source] = result.frames
        self.frames += result.frames - (result.lead_frames or 0)  # (a part's overlap: the part before counts it)
        self.faces += result.faces
        if share_id in self.running:  # (recorded as it finished: its share's count holds it too, until it ends)
            frames, faces = self.recorded.get(share_id, (0, 0))
            self.recorded[share_id] = (frames + result.frames, faces + result.faces)

    def joined(self, result: SourceResult) -> None:
        """A video joined from its parts (their frames counted as each came): its real frame count."""
        self.actual[result.source] = result.frames

    def ended(self, share_id: int) -> None:
        self.running.pop(share_id, None)
        self.recorded.pop(share_id, None)

    def total(self) -> int | None:
        known = [self.actual.get(u, self.expected.get(u)) for u in self.uris]
        return sum(k for k in known if k is not None) if None not in known else None

    def draw(self) -> None:
        if self.bar is not None:
            running = [(max(0, frames - self.recorded.get(share_id, (0, 0))[0]),
                        max(0, faces - self.recorded.get(share_id, (0, 0))[1]))
                       for share_id, (frames, faces) in self.running.items()]
            self.bar.show(self.frames + sum(f for f, _ in running), self.faces + sum(f for _, f in running),
                          self.total(), workers=len(self.alive))

    def close(self) -> None:
        self._stop.set()
        if self.bar is not None:
            self.draw()
            self.bar.close()


def connect_ray(address: str) -> bool:
    """Connect to Ray (or start it here, ``local``); True when this call started or joined it (and the run
    ends it), False when the process was already connected."""
    import ray

    if ray.is_initialized():
        return False  # e.g. a notebook or a test that started Ray itself
    # Ray's driver takes SIGTERM for itself as ray.init starts (it exits at once, status 15, files left open): the
    # handler this process had (the command line's: finish the files, exit 130, as `docker stop` and Kubernetes
    # expect) is kept all along, Ray kept from setting its own, and set back after (should Ray set it otherwise)
    main = threading.current_thread() is threading.main_thread()
    handler = signal.getsignal(signal.SIGTERM) if main else None
    try:
        with _without_rays_sigterm_handler():
            _join(address)
    finally:
        if handler is not None:
            signal.signal(signal.SIGTERM, handler)
    return True


@contextlib.contextmanager
def _without_rays_sigterm_handler() -> Iterator[None]:
    """ray.init sets Ray's SIGTERM handlers (the driver's, then the local node's) through
    ``ray._private.utils.set_sigterm_handler``: while Ray starts, that sets nothing. Through Ray's private module,
    as :func:`disconnect_ray` does; should it change, Ray's handler is only set back after ray.init (a SIGTERM during
    ray.init then ends the process)."""
    try:
        from ray._private import utils
    except ImportError:  # (a Ray that moved it: the degraded path said above)
        utils = None
    setter = getattr(utils, "set_sigterm_handler", None)
    if setter is None:
        yield
        return
    utils.set_sigterm_handler = lambda handler: None
    try:
        yield
    finally:
        utils.set_sigterm_handler = setter


def _join(address: str) -> None:
    import ray

    if address == LOCAL:
        # Ray warns that the cluster it starts takes tokens (RAY_AUTH_MODE unset): this run's own, ended with it —
        # a line in every run's log that asks nothing of the user
        setup = _token_auth_module()
        log = logging.getLogger(setup.__name__) if setup is not None else None
        if log is not None:
            log.addFilter(_no_token_auth_note)
        try:
            ray.init(include_dashboard=False, logging_level=logging.WARNING, log_to_driver=False)
        finally:
            if log is not None:
                log.removeFilter(_no_token_auth_note)
        return
    given = os.environ.get("RAY_ADDRESS", "") if address == "auto" else address  # ("": Ray looks for one here itself)
    option = "--ray (RAY_ADDRESS)" if address == "auto" else f"--ray {address}"
    _answers(given, option)
    if given.startswith("ray://") and _ray_client_missing():
        raise UsageError(f"{option}: a ray:// address is joined through Ray Client, which this Python lacks: "
                         "pip install 'ray[client]', or give the cluster's own address (HOST:6379) from one of its "
                         "machines")
    mode_unset = os.environ.get(AUTH_MODE) is None
    with_local_token = bool(given) and mode_unset and _on_this_machine(given) and _enable_local_token()
    try:
        _init_meanwhile_free(option, address=address, logging_level=logging.WARNING, log_to_driver=False)
    except ConnectionError as exc:
        if with_local_token:
            hint = ("it may use token authentication with another token than this machine's: set RAY_AUTH_TOKEN "
                    "or RAY_AUTH_TOKEN_PATH to its token")
        elif given and mode_unset and _token_auth_module() is not None:
            hint = (f"if it uses token authentication, set {AUTH_MODE}=token and its token in RAY_AUTH_TOKEN, "
                    "RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token")
        else:
            hint = "start one (ray start --head) or use --ray local"
        raise UsageError(f"--ray {address}: could not join a Ray cluster there ({exc}); {hint}") from None


JOIN_TIMEOUT_S = 60.0  # how long Ray is given to join a cluster that accepts connections (one that answers: seconds)


_GIVEN_UP: list[threading.Thread] = []  # joins this process gave up on that still wait in Ray


def _init_meanwhile_free(option: str, **init: Any) -> None:
    """``ray.init(**init)`` joining a cluster, in a thread of its own while this one waits, free to take Ctrl-C and
    SIGTERM at once: where no Ray answers (a port that accepts and never replies, packets dropped) Ray waits in its
    C++ client, ~40 s a try, 20 tries, and Python runs no signal handler until it returns. Given up after
    JOIN_TIMEOUT_S. Joining starts no process here, so nothing is left behind by a process that ends meanwhile; the
    thread is a daemon, left to end with it. A library caller's process goes on with it waiting in Ray: should Ray
    answer it after all, it disconnects at once (the caller was told there was no Ray), and until it has ended this
    process joins no Ray (two ray.init at once are not Ray's to take)."""
    import ray

    _GIVEN_UP[:] = [t for t in _GIVEN_UP if t.is_alive()]
    if _GIVEN_UP:
        raise UsageError(f"{option}: an earlier join of this process ({_GIVEN_UP[0].name}) was given up on and still "
                         "waits in Ray; this process can join Ray again once it ends (a new process can now)")
    failure: list[BaseException] = []
    outcome = threading.Lock()  # (the join ending and the wait giving up on it: one of them decides, not both)
    state = {"joined": False, "given_up": False}

    def join() -> None:
        try:
            ray.init(**init)
        except BaseException as exc:  # (said in the waiting thread)
            failure.append(exc)
            return
        with outcome:
            state["joined"] = not state["given_up"]
        if not state["joined"]:  # answered after the run was told there was no Ray: none it shall have
            ray.shutdown()

    joining = threading.Thread(target=join, name=f"emopipe-ray-join ({option})", daemon=True)
    # off the main thread, ray.init notes that it sets no SIGTERM handler: what this process wants (its own stays)
    ray_log = logging.getLogger("ray._private.worker")
    ray_log.addFilter(_no_sigterm_note)
    try:
        joining.start()
        joining.join(JOIN_TIMEOUT_S)
    finally:
        ray_log.removeFilter(_no_sigterm_note)
    with outcome:
        state["given_up"] = joining.is_alive() and not state["joined"]
    if state["given_up"]:
        _GIVEN_UP.append(joining)
        raise UsageError(f"{option}: no Ray cluster answered there within {JOIN_TIMEOUT_S:.0f} s (something "
                         "accepts connections there, but no Ray replied); check the address and port (ray start --head "
                         "says it), or use --ray local")
    joining.join()  # (joined: only the bookkeeping above was left to it)
    if failure:
        raise failure[0]


def _ray_client_missing() -> bool:
    """Whether Ray Client's packages (``ray[client]``) are missing, as Ray itself checks before a ray:// join (which
    then fails with a ValueError: an internal error to the command)."""
    try:
        from ray._private import utils

        return utils.get_ray_client_dependency_error() is not None
    except (ImportError, AttributeError):  # (a Ray that moved it: its own error then)
        return False


def _no_sigterm_note(record: logging.LogRecord) -> bool:
    return "SIGTERM handler is not set" not in record.getMessage()


def _no_token_auth_note(record: logging.LogRecord) -> bool:
    return not record.getMessage().startswith("Token authentication is enabled for this Ray cluster")


AUTH_MODE = "RAY_AUTH_MODE"  # Ray's switch for token authentication: token, disabled, or unset


def _token_auth_module() -> Any:
    """Ray's token authentication setup (``ray._private``), or None for a Ray without token authentication."""
    try:
        from ray._private.authentication import authentication_token_setup
    except ImportError:
        return None
    return authentication_token_setup


def _enable_local_token() -> bool:
    """Send this machine's Ray token (RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH, ~/.ray/auth_token), if it has one, as
    Ray itself does for a local cluster it finds (``--ray`` alone): a cluster started here with ``ray start
    --head`` takes token authentication from that token, but Ray sends it to no address it is given. True when
    enabled. Through Ray's private helper, its warning (about a cluster Ray starts) silenced; should the helper
    change, nothing is enabled and a failed join says how to."""
    setup = _token_auth_module()
    enable = getattr(setup, "maybe_enable_token_auth_if_token_available", None)
    if enable is None:
        return False
    log = logging.getLogger(setup.__name__)
    disabled, log.disabled = log.disabled, True
    try:
        return bool(enable(warn_if_disabled=False))
    finally:
        log.disabled = disabled


def _host_port(address: str) -> tuple[str, str]:
    """(host, port) of ``host:port`` or ``ray://host:port`` (an IPv6 host without its brackets)."""
    host, _, port = address.removeprefix("ray://").rstrip("/").rpartition(":")
    return host.strip("[]"), port


def _on_this_machine(address: str) -> bool:
    """Whether every address the host resolves to is this machine's: loopback, or one a socket here can bind (an
    address of one of its interfaces). A token is never sent elsewhere unasked."""
    host, _ = _host_port(address)
    if not host:
        return False
    try:
        found = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except OSError:
        return False
    for family, kind, _, _, where in found:
        try:
            with socket.socket(family, kind) as probe:
                probe.bind((where[0], 0, *where[2:]))
        except OSError:
            return False
    return bool(found)


ADDRESS_PROBE_S = 5.0  # how long a cluster's address is given to accept a connection before Ray is asked to join


def _answers(address: str, option: str) -> None:
    """Refuse an address where nothing accepts a connection (a typo, a cluster not started): Ray itself would retry
    for minutes, printing its own warnings, before it gives up. ``host:port`` or ``ray://host:port``; other forms
    (``auto`` without RAY_ADDRESS, none) are left to Ray."""
    host, port = _host_port(address)
    if not host or not port.isdigit():
        return
    try:
        with socket.create_connection((host, int(port)), timeout=ADDRESS_PROBE_S):
            pass
    except OSError as exc:
        reason = "no answer" if isinstance(exc, TimeoutError) else (exc.strerror or str(exc)).lower()
        raise UsageError(f"{option}: no Ray cluster at {address} ({reason}); start one (ray start --head), check "
                         "the address, or use --ray local") from None


def disconnect_ray(address: str) -> None:
    """Leave Ray; a local Ray this run started is stopped with every process it ran."""
    import ray

    if address == LOCAL:
        # Ray stops its processes one at a time, each given a second after SIGTERM before SIGKILL. Its autoscaler
        # monitor spends that whole second reporting the SIGTERM to the GCS Ray has just stopped (1.0 of a 1.4 s
        # stop). A local Ray made for one run has nothing for the monitor to save, so it is killed first. Through
        # Ray's own record of what it started; should that change, the stop is only slower.
        try:
            from ray._private import ray_constants, worker
        except ImportError:  # (a Ray that moved them: only slower)
            ray_constants = worker = None
        started = getattr(getattr(worker, "_global_node", None), "all_processes", None) or {}
        for info in started.get(getattr(ray_constants, "PROCESS_TYPE_MONITOR", None), []):
            info.process.kill()
    ray.shutdown()


def worker_device(config: RunConfig, per_gpu: float) -> str:
    """The device the run's options are resolved for (precision, batch sizes): the workers', not this process's — a
    driver on a head node without a GPU plans a run of GPU workers (each worker checks its own device)."""
    device = config.device.strip().lower()
    if device == "cpu":
        return "cpu"
    if device != "auto" and not re.fullmatch(r"cuda(:\d+)?", device):  # (as the workers' PyTorch would refuse it)
        raise UsageError(f"unknown device {config.device!r}: use auto, cpu, cuda or cuda:N")
    if device != "auto" and not per_gpu:
        raise UsageError(f"--device {config.device}: the Ray cluster gives its workers no GPU (it has none, or "
                         "--ray-gpus-per-worker 0); use --device cpu or auto")
    return "cuda" if per_gpu else "cpu"


MPS_WORKERS_PER_GPU = 4  # under MPS, workers to a GPU (one H200: 4 or 6 ran 2 740–2 890 frames/s, one 1 300)
CPUS_PER_SHARED_WORKER = 4  # (each runs a decoder, a GPU and a writer thread: fewer cores, fewer workers)
# A camera fleet's worker is bound by its process's lock at a few cameras' frames (each camera a capture thread):
# more, smaller workers cut the latency (32 cameras on an H100: p99 51–55 ms with 8 workers against 66 ms with 4;
# 64 on an H200: 42 against 48 ms)
MPS_CAMERA_WORKERS_PER_GPU = 8
CPUS_PER_SHARED_CAMERA_WORKER = 2
GIB_PER_SHARED_WORKER = 8  # GPU memory a worker is given room for (one process's peak: 6.0 GB over the archive)


def _smallest_gpu_gib() -> float | None:
    """The memory of this machine's smallest GPU in GiB, as ``nvidia-smi`` says (None where it cannot: the driver
    process loads no CUDA library to ask)."""
    try:
        asked = subprocess.run(["nvidia-smi", "--query-gpu=memory.total", "--format=csv,noheader,nounits"],
                               capture_output=True, text=True, timeout=10)
        return min(float(line) for line in asked.stdout.split()) / 1024 if asked.returncode == 0 else None
    except (OSError, subprocess.SubprocessError, ValueError):
        return None


def _cluster_is_this_machine(address: str) -> bool:
    """Whether every node of the cluster joined is this machine (``--ray local``, or a one-machine cluster started
    here), so what this machine runs (MPS) is what the workers get."""
    import ray

    if address == LOCAL:
        return True
    nodes = [node for node in ray.nodes() if node.get("Alive")]
    return bool(nodes) and all(_on_this_machine(f"{node['NodeManagerAddress']}:0") for node in nodes)


def _workers_per_gpu(options: RayOptions, gpus: float, cpus: float, cameras: bool = False) -> int:
    """Workers to a GPU when ``--ray-gpus-per-worker`` is not given: several where this machine's GPUs run MPS and
    the cluster is this machine (a GPU runs ~2× what one worker's pipeline gives it, bound by its interpreter), one
    otherwise (said in the log, with what MPS would give). No more than the cores and the smallest GPU's memory
    have room for. A camera fleet's (``cameras``) are more and smaller."""
    if not _cluster_is_this_machine(options.address):
        return 1
    most, cores = ((MPS_CAMERA_WORKERS_PER_GPU, CPUS_PER_SHARED_CAMERA_WORKER) if cameras
                   else (MPS_WORKERS_PER_GPU, CPUS_PER_SHARED_WORKER))
    room = min(most, int(cpus // gpus // cores))
    memory = _smallest_gpu_gib()
    if memory is not None:
        room = min(room, int(memory // GIB_PER_SHARED_WORKER))
    room = max(1, room)
    shared = 1 << (room.bit_length() - 1)  # 1, 2, 4 or 8: a GPU's share Ray counts exactly
    if not mps_running():
        if shared > 1:
            logger.info("one worker per GPU: NVIDIA MPS is not running here (with it, %d workers would share each "
                        "GPU: docs/cluster.md, \"Several workers on a GPU\")", shared)
        return 1
    if shared > 1:
        logger.info("NVIDIA MPS is running: %d workers share each GPU (--ray-gpus-per-worker %g)", shared,
                    1 / shared)
    return shared


def worker_sizing(options: RayOptions, *, cameras: bool = False) -> tuple[int, float, float]:
    """(workers, GPUs per worker, CPUs per worker) for the cluster Ray sees (``cameras``: for a camera fleet)."""
    import ray

    resources = ray.cluster_resources()
    gpus, cpus = float(resources.get("GPU", 0)), float(resources.get("CPU", 1))
    per_gpu = options.gpus_per_worker
    if per_gpu is None:
        per_gpu = 1.0 / _workers_per_gpu(options, gpus, cpus, cameras) if gpus else 0.0
    if per_gpu > 0 and gpus < per_gpu:
        raise UsageError(f"--ray-gpus-per-worker {per_gpu}: the cluster has {gpus:g} GPU(s)")
    workers = options.workers or (int(gpus // per_gpu) if per_gpu else max(1, min(8, int(cpus))))
    cpus_per_worker = 1.0 if per_gpu else max(1.0, min(4.0, cpus // workers))
    by_gpu, by_cpu = int(gpus // per_gpu) if per_gpu else workers, int(cpus // cpus_per_worker)
    room = min(by_gpu, by_cpu)  # workers that fit at once
    if workers > room:
        what = (f"{gpus:g} GPU(s), {per_gpu:g} a worker" if by_gpu < by_cpu
                else f"{cpus:g} CPU(s), {cpus_per_worker:g} a worker")
        if options.address == LOCAL:  # nothing will add room to a Ray started for this run
            running = max(room, 1)
            logger.warning("--ray-workers %d: this machine has room for %d (%s); running %d", workers, running,
                           what, running)
            workers = running
        else:
            logger.warning("--ray-workers %d: the cluster has room for %d now (%s); the others join when it grows",
                           workers, room, what)
    return workers, per_gpu, cpus_per_worker


KILL_WAIT_S = 10.0  # Ctrl-C: how long the driver waits for the killed workers' calls to end
WATCH_S = 5.0  # --ray-keep-warm: how often a worker checks whether it is idle, or its run gone
DEPTH = 2  # shares in a worker's pipeline at once: the next is there when one ends, so no round trip idles it


class _Crew:
    """The workers of a run: started, named, counted, replaced when they die, and killed at the end."""

    def __init__(self, config: RunConfig, count: int, per_gpu: float, per_cpu: float, board: Any,
                 keep_warm_s: float | None = None, frame_size: tuple[int, int] | None = None) -> None:
        import ray

        self.config = config
        self.frame_size = frame_size  # what its new workers warm their detector for as they start
        self.count, self.per_gpu, self.per_cpu = count, per_gpu, per_cpu
        self.board = board
        self.keep_warm_s = keep_warm_s
        self.run = uuid.uuid4().hex  # (the token warm workers are claimed and released with)
        # (calls at once: DEPTH shares waiting on its pipeline, plus ready/progress, plus claim or release)
        self.actor_class = ray.remote(num_gpus=per_gpu, num_cpus=per_cpu, max_restarts=0,
                                      max_concurrency=DEPTH + 3)(Worker)
        self.spawned = 0
        self.live: dict[str, Any] = {}  # name → actor handle, for the workers not known dead
        self.warm: set[str] = set()  # the workers known warm (claimed so, or said so): only they are kept warm
        self.workers: dict[str, dict[str, Any]] = {}  # by name: where, metrics, sources, frames, faces, busy_s, died
        self.lost = False  # the cluster's head stopped answering: none is kept warm (a release would wait on it)

    def spawn(self) -> str:
        port = worker_metrics_port(self.config.metrics_port, self.spawned)
        if self.keep_warm_s is None:
            name = WORKER_NAME.format(self.spawned)
            actor = self.actor_class.options(name=name, get_if_exists=False)
        else:  # (outlives the run, claimed by it from the start)
            name = WARM_NAME.format(uuid.uuid4().hex[:8])
            actor = self.actor_class.options(name=name, namespace=WARM_NAMESPACE, lifetime="detached")
        self.live[name] = actor.remote(self.config, os.getcwd(), name, port, self.board, self.run, self.keep_warm_s,
                                       self.frame_size)
        self._enlist(name, warm=False)
        self.spawned += 1
        return name

    def _enlist(self, name: str, warm: bool) -> None:
        self.workers[name] = {"where": None, "metrics": None, "sources": 0, "frames": 0, "faces": 0, "busy_s": 0.0,
                              "died": False, "warm_from_an_earlier_run": warm}

    def claim_warm(self, wanted: int, take: bool = True) -> int:
        """Take up to ``wanted`` workers an earlier run left warm (--ray-keep-warm) whose options are this run's
        (``take``: this run keeps warm too), and room for the rest where idle warm workers of other options hold
        it; how many it took."""
        import ray
        from ray.exceptions import GetTimeoutError, RayActorError

        taken = 0
        others = []  # warm workers this run cannot take (other options, or another run's now)
        names = sorted(entry["name"] for entry in ray.util.list_named_actors(all_namespaces=True)
                       if entry.get("namespace") == WARM_NAMESPACE and entry["name"].startswith(WARM_NAME[:-2]))
        for name in names:
            try:
                actor = ray.get_actor(name, namespace=WARM_NAMESPACE)
                identity = None if taken == wanted or not take else \
                    ray.get(actor.claim.remote(self.config, os.getcwd(), self.board, self.run), timeout=30)
            except (ValueError, RayActorError, GetTimeoutError):  # ended meanwhile, or not answering
                continue
            if identity is None:
                others.append((name, actor))
                continue
            self.live[name] = actor
            self.warm.add(name)
            self._enlist(name, warm=True)
            logger.info("%s (%s): warm from an earlier run", name, identity["where"])
            taken += 1
        if taken < wanted:
            self._make_room(wanted - taken, others)
        return taken

    def _make_room(self, workers: int, others: list[tuple[str, Any]]) -> None:
        """Room on the cluster for ``workers`` new ones, where idle workers that earlier runs with other options
        left warm (``others``) hold it: those end, as many as the room needs (a warm worker is a cache, not a
        claim on the cluster: else this run would wait their keep time for its workers to start)."""
        import ray
        from ray.exceptions import GetTimeoutError, RayActorError

        free = ray.available_resources()
        short = {"GPU": workers * self.per_gpu - free.get("GPU", 0.0),
                 "CPU": workers * self.per_cpu - free.get("CPU", 0.0)}
        for name, actor in others:
            if max(short.values()) <= 1e-9:
                return
            try:
                held = ray.get(actor.leave_if_idle.remote(), timeout=30)
            except (RayActorError, GetTimeoutError):  # ended meanwhile, or not answering
                continue
            if held is None:  # another run's now
                continue
            ray.kill(actor, no_restart=True)
            logger.info("%s: ended, its room for this run's workers (it waited warm with other options)", name)
            for resource in short:
                short[resource] -= held.get(resource, 0.0)

    def died(self, name: str) -> bool:
        """Mark a worker dead; True the first time (one replacement per death, however many shares it held)."""
        if self.workers[name]["died"]:
            return False
        self.workers[name]["died"] = True
        self.live.pop(name, None)
        return True

    def dismiss(self, name: str, keep: bool = False) -> None:
        """Let a worker go: with ``keep`` and --ray-keep-warm, left warm for the next run (killed if it does not
        say so), else killed."""
        import ray

        actor = self.live.pop(name, None)
        if actor is None:
            return
        if keep and self.keep_warm_s is not None:
            with contextlib.suppress(Exception):  # (any failure: killed below)
                if ray.get(actor.release.remote(self.run, self.keep_warm_s), timeout=30):
                    return
        ray.kill(actor, no_restart=True)

    def kill_all(self) -> None:
        for name in list(self.live):
            self.dismiss(name)

    def end(self, kept: bool) -> None:
        """The run is over: its warm workers left warm (``kept``, with --ray-keep-warm) or killed. One never warm
        is killed at once: it may be waiting for room on the cluster, and a release would wait for it to start."""
        for name in list(self.live):
            self.dismiss(name, keep=kept and not self.lost and name in self.warm)


def _head_answers(timeout: float) -> bool | None:
    """Whether the cluster's head (Ray's GCS) answers within ``timeout`` seconds, asked as Ray's own scripts ask it;
    None where this Ray has no such call (its private modules moved)."""
    try:
        from ray._private.worker import global_worker

        check = global_worker.gcs_client.check_alive
    except Exception:  # (moved, or a Ray Client connection, which has no GCS client here)
        return None
    try:
        check([], timeout=timeout)
    except TypeError:  # (a Ray whose call takes other arguments: no answer either way, never taken for a lost head)
        return None
    except Exception:  # (Ray's RpcError: "Timed out while waiting for GCS to become available")
        return False
    return True


class _HeadWatch:
    """How long the cluster's head has been silent, asked every HEAD_CHECK_S (and at once after a worker died): a
    head stopped mid-run takes every worker with it and starts no new one, and Ray itself ends the driver 60 s later
    (exit status 1, its own lines, no summary.json), so the driver ends the run before that."""

    def __init__(self) -> None:
        self.answered = self.asked = time.monotonic()

    def silent_s(self, now: bool = False) -> float:
        if now or time.monotonic() - self.asked >= HEAD_CHECK_S:
            self.asked = time.monotonic()
            if _head_answers(HEAD_CHECK_S) is not False:
                self.answered = time.monotonic()
        return time.monotonic() - self.answered


def _say_no_room(crew: _Crew, waiting: Sequence[str]) -> None:
    """Say which of the ``waiting`` workers the cluster has not started (no room for them: other jobs' actors or
    tasks hold it, or it is smaller than a worker) and what each needs of what is free: a run none of whose workers
    is warm waits for them, and should not wait without a word."""
    import ray

    try:
        started = ray.get(crew.board.read_started.remote(), timeout=HEAD_CHECK_S)
        free, total = ray.available_resources(), ray.cluster_resources()
    except Exception:  # (the board or the cluster not answering: the head watch says so)
        return
    unplaced = [name for name in waiting if name not in started and name not in crew.warm]
    if not unplaced:
        return
    needs = [("CPU", crew.per_cpu)] + ([("GPU", crew.per_gpu)] if crew.per_gpu else [])
    logger.warning("no worker has started yet: the cluster has no room for %s (each needs %s; free now %s); the run "
                   "waits until other jobs free it or the cluster grows (Ctrl-C stops it)", ", ".join(unplaced),
                   " and ".join(f"{n:g} {kind}(s)" for kind, n in needs),
                   ", ".join(f"{free.get(kind, 0.0):g} of {total.get(kind, 0.0):g} {kind}(s)" for kind, _ in needs))


def run_on_ray(config: RunConfig, options: RayOptions, *, sources: Sequence[str] | None = None,
               output_dir: str | Path | None = None, on_result: Callable[[SourceResult], None] | None = None,
               progress: bool = False) -> ManyOutcome:
    """The many-source run over Ray workers; the same files as :meth:`Analyzer.run_many` makes in one process.

    The output folder is taken first (:func:`~emopipe.io.records.hold_folder`, until the run ends): one another
    run is writing is refused before Ray starts; so is a ``--report`` page another run will write (held by the plan,
    until the run ends). Then the run is planned (sources, outputs, manifest: checked as one
    process checks them; no PyTorch is loaded here): an input or output error, or a run with nothing left to do,
    never starts Ray. Then Ray is started (or joined: given up after ``JOIN_TIMEOUT_S`` where no Ray answers) and
    the workers spawned (no more than there are sources to do). ``progress``: one bar on stderr over every source
    (frames of the expected total, frames/s, faces, workers alive), drawn as the one-process run draws its own.
    """
    import ray

    if options.retries < 0:
        raise UsageError(f"--ray-retries must be ≥ 0, got {options.retries}")
    if options.keep_warm_s is not None and options.address == LOCAL:
        raise UsageError("--ray-keep-warm: a local Ray stops with its run; start one that outlives runs "
                         "(ray start --head) and use --ray with its address")
    directory = config.output_folder(output_dir)
    # (both released once the last manifest line, summary.json and report are written)
    with hold_folder(directory), contextlib.ExitStack() as planned:
        started = time.perf_counter()
        # planned first, as one process plans it (it loads no PyTorch: a tenth of a second for an archive), so an
        # input or output error is said before Ray starts, and Ray is not started at all for a run with nothing left
        # to do (--resume); resolved for the workers' device once the cluster says what that is. The plan holds
        # the --report page until it closes
        plan = planned.enter_context(plan_sources(
            sources, directory, many_config(config, "cpu" if config.device == "cpu" else "cuda"), config,
            folder_held=True))
        timeline = {"plan_s": time.perf_counter() - started}
        if not plan.todo:
            outcome = finish_many(plan, plan.skipped, None, False, time.perf_counter() - started)
            report_many(plan, outcome)
            return outcome
        logger.info("%d source(s) to do; connecting to Ray (%s), then its workers start …", len(plan.todo),
                    options.address)
        ours, crew, board, ended = False, None, None, False
        held = HeldSignals()  # Ctrl-C and SIGTERM until _run takes them (HeldSignals says why)
        joining = options.address != LOCAL  # (starts nothing here: a signal while Ray joins ends the run at once)
        if not joining:
            held.hold()
        try:
            ours = connect_ray(options.address)
            if joining:
                held.hold()
            timeline["connect_s"] = time.perf_counter() - started
            count, per_gpu, per_cpu = worker_sizing(options)
            plan.config = many_config(config, worker_device(config, per_gpu))
            # fewer videos than workers: long ones in parts, one a worker, as over --processes (emopipe.pipeline.parts)
            units, splits = plan_parts(largest_first(plan.todo), count, config, run=plan.planned)
            count = min(count, len(units))  # (no more workers than sources and parts)
            worker_metrics_port(config.metrics_port, count - 1)  # every first worker's port is valid before any starts
            board = ray.remote(num_cpus=0)(ProgressBoard).remote()
            # the largest source's frame size (handed out first): each new worker warms its detector for it with
            # EmoNet as it starts, not alone at its first share
            crew = _Crew(config, count, per_gpu, per_cpu, board, options.keep_warm_s,
                         frame_size_of(largest_first(plan.todo)[0].uri) if plan.todo else None)
            # (a standing cluster: another run's idle warm workers may hold the room this run's need)
            warm = crew.claim_warm(count, take=options.keep_warm_s is not None) \
                if options.address != LOCAL and held.signum is None else 0
            for _ in range(count - warm if held.signum is None else 0):  # (none for a run already interrupted)
                crew.spawn()
            seen = _Progress(plan.todo, plan.config, ProgressBar(None) if progress else None)
            try:
                outcome = _run(plan, config, options, seen, on_result, started, crew, timeline, held, units,
                               PartResults(splits, config))
            finally:
                seen.close()  # the bar's last line, on its own line, before the summary's log lines
            ended = True
        except Exception as exc:
            held.overrule(exc)  # (a Ctrl-C while Ray started, then an error: the Ctrl-C ends the run)
            raise
        finally:  # (signals still held: an error before _run took them, or a run that finished — _run says why)
            if crew is not None:
                crew.end(kept=ended)  # (a run cut off or failed leaves none warm: one may still be writing)
            if board is not None:
                ray.kill(board, no_restart=True)
            if ours:  # (now, not at exit: a local Ray's processes take a second or more to stop; said in the log)
                ended = time.perf_counter()
                disconnect_ray(options.address)
                logger.info("Ray %s in %.1f s", "stopped" if options.address == LOCAL else "disconnected",
                            time.perf_counter() - ended)
            held.release()
        if held.signum is not None:  # Ctrl-C or SIGTERM while Ray stopped, every source done: nothing of theirs lost
            done = "interrupted while Ray stopped, every source done (as the manifest and summary.json say)"
            if plan.report:  # (what is left undone: exit 130, as for a signal while the report is written)
                logger.warning("%s: the report %s is not written; the same command with --resume writes it", done,
                               plan.report)
                raise KeyboardInterrupt
            logger.warning("%s: the exit status is the run's", done)
        report_many(plan, outcome)
    return outcome


def _run(plan: ManyPlan, config: RunConfig, options: RayOptions, seen: _Progress,
         on_result: Callable[[SourceResult], None] | None, started: float, crew: _Crew,
         timeline: dict[str, float], held: HeldSignals, units: Sequence[PlannedSource],
         parts: PartResults) -> ManyOutcome:
    import ray
    from ray.exceptions import RayActorError, RayTaskError

    from emopipe.pipeline.archive import SourceResult, publish

    workers = crew.workers
    warned_mps: list[str] = []  # (the first worker found sharing its GPU without MPS: said once)

    def met(identity: dict[str, Any]) -> None:
        """A worker answered: it is alive; say where its metrics are the first time they are known."""
        name = identity["name"]
        seen.alive.add(name)
        entry = workers[name]
        if identity.get("metrics") and entry["metrics"] is None:
            logger.info("%s (%s): metrics on %s", name, identity["where"], identity["metrics"])
        if 0 < crew.per_gpu < 1 and identity.get("mps") is False and not warned_mps:
            warned_mps.append(name)
            logger.warning("%s (%s) shares its GPU without NVIDIA MPS: the workers on a GPU take turns on it (a "
                           "second adds ~8 %%); start MPS on the GPU nodes (docs/cluster.md, \"Several workers on a "
                           "GPU\")", name, identity["where"])
        entry.update(where=identity["where"], metrics=identity.get("metrics"))

    pending = deque(units)  # (largest first; a long video's parts among them)
    attempts: dict[str, int] = {}
    results: list[SourceResult] = []
    summaries: dict[str, dict[str, Any]] = {}  # each worker's pipeline, as its latest reply says
    # Shares go only to warm workers, each as soon as it is warm: a worker the cluster has no room for yet (or
    # that is still starting) holds no sources, so none wait on it.
    warming: dict[Any, str] = {}  # ready call → worker, for the workers not yet warm
    first_crew = set(crew.live)
    start_deaths = 0

    def warm_up(name: str) -> None:
        warming[crew.live[name].ready.remote()] = name

    if pending:
        for name in list(crew.live):
            warm_up(name)
    load: dict[str, int] = {}  # shares queued at each warm worker
    in_flight: dict[Any, tuple[str, list[PlannedSource], int]] = {}  # share ref → (worker, share, share id)
    sent_at: dict[str, float] = {}  # source (its key) → when its latest share went out (wall clock: files' times are)
    shares = 0
    failures = 0
    interrupted = False
    begun: set[tuple[int, str]] = set()  # (share id, source's key) of each worker's result whose recording began
    read_on_board = [0]  # how many of the board's finished results record_finished has been through
    head = _HeadWatch()
    died = 0  # workers that died since the head was last asked: replaced once it answers (a new actor's name is
    # checked with the head, which waits for it for good)
    say_room_at = time.monotonic() + NO_ROOM_S  # (no worker warm and one not started: said then)

    def record(result: SourceResult, name: str | None = None, share_id: int | None = None) -> None:
        """A source's manifest line, then its files' names; ``name`` and ``share_id``: the worker's result it is
        (told through the board as the source finished, or in its share's reply: recorded once). A part of a video
        is held until its video's parts are all in, which are then joined into the video's line and files."""
        with signals_held():  # (a Ctrl-C between "begun" and the line would leave the source with no line)
            if share_id is not None:
                begun.add((share_id, result.part or result.source))
            seen.finished(result, share_id)
            if name is not None:
                workers[name]["sources"] += result.part is None
                workers[name]["frames"] += result.frames
                workers[name]["faces"] += result.faces
            if result.part is None:
                record_line(result)
        if result.part is not None:
            parts.take(result, record_joined)  # (a Ctrl-C while joined: the video is recorded interrupted)
        elif on_result is not None:
            on_result(result)

    def record_line(result: SourceResult) -> None:
        # as in one process: the line claims the names, then the files the worker left partial take them, the
        # rows last (killed between the two, --resume redoes the source: its line owns the names)
        plan.manifest.append(result.as_dict())
        publish(result.renames)
        result.renames = []
        results.append(result)

    def record_joined(result: SourceResult) -> None:
        """A video's line, joined from its parts' (each counted on the bar as it came)."""
        with signals_held():
            record_line(result)
            seen.joined(result)
        if on_result is not None:
            on_result(result)

    def record_finished(timeout: float | None = None) -> None:
        """Record each source a worker has finished (and told the board of) in a share whose reply has not come:
        at once, not up to two shares later — and kept if Ctrl-C or the worker's death comes first. Only while
        its share is out: once its reply (or its worker's death) is handled, that says what became of it."""
        out = {share_id for _, _, share_id in in_flight.values()}
        try:
            told = ray.get(crew.board.finished_since.remote(read_on_board[0]), timeout=timeout)
        except RayActorError:  # the board lost with its node: the shares' replies still say every result
            return
        for name, share_id, result in told:
            if share_id in out and (share_id, result.part or result.source) not in begun:
                record(result, name, share_id)
        # counted once recorded: a Ctrl-C after the board answered (or amid these) has them read again, and
        # `begun` keeps any recorded once (was: taken off the board first, and lost with such a Ctrl-C)
        read_on_board[0] += len(told)

    def again(source: PlannedSource, why: str, kind: str) -> None:
        """A source its worker left unfinished (it died, or its pipeline failed before the source): to another
        pipeline, up to --ray-retries times, then failed (``why`` with the count)."""
        attempts[source.key] = attempts.get(source.key, 0) + 1
        if attempts[source.key] > options.retries:
            record(SourceResult.failed_before(source, why.format(attempts[source.key]), kind))
        else:
            pending.appendleft(source)

    def poll() -> None:
        """Read how far the running shares are (as their workers last told the board) and redraw."""
        if crew.board is not None:
            try:
                told = ray.get(crew.board.read.remote())
            except RayActorError:  # the board lost with its node: the bar moves as sources end
                told = {}
            for name, shares in told.items():
                for share_id, (frames, faces) in shares.items():
                    if share_id in seen.running and workers[name]["died"] is False:
                        seen.running[share_id] = (frames, faces)
        seen.draw()

    try:
        held.take()  # a Ctrl-C or SIGTERM while the run started ends it here
        while pending or in_flight:
            while pending and (free := _takers(load, crew.live, len(pending), len(warming))):
                # guided: large shares while much is left (few pipeline restarts), single sources at the end
                # (no worker left with a long tail); at most 16, which bounds the work a dead worker loses
                size = options.chunk or max(1, min(16, len(pending) // (2 * crew.count)))
                share = [pending.popleft() for _ in range(min(size, len(pending)))]
                name = min(free, key=lambda n: load.get(n, 0))
                load[name] = load.get(name, 0) + 1
                sent_at.update(dict.fromkeys((s.key for s in share), time.time()))
                for source in share:
                    parts.handed_out(source)
                in_flight[crew.live[name].process.remote(share, shares)] = (name, share, shares)
                seen.running[shares] = (0, 0)
                shares += 1
            if not in_flight and not warming and not died:
                break  # no worker left to take what is pending (every start failed): recorded below
            done, _ = ray.wait([*warming, *in_flight], num_returns=1,  # (a warm worker is known first)
                               timeout=POLL_S) if warming or in_flight else ([], [])
            for ref in done:
                if ref in warming:  # a worker is warm (or died starting, or met the user error that stops all)
                    name = warming.pop(ref)
                    try:
                        reply = ray.get(ref)
                    except RayActorError as exc:
                        if crew.died(name):
                            failures += 1
                            logger.warning("%s died while starting (%s)", name, type(exc).__name__)
                        start_deaths += 1
                        if start_deaths <= options.retries:
                            died += 1
                        continue
                    if reply["error"] is not None:
                        raise reply["error"]  # as in one process: a bad model or option stops every worker
                    met(reply)
                    load[name] = 0  # (a worker is in load once it is warm)
                    crew.warm.add(name)
                    timeline.setdefault("first_ready_s", time.perf_counter() - started)
                    if first_crew <= load.keys():  # (absent when one of the first crew never got warm)
                        timeline.setdefault("ready_s", time.perf_counter() - started)
                    seen.draw()
                    continue
                # (left in flight until its reply is recorded: a Ctrl-C meanwhile has the board's word on its
                # finished sources read; popped first, they were left `interrupted`)
                name, share, share_id = in_flight[ref]
                load[name] = load.get(name, 1) - 1
                seen.ended(share_id)  # its frames now count through its results (or not at all)
                # (its sources recorded as they finished, through the board, are not recorded or redone again)
                unrecorded = [source for source in share if (share_id, source.key) not in begun]
                try:
                    reply = ray.get(ref)
                except RayActorError as exc:  # the worker died: its unfinished sources go elsewhere
                    in_flight.pop(ref)
                    if crew.died(name):
                        failures += 1
                        seen.alive.discard(name)
                        logger.warning("%s died (%s); its sources go to another worker", name, type(exc).__name__)
                        died += 1
                    for source in unrecorded:
                        again(source, f"its worker died {{}} time(s): {type(exc).__name__}", "WorkerDied")
                    continue
                except RayTaskError as exc:  # a bug in a worker (a user error is a failed source, not this)
                    # the error itself, not str(exc): that starts with Ray's "ray::…Worker.process() (pid=…)"
                    error, exit_code, kind = reported(exc.cause)
                    in_flight.pop(ref)
                    for source in unrecorded:
                        record(SourceResult.failed_before(source, error, kind, exit_code))
                    continue
                met(reply)
                finished = {r.part or r.source for r in reply["results"]}
                for result in reply["results"]:
                    if (share_id, result.part or result.source) not in begun:
                        record(result, name, share_id)
                workers[name]["busy_s"] = max(workers[name]["busy_s"], reply["busy_s"])  # (replies: any order)
                for source in unrecorded:
                    if source.key not in finished:  # its pipeline failed before reaching it
                        again(source, "its worker's pipeline failed {} time(s) before reaching it", "WorkerError")
                keep_latest_summary(summaries, name, reply)
                in_flight.pop(ref)
            record_finished()
            silent = head.silent_s(now=died > 0)  # (seconds since the cluster's head last answered)
            if silent >= HEAD_LOST_S:  # its head stopped: no worker of it will ever answer
                crew.lost = True
                undone = [source for _, share, share_id in in_flight.values() for source in share
                          if (share_id, source.key) not in begun]
                in_flight.clear()
                for source in pending:
                    parts.handed_out(source)  # (a video's parts: joined into its one failed line)
                undone += pending
                pending.clear()
                logger.warning("the Ray cluster's head has not answered for %.0f s (stopped, or unreachable from "
                               "here): the run ends; its %d source(s) not done are recorded failed, and the same "
                               "command with --resume runs them", silent, len(undone))
                for source in undone:
                    record(SourceResult.failed_before(source, "the Ray cluster was lost: its head stopped answering",
                                                      "ClusterLost"))
                break
            if silent <= HEAD_CHECK_S:  # (the head answered just now)
                for _ in range(died):
                    warm_up(crew.spawn())
                died = 0
            if not warming or any(n in crew.live for n in load):
                say_room_at = time.monotonic() + NO_ROOM_S
            elif time.monotonic() >= say_room_at and silent <= HEAD_CHECK_S:  # none warm, one waiting: for room?
                say_room_at = time.monotonic() + 10 * NO_ROOM_S
                _say_no_room(crew, list(warming.values()))
            if seen.bar is not None:
                poll()
        for source in list(pending):  # no worker could start (each died starting, retries spent)
            parts.handed_out(source)  # (a video's parts: joined into its one failed line)
            record(SourceResult.failed_before(source, f"no worker started: {start_deaths} died while starting",
                                              "WorkerDied"))
        timeline["done_s"] = time.perf_counter() - started
        # the first row any worker wrote, on this process's clock (a worker on another node: as far as the clocks agree)
        firsts = [s["first_frame_at"] for s in summaries.values() if s.get("first_frame_at")]
        if firsts:
            timeline["first_row_s"] = perf_counter_at(min(firsts)) - started
        if config.metrics_port is not None and config.metrics_linger > 0 and not crew.lost:
            logger.info("run finished; the workers serve their final metrics for up to %g s (Ctrl-C ends this)",
                        config.metrics_linger)
            linger(config.metrics_linger)
        # every source has its line: what is left (summary.json, the workers and Ray stopped) is clean-up, which a
        # signal does not cut short; run_on_ray says what became of one
        held.hold()
    except KeyboardInterrupt:
        interrupted = True
        # the workers first, and until they are gone: one still running would write files after the manifest
        # says what was left (Ray cancels no actor task by force; a killed actor's calls end once it is dead)
        crew.kill_all()
        with contextlib.suppress(Exception):
            ray.wait(list(in_flight), num_returns=len(in_flight), timeout=KILL_WAIT_S)
        with contextlib.suppress(Exception):  # (Ray failing here: those sources are recorded as their files say)
            record_finished(timeout=KILL_WAIT_S)  # the sources the workers had finished: kept, as in one process
        # each source that went out without its line gets one, as its files say (its worker's reply never came, or
        # came cut off), or as its worker said it was in it; one its worker had not begun, or never handed out, gets
        # none, as one process's sources not begun (--resume: new ones). A video whose parts are not all in is
        # interrupted (--resume runs it again)
        entered = _entered(crew.board, in_flight)
        recorded = {r.source for r in results}
        for source in units:
            if source.part is None and source.uri not in recorded and source.uri in sent_at:
                left = as_left(source, sent_at[source.uri], entered=source.uri in entered)
                if left is not None:
                    record(left)
        for left in parts.left():
            record(left)
        if not results:  # nothing begun: as one process cut off while its models load, no line and no summary.json
            raise  # (which, without a manifest, would keep a rerun from the folder)
    return finish_many(plan, plan.skipped + results, None, interrupted, time.perf_counter() - started,
                       ray={"workers": crew.count, "gpus_per_worker": crew.per_gpu, "worker_failures": failures,
                            "shares": shares, "timeline": {k: round(v, 3) for k, v in timeline.items()},
                            "per_worker": workers, "metrics": {n: w["metrics"] for n, w in workers.items()
                                                               if w["metrics"]},
                            "worker_summaries": list(summaries.values())})


def _takers(load: dict[str, int], live: Any, pending: int, warming: int) -> list[str]:
    """The warm workers a share may go to now (``load``: shares queued at each). An idle one first; a share queued
    behind a running one (up to DEPTH, so its GPU does not idle between shares) only while more sources wait than the
    ``warming`` workers could each take as they come: a few long videos are not all queued at the first worker warm
    while the others start (a run twice as long on two GPUs)."""
    free = [n for n in load if n in live and load[n] < DEPTH]
    idle = [n for n in free if load[n] == 0]
    return idle or (free if pending > warming else [])


def _entered(board: Any, in_flight: dict[Any, tuple[str, list[PlannedSource], int]]) -> set[str]:
    """The sources the stopped workers were in, as they last told the board, in shares whose reply never came (a
    share answered said what became of its sources, and a dead worker's went elsewhere)."""
    import ray

    out = {share_id: name for name, _, share_id in in_flight.values()}
    try:
        told = ray.get(board.read_entered.remote(), timeout=KILL_WAIT_S)
    except Exception:  # (the board lost: those sources are recorded as their files say)
        return set()
    return {inside[1] for name, inside in told.items() if inside is not None and out.get(inside[0]) == name}


def keep_latest_summary(summaries: dict[str, dict[str, Any]], name: str, reply: dict[str, Any]) -> None:
    """Keep worker ``name``'s summary from ``reply`` unless one taken after it is kept already: a worker's
    shares run side by side, so their replies can reach the driver in another order than they were taken."""
    kept = summaries.get(name)
    if kept is None or reply["snapshot"] > kept["snapshot"]:
        summaries[name] = {**reply["summary"], "worker": reply["worker"], "name": name,
                           "snapshot": reply["snapshot"]}


__all__ = ["LOCAL", "RayOptions", "Worker", "run_on_ray"]
