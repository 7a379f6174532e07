"""python3 .gpu/threaded.py ARGS: `emopipe ARGS` with the NVDEC reader as it was (a ThreadedDecoder after a
SimpleDecoder probe), for A/B timings."""

import importlib.util
import runpy
import sys

import emopipe.io  # noqa: F401

spec = importlib.util.spec_from_file_location("emopipe.io.nvdec", ".gpu/nvdec_threaded.py")
module = importlib.util.module_from_spec(spec)
sys.modules["emopipe.io.nvdec"] = module
spec.loader.exec_module(module)
sys.argv = ["emopipe", *sys.argv[1:]]
runpy.run_module("emopipe", run_name="__main__")
