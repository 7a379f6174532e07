"""The many-source command over worker processes of this machine (``--processes N``): a Ray run's shape, without Ray.

One process's pipeline is bound by its interpreter (~1 250–1 480 frames/s of 720p on an H100 or H200) while the GPU
takes twice that from several processes under NVIDIA MPS (docs/benchmarks.md). Ray gives a machine such workers
(``--ray local``), but its own start and stop cost ~4.5 s of a 64-clip archive's ~19 s. Here the command starts its
workers itself, as soon as the run is planned: each a fresh interpreter (:mod:`multiprocessing`, spawned) that builds
and warms an :class:`emopipe.Analyzer` once, then runs one pipeline over a fed source chain for its whole life
(:meth:`Analyzer.process`), as a Ray worker does.

The driver (this process) loads no PyTorch: it plans the run exactly as one process does
(:func:`~emopipe.pipeline.many.plan_sources`), hands out the sources largest first, one at a time to the worker that
asks (each asks while it holds fewer than its chain reads ahead, so its GPU work never drains between sources),
writes each source's manifest line as its worker reports it finished and then renames its files (the worker leaves
them under their partial names), and writes ``summary.json``. Each worker talks to the driver over a pipe of its
own: a worker whose pipe ends without its goodbye died (killed, out of memory, a crash), and the sources it held and
had not finished go to another worker, up to ``--ray-retries`` times each (a replacement is started); a source redone
replaces its partial files, so no row is duplicated. A user error in a worker (weights missing, a bad option) ends
the run as it ends one process. Ctrl-C and SIGTERM go to the driver (the workers ignore the terminal's Ctrl-C): it
kills the workers, keeps every source they had finished, and records the sources they were in as their files say
(``interrupted``), as a Ray run's driver does; the workers also die with the driver (Linux: the parent-death
signal), so a killed driver leaves no worker writing, and ``--resume`` goes on.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import multiprocessing
import os
import signal
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import TYPE_CHECKING, Any

# (the driver loads no PyTorch: only the workers import the API)
from emopipe.config import RunConfig, StrPath
from emopipe.errors import EmopipeError, UsageError
from emopipe.io.records import hold_folder
from emopipe.model import cuda_context, cudnn_plans
from emopipe.pipeline.drivers import (
    HeldSignals,
    as_left,
    failed_in_worker,
    reported,
    signals_held,
    worker_metrics_port,
)
from emopipe.pipeline.hooks import Observer
from emopipe.pipeline.many import (
    MANY_SOURCES,
    ManyOutcome,
    ManyPlan,
    finish_many,
    many_config,
    plan_sources,
    report_many,
)
from emopipe.pipeline.progress import ProgressBar

if TYPE_CHECKING:
    from multiprocessing.process import BaseProcess

    from emopipe.pipeline.archive import PlannedSource, SourceResult
    from emopipe.types import FrameResult

logger = logging.getLogger(__name__)

WORKER_NAME = "emopipe-process-{}"
POLL_S = 0.25  # how often the driver redraws the bar while no worker says anything
PROGRESS_S = 0.5  # how often a worker tells the driver its frame counts
KILL_WAIT_S = 10.0  # Ctrl-C: how long the driver waits for a killed worker to be gone
_PR_SET_PDEATHSIG = 1  # prctl(2)


def run_on_processes(config: RunConfig, processes: int, *, sources: StrPath | Sequence[StrPath] | None = None,
                     output_dir: StrPath | None = None, on_result: Callable[[SourceResult], None] | None = None,
                     progress: bool = False) -> ManyOutcome:
    """The many-source run over ``processes`` worker processes of this machine; the same files as
    :meth:`Analyzer.run_many` makes in one process, and the same exit codes.

    The output folder is taken and the run planned first, as in one process (an input or output error, or a run
    with nothing left to do, starts no worker); then the workers start (no more than there are sources to do), each
    on a GPU of its own while there are several (``--device auto`` or ``cuda``), else all on the one named.
    ``progress``: one bar on stderr over every worker's frames."""
    if processes < 1:
        raise UsageError(f"--processes must be at least 1, got {processes}")
    directory = config.output_folder(output_dir)
    with hold_folder(directory), contextlib.ExitStack() as planned:
        started = time.perf_counter()
        device_type = "cuda" if _devices(config.device) else "cpu"
        plan = planned.enter_context(plan_sources(sources, directory, many_config(config, device_type), config,
                                                  folder_held=True))
        timeline = {"plan_s": time.perf_counter() - started}
        if not plan.todo:
            outcome = finish_many(plan, plan.skipped, None, False, time.perf_counter() - started)
        else:
            count = min(processes, len(plan.todo))
            logger.info("%d source(s) to do over %d worker processes …", len(plan.todo), count)
            run = _Run(plan, config, count, on_result, started, timeline, ProgressBar(None) if progress else None)
            outcome = run.run()
        report_many(plan, outcome)
    return outcome


