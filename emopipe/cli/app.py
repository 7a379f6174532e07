"""Command line: ``emopipe SOURCE`` runs the pipeline; ``emopipe models|bench|export-onnx`` manage it;
``emopipe report`` reports rows files written earlier.

Errors a user can act on print one line and exit with the code documented in
:mod:`emopipe.errors`; ``--debug`` adds the traceback.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import faulthandler
import logging
import os
import re
import select
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import NoReturn

from emopipe._version import __version__
from emopipe.cli.parsing import say
from emopipe.errors import (
    GPU_OUT_OF_MEMORY_EXIT_CODE,
    INTERRUPTED_EXIT_CODE,
    STDOUT_CLOSED_EXIT_CODE,
    EmopipeError,
    LineFormatter,
)

logger = logging.getLogger("emopipe")


# -- dispatch --------------------------------------------------------------------------------------

# each command's module, imported only when that command runs (so `emopipe --help` loads no torch)
COMMANDS = {"models": "emopipe.cli.models", "bench": "emopipe.cli.bench", "export-onnx": "emopipe.cli.export",
            "report": "emopipe.cli.report", "run": "emopipe.cli.run"}


def _command(name: str) -> tuple[Callable[[], argparse.ArgumentParser], Callable[[argparse.Namespace], int]]:
    import importlib

    module = importlib.import_module(COMMANDS[name])
    return module.build_parser, module.run


_BYTECODE: str | None = None  # where the command's compiled Python modules are kept (emopipe.cli.bytecode)
_INTERRUPTED = threading.Event()  # a first Ctrl-C or SIGTERM was seen: the run is finishing its files
_PROCESS_ENDS = threading.Event()  # the emopipe command runs: the process ends once the run returns (run_and_exit)
# Every output is committed when the run returns: what is left (threads that are not daemons, exit handlers — NVDEC's
# decoders ended among them) may not hold the process longer. Past this, every thread's stack is printed and the
# process ends with status 1 (faulthandler's watchdog, which needs no interpreter lock: a native call that hangs
# holding it cannot stop it). A GPU run over a folder did not end after its summary line, once (session 38, s38h).
EXIT_GRACE_S = 60.0


def process_ends_after_run() -> bool:
    """Whether this process ends when the run returns (the ``emopipe`` command, not :func:`main` in a process of
    yours): then what the run holds (engines, GPU memory) goes with the process, and letting it go first — a full
    collection of the heap, 0.2 s on the CPU machine — would only delay the end."""
    return _PROCESS_ENDS.is_set()


def _on_signal(signum: int, frame: object) -> None:
    """The first Ctrl-C or SIGTERM ends the run in order (KeyboardInterrupt: rows written, files closed, exit 130);
    a second one means now: exit 130 at once. Its rows are still under their partial names, so nothing complete
    is lost, and the process never dies by the signal (where a KeyboardInterrupt in the interpreter's shutdown
    would)."""
    if _INTERRUPTED.is_set():
        os.write(2, b"emopipe: interrupted again: exiting now\n")
        os._exit(INTERRUPTED_EXIT_CODE)
    _INTERRUPTED.set()
    raise KeyboardInterrupt


def _handle_signals() -> None:
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, _on_signal)
        signal.signal(signal.SIGTERM, _on_signal)


def _configure_logging(debug: bool, quiet: bool) -> None:
    level = logging.DEBUG if debug else logging.WARNING if quiet else logging.INFO
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(LineFormatter("emopipe: %(message)s"))
    root = logging.getLogger("emopipe")
    root.handlers[:] = [handler]
    root.setLevel(level)


def run_and_exit(argv: Sequence[str] | None = None) -> NoReturn:
    """The ``emopipe`` command (its console script and ``python -m emopipe``): :func:`main`, then the process
    ends once its threads are done and its exit handlers have run.

    Python's own exit would go on to unload every module the run imported (PyTorch's, OpenCV's, Ray's): over a
    second on the CI machine, for nothing — by then main() has committed and closed every output. (Only the
    command ends so; main() called in a process of yours returns as any function does.)"""
    global _BYTECODE
    # a native crash (a library's segmentation fault or abort) prints every thread's Python stack on standard error,
    # for the bug report, before the process ends (Python's -X faulthandler; Ray's workers enable it themselves)
    with contextlib.suppress(RuntimeError, ValueError, OSError):  # (no standard error to print on)
        faulthandler.enable(all_threads=True)
    from emopipe.cli.bytecode import keep_bytecode  # (before anything imports PyTorch, NumPy or OpenCV)
    from emopipe.model.places import cache_root

    _BYTECODE = keep_bytecode(cache_root() / "python")
    _PROCESS_ENDS.set()
    code = _run_command(argv)  # (not main: the command line's signal handlers stay, so a second signal exits
    # at once also while the threads below finish and the exit handlers run)
    with contextlib.suppress(RuntimeError, ValueError, OSError):
        faulthandler.dump_traceback_later(EXIT_GRACE_S, exit=True)
    try:
        _end_threads()
    except KeyboardInterrupt:  # Ctrl-C while waiting for them: wait no more
        code = INTERRUPTED_EXIT_CODE
    try:
        atexit._run_exitfuncs()  # the exit handlers (logging's flush among them), as at any exit
    except KeyboardInterrupt:
        code = INTERRUPTED_EXIT_CODE
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # (a closed pipe: nothing more can be said there)
            stream.flush()
    os._exit(code)


def _end_threads() -> None:
    """Python's own exit's first step: tell the thread pools to end (``concurrent.futures`` registers that with
    ``threading``, not ``atexit``), then wait for every thread that is not a daemon.

    Joining the threads alone waited for ever on a pool's idle workers — the frame copiers' pool of a GPU run
    decoding on the CPU (s39a: every such command hung after its summary)."""
    shutdown = getattr(threading, "_shutdown", None)  # (CPython's; the exit calls it before the atexit handlers)
    if shutdown is not None:
        shutdown()
        return
    for thread in threading.enumerate():  # (another Python: join them as its exit would)
        if thread is not threading.current_thread() and not thread.daemon:
            thread.join()


def main(argv: Sequence[str] | None = None) -> int:
    """The command, called in a process of yours: its exit code returned, and the SIGINT and SIGTERM handlers it
    set for the run given back after, for the command line's would exit your process at a second signal; so is the
    ``emopipe`` logger as it was (the command's writes ``emopipe: …`` lines to standard error)."""
    with _signal_handlers_given_back(), _logger_given_back():
        return _run_command(argv)


@contextlib.contextmanager
def _logger_given_back() -> Iterator[None]:
    logger = logging.getLogger("emopipe")
    handlers, level, propagate = list(logger.handlers), logger.level, logger.propagate
    try:
        yield
    finally:
        logger.handlers[:] = handlers
        logger.setLevel(level)
        logger.propagate = propagate


@contextlib.contextmanager
def _signal_handlers_given_back() -> Iterator[None]:
    before = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        if threading.current_thread() is threading.main_thread():  # (elsewhere none was set: _handle_signals)
            for signum, handler in before.items():
                if handler is not None:  # (None: one set outside Python, which Python cannot set back)
                    signal.signal(signum, handler)
        _INTERRUPTED.clear()  # a later run starts unarmed: its first signal finishes its files


def _run_command(argv: Sequence[str] | None) -> int:
    try:
        try:
            return _main(argv)
        finally:  # what is still buffered goes out now (also after argparse's --help): a reader gone is found here
            sys.stdout.flush()
    except BrokenPipeError:  # (only standard output's reach here: see _main)
        return _stdout_closed()


def _stdout_closed() -> int:
    """Standard output's reader has gone (``emopipe models list | head -1``): nobody wants the rest, so the command
    ends quietly with the status a shell gives a command killed by SIGPIPE, as Python's docs advise (its
    signal module, "Note on SIGPIPE"): later writes and flushes go to /dev/null rather than fail again."""
    logger.debug("standard output was closed by its reader: stopped")
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    return STDOUT_CLOSED_EXIT_CODE


def _stdout_reader_gone() -> bool:
    """Whether standard output is a pipe or socket whose reader has gone (poll reports an error or hang-up on it),
    so a BrokenPipeError from elsewhere (a pipe to another process) is still reported as the bug it is."""
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))
    except (OSError, ValueError, AttributeError):  # no file descriptor (a stream of the caller's own)
        return False


