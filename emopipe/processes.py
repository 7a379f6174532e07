"""The many-source command over worker processes of this machine (``--processes N``): a Ray run's shape, without Ray.

One process's pipeline is bound by its interpreter (~1 250–1 480 frames/s of 720p on an H100 or H200) while the GPU
takes twice that from several processes under NVIDIA MPS (docs/benchmarks.md). Ray gives a machine such workers
(``--ray local``), but its own start and stop cost ~4.5 s of a 64-clip archive's ~19 s. Here the command starts its
workers itself, first of all: each a fresh interpreter (``python -m emopipe.process_worker``: PyTorch's import begun
before anything else) that builds and warms an :class:`emopipe.Analyzer` once, then runs one pipeline over a fed
source chain for its whole life (:meth:`Analyzer.process`), as a Ray worker does.

The driver (this process) loads no PyTorch: it plans the run exactly as one process does
(:func:`~emopipe.pipeline.many.plan_sources`, while its workers import PyTorch), hands out the sources largest first,
one at a time to the worker that asks (each asks while it holds fewer than its chain reads ahead, so its GPU work never
drains between sources; its first as it begins to load its engines, which then warm for that source's frame size while
NVDEC's probe of it runs beside the load: :class:`_FirstSource`), writes each source's manifest line as its worker
reports it finished and then renames its files (the worker leaves them under their partial names), and writes
``summary.json``. Each worker talks to the driver over a socket of its own: a worker whose socket ends without its
goodbye died (killed, out of memory, a crash), and the sources it held and had not finished go to another worker, up to
``--ray-retries`` times each (a replacement is started); a source redone replaces its partial files, so no row is
duplicated. A user error in a worker (weights missing, a bad option) ends the run as it ends one process. Ctrl-C and
SIGTERM go to the driver (the workers ignore the terminal's Ctrl-C): it kills the workers, keeps every source they had
finished, and records the sources they were in as their files say (``interrupted``), as a Ray run's driver does; the
workers also die with the driver (Linux: the parent-death signal), so a killed driver leaves no worker writing, and
``--resume`` goes on.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import TYPE_CHECKING, Any

# The driver loads no PyTorch, and starts its workers before it imports what planning needs (the pipeline's modules,
# OpenCV): only the workers import the API.
from emopipe.config import RunConfig, StrPath
from emopipe.errors import EmopipeError, UsageError, WeightsError
from emopipe.io.records import hold_folder
from emopipe.model import cuda_context, cudnn_plans, weights
from emopipe.pipeline.hooks import Observer

if TYPE_CHECKING:
    from emopipe.pipeline.archive import PlannedSource, SourceResult
    from emopipe.pipeline.many import ManyOutcome, ManyPlan
    from emopipe.pipeline.parts import Split
    from emopipe.types import FrameResult

logger = logging.getLogger(__name__)

WORKER_NAME = "emopipe-process-{}"
POLL_S = 0.25  # how often the driver redraws the bar while no worker says anything
PROGRESS_S = 0.5  # how often a worker tells the driver its frame counts
KILL_WAIT_S = 10.0  # Ctrl-C: how long the driver waits for a killed worker to be gone
# Every source recorded: how long the driver waits for its workers' goodbyes (their pipelines' summaries) before it
# ends; a worker's pipeline sometimes took 0.8 s to end on an H100 host (session 25), for nothing the run needs. With
# --pushgateway it waits for every one (each pushes its final metrics first), up to KILL_WAIT_S.
BYE_WAIT_S = 0.25


def run_on_processes(config: RunConfig, processes: int, *, sources: StrPath | Sequence[StrPath] | None = None,
                     output_dir: StrPath | None = None, on_result: Callable[[SourceResult], None] | None = None,
                     progress: bool = False) -> ManyOutcome:
    """The many-source run over ``processes`` worker processes of this machine; the same files as
    :meth:`Analyzer.run_many` makes in one process, and the same exit codes.

    The output folder is taken first (a folder another run is writing is refused before anything starts), then the
    workers are started — PyTorch's import in them is the run's longest wait, planning a few hundredths of a
    second — and the run planned meanwhile, as in one process: an input or output error, or a run with nothing left
    to do, ends the workers at once (none has begun anything), as do workers beyond the sources to do. Each worker
    runs on a GPU of its own while there are several (``--device auto`` or ``cuda``), else all on the one named.
    ``progress``: one bar on stderr over every worker's frames."""
    if processes < 1:
        raise UsageError(f"--processes must be at least 1, got {processes}")
    directory = config.output_folder(output_dir)
    with hold_folder(directory), contextlib.ExitStack() as planned:
        started = time.perf_counter()
        # (before the workers start: a process makes its CUDA context under the MPS that answers then, or none)
        mps = planned.enter_context(_mps_for(config, processes))
        crew = _Crew(config, processes, env=mps.env)
        try:
            from emopipe.pipeline.drivers import largest_first
            from emopipe.pipeline.many import finish_many, many_config, plan_sources, report_many
            from emopipe.pipeline.parts import plan_parts

            plan = planned.enter_context(plan_sources(sources, directory,
                                                      many_config(config, "cuda" if crew.devices else "cpu"),
                                                      config, folder_held=True))
            # fewer videos than workers: long ones in parts, one a worker (no part's file takes a name of the run's)
            units, splits = plan_parts(largest_first(plan.todo), processes, config, run=plan.planned)
            crew.keep(min(processes, len(units)))
            if plan.todo and config.weights:  # (said here once, not by every worker; a missing file: theirs to say)
                with contextlib.suppress(WeightsError):
                    weights.user_file(config.weights)
            timeline = {"plan_s": time.perf_counter() - started}
            if not plan.todo:
                outcome = finish_many(plan, plan.skipped, None, False, time.perf_counter() - started)
            else:
                parts = sum(len(split.parts) for split in splits.values())
                cut_up = f" ({len(splits)} of them in {parts} parts)" if splits else ""
                logger.info("%d source(s)%s to do over %d worker processes …", len(plan.todo), cut_up,
                            len(crew.alive()))
                outcome = _Run(plan, config, crew, on_result, started, timeline, progress, units, splits,
                               mps.state).run()
        except BaseException:
            crew.kill()  # (a run that ended leaves none: each ends on its own once it has said goodbye)
            raise
        report_many(plan, outcome)
    return outcome


