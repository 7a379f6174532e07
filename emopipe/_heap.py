"""Python's cycle collector while a process of emopipe's imports its libraries: off, and what they made frozen.

Importing PyTorch, OpenCV and emopipe's run makes ~175 000 objects that the collector tracks. Python runs a full
collection each time the tracked objects have grown by a quarter, and each one walks all of them with the
interpreter lock held: importing the command's modules took 1.41–1.77 s with the collector on and 1.21–1.24 s
with it off on the CPU machine, and a one-frame command's first row came 0.4 s sooner; on the H200 hosts the
difference is within the spread of their loans (docs/benchmarks.md, "Start-up"). What an import makes lives as
long as the process, so the collector has nothing to find there; frozen (``gc.freeze``, as Python's documentation
advises before a fork), it is out of the later collections' walks too — the one that settles the heap after the
warm-ups (:func:`emopipe.pipeline.models.settle_heap`) among them. Used where emopipe's run imports PyTorch: the command
(also :func:`emopipe.cli.main` called in a process of yours), its worker processes and its Ray workers; ``import
emopipe`` and the Analyzer leave the collector as it is until their warm-ups settle the heap.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

_used = False  # whether this process has had its block


@contextlib.contextmanager
def imports_uncollected() -> Iterator[None]:
    """The collector off while the block imports, then everything the process holds frozen and the collector on.

    Nothing is collected first: the cycles importing leaves behind (~0.6 MB on the CPU machine: functions and
    tuples made and dropped by the typing module's machinery) stay, as the modules do, rather than pay a walk over
    everything for them. Once a process: a later block (a kept worker's next run) would freeze that run's garbage
    too. Where the collector is off (someone's choice, or an outer block's), it is left off and nothing is frozen."""
    global _used
    if _used or not gc.isenabled():
        yield
        return
    _used = True
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.enable()
