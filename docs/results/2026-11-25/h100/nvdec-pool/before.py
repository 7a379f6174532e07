"""python3 .gpu/before.py ARGS: `emopipe ARGS` with the NVDEC reader before the decoder pool (a new
ThreadedDecoder after a SimpleDecoder probe for every source, .gpu/nvdec_old.py = emopipe/io/nvdec.py at 95fe2be),
for A/B timings."""

import importlib.util
import runpy
import sys

import emopipe.io  # noqa: F401

spec = importlib.util.spec_from_file_location("emopipe.io.nvdec", ".gpu/nvdec_old.py")
module = importlib.util.module_from_spec(spec)
sys.modules["emopipe.io.nvdec"] = module
spec.loader.exec_module(module)
sys.argv = ["emopipe", *sys.argv[1:]]
runpy.run_module("emopipe", run_name="__main__")
