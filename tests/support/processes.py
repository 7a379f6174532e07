"""Helpers for tests that drive emopipe as a child process."""

from __future__ import annotations

import os
import signal
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
