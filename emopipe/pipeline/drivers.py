"""What a driver of worker processes needs, Ray's (:mod:`emopipe.cluster`) or this machine's (:mod:`emopipe.processes`):
Ctrl-C and SIGTERM held over the statements that must not be cut apart, a source cut off as its files say, a
worker's failure as a manifest line gives it, the workers' metrics ports. It loads no PyTorch (a driver loads none).
"""

from __future__ import annotations

import contextlib
import json
import logging
import signal
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from emopipe.errors import EmopipeError, LineFormatter, UsageError
from emopipe.io.records import partial_path
from emopipe.pipeline.archive import PlannedSource, SourceResult

logger = logging.getLogger(__name__)

CLOCK_SLACK_S = 1.0  # a file written after a share went out may carry a time this much earlier


class HeldSignals:
    """Ctrl-C and SIGTERM while a run starts (a local Ray starting, the workers spawned, the run planned) are held,
    and taken as the run begins (:meth:`take`): it then ends at once, as at any later moment (no source begun: none
    gets a line). Cut off before, it would leave a Ray started halfway and no manifest. (Not while a cluster is
    joined: that starts nothing here, and can wait a minute.) Held again once every source has its line, while Ray
    stops: cut off, it would leave Ray's processes running, and exit 130 for a run that is complete. A second signal
    meanwhile goes to the process's own handler at once (the command line's: exit 130 now). Only on the main thread,
    where Python handles signals; a signal the process ignores stays ignored."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self) -> None:
        self.signum: int | None = None
        self._before: dict[int, Any] = {}  # signal → the handler the process had

    def hold(self) -> None:
        self.signum = None
        if threading.current_thread() is not threading.main_thread():
            return
        for signum in self.SIGNALS:
            handler = signal.getsignal(signum)
            if handler not in (signal.SIG_IGN, None):  # (None: a handler set outside Python, left alone)
                self._before[signum] = handler
                signal.signal(signum, self._hold)

    def _hold(self, signum: int, frame: Any) -> None:
        if self.signum is None:
            self.signum = signum
            return
        self.release()
        self._deliver(signum)

    def release(self) -> None:
        """Give each signal back to the handler the process had."""
        for signum, handler in self._before.items():
            signal.signal(signum, handler)
        self._before.clear()

    def take(self) -> None:
        """Release the signals, and hand the one held (if any) to its handler: a KeyboardInterrupt, mostly."""
        self.release()
        signum, self.signum = self.signum, None
        if signum is not None:
            self._deliver(signum)

    def overrule(self, error: Exception) -> None:
        """For an error raised while a signal is held: the signal came first, so it is what ends the run (a
        KeyboardInterrupt: exit 130, as a signal at any other moment), the error said in the log. Nothing where
        no signal is held."""
        if self.signum is None:
            return
        logger.error("%s (after %s had asked the run to stop)", str(error).splitlines()[0] if str(error) else
                     type(error).__name__, signal.Signals(self.signum).name)
        raise KeyboardInterrupt from error

    @staticmethod
    def _deliver(signum: int) -> None:
        handler = signal.getsignal(signum)
        if callable(handler):
            handler(signum, None)  # the command line's: a KeyboardInterrupt (and the next signal exits at once)
        raise KeyboardInterrupt  # SIGTERM with no handler of the process's: ends the run as Ctrl-C does


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """Ctrl-C and SIGTERM held over a few statements that must not be cut apart (a result taken and its manifest
    line written), then taken: the KeyboardInterrupt comes after them, not between. Within a run's own hold
    (:class:`HeldSignals`: its start, its end) it leaves that hold alone."""
    if isinstance(getattr(signal.getsignal(signal.SIGINT), "__self__", None), HeldSignals):
        yield
        return
    held = HeldSignals()
    held.hold()
    try:
        yield
    finally:
        held.take()




def largest_first(todo: Sequence[PlannedSource]) -> list[PlannedSource]:
    """The order a driver hands sources out in: the largest files first (their durations unknown, a file's size
    stands for them), so the last to finish are short."""

    def size(source: PlannedSource) -> int:
        try:
            return Path(source.uri).stat().st_size
        except OSError:
            return 0

    return sorted(todo, key=lambda source: -size(source))


def perf_counter_at(wall: float) -> float:
    """A wall-clock time (``time.time()``, as workers report it) on this process's ``time.perf_counter()`` clock."""
    return wall - (time.time() - time.perf_counter())