@dataclass
class _Mps:
    """NVIDIA MPS for a run's workers, with ``--mps``: ``state`` (summary.json's ``processes.mps``) ``"started"``
    (the command's own) or ``"running"`` (the machine's answered), else None (not asked, or none could start; each
    worker says whether it ran under MPS: ``worker_summaries[].mps``); ``env``: what the workers' environment needs
    for the command's own."""

    state: str | None = None
    env: dict[str, str] = field(default_factory=dict)


@contextlib.contextmanager
def _mps_for(config: RunConfig, processes: int) -> Iterator[_Mps]:
    """The MPS a run's workers share their GPUs under; with ``--mps`` where none runs, the command's own, started
    now and ended as the run ends (:class:`~emopipe.model.cuda_context.OwnMps`). A daemon that cannot start leaves
    the run as it was without it (said in one line)."""
    if not config.mps:  # (nothing asked before the workers start: each says whether MPS runs, worker_summaries)
        yield _Mps()
        return
    devices = _devices(config.device)
    if not devices:
        logger.info("--mps: the workers run on the CPU; no MPS")
        yield _Mps()
        return
    if cuda_context.mps_running():
        logger.info("--mps: NVIDIA MPS runs here already: the workers share the GPU under it")
        yield _Mps("running")
        return
    if processes <= len(devices):  # (a worker a GPU: nothing to share)
        yield _Mps()
        return
    try:
        own = cuda_context.OwnMps.start()
    except cuda_context.MpsUnavailable as exc:
        logger.warning("--mps: NVIDIA MPS could not be started (%s); the workers on a GPU take turns on it", exc)
        yield _Mps()
        return
    logger.info("--mps: NVIDIA MPS started for this command's workers (ended with it)")
    try:
        yield _Mps("started", own.env)
    finally:
        own.stop()