def _devices(device: str) -> list[str]:
    """The CUDA devices the workers take in turn (``cuda:N`` each, where ``auto`` or ``cuda`` finds several GPUs);
    empty for a run on the CPU (``cpu``, or ``auto`` without a GPU or without a CUDA build of PyTorch)."""
    wanted = device.strip().lower()
    if wanted == "cpu":
        return []
    if wanted not in ("auto", "cuda"):
        return [device]  # cuda:N (a name the workers refuse is refused there, as one process refuses it)
    gpus = cuda_context.gpu_count() if wanted == "cuda" or cuda_context.device_ordinal("auto") is not None else 0
    if gpus <= 1:
        return [device] if gpus or wanted == "cuda" else []
    return [f"cuda:{n}" for n in range(gpus)]


@dataclass
class _Worker:
    """The driver's view of one worker process."""

    name: str
    process: BaseProcess
    pipe: Connection
    taken: dict[str, PlannedSource] = field(default_factory=dict)  # handed to it, not yet finished (in order)
    sent_at: dict[str, float] = field(default_factory=dict)  # source → when it was handed out (wall clock)
    asking: bool = False  # it waits for a source
    ready: bool = False  # its engines are warm
    said_bye: bool = False  # its pipeline ended with the run: every source it held is recorded
    gone: bool = False
    entered: str | None = None  # the source its pipeline is in, as it last said
    failure: tuple[str, int, str] | None = None  # its pipeline's failure, as it said it before it ended
    frames: int = 0  # written so far (its finished sources' and its current one's)
    faces: int = 0
    identity: dict[str, Any] = field(default_factory=dict)  # pid, device, start, metrics (said when ready)
    summary: dict[str, Any] = field(default_factory=dict)  # its pipeline, as its goodbye says
    recorded: dict[str, int] = field(default_factory=lambda: {"sources": 0, "frames": 0, "faces": 0})


