#!/bin/bash
# The mixed folder again (after the pool keyed by OpenCV's pixel format and the mixed-batch upload fix), then the
# NVDEC and GPU tests.
set -u
cd "$(dirname "$0")/.."
bash .gpu/run24.sh
export PYTHONPATH=$PWD:/tmp/site
timeout 250 python3 -m pytest -q -p no:cacheprovider tests/test_nvdec.py tests/test_gpu.py 2>&1 | tail -4