def as_left(source: PlannedSource, since: float, entered: bool = False) -> SourceResult | None:
    """A source of a share cut off by Ctrl-C, as its files say (its result was never recorded): a worker leaves a
    source's files under their partial names for the driver to rename after the line, so mostly interrupted, with
    the rows it kept under the partial name (the next --resume redoes it). Complete only when its rows file has its
    final name and its summary is written since its share went out: the Ctrl-C came inside ``record``, after the
    renames (older files are an earlier attempt's, e.g. of a source that failed then; the rows take their name last,
    after the summary). None when its worker had not begun it (no rows written since its share went out: the
    pipeline was in an earlier source of its chain): no line, as one process writes none for a source it had not
    begun, and --resume takes it as new — unless ``entered``: its worker said its pipeline was in it (begun, no frame
    written yet), then interrupted with no rows, as one process records the source it was in."""
    since -= CLOCK_SLACK_S  # (a file's time comes from a coarser clock than time.time())
    with contextlib.suppress(OSError, ValueError):
        if source.summary.stat().st_mtime >= since and source.rows.stat().st_mtime >= since:
            facts = json.loads(source.summary.read_text())
            if facts.get("ended_early"):  # complete as far as it went: a failure, as the worker would have said
                return SourceResult(source=source.uri, status="failed", frames=facts.get("frames", 0),
                                    faces=facts.get("faces", 0), rows=facts.get("faces", 0),
                                    error=f"{source.uri}: input ended early: {facts['ended_early']}", exit_code=8,
                                    kind="InputTruncatedError",
                                    outputs={"rows": str(source.rows), "summary": str(source.summary)})
            return SourceResult(source=source.uri, status="ok", frames=facts.get("frames", 0),
                                faces=facts.get("faces", 0), rows=facts.get("faces", 0),
                                seconds=facts.get("seconds", 0.0),
                                outputs={"rows": str(source.rows), "summary": str(source.summary)})
    partial = partial_path(source.rows)
    begun = SourceResult(source=source.uri, status="interrupted", exit_code=130) if entered else None
    try:
        if partial.stat().st_mtime < since:  # an earlier attempt's (this run's worker never opened it for writing)
            return begun
        rows, frames = _rows_and_frames(partial, jsonl=source.rows.suffix != ".csv")
    except FileNotFoundError:
        return begun
    except OSError:  # (begun, its rows unreadable here)
        return SourceResult(source=source.uri, status="interrupted", exit_code=130)
    # a row is a face; the frames are those with a face (a frame without one leaves no row): at least that many
    return SourceResult(source=source.uri, status="interrupted", exit_code=130, rows=rows, faces=rows, frames=frames,
                        outputs={"rows": str(partial)})


def _rows_and_frames(path: Path, jsonl: bool) -> tuple[int, int]:
    """The complete rows of a rows file a worker was cut off writing, and the frames they are of (the interrupted
    line said 0 frames and 0 faces beside its rows: QA pass, session 39). A last line cut short is no row."""
    import csv

    rows, frames = 0, set()
    with open(path, encoding="utf-8", errors="replace", newline="") as file:
        if jsonl:
            for line in file:
                with contextlib.suppress(ValueError, TypeError, AttributeError):
                    frames.add(json.loads(line).get("frame"))
                    rows += 1
        else:
            for row in csv.DictReader(file):
                if None not in row and None not in row.values():  # (a line cut short has fewer fields)
                    frames.add(row.get("frame"))
                    rows += 1
    return rows, len(frames)




def reported(failure: BaseException | None, prefix: str = "") -> tuple[str, int, str]:
    """A failure in a worker as its source's manifest line gives it: the one-line message, the exit code and the
    kind — an emopipe error's own (as one process reports it), a bug's ``Type: message``, 1 and ``WorkerError``."""
    if isinstance(failure, EmopipeError):
        message, exit_code, kind = str(failure), failure.exit_code, type(failure).__name__
    else:
        message, exit_code, kind = f"{type(failure).__name__}: {failure}", 1, "WorkerError"
    return ((prefix + message).splitlines() or [""])[0], exit_code, kind


def failed_in_worker(result: SourceResult, failure: BaseException, worker: str) -> SourceResult:
    """The source a worker's pipeline failed in (its sink marked it interrupted as the pipeline stopped): failed,
    with the failure's one-line message and exit code; its rows so far stay under the partial name."""
    error, exit_code, kind = reported(failure, f"{worker}'s pipeline failed: ")
    return replace(result, status="failed", error=error, exit_code=exit_code, kind=kind)




def worker_metrics_port(base: int | None, index: int) -> int | None:
    """``--metrics-port P``: worker N serves on P+1+N (a replacement for a dead worker takes the next N); 0: each
    worker a free port of its own."""
    if base is None or base == 0:
        return base
    port = base + 1 + index
    if port > 65535:
        raise UsageError(f"--metrics-port {base}: worker {index} would serve on {port}, past 65535; choose a "
                         "lower port")
    return port


def log_as_worker(prefix: str, level: int) -> None:
    """A worker's own messages (emopipe's loggers) on its stderr at ``level``, each line after ``prefix``, as the
    command says its own; other libraries' stay at Python's default (warnings and errors). A handler on the root
    logger would show every library's INFO too: PyNvVideoCodec's says its NVENC version at each import, two lines a
    worker in the command's output."""
    handler = logging.StreamHandler()  # (stderr)
    handler.setFormatter(LineFormatter(f"{prefix}: %(message)s"))
    ours = logging.getLogger("emopipe")
    ours.handlers[:] = [handler]
    ours.setLevel(level)
    ours.propagate = False  # (a handler Ray's worker put on the root would say each line twice)
