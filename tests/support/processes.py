"""Helpers for tests that drive emopipe as a child process."""

from __future__ import annotations

import signal


def interruptible() -> None:
    """``preexec_fn`` that lets Ctrl-C (SIGINT) reach the child however the test run was started.

    A non-interactive shell starts background jobs with SIGINT ignored and children inherit that,
    and Python then installs no KeyboardInterrupt handler: the Ctrl-C tests would test nothing.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)
