"""Python's compiled modules kept in emopipe's cache when the environment keeps none.

Some images install PyTorch without its compiled bytecode and set ``PYTHONDONTWRITEBYTECODE`` (the GPU hosts
emopipe is measured on do both), so every process compiles the ~1 000 modules ``import torch`` reaches, again: 3.5–5.9 s
there. Kept, a warm command's first row took 4.4–5.5 s against 6.7–8.4 s, the 64-clip archive over four worker
processes 11.2–12.5 s against 13.5–14.9 s (H200, docs/benchmarks.md). ``pip install`` compiles bytecode beside the
sources as it installs a package, and then nothing is done here.

Otherwise the command keeps it under ``<cache>/python`` (Python's own ``PYTHONPYCACHEPREFIX`` mechanism: the
sources stay untouched, each file is checked against its source's size and modification time before use), for its
own process and — through the environment — for the processes it starts (``--processes`` workers, a ``--ray
local`` cluster's). ``EMOPIPE_BYTECODE_CACHE=0`` turns it off; a ``PYTHONPYCACHEPREFIX`` of your own is left as it
is. Only the command's own process is changed: :func:`emopipe.cli.app.main` called in a process of yours is not.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

PROBE = "torch"  # the import every run waits for, and the largest: its bytecode tells whether any is kept
OFF_VALUES = ("0", "off", "no", "false")


def keep_bytecode(directory: Path) -> str:
    """Keep compiled modules in ``directory`` where the probe's are not kept beside its sources; say what was done."""
    if os.environ.get("EMOPIPE_BYTECODE_CACHE", "").strip().lower() in OFF_VALUES:
        return "not kept by emopipe (EMOPIPE_BYTECODE_CACHE is off)"
    if sys.pycache_prefix is not None:
        return f"kept where PYTHONPYCACHEPREFIX says ({sys.pycache_prefix})"
    if PROBE in sys.modules:
        return f"not looked at ({PROBE} was imported already)"
    spec = importlib.util.find_spec(PROBE)
    if spec is None or not spec.has_location or not spec.origin:
        return f"not looked at ({PROBE} is not installed as source files)"
    if os.path.exists(importlib.util.cache_from_source(spec.origin)):
        return f"kept beside the sources ({PROBE}'s was compiled when it was installed)"
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError:
        return f"compiled at each start ({PROBE}'s is not kept, and {directory} cannot be made)"
    if not os.access(directory, os.W_OK):
        return f"compiled at each start ({PROBE}'s is not kept, and {directory} is read-only)"
    sys.pycache_prefix = str(directory)
    sys.dont_write_bytecode = False
    os.environ["PYTHONPYCACHEPREFIX"] = str(directory)  # (the processes this one starts read the variables)
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    return f"kept in {directory} ({PROBE}'s is not kept where it is installed)"