class _Run:
    """One run's workers, its sources still to do, and its results as recorded."""

    def __init__(self, plan: ManyPlan, config: RunConfig, count: int,
                 on_result: Callable[[SourceResult], None] | None, started: float, timeline: dict[str, float],
                 bar: ProgressBar | None) -> None:
        self.plan, self.config, self.count = plan, config, count
        self.on_result = on_result
        self.started, self.timeline, self.bar = started, timeline, bar
        self.pending: deque[PlannedSource] = deque(sorted(plan.todo, key=lambda p: -_size(p.uri)))
        self.workers: dict[str, _Worker] = {}
        self.results: list[SourceResult] = []
        self.attempts: dict[str, int] = {}
        self.failures = 0  # workers that died
        self.start_deaths = 0  # of those, before they were warm
        self.warned_mps = False  # (a GPU shared without MPS: said once)
        self.devices = _devices(config.device) or [config.device]
        self.context = multiprocessing.get_context("spawn")  # (a fresh interpreter: no fork of this one's threads)
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        # a fresh machine's cuDNN plans are built by processes each worker's warm-up starts: the cores shared out
        self.builders = os.environ.get(cudnn_plans.BUILDERS_VARIABLE) or str(max(1, (cores - 2) // count))

    # -- the workers ---------------------------------------------------------------------------------------------

    def spawn(self) -> None:
        index = len(self.workers)
        name = WORKER_NAME.format(index)
        ours, theirs = self.context.Pipe()
        config = replace(self.config, device=self.devices[index % len(self.devices)])
        port = worker_metrics_port(self.config.metrics_port, index)
        level = logging.getLogger("emopipe").getEffectiveLevel()  # (its warnings and errors; all with --debug)
        process = self.context.Process(
            target=serve, name=name, daemon=True,  # (daemon: ended with this interpreter, should it end first)
            args=(config, os.getcwd(), name, theirs, os.getpid(), port, self.builders,
                  level if level <= logging.DEBUG else max(level, logging.WARNING)))
        process.start()
        theirs.close()  # (this process keeps its end only: the pipe ends when the worker does)
        self.workers[name] = _Worker(name, process, ours)

    def _hear(self, worker: _Worker) -> None:
        """One message of ``worker``'s; its end when its pipe ends."""
        try:
            kind, body = worker.pipe.recv()
        except (EOFError, OSError):
            self._ended(worker)
            return
        if kind == "want":
            worker.asking = True
        elif kind == "result":
            worker.taken.pop(body.source, None)
            if worker.entered == body.source:
                worker.entered = None
            self.record(body, worker)
        elif kind == "progress":
            worker.frames, worker.faces = body
        elif kind == "entered":
            worker.entered = body
        elif kind == "ready":
            worker.ready = True
            worker.identity = body
            self.timeline.setdefault("first_ready_s", time.perf_counter() - self.started)
            if all(w.ready or w.gone for w in self.workers.values()):
                self.timeline.setdefault("ready_s", time.perf_counter() - self.started)
            if body.get("metrics"):
                logger.info("%s (pid %s): metrics on %s", worker.name, body["pid"], body["metrics"])
            if len(self.workers) > len(self.devices) and body.get("mps") is False and not self.warned_mps:
                self.warned_mps = True
                logger.warning("%s shares its GPU without NVIDIA MPS: the workers on a GPU take turns on it; start "
                               "MPS (docs/cluster.md, \"Several workers on a GPU\") or use fewer --processes",
                               worker.name)
        elif kind == "failed":  # its pipeline failed (the source it was in is recorded failed already)
            worker.failure = body
        elif kind == "error":  # a user error that stops every worker, as it stops one process
            raise body
        elif kind == "bye":
            worker.said_bye, worker.summary = True, body

    def _ended(self, worker: _Worker) -> None:
        """A worker's pipe ended: after its goodbye, a worker done; else it died, and what it held goes elsewhere."""
        worker.gone, worker.asking = True, False
        worker.pipe.close()
        if worker.said_bye and not worker.taken:
            return
        worker.process.join(KILL_WAIT_S)
        code = worker.process.exitcode
        self.failures += 1
        if worker.failure is not None:
            why = worker.failure[0] + " ({} time(s))"
            logger.warning("%s", worker.failure[0])
        else:
            how = f"killed by {signal.Signals(-code).name}" if code is not None and code < 0 else f"exit status {code}"
            why = "its worker process died {} time(s): " + how
            logger.warning("%s died (%s)%s", worker.name, how, "; its sources go to another" if worker.taken else "")
        if not worker.ready:
            self.start_deaths += 1
        for source in list(worker.taken.values()):
            self.again(source, why, "WorkerError" if worker.failure else "WorkerDied")
        worker.taken.clear()
        if self.pending and (worker.ready or self.start_deaths <= self.config.ray_retries):
            self.spawn()

    def again(self, source: PlannedSource, why: str, kind: str) -> None:
        """A source its worker left unfinished: to another, up to --ray-retries times, then failed."""
        self.attempts[source.uri] = self.attempts.get(source.uri, 0) + 1
        if self.attempts[source.uri] > self.config.ray_retries:
            from emopipe.pipeline.archive import SourceResult

            self.record(SourceResult(source=source.uri, status="failed", error=why.format(self.attempts[source.uri]),
                                     exit_code=1, kind=kind))
        else:
            self.pending.appendleft(source)

    def _hand_out(self) -> None:
        """Sources to the workers that ask, the least laden first: one that holds none gets one; one that holds
        some (its chain reads the next ahead) only while enough wait for every worker to hold as many, so the last
        sources are not queued behind one worker while another idles, nor all taken before the others are warm."""
        alive = [w for w in self.workers.values() if not w.gone]
        for worker in sorted((w for w in alive if w.asking), key=lambda w: len(w.taken)):
            if not self.pending:
                return
            if worker.taken and len(self.pending) < len(worker.taken) * len(alive):
                continue
            source = self.pending.popleft()
            worker.taken[source.uri] = source
            worker.sent_at[source.uri] = time.time()
            worker.asking = False
            with contextlib.suppress(OSError):  # (gone meanwhile: its pipe's end says so, and the source goes on)
                worker.pipe.send(source)

    def _listen(self) -> None:
        """Hear every worker that has spoken (waiting up to POLL_S for one), then redraw the bar."""
        pipes: dict[Any, _Worker] = {w.pipe: w for w in self.workers.values() if not w.gone}
        for pipe in wait(list(pipes), timeout=POLL_S):
            self._hear(pipes[pipe])
        if self.bar is not None:
            alive = [w for w in self.workers.values() if not w.gone]
            frames = sum(r.frames for r in self.results) + sum(w.frames - w.recorded["frames"] for w in alive)
            faces = sum(r.faces for r in self.results) + sum(w.faces - w.recorded["faces"] for w in alive)
            self.bar.show(frames, faces, None, workers=len(alive))

    # -- the results ---------------------------------------------------------------------------------------------

    def record(self, result: SourceResult, worker: _Worker | None = None) -> None:
        """A source's manifest line, then its files' names (the rows last), as one process does them."""
        from emopipe.pipeline.archive import publish

        with signals_held():  # (a Ctrl-C between the line and the renames would leave a line for partial files)
            self.plan.manifest.append(result.as_dict())
            publish(result.renames)
            result.renames = []
            self.results.append(result)
            if worker is not None:
                for figure in ("frames", "faces"):
                    worker.recorded[figure] += getattr(result, figure)
                worker.recorded["sources"] += 1
        if self.on_result is not None:
            self.on_result(result)

    def _record_left(self) -> None:
        """Cut off: the sources the workers held, as their files say (those not begun get no line)."""
        for worker in self.workers.values():
            with contextlib.suppress(EOFError, OSError):  # what a worker said before it was killed is kept
                while worker.pipe.poll():
                    kind, body = worker.pipe.recv()
                    if kind == "result":
                        worker.taken.pop(body.source, None)
                        self.record(body, worker)
                    elif kind == "entered":
                        worker.entered = body
            for source in worker.taken.values():
                left = as_left(source, worker.sent_at[source.uri], entered=worker.entered == source.uri)
                if left is not None:
                    self.record(left)
            worker.taken.clear()

    # -- the run -------------------------------------------------------------------------------------------------

    def run(self) -> ManyOutcome:
        from emopipe.pipeline.archive import SourceResult

        interrupted = False
        held = HeldSignals()  # (Ctrl-C while the workers start: taken once they are, and the run ends at once)
        held.hold()
        try:
            for _ in range(self.count):
                self.spawn()
            held.take()
            while self.pending or any(w.taken for w in self.workers.values()):
                self._hand_out()
                if all(w.gone for w in self.workers.values()):
                    break
                self._listen()
            for source in self.pending:  # no worker could start (each died starting, retries spent)
                self.record(SourceResult(source=source.uri, status="failed", exit_code=1, kind="WorkerDied",
                                         error=f"no worker started: {self.start_deaths} died while starting"))
            self.pending.clear()
            self.timeline["done_s"] = time.perf_counter() - self.started
            self._dismiss()
        except KeyboardInterrupt:
            interrupted = True
            self._kill()
            self._record_left()
            if not self.results:  # nothing begun: as one process cut off while its models load (no line, no summary)
                raise
        except BaseException:
            self._kill()
            raise
        finally:
            held.release()
            if self.bar is not None:
                self.bar.close()
        return finish_many(self.plan, self.plan.skipped + self.results, None, interrupted,
                           time.perf_counter() - self.started, processes=self._facts())

    def _dismiss(self) -> None:
        """Every source recorded: each worker told there is no more, its pipeline ends and it says goodbye (its
        process then ends on its own: nothing of the run is left to it)."""
        for worker in self.workers.values():
            worker.asking = worker.asking and not worker.gone
        while any(not (w.gone or w.said_bye) for w in self.workers.values()):
            for worker in self.workers.values():
                if worker.asking and not worker.gone:
                    worker.asking = False
                    with contextlib.suppress(OSError):
                        worker.pipe.send(None)
            self._listen()

    def _kill(self) -> None:
        for worker in self.workers.values():
            if worker.process.is_alive():
                worker.process.kill()
        for worker in self.workers.values():
            worker.process.join(KILL_WAIT_S)

    def _facts(self) -> dict[str, Any]:
        """``summary.json``'s ``processes`` section: the workers, where their time went, their pipelines."""
        firsts = [float(w.summary["first_frame_at"]) for w in self.workers.values() if w.summary.get("first_frame_at")]
        if firsts:  # the first row any worker wrote, on this process's clock
            self.timeline["first_row_s"] = min(firsts) - (time.time() - (time.perf_counter() - self.started))
        return {"workers": self.count, "started": len(self.workers), "worker_failures": self.failures,
                "devices": sorted({w.identity.get("device", "") for w in self.workers.values()} - {""}),
                "timeline": {k: round(v, 3) for k, v in self.timeline.items()},
                "per_worker": {w.name: {**w.recorded, "pid": w.identity.get("pid"), "died": w.gone and not w.said_bye}
                               for w in self.workers.values()},
                "metrics": {w.name: w.identity["metrics"] for w in self.workers.values() if w.identity.get("metrics")},
                "worker_summaries": [{"name": w.name, **w.identity, **w.summary}
                                     for w in self.workers.values() if w.summary]}


def _size(uri: str) -> int:
    try:
        return Path(uri).stat().st_size
    except OSError:
        return 0


# -- a worker process ------------------------------------------------------------------------------------------------


class _Teller:
    """A worker's end of its pipe: messages sent whole, from whichever thread (the feeder, the writer)."""

    def __init__(self, pipe: Connection) -> None:
        self.pipe = pipe
        self._lock = threading.Lock()

    def __call__(self, kind: str, body: Any = None) -> None:
        with self._lock, contextlib.suppress(OSError):  # (the driver gone: this process ends with it)
            self.pipe.send((kind, body))


class _Counter(Observer):
    """The frames and faces a worker has written, told to the driver every PROGRESS_S (its bar)."""

    def __init__(self, tell: _Teller) -> None:
        self.tell = tell
        self.frames = self.faces = 0
        self.first_frame_at: float | None = None
        self._told = 0.0

    def frame(self, result: FrameResult, latency_s: float) -> None:  # (the pipeline's writer thread)
        self.frames += 1
        self.faces += len(result.faces)
        if self.first_frame_at is None:
            self.first_frame_at = time.time()
        if time.monotonic() - self._told >= PROGRESS_S:
            self._told = time.monotonic()
            self.tell("progress", (self.frames, self.faces))


def serve(config: RunConfig, cwd: str, name: str, pipe: Connection, driver_pid: int, metrics_port: int | None,
          builders: str, log_level: int) -> None:
    """A worker process's life (spawned by the driver): its Analyzer built and warmed, then one pipeline over the
    sources it asks the driver for, one at a time, until the driver says there are no more."""
    began = time.perf_counter()
    _end_with_driver(driver_pid)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # (a terminal's Ctrl-C reaches every process: the driver decides)
    cuda_context.start(config.device)  # (made on a thread while PyTorch imports)
    os.environ.setdefault(cudnn_plans.BUILDERS_VARIABLE, builders)
    logging.basicConfig(level=log_level, format=f"{name}: %(message)s")
    logging.getLogger("emopipe").setLevel(log_level)
    if Path(cwd).is_dir():  # relative sources and outputs mean what they mean to the driver
        os.chdir(cwd)
    tell = _Teller(pipe)
    identity: dict[str, Any] = {"pid": os.getpid(), "device": config.device,
                                "mps": cuda_context.mps_running(tries=3) if config.device != "cpu" else None}
    metrics = exporter = None
    try:
        if metrics_port is not None or config.pushgateway:
            from prometheus_client import CollectorRegistry

            from emopipe.observe.exposition import MetricsExporter
            from emopipe.observe.metrics import PipelineMetrics

            registry = CollectorRegistry()
            metrics = PipelineMetrics(registry, queues=("frames", "results"))
            exporter = MetricsExporter(registry, port=metrics_port, host=config.metrics_host,
                                       pushgateway=config.pushgateway, grouping_key={"instance": name},
                                       run_state=metrics.set_run_state)
            exporter.start()  # before the engines load, so scrapes see the start-up
            identity["metrics"] = exporter.server.url if exporter.server is not None else None
        from emopipe.api import Analyzer  # (PyTorch: in this process only)

        analyzer = Analyzer(config).open()
        run_config = analyzer.source_config(MANY_SOURCES, output=None, summary=None)
    except EmopipeError as exc:
        tell("error", exc)
        return
    except BaseException as exc:  # (a bug: said in one line to the driver, which says it and goes on without it)
        tell("failed", reported(exc, f"{name} could not start: "))
        logger.debug("its start failed", exc_info=True)
        os._exit(1)
    identity["start"] = {"ready_s": round(time.perf_counter() - began, 3),
                         "plan_builders": cudnn_plans.builders_for()}
    tell("ready", identity)
    chain = analyzer.source_chain([], run_config, feeding=True)
    counter = _Counter(tell)
    ahead = (config.parallel or 2) + 1  # sources it holds: those its chain reads ahead, and the one it writes
    changed = threading.Condition()
    state = {"taken": 0, "finished": 0}
    cut_off: list[SourceResult] = []  # the source its pipeline stopped in (said with the failure)

    def feed() -> None:
        while True:
            with changed:
                changed.wait_for(lambda: state["taken"] - state["finished"] < ahead)
            tell("want")
            try:
                source = pipe.recv()
            except (EOFError, OSError):
                source = None  # (the driver gone: this process ends with it)
            if source is None:
                chain.end_feed()
                return
            with changed:
                state["taken"] += 1
            chain.extend([source])

    def entered() -> None:  # (the driver records the source it was in, should it be cut off before its first frame)
        with changed:
            position = state["finished"]
            inside = chain.readings[position].planned.uri if position < chain.started else None
        tell("entered", inside)

    def finished(result: SourceResult) -> None:  # (in position order)
        if result.status == "interrupted":
            cut_off.append(result)
            return
        tell("result", result)
        with changed:
            state["finished"] += 1
            changed.notify_all()
        entered()

    chain.on_begin = entered
    threading.Thread(target=feed, name="emopipe-feed", daemon=True).start()
    try:
        _, summary, _ = analyzer.process(chain, run_config, metrics=metrics, observers=[counter], on_result=finished)
    except BaseException as exc:
        for result in cut_off:
            tell("result", failed_in_worker(result, exc, name))
        tell("failed", reported(exc, f"{name}'s pipeline failed: "))
        logger.debug("its pipeline failed", exc_info=True)
        os._exit(1)
    if exporter is not None:
        exporter.finish(linger_after=False, state="finished")
    facts = summary.as_dict() if summary is not None else {}
    tell("bye", {"frames": counter.frames, "faces": counter.faces, "first_frame_at": counter.first_frame_at,
                 "stage_seconds": facts.get("stage_seconds"), "startup": facts.get("startup")})
    logging.shutdown()
    os._exit(0)  # (every file is written and renamed; the interpreter's own exit would unload PyTorch for nothing)


def _end_with_driver(driver_pid: int) -> None:
    """Die with the driver (Linux: the parent-death signal), so a killed driver leaves no worker writing."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != driver_pid:  # (it died before the signal was asked for)
        os._exit(1)


__all__ = ["run_on_processes"]
