"""Errors a user can act on, each with the exit code the command line returns for it.

The codes are part of the interface (scripts rely on them) and are listed in the README:

====  ==========================================================================
code  meaning
====  ==========================================================================
0     success (also: a video with no faces — the output then has only a header)
1     unexpected internal error (a bug: rerun with ``--debug`` for the traceback)
2     invalid command line or option value
3     input not found
4     input unreadable: not a video or image, no decodable frame
5     output cannot be written (also: an output, or output folder, another emopipe run is writing now)
6     model weights missing, failing verification, or not fitting the model
7     camera or network stream unavailable
8     input ended early: truncated or corrupt; results up to that point were written
9     several sources: some failed (the run manifest says which and why); the others completed
10    the GPU ran out of memory (the line says what to change: a smaller batch, fewer processes on it)
130   interrupted (Ctrl-C or SIGTERM); results up to that point were written
141   standard output closed by its reader (``| head``): the command stopped quietly (128 + SIGPIPE's 13)
====  ==========================================================================
"""

from __future__ import annotations

import logging
import re


class EmopipeError(Exception):
    """Base class: the message is one line a user can act on. ``outcome``: where an ``Analyzer`` run raised it after
    writing every output (a truncated file, a stream lost for good), what the run would have returned."""

    exit_code = 1
    outcome: object | None = None


class UsageError(EmopipeError, ValueError):
    exit_code = 2


class InputNotFoundError(EmopipeError):
    exit_code = 3


class InputUnreadableError(EmopipeError):
    exit_code = 4


class OutputError(EmopipeError):
    exit_code = 5


class WeightsError(EmopipeError):
    exit_code = 6


class CheckpointError(WeightsError):
    """A checkpoint file that cannot be read or does not fit the network."""


class OnnxModelError(WeightsError):
    """An ONNX model file that cannot be read, does not fit the run, or disagrees with PyTorch."""


class SourceUnavailableError(EmopipeError):
    exit_code = 7


class InputTruncatedError(EmopipeError):
    exit_code = 8


SOME_SOURCES_FAILED_EXIT_CODE = 9
GPU_OUT_OF_MEMORY_EXIT_CODE = 10  # not a bug (1): a script may retry with a smaller --batch-size
INTERRUPTED_EXIT_CODE = 130
STDOUT_CLOSED_EXIT_CODE = 141  # what a shell reports for a command killed by SIGPIPE (128 + 13)


class Interrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM ended an ``Analyzer`` run (``run``, ``run_many``, ``run_fleet``) after it had written every
    row it computed, its summary and manifest: ``outcome`` is what the run would have returned. A KeyboardInterrupt,
    so that a script's loop over sources stops there as any Python program stops at Ctrl-C (the run returning its
    outcome let the loop go on to the next source)."""

    exit_code = INTERRUPTED_EXIT_CODE

    def __init__(self, outcome: object) -> None:
        super().__init__("interrupted: every row computed until then was written")
        self.outcome = outcome


_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")  # (a tab stays: it keeps a line one line)


def one_line(text: str) -> str:
    """``text`` on one line, as every message is: a control character in it (the newline of a file's name, an escape
    that would work the terminal) written as Python writes it in a string, ``\\n``."""
    return _CONTROL.sub(lambda found: repr(found.group())[1:-1], text)


class LineFormatter(logging.Formatter):
    """Each message on one line (:func:`one_line`): ``failed clip\\n2.mp4 — …`` was two, the second no message."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        return one_line(super().formatMessage(record))