def _gpu_out_of_memory(exc: BaseException) -> bool:
    """PyTorch's CUDA out-of-memory error (told by its class, without importing PyTorch for it), or the CUDA error
    a kernel or the CUDA context meets when the GPU has no memory left (``AcceleratorError: CUDA error: out of
    memory``: PyTorch's allocator was not asked; seen with 0.3 GiB free on an H200)."""
    if type(exc).__module__.split(".")[0] != "torch":
        return False
    return type(exc).__name__ == "OutOfMemoryError" or str(exc).startswith("CUDA error: out of memory")


def _main(argv: Sequence[str] | None) -> int:
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
    if _BYTECODE:
        logger.debug("Python's compiled modules: %s", _BYTECODE)
    _handle_signals()
    try:
        code = run(args)
        if code == INTERRUPTED_EXIT_CODE:  # interrupted, and the run finished its files: a second signal exits
            _INTERRUPTED.set()
        return code
    except EmopipeError as exc:
        if args.debug:
            logger.exception("error")
        say(f"emopipe: error: {exc}")
        return exc.exit_code
    except KeyboardInterrupt:
        _INTERRUPTED.set()
        say("emopipe: interrupted")
        return INTERRUPTED_EXIT_CODE
    except Exception as exc:  # a bug: still one line unless --debug
        if isinstance(exc, BrokenPipeError) and _stdout_reader_gone():
            raise  # not a bug: the reader of standard output has gone (main ends quietly)
        if args.debug:
            raise
        if _gpu_out_of_memory(exc):  # not a bug: the options (or other programs) ask more than the GPU has
            # (PyTorch's line goes on about its allocator for 600 characters: what was asked and what was free)
            said = " ".join(re.split(r"(?<=\.) ", (str(exc).splitlines() or [""])[0])[:3])
            say(f"emopipe: error: the GPU ran out of memory ({said}); give a smaller "
                "--batch-size or --detect-batch, run fewer --processes on it, or free what other programs hold")
            return GPU_OUT_OF_MEMORY_EXIT_CODE
        message = f"{type(exc).__name__}: {exc}".split("\n")[0]
        say(f"emopipe: internal error: {message} (rerun with --debug for the traceback)")
        return 1
