"""argparse for every emopipe command: one-line usage errors (exit 2) and defaults shown where they say something."""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING

from emopipe.errors import one_line

if TYPE_CHECKING:
    from _typeshed import SupportsWrite


def say(line: str) -> None:
    """One line on standard error in one write: ``print`` writes the text and its newline apart, and a thread's log
    line (Ray's, from the thread that joins a cluster) could fall between them. Never two: a newline in it (a file's
    name) is written ``\\n`` (:func:`~emopipe.errors.one_line`)."""
    sys.stderr.write(one_line(line) + "\n")
    sys.stderr.flush()


class _Parser(argparse.ArgumentParser):
    """argparse, but usage errors use our one-line format and exit code 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        # one line, as for every other error: the usage block would bury it (``--help`` shows it)
        unknown = message.removeprefix("unrecognized arguments: ")
        files = [word for word in unknown.split(" ") if word.startswith("-") and os.path.lexists(word)]
        if unknown != message and files:  # (a file named -x.mp4 is read as an option, as by every command)
            message += f" ({files[0]} is a file: give it as ./{files[0]}, or after --)"
        say(f"emopipe: error: {message} (see '{self.prog} --help')")
        raise SystemExit(2)

    def print_help(self, file: SupportsWrite[str] | None = None) -> None:
        # argparse's own printing swallows a failed write, so `emopipe run --help | head -1` exited 0 once the
        # help outgrew the buffer or output was unbuffered: a closed standard output must reach main (exit 141)
        (sys.stdout if file is None else file).write(self.format_help())


class _DefaultsFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows a default only where it says something: not for flags, unset options, or help that names it."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if action.default in (None, False, argparse.SUPPRESS) or "default" in text:
            return text
        return super()._get_help_string(action)


def _formatter(prog: str) -> argparse.HelpFormatter:
    return _DefaultsFormatter(prog, max_help_position=34)


def new_parser(prog: str, description: str) -> argparse.ArgumentParser:
    parser = _Parser(prog=prog, description=description, formatter_class=_formatter)
    parser.add_argument("--debug", action="store_true", help="show tracebacks and debug messages")
    parser.add_argument("-q", "--quiet", action="store_true", help="only warnings and errors on stderr")
    return parser
