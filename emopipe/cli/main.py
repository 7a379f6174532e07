"""Command line: ``emopipe SOURCE`` runs the pipeline; ``emopipe models|bench|export-onnx`` manage it.

Errors a user can act on print one line and exit with the code documented in
:mod:`emopipe.errors`; ``--debug`` adds the traceback.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Sequence

from emopipe._version import __version__
from emopipe.cli.parsing import new_parser
from emopipe.errors import INTERRUPTED_EXIT_CODE, EmopipeError, UsageError

logger = logging.getLogger("emopipe")


# -- emopipe models ------------------------------------------------------------------------------

def _models_parser() -> argparse.ArgumentParser:
    parser = new_parser("emopipe models", "List, verify and download the model weights.")
    parser.add_argument("--models-dir", help="models directory (default: $EMOPIPE_HOME, the checkout's models/, "
                                             "or ~/.cache/emopipe)")
    sub = parser.add_subparsers(dest="action", required=True)
    sub.add_parser("list", help="show each model file: present and verified, missing, or mismatching")
    fetch = sub.add_parser("fetch", help="download (and verify) one model, or all of them")
    fetch.add_argument("names", nargs="*", help="manifest names (default: all)")
    fetch.add_argument("--no-progress", action="store_true", help="no progress bar")
    return parser


def _run_models(args: argparse.Namespace) -> int:
    from emopipe.model import weights

    directory = weights.models_dir(args.models_dir)
    entries = weights.load_manifest()
    if args.action == "list":
        print(f"models directory: {directory}")
        print(f"{'name':<24} {'state':<9} {'file':<22} licence")
        for entry in entries.values():
            state = weights.status(entry, directory).state
            print(f"{entry.name:<24} {state:<9} {entry.file:<22} {entry.licence.split(':')[0]}")
        return 0
    names = args.names or list(entries)
    unknown = [n for n in names if n not in entries]
    if unknown:
        raise UsageError(f"unknown model(s): {', '.join(unknown)}; known: {', '.join(entries)}")
    for name in names:
        path = weights.ensure(name, directory, progress=not args.no_progress)
        print(f"{name}: {path} (verified)")
    return 0


# -- dispatch --------------------------------------------------------------------------------------

def _commands() -> dict[str, tuple[Callable[[], argparse.ArgumentParser], Callable[[argparse.Namespace], int]]]:
    from emopipe.cli import bench
    from emopipe.engines import export

    return {
        "models": (_models_parser, _run_models),
        "bench": (bench.build_parser, bench.run),
        "export-onnx": (export.build_parser, export.run),
    }


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
    commands = _commands()
    if argv and argv[0] in commands:
        build, run = commands[argv[0]]
        argv = argv[1:]
    else:
        from emopipe.cli import run as run_command

        build, run = run_command.build_parser, run_command.run
        if not argv or argv[0] in ("-h", "--help"):
            build().print_help()
            print("\nother commands: " + ", ".join(f"emopipe {c}" for c in commands) + " (each with --help)")
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
