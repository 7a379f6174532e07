"""Helpers for tests that drive emopipe as a child process."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path


def interruptible() -> None:
    """``preexec_fn`` that lets Ctrl-C (SIGINT) reach the child however the test run was started.

    A non-interactive shell starts background jobs with SIGINT ignored and children inherit that,
    and Python then installs no KeyboardInterrupt handler: the Ctrl-C tests would test nothing.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def end_processes_in(folder: Path) -> list[str]:
    """SIGKILL every process but this one whose working folder is ``folder`` or below it — e.g. what a killed
    ``--ray local`` driver's Ray leaves running (its agents outlive it) — and return their names. Linux only (/proc);
    elsewhere nothing."""
    folder = folder.resolve()
    ended = []
    for entry in Path("/proc").glob("[0-9]*"):
        pid = int(entry.name)
        if pid == os.getpid():
            continue
        try:
            cwd = Path(os.readlink(entry / "cwd"))
            if cwd == folder or folder in cwd.parents:
                name = (entry / "comm").read_text().strip()
                os.kill(pid, signal.SIGKILL)
                ended.append(name)
        except OSError:  # gone meanwhile, a zombie (no cwd), or another user's
            continue
    return ended


def wait_for(predicate, timeout: float, proc: subprocess.Popen, log: Path, what: str, tail: int = 4000):
    """``predicate()``'s first true value, polled until ``timeout`` (a bound on a hang, not a speed claim) or until
    ``proc`` ends; else an AssertionError with ``what`` and the end of the process's ``log``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        if proc.poll() is not None:
            break
        time.sleep(0.2)
    raise AssertionError(f"{what} (emopipe exit code {proc.poll()})\n--- log ---\n{log.read_text()[-tail:]}")



def stderr_until(process: subprocess.Popen, prefix: str) -> list[str]:
    """The lines ``process`` wrote to its piped stderr, read up to the first that starts with ``prefix`` (that one
    last); an AssertionError with what it wrote if it ended without one."""
    assert process.stderr is not None
    seen = []
    for line in process.stderr:  # (ends with the process, should it end before the line)
        seen.append(line)
        if line.startswith(prefix):
            return seen
    raise AssertionError(f"no line starting {prefix!r}:\n{''.join(seen)}")
