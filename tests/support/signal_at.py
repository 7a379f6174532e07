"""Run the emopipe command and send it a signal at one named point of a many-source run, deterministically.

``python -m tests.support.signal_at SIGNAL POINT ARGS…``: ``SIGNAL`` is ``INT`` or ``TERM``; ``POINT`` is
``detector-warmup`` (as one process warms the detector for the first source's frame size: that source opened, its
reading begun, no frame analysed yet), ``ray-stop`` (as the Ray the run started, ``--ray local``, begins to stop),
``report`` (as ``--report``'s page begins) or ``manifest`` (as the first manifest line is written; a driver holds
the signal until the line and its renames are done, so it comes after them). The process sends the signal to itself
there (once); Python runs its handler at the main thread's next instruction, inside this module's wrapper, before
the step itself — then the step goes on, as far as the command lets it. Exits with the command's exit code (stderr
says ``signal_at: sent`` first), or 3 if the point was never reached.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

NOT_REACHED = 3


def main() -> None:
    name, point, *args = sys.argv[1:]
    signum = getattr(signal, f"SIG{name}")
    if point == "ray-stop":
        import emopipe.cluster as module

        attribute = "disconnect_ray"
    elif point == "report":
        import emopipe.report.outputs as module  # (the many-source report imports write_report as it starts)

        attribute = "write_report"
    elif point == "detector-warmup":
        from emopipe.pipeline.models import Models as module  # (a method: patched on the class)

        attribute = "warm_detector"
    elif point == "manifest":
        from emopipe.pipeline.archive import Manifest as module

        attribute = "append"
    else:
        raise SystemExit(f"signal_at: unknown point {point}")
    step = getattr(module, attribute)
    reached = []

    def signalled(*params: Any, **options: Any) -> Any:
        if reached:  # (once: a second signal would end the command at once)
            return step(*params, **options)
        reached.append(True)
        print("signal_at: sent", file=sys.stderr, flush=True)
        os.kill(os.getpid(), signum)
        return step(*params, **options)

    setattr(module, attribute, signalled)

    from emopipe.cli.app import main as command

    code = command(args)  # (not run_and_exit: the exit code is decided below)
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(code if reached else NOT_REACHED)


if __name__ == "__main__":
    main()