# --processes auto. Measured on H100 hosts of 16 cores with the 64-clip archive (docs/benchmarks.md): under MPS 4, 6 and
# 8 workers on the one GPU ran it alike (14–17 s against one process's 22–24 s), 4 without MPS no faster than one
# process; each worker keeps ~4 cores busy (its decoding, GPU and writer threads).
WORKERS_PER_GPU_UNDER_MPS = 4
CORES_PER_WORKER = 4


def workers_for(gpus: int, mps: bool, cores: int) -> int:
    """How many worker processes ``--processes auto`` starts: on GPUs, 4 a GPU under NVIDIA MPS, else one a GPU, no
    more than the cores feed; on the CPU one (PyTorch's threads already use every core in one process). One means the
    run stays in its own process."""
    if gpus < 1:
        return 1
    return max(1, min(gpus * (WORKERS_PER_GPU_UNDER_MPS if mps else 1), cores // CORES_PER_WORKER))


def auto_workers(device: str, start_mps: bool = False) -> tuple[int, str]:
    """``--processes auto`` on this machine for ``device``: the count, and what it was chosen from (for the log).
    ``start_mps`` (``--mps``): counted as under MPS where its tool is here to start it."""
    gpus = len(_devices(device))
    cores = _cores()
    running = gpus > 0 and cuda_context.mps_running()
    mps = running or (gpus > 0 and start_mps and shutil.which(cuda_context.MPS_CONTROL) is not None)
    under = " under NVIDIA MPS" if running else " under NVIDIA MPS (--mps)" if mps else " without NVIDIA MPS"
    why = f"{gpus} GPU{'s' if gpus != 1 else ''}{under}, {cores} cores" if gpus else f"the CPU, {cores} cores"
    return workers_for(gpus, mps, cores), why


def _cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


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


# the signals on which a worker prints its threads' Python stacks before it dies (faulthandler's: process_worker)
_STACKS_PRINTED_ON = (signal.SIGSEGV, signal.SIGFPE, signal.SIGABRT, signal.SIGBUS, signal.SIGILL)


def death(code: int) -> str:
    """How a worker process with exit code ``code`` ended, in words."""
    return f"killed by {signal.Signals(-code).name}" if code < 0 else f"exit status {code}"


def printed_its_stacks(code: int) -> bool:
    """Whether a worker process that ended with ``code`` printed its threads' stacks as it died."""
    return -code in _STACKS_PRINTED_ON


@dataclass
class _Worker:
    """The driver's view of one worker process."""

    name: str
    process: subprocess.Popen[bytes]
    pipe: Connection
    options: dict[str, Any]  # what it is sent once it is needed (its config, its name, …)
    taken: dict[str, PlannedSource] = field(default_factory=dict)  # handed to it, not yet finished (in order)
    sent_at: dict[str, float] = field(default_factory=dict)  # source → when it was handed out (wall clock)
    asking: bool = False  # it waits for a source
    ready: bool = False  # its engines are warm
    said_bye: bool = False  # its pipeline ended with the run: every source it held is recorded
    gone: bool = False
    entered: str | None = None  # the source its pipeline is in, as it last said
    failure: tuple[str, int, str] | None = None  # its pipeline's failure, as it said it before it ended
    needed: bool = True  # False: one of more workers than the run had sources for, ended as the run was planned
    frames: int = 0  # written so far (its finished sources' and its current one's)
    faces: int = 0
    first_frame_at: float | None = None  # (wall clock) when it wrote its first frame
    identity: dict[str, Any] = field(default_factory=dict)  # pid, device, start, metrics (said when ready)
    summary: dict[str, Any] = field(default_factory=dict)  # its pipeline, as its goodbye says
    recorded: dict[str, int] = field(default_factory=lambda: {"sources": 0, "frames": 0, "faces": 0})


class _Crew:
    """The worker processes of a run: started, told what to do, and killed where the run ends early."""

    def __init__(self, config: RunConfig, count: int, env: dict[str, str] | None = None) -> None:
        from emopipe.pipeline.drivers import worker_metrics_port

        worker_metrics_port(config.metrics_port, count - 1)  # every first worker's port is valid before any starts
        self.config = config
        self.env = env or {}  # the workers' environment beyond this process's (the command's own MPS)
        self.devices = _devices(config.device)
        cores = _cores()
        # a fresh machine's cuDNN plans are built by processes each worker's warm-up starts: the cores shared out
        self.builders = os.environ.get(cudnn_plans.BUILDERS_VARIABLE) or str(max(1, (cores - 2) // count))
        # PyTorch's CPU threads a worker may start: each worker's would otherwise be as many as the machine's cores,
        # and four GPU workers' spinning OpenMP threads made loading EmoNet 4-6 s instead of 0.7 s on a 16-core H100
        # host (docs/benchmarks.md). A GPU worker's work is on the GPU and in its pipeline's threads: one (as Ray
        # gives its workers); a CPU worker's is EmoNet itself: the cores shared out. A value of the user's stands.
        self.threads = os.environ.get("OMP_NUM_THREADS") or str(1 if self.devices else max(1, cores // count))
        level = logging.getLogger("emopipe").getEffectiveLevel()  # (its warnings and errors; all with --debug)
        self.log_level = level if level <= logging.DEBUG else max(level, logging.WARNING)
        self.workers: dict[str, _Worker] = {}
        for _ in range(count):
            self.spawn()

    def spawn(self) -> _Worker:
        """A new worker: its process starts now (PyTorch's import first); it is sent its options by :meth:`send`."""
        from emopipe.pipeline.drivers import worker_metrics_port

        index = len(self.workers)
        name = WORKER_NAME.format(index)
        device = (self.devices or [self.config.device])[index % max(1, len(self.devices))]
        env = {**os.environ, **self.env, "OMP_NUM_THREADS": self.threads}
        if index:  # one writer of Python's compiled modules (emopipe.cli.bytecode): the others read what it writes
            env["PYTHONDONTWRITEBYTECODE"] = "1"
        ours, theirs = socket.socketpair()
        with theirs:
            process = subprocess.Popen([sys.executable, "-m", "emopipe.process_worker", str(theirs.fileno()), device,
                                        str(os.getpid())], pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL,
                                       env=env)
        options = {"config": replace(self.config, device=device), "cwd": os.getcwd(), "name": name,
                   "metrics_port": worker_metrics_port(self.config.metrics_port, index), "builders": self.builders,
                   "log_level": self.log_level}
        worker = self.workers[name] = _Worker(name, process, Connection(ours.detach()), options)
        return worker

    def send(self, worker: _Worker) -> None:
        with contextlib.suppress(OSError):  # (gone meanwhile: its pipe's end says so)
            worker.pipe.send(worker.options)

    def keep(self, count: int) -> None:
        """The first ``count`` workers are the run's (each sent its options); the others end now."""
        for index, worker in enumerate(self.workers.values()):
            if index < count:
                self.send(worker)
            else:
                self.end(worker)

    def end(self, worker: _Worker) -> None:
        """A worker the run does not need: its pipe closed (it ends as it finds no options), and killed."""
        worker.gone, worker.needed = True, False
        worker.pipe.close()
        with contextlib.suppress(OSError):
            worker.process.kill()

    def kill(self) -> None:
        """Every worker still running killed, and waited for (up to KILL_WAIT_S each)."""
        for worker in self.workers.values():
            if worker.process.poll() is None:
                worker.process.kill()
        for worker in self.workers.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                worker.process.wait(KILL_WAIT_S)

    def alive(self) -> list[_Worker]:
        return [w for w in self.workers.values() if not w.gone]


class _Run:
    """One run's sources still to do, its workers' messages, and its results as recorded."""

    def __init__(self, plan: ManyPlan, config: RunConfig, crew: _Crew,
                 on_result: Callable[[SourceResult], None] | None, started: float, timeline: dict[str, float],
                 progress: bool, units: Sequence[PlannedSource], splits: dict[str, Split],
                 mps: str | None = None) -> None:
        from emopipe.pipeline.parts import PartResults
        from emopipe.pipeline.progress import ProgressBar

        self.plan, self.config, self.crew = plan, config, crew
        self.count = len(crew.alive())
        self.on_result = on_result
        self.started, self.timeline = started, timeline
        self.bar = ProgressBar(None) if progress else None
        self.pending: deque[PlannedSource] = deque(units)  # (largest first; a long video's parts among them)
        self.parts = PartResults(splits, config)  # videos run as parts (emopipe.pipeline.parts)
        self.results: list[SourceResult] = []
        self.attempts: dict[str, int] = {}
        self.failures = 0  # workers that died
        self.start_deaths = 0  # of those, before they were warm
        self.warned_mps = False  # (a GPU shared without MPS: said once)
        self.mps = mps  # "running", "started" (--mps) or None

    # -- the workers ---------------------------------------------------------------------------------------------

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
            key = body.part or body.source
            worker.taken.pop(key, None)
            if worker.entered == key:
                worker.entered = None
            self.record(body, worker)
        elif kind == "progress":
            worker.frames, worker.faces, worker.first_frame_at = body
        elif kind == "entered":
            worker.entered = body
        elif kind == "ready":
            worker.ready = True
            worker.identity = body
            self.timeline.setdefault("first_ready_s", time.perf_counter() - self.started)
            if all(w.ready for w in self.crew.alive()):
                self.timeline.setdefault("ready_s", time.perf_counter() - self.started)
            if body.get("metrics"):
                logger.info("%s (pid %s): metrics on %s", worker.name, body["pid"], body["metrics"])
            # (only where the workers share GPUs: a run on the CPU was told its "GPU" was shared without MPS)
            if (self.crew.devices and len(self.crew.alive()) > len(self.crew.devices) and body.get("mps") is False
                    and not self.warned_mps):
                self.warned_mps = True
                logger.warning("%s shares its GPU without NVIDIA MPS: the workers on a GPU take turns on it; add "
                               "--mps, start MPS (docs/cluster.md, \"Several workers on a GPU\") or use fewer "
                               "--processes", worker.name)
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
        try:
            code = worker.process.wait(KILL_WAIT_S)
        except subprocess.TimeoutExpired:  # (its pipe closed, its process not ended: ended here)
            worker.process.kill()
            code = worker.process.wait()
        self.failures += 1
        if worker.failure is not None:
            why = worker.failure[0] + " ({} time(s))"
            logger.warning("%s", worker.failure[0])
        else:
            why = "its worker process died {} time(s): " + death(code)
            logger.warning("%s died (%s%s)%s", worker.name, death(code),
                           "; its threads' stacks are printed above" if printed_its_stacks(code) else "",
                           "; its sources go to another" if worker.taken else "")
        if not worker.ready:
            self.start_deaths += 1
        for source in list(worker.taken.values()):
            self.again(source, why, "WorkerError" if worker.failure else "WorkerDied")
        worker.taken.clear()
        if self.pending and (worker.ready or self.start_deaths <= self.config.ray_retries):
            self.crew.send(self.crew.spawn())

    def again(self, source: PlannedSource, why: str, kind: str) -> None:
        """A source its worker left unfinished: to another, up to --ray-retries times, then failed."""
        from emopipe.pipeline.archive import SourceResult

        self.attempts[source.key] = self.attempts.get(source.key, 0) + 1
        if self.attempts[source.key] > self.config.ray_retries:
            self.record(SourceResult.failed_before(source, why.format(self.attempts[source.key]), kind))
        else:
            self.pending.appendleft(source)

    def _hand_out(self) -> None:
        """Sources to the workers that ask, the least laden first: one that holds none gets one; one that holds
        some (its chain reads the next ahead) only while enough wait for every worker to hold as many, so the last
        sources are not queued behind one worker while another idles, nor all taken before the others are warm."""
        alive = self.crew.alive()
        for worker in sorted((w for w in alive if w.asking), key=lambda w: len(w.taken)):
            if not self.pending:
                return
            if worker.taken and len(self.pending) < len(worker.taken) * len(alive):
                continue
            source = self.pending.popleft()
            worker.taken[source.key] = source
            worker.sent_at[source.key] = time.time()
            self.parts.handed_out(source)
            worker.asking = False
            with contextlib.suppress(OSError):  # (gone meanwhile: its pipe's end says so, and the source goes on)
                worker.pipe.send(source)

    def _listen(self, timeout: float = POLL_S) -> None:
        """Hear every worker that has spoken (waiting up to ``timeout`` for one), then redraw the bar."""
        pipes: dict[Any, _Worker] = {w.pipe: w for w in self.crew.alive()}
        for pipe in wait(list(pipes), timeout=timeout):
            self._hear(pipes[pipe])
        if self.bar is not None:
            alive = self.crew.alive()
            parts = self.parts.unjoined()
            frames = sum(r.frames for r in [*self.results, *parts]) + \
                sum(w.frames - w.recorded["frames"] for w in alive)
            faces = sum(r.faces for r in [*self.results, *parts]) + sum(w.faces - w.recorded["faces"] for w in alive)
            self.bar.show(frames, faces, None, workers=len(alive))

    # -- the results ---------------------------------------------------------------------------------------------

    def record(self, result: SourceResult, worker: _Worker | None = None) -> None:
        """A source's manifest line, then its files' names (the rows last), as one process does them. A part of a
        video is kept until its video's parts are all in, which are then joined into the video's line and files."""
        from emopipe.pipeline.archive import publish
        from emopipe.pipeline.drivers import signals_held

        if result.part is not None:
            self._record_part(result, worker)
            return
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

    def _record_part(self, result: SourceResult, worker: _Worker | None) -> None:
        """A part's result: once its video's parts are all in, the video's line and files, joined from them (its
        parts' files removed)."""
        if worker is not None:
            for figure in ("frames", "faces"):
                worker.recorded[figure] += getattr(result, figure)
        self.parts.take(result, self.record)  # (a Ctrl-C while joined: the video is recorded interrupted)

    def _record_left(self) -> None:
        """Cut off: the sources the workers held, as their files say (those not begun get no line). A video whose
        parts went out but are not all in is interrupted (``--resume`` runs it again)."""
        from emopipe.pipeline.drivers import as_left

        for worker in self.crew.workers.values():
            with contextlib.suppress(EOFError, OSError):  # what a worker said before it was killed is kept
                while not worker.pipe.closed and worker.pipe.poll():
                    kind, body = worker.pipe.recv()
                    if kind == "result":
                        worker.taken.pop(body.part or body.source, None)
                        self.record(body, worker)
                    elif kind == "entered":
                        worker.entered = body
            for source in worker.taken.values():
                if source.part is not None:
                    continue
                left = as_left(source, worker.sent_at[source.key], entered=worker.entered == source.key)
                if left is not None:
                    self.record(left)
            worker.taken.clear()
        for left in self.parts.left():
            self.record(left)

    # -- the run -------------------------------------------------------------------------------------------------

    def run(self) -> ManyOutcome:
        from emopipe.pipeline.archive import SourceResult
        from emopipe.pipeline.many import finish_many

        interrupted = False
        try:
            while self.pending or any(w.taken for w in self.crew.workers.values()):
                self._hand_out()
                if not self.crew.alive():
                    break
                self._listen()
            for source in list(self.pending):  # no worker could start (each died starting, retries spent)
                self.parts.handed_out(source)  # (a video's parts: joined into its one failed line)
                self.record(SourceResult.failed_before(source, f"no worker started: {self.start_deaths} died while "
                                                       "starting", "WorkerDied"))
            self.pending.clear()
            self.timeline["done_s"] = time.perf_counter() - self.started
            self._dismiss()
        except KeyboardInterrupt:
            interrupted = True
            self.crew.kill()
            self._record_left()
            if not self.results:  # nothing begun: as one process cut off while its models load (no line, no summary)
                raise
        finally:
            if self.bar is not None:
                self.bar.close()
        return finish_many(self.plan, self.plan.skipped + self.results, None, interrupted,
                           time.perf_counter() - self.started, processes=self._facts())

    def _dismiss(self) -> None:
        """Every source recorded: each worker told there is no more; its pipeline ends, it says goodbye (its
        summary) and its process ends on its own. Goodbyes are waited for BYE_WAIT_S (with --pushgateway, each, up to
        KILL_WAIT_S); a worker still ending then is left to end (killed as this process ends, where it does first:
        nothing of the run is left to it)."""
        wait_s = KILL_WAIT_S if self.config.pushgateway else BYE_WAIT_S
        deadline = time.monotonic() + wait_s
        while any(not (w.gone or w.said_bye) for w in self.crew.workers.values()):
            left = deadline - time.monotonic()
            if left <= 0:
                break
            for worker in self.crew.alive():
                if worker.asking:
                    worker.asking = False
                    with contextlib.suppress(OSError):
                        worker.pipe.send(None)
            self._listen(min(POLL_S, left))
        for worker in self.crew.workers.values():
            worker.pipe.close()  # (what is left of a worker's exit is its own; one not yet told ends as its pipe does)

    def _facts(self) -> dict[str, Any]:
        """``summary.json``'s ``processes`` section: the workers, where their time went, their pipelines."""
        from emopipe.pipeline.drivers import perf_counter_at

        workers = self.crew.workers.values()
        firsts = [w.first_frame_at for w in workers if w.first_frame_at is not None]
        if firsts:  # the first row any worker wrote, on this process's clock
            self.timeline["first_row_s"] = perf_counter_at(min(firsts)) - self.started
        run = [w for w in workers if w.needed]
        return {"workers": self.count, "started": len(run), "worker_failures": self.failures, "mps": self.mps,
                "devices": sorted({w.identity.get("device", "") for w in workers} - {""}),
                "timeline": {k: round(v, 3) for k, v in self.timeline.items()},
                "per_worker": {w.name: {**w.recorded, "pid": w.process.pid, "died": w.gone and not w.said_bye}
                               for w in run},
                "metrics": {w.name: w.identity["metrics"] for w in workers if w.identity.get("metrics")},
                "worker_summaries": [{"name": w.name, **w.identity, **w.summary} for w in workers if w.summary]}


# -- a worker process ------------------------------------------------------------------------------------------------


class _Teller:
    """A worker's end of its pipe: messages sent whole, from whichever thread (the feeder, the writer)."""

    def __init__(self, pipe: Connection) -> None:
        self.pipe = pipe
        self._lock = threading.Lock()

    def __call__(self, kind: str, body: Any = None) -> None:
        with self._lock, contextlib.suppress(OSError):  # (the driver gone: this process ends with it)
            self.pipe.send((kind, body))


# What a worker's goodbye carries of its pipeline's summary (summary.json's ``processes.worker_summaries``): its
# time from the pipeline's start to its end and the rates over it, the frames' latencies, the stages' busy seconds.
WORKER_FIGURES = ("seconds", "fps", "faces_per_s", "decoder", "first_frame_latency_s", "steady_latency_p50_s",
                  "steady_latency_p99_s", "stage_seconds", "startup")


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
        if self.first_frame_at is None:  # (told with the first message: the run's first row is any worker's first)
            self.first_frame_at = time.time()
        if time.monotonic() - self._told >= PROGRESS_S:
            self._told = time.monotonic()
            self.tell("progress", (self.frames, self.faces, self.first_frame_at))


class _FirstSource:
    """A worker's first source, asked for before its engines load (the driver planned the run while this process
    imported PyTorch: it answers at once) and opened ahead on a thread while they load — its container read, its
    stream probed (:func:`~emopipe.io.nvdec.probe_ahead`) — so that the engines' warm-up warms the detector for its
    frame size with EmoNet's and its reader starts decoding at once. Nothing may decode once the warm-up has begun (a
    CUDA graph captured while NVDEC decoded killed workers, session 22): a probe under way then is waited for, one not
    begun is left to the source's reader."""

    def __init__(self, pipe: Connection, tell: _Teller, config: RunConfig) -> None:
        self._lock = threading.Lock()
        self._warming = False  # the warm-up has begun: no probe from now
        self._size: tuple[int, int] | None = None
        self.source: PlannedSource | None = None
        tell("want")
        self._thread = threading.Thread(target=self._take, args=(pipe, config), name="emopipe-first", daemon=True)
        self._thread.start()

    def _take(self, pipe: Connection, config: RunConfig) -> None:
        from emopipe.io.nvdec import probe_ahead
        from emopipe.model.devices import resolve_device

        try:
            source = pipe.recv()
        except (EOFError, OSError):  # (the driver gone: this process ends with it)
            source = None
        with self._lock:
            self.source = source
            if source is not None and not self._warming:
                self._size = probe_ahead(source.uri, decoder=config.decoder, device=resolve_device(config.device))

    def frame_size(self) -> tuple[int, int] | None:
        """Its frames' (height, width) if it came and was probed before the warm-up (which asks this as it begins)."""
        with self._lock:
            self._warming = True
            return self._size

    def taken(self) -> PlannedSource | None:
        """The first source (once it has come), or None: the driver had none for this worker."""
        self._thread.join()
        return self.source


def serve(pipe: Connection, *, began: float, config: RunConfig, cwd: str, name: str, metrics_port: int | None,
          builders: str, log_level: int) -> None:
    """A worker process's life, once :mod:`emopipe.process_worker` has imported PyTorch: its Analyzer built and
    warmed, then one pipeline over the sources it asks the driver for, one at a time, until the driver says there
    are no more. ``began``: when its process started (its ``ready_s`` counts from there)."""
    from emopipe.pipeline.drivers import failed_in_worker, log_as_worker, reported
    from emopipe.pipeline.many import MANY_SOURCES

    os.environ.setdefault(cudnn_plans.BUILDERS_VARIABLE, builders)
    log_as_worker(name, log_level)
    logging.getLogger(weights.YOURS_LOGGER).setLevel(max(log_level, logging.ERROR))  # (the driver said it)
    if Path(cwd).is_dir():  # relative sources and outputs mean what they mean to the driver
        os.chdir(cwd)
    tell = _Teller(pipe)
    mps: list[bool | None] = []  # (asked on a thread: the daemon's answer takes a subprocess)
    asking = threading.Thread(target=lambda: mps.append(cuda_context.mps_running(tries=3)
                                                         if config.device != "cpu" else None), daemon=True)
    asking.start()
    identity: dict[str, Any] = {"pid": os.getpid(), "device": config.device}
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

        first = _FirstSource(pipe, tell, config)
        analyzer = Analyzer(config).open(frame_size=first.frame_size)
        run_config = analyzer.source_config(MANY_SOURCES, output=None, summary=None)
    except EmopipeError as exc:
        tell("error", exc)
        return
    except BaseException as exc:  # (a bug: said in one line to the driver, which says it and goes on without it)
        tell("failed", reported(exc, f"{name} could not start: "))
        logger.debug("its start failed", exc_info=True)
        os._exit(1)
    asking.join()
    identity["mps"] = mps[0] if mps else None
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
            inside = chain.readings[position].planned.key if position < chain.started else None
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
    source = first.taken()
    if source is None:  # (the driver had none left for it)
        chain.end_feed()
    else:
        state["taken"] = 1
        chain.extend([source])
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
    # (its pipeline's rates, as a Ray worker's summary gives them: what each worker did, in summary.json)
    tell("bye", {"frames": counter.frames, "faces": counter.faces, "first_frame_at": counter.first_frame_at,
                 **{key: facts.get(key) for key in WORKER_FIGURES}})
    logging.shutdown()
    os._exit(0)  # (every source's files are written, the driver renames them; Python's own exit would unload PyTorch)


__all__ = ["run_on_processes"]
