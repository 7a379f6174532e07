"""python3 .gpu/nolock.py ARGS: `emopipe ARGS` with the NVDEC library lock taken out (for A/B timings only)."""

import contextlib
import runpy
import sys

import emopipe.io.nvdec as nvdec

nvdec._library_lock = contextlib.nullcontext()
sys.argv = ["emopipe", *sys.argv[1:]]
runpy.run_module("emopipe", run_name="__main__")
