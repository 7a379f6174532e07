"""When this process started being emopipe: the zero of the start-up report (``summary.startup``).

Taken when the package is first imported, which for the command line is its first line of Python; the
interpreter's own start (tens of milliseconds) is before it.
"""

from __future__ import annotations

import time

STARTED = time.perf_counter()
