"""The many-source command on a Ray cluster: each worker an :class:`emopipe.Analyzer`, warmed once.

The driver (the ``emopipe ... --ray`` process) plans the run exactly as one process does
(:meth:`Analyzer.plan_many`: the sources, their output files, the manifest, ``--resume``), starts one Ray actor
per GPU (``--ray-gpus-per-worker`` for fractions; CPU workers on a cluster without GPUs), and hands the sources
out dynamically, a few at a time, largest file first, so one long video never leaves the other GPUs idle. Each
worker runs its share through one pipeline (:meth:`Analyzer.process`) and writes the rows files itself, under
their partial names until complete; the driver appends each source's manifest line as results come back and
writes ``summary.json``. A worker that dies (killed, out of memory, node lost) is replaced and its unfinished
sources go to another worker, up to ``--ray-retries`` times each; a source redone replaces its partial file, so no
row is ever duplicated. The output folder must be storage every worker sees at the same path (docs/cluster.md).
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from emopipe.api import Analyzer, ManyOutcome, finish_many, report_many
from emopipe.config import RunConfig
from emopipe.errors import EmopipeError, UsageError
from emopipe.pipeline.archive import PlannedSource, SourceResult

logger = logging.getLogger(__name__)

LOCAL = "local"  # --ray local: start a Ray instance on this machine for the run
WORKER_NAME = "emopipe-worker-{}"  # actor names, as the Ray dashboard shows them


@dataclass(frozen=True)
class RayOptions:
    address: str = "auto"  # a cluster's address, "auto" (RAY_ADDRESS or the local cluster), or "local"
    workers: int | None = None  # default: one per GPU of the cluster (per CPU, up to 8, without GPUs)
    gpus_per_worker: float | None = None  # default: 1 where the cluster has GPUs, else 0
    retries: int = 2  # times a source is given to another worker after its worker died
    chunk: int | None = None  # sources handed to a worker at a time (default: guided, up to 16, 1 at the end)

    @classmethod
    def from_config(cls, config: RunConfig) -> RayOptions:
        return cls(address=config.ray or "auto", workers=config.ray_workers,
                   gpus_per_worker=config.ray_gpus_per_worker, retries=config.ray_retries)


class Worker:
    """One Ray actor: an Analyzer built and warmed when the actor starts, then any number of shares."""

    def __init__(self, config: RunConfig, cwd: str | None = None) -> None:
        logging.basicConfig(level=logging.INFO, format="emopipe worker: %(message)s")
        if cwd and Path(cwd).is_dir():  # relative sources and outputs mean what they mean to the driver
            os.chdir(cwd)
        self.config = config
        self.where = f"{socket.gethostname()}:{os.getpid()}"
        self.error: EmopipeError | None = None
        self.analyzer = Analyzer(config)
        try:
            self.analyzer.open()
        except EmopipeError as exc:  # (weights missing, a bad option): the driver reports it as one process would
            self.error = exc

    def ready(self) -> EmopipeError | None:
        """None once the engines are built and warm; else the user error that stopped them."""
        return self.error

    def process(self, share: Sequence[PlannedSource]) -> dict[str, Any]:
        """Run ``share`` (rows files and per-source summaries written here); the results go back to the driver."""
        if self.error is not None:
            raise self.error
        config = self.analyzer.source_config("many-sources.mp4", output=None, summary=None)
        results, summary, interrupted = self.analyzer.process(share, config)
        return {"results": results, "summary": summary.as_dict(), "interrupted": interrupted, "worker": self.where}


def _connect(address: str) -> None:
    import ray

    if ray.is_initialized():
        return  # e.g. a notebook or a test that started Ray itself
    if address == LOCAL:
        ray.init(include_dashboard=False, logging_level=logging.WARNING, log_to_driver=False)
    else:
        try:
            ray.init(address=address, logging_level=logging.WARNING, log_to_driver=False)
        except ConnectionError as exc:
            raise UsageError(f"--ray {address}: no Ray cluster there ({exc}); start one (ray start --head) or use "
                             "--ray local") from None


def _sizing(options: RayOptions) -> tuple[int, float, float]:
    """(workers, GPUs per worker, CPUs per worker) for the cluster Ray sees."""
    import ray

    resources = ray.cluster_resources()
    gpus, cpus = float(resources.get("GPU", 0)), float(resources.get("CPU", 1))
    per_gpu = options.gpus_per_worker if options.gpus_per_worker is not None else (1.0 if gpus else 0.0)
    if per_gpu > 0 and gpus < per_gpu:
        raise UsageError(f"--ray-gpus-per-worker {per_gpu}: the cluster has {gpus:g} GPU(s)")
    workers = options.workers or (int(gpus // per_gpu) if per_gpu else max(1, min(8, int(cpus))))
    cpus_per_worker = 1.0 if per_gpu else max(1.0, min(4.0, cpus // workers))
    return workers, per_gpu, cpus_per_worker


def run_on_ray(config: RunConfig, options: RayOptions, *, sources: Sequence[str] | None = None,
               output_dir: str | Path | None = None, on_result: Callable[[SourceResult], None] | None = None,
               progress: Callable[[int, int, int], None] | None = None) -> ManyOutcome:
    """The many-source run over Ray workers; the same files as :meth:`Analyzer.run_many` makes in one process.

    ``progress(sources_done, sources_total, workers_alive)`` is called as results come back.
    """
    import ray
    from ray.exceptions import RayActorError, RayTaskError

    if options.retries < 0:
        raise UsageError(f"--ray-retries must be ≥ 0, got {options.retries}")
    plan = Analyzer(config).plan_many(sources, output_dir)  # checked here, before any worker starts
    started = time.perf_counter()
    _connect(options.address)
    count, per_gpu, per_cpu = _sizing(options)
    actor_class = ray.remote(num_gpus=per_gpu, num_cpus=per_cpu, max_restarts=0)(Worker)
    spawned = 0

    def spawn() -> Any:
        nonlocal spawned
        actor = actor_class.options(name=WORKER_NAME.format(spawned), get_if_exists=False).remote(config, os.getcwd())
        spawned += 1
        return actor

    # largest first: when durations are unknown, file size stands for them
    pending = deque(sorted(plan.todo, key=lambda p: -_size(p.uri)))
    attempts: dict[str, int] = {}
    results: list[SourceResult] = []
    summaries: list[dict[str, Any]] = []
    idle = [spawn() for _ in range(min(count, max(1, len(pending))))]
    alive = len(idle)
    try:  # every worker built and warm (or the user error that stops them all, as in one process)
        errors = [e for e in ray.get([a.ready.remote() for a in idle]) if e is not None]
    except RayActorError:
        errors = []  # a worker that died while starting is replaced below, when its first share fails
    if errors:
        for actor in idle:
            ray.kill(actor, no_restart=True)
        raise errors[0]
    in_flight: dict[Any, tuple[Any, list[PlannedSource]]] = {}
    failures = 0
    interrupted = False

    def record(result: SourceResult) -> None:
        plan.manifest.append(result.as_dict())
        results.append(result)
        if on_result is not None:
            on_result(result)

    try:
        while pending or in_flight:
            while idle and pending:
                # guided: large shares while much is left (few pipeline restarts), single sources at the end
                # (no worker left with a long tail); at most 16, which bounds the work a dead worker loses
                size = options.chunk or max(1, min(16, len(pending) // (2 * count)))
                share = [pending.popleft() for _ in range(min(size, len(pending)))]
                actor = idle.pop()
                in_flight[actor.process.remote(share)] = (actor, share)
            if not in_flight:
                break
            done, _ = ray.wait(list(in_flight), num_returns=1)
            for ref in done:
                actor, share = in_flight.pop(ref)
                try:
                    reply = ray.get(ref)
                except RayActorError as exc:  # the worker died: its unfinished sources go elsewhere
                    failures += 1
                    logger.warning("a worker died (%s); its %d source(s) go to another worker",
                                   type(exc).__name__, len(share))
                    for source in share:
                        attempts[source.uri] = attempts.get(source.uri, 0) + 1
                        if attempts[source.uri] > options.retries:
                            record(SourceResult(source=source.uri, status="failed", error=f"its worker died "
                                                f"{attempts[source.uri]} time(s): {type(exc).__name__}",
                                                exit_code=1, kind="WorkerDied"))
                        else:
                            pending.appendleft(source)
                    idle.append(spawn())
                    continue
                except RayTaskError as exc:  # a bug in a worker (a user error is a failed source, not this)
                    cause = exc.cause if isinstance(exc.cause, EmopipeError) else None
                    for source in share:
                        record(SourceResult(source=source.uri, status="failed", error=str(cause or exc).splitlines()[0],
                                            exit_code=cause.exit_code if cause else 1,
                                            kind=type(cause).__name__ if cause else "WorkerError"))
                    idle.append(actor)
                    continue
                finished = {r.source for r in reply["results"]}
                for result in reply["results"]:
                    record(result)
                pending.extendleft(s for s in share if s.uri not in finished)  # (not expected: interrupted)
                summaries.append({**reply["summary"], "worker": reply["worker"]})
                idle.append(actor)
                if progress is not None:
                    progress(len(results), len(plan.todo), alive)
    except KeyboardInterrupt:
        interrupted = True
        for _, share in in_flight.values():  # (their workers are killed below: Ray cancels no actor task by force)
            for source in share:  # their rows stay under partial names: the next --resume redoes them
                record(SourceResult(source=source.uri, status="interrupted", exit_code=130))
    finally:
        for actor in idle + [a for a, _ in in_flight.values()]:
            ray.kill(actor, no_restart=True)
    outcome = finish_many(plan, plan.skipped + results, None, interrupted, time.perf_counter() - started,
                          ray={"workers": count, "gpus_per_worker": per_gpu, "worker_failures": failures,
                               "worker_summaries": summaries})
    report_many(plan, outcome)
    return outcome


def _size(uri: str) -> int:
    try:
        return Path(uri).stat().st_size
    except OSError:
        return 0


__all__ = ["LOCAL", "RayOptions", "Worker", "run_on_ray"]
