"""Run the emopipe command and SIGKILL it at one chosen instant of a source's finish, deterministically.

``python -m tests.support.kill_at WHEN STEP NAME ARGS…``: ``WHEN`` is ``before`` or ``after``; ``STEP`` is
``manifest`` (the manifest line of the source whose path ends with ``NAME``) or a file ending (``emotions.csv``,
``emotions.tracks.csv``, ``emotions.segments.csv``, ``emotions.summary.json``; a one-source run's ``csv``,
``tracks.csv``, ``segments.csv``, ``summary.json`` with ``NAME`` its rows file's stem): the rename that gives
``NAME``'s file that final name. The process kills itself there (no clean-up runs, as with ``kill -9``); a
run that never reaches the instant exits 3, so a test can tell it from a run that was killed.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Any

from emopipe.pipeline.archive import Manifest

NOT_REACHED = 3


def main() -> None:
    when, step, name, *args = sys.argv[1:]

    def die() -> None:
        os.kill(os.getpid(), signal.SIGKILL)

    def around(call: Any, *params: Any) -> Any:
        if when == "before":
            die()
        done = call(*params)
        die()
        return done

    if step == "manifest":
        append = Manifest.append

        def killing_append(self: Manifest, entry: dict[str, Any], **options: Any) -> None:
            if Path(entry.get("source", "")).stem == name:
                around(lambda: append(self, entry, **options))
            else:
                append(self, entry, **options)

        Manifest.append = killing_append  # type: ignore[method-assign]
    else:
        replace = os.replace

        def killing_replace(src: Any, dst: Any, *rest: Any, **options: Any) -> None:
            if Path(dst).name == f"{name}.{step}":
                around(replace, src, dst, *rest, **options)
            else:
                replace(src, dst, *rest, **options)

        os.replace = killing_replace

    from emopipe.cli.app import main

    sys.argv = ["emopipe", *args]
    try:
        main(args)  # (not run_and_exit: it ends the process with the run's own exit code)
    finally:
        os._exit(NOT_REACHED)  # (the instant never came)


if __name__ == "__main__":
    main()
