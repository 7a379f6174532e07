"""Command line: ``emopipe SOURCE`` runs the pipeline; ``emopipe models|bench|export-onnx`` manage it;
``emopipe report`` reports rows files written earlier.

Errors a user can act on print one line and exit with the code documented in
:mod:`emopipe.errors`; ``--debug`` adds the traceback.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Sequence

from emopipe._version import __version__
from emopipe.errors import INTERRUPTED_EXIT_CODE, EmopipeError

logger = logging.getLogger("emopipe")


# -- dispatch --------------------------------------------------------------------------------------

# each command's module, imported only when that command runs (so `emopipe --help` loads no torch)
COMMANDS = {"models": "emopipe.cli.models", "bench": "emopipe.cli.bench", "export-onnx": "emopipe.cli.export",
            "report": "emopipe.cli.report", "run": "emopipe.cli.run"}


def _command(name: str) -> tuple[Callable[[], argparse.ArgumentParser], Callable[[argparse.Namespace], int]]:
    import importlib

    module = importlib.import_module(COMMANDS[name])
    return module.build_parser, module.run


def _configure_logging(debug: bool, quiet: bool) -> None:
    level = logging.DEBUG if debug else logging.WARNING if quiet else logging.INFO
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("emopipe: %(message)s"))
    root = logging.getLogger("emopipe")
    root.handlers[:] = [handler]
    root.setLevel(level)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in ("-V", "--version"):
        print(f"emopipe {__version__}")
        return 0
    others = [name for name in COMMANDS if name != "run"]
    if argv and argv[0] in others:
        build, run = _command(argv[0])
        argv = argv[1:]
    else:
        build, run = _command("run")
        if not argv or argv[0] in ("-h", "--help"):
            build().print_help()
            print("\nother commands: " + ", ".join(f"emopipe {c}" for c in others) + " (each with --help)")
            return 0 if argv else 2
    args = build().parse_args(argv)
    _configure_logging(args.debug, args.quiet)
    try:
        return run(args)
    except EmopipeError as exc:
        if args.debug:
            logger.exception("error")
        print(f"emopipe: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("emopipe: interrupted", file=sys.stderr)
        return INTERRUPTED_EXIT_CODE
    except Exception as exc:  # a bug: still one line unless --debug
        if args.debug:
            raise
        message = f"{type(exc).__name__}: {exc}".split("\n")[0]
        print(f"emopipe: internal error: {message} (rerun with --debug for the traceback)", file=sys.stderr)
        return 1
