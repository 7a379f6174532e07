"""A worker process of ``--processes`` (:mod:`emopipe.processes`): ``python -m emopipe.process_worker FD DEVICE``.

What its warm-up waits on longest is begun before anything else is imported: its death tied to its driver's, the
GPU's CUDA context made on a thread, and PyTorch's import (~4 s with four workers importing it at once on an H100
host); then it takes its options from its driver over the connection ``FD`` and serves it
(:func:`emopipe.processes.serve`). Nothing here before PyTorch's import loads more than the standard library.
"""

from __future__ import annotations

import contextlib
import ctypes
import faulthandler
import os
import signal
import sys
import time
from multiprocessing.connection import Connection

_PR_SET_PDEATHSIG = 1  # prctl(2)


def main() -> None:
    began = time.perf_counter()
    # a native crash (a library's segmentation fault or abort: NVDEC's have happened) prints every thread's Python
    # stack on the command's standard error before the worker dies, ahead of the driver's line that it died
    with contextlib.suppress(RuntimeError, ValueError, OSError):  # (no standard error to print on)
        faulthandler.enable(all_threads=True)
    fd, device, driver_pid = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    _end_with_driver(driver_pid)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # (a terminal's Ctrl-C reaches every process: the driver decides)
    from emopipe.model import cuda_context  # (ctypes only)

    cuda_context.start(device)  # (made on a thread while PyTorch imports)
    from emopipe._heap import imports_uncollected

    with imports_uncollected():
        import torch  # noqa: F401  (the longest step of a worker's start: first)

        import emopipe.api  # noqa: F401  (what serve() imports to build the engines)
        from emopipe.processes import serve

    pipe = Connection(fd)
    try:
        options = pipe.recv()
    except (EOFError, OSError):  # the driver is gone (or ended the run before this worker was needed)
        os._exit(0)
    serve(pipe, began=began, **options)


def _end_with_driver(driver_pid: int) -> None:
    """Die with the driver (Linux: the parent-death signal), so a killed driver leaves no worker writing."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != driver_pid:  # (it died before the signal was asked for)
        os._exit(1)


if __name__ == "__main__":
    main()
