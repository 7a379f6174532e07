#!/bin/bash
# reconfigure_decoder: correctness across codecs/resolutions and set-up costs
set -u
cd "$(dirname "$0")/.."
[ -d /tmp/site/PyNvVideoCodec ] || python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw3/*.whl 2>&1 | tail -2
export PYTHONPATH=$PWD:/tmp/site
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
mkdir -p $OUT/r19
timeout 300 python3 .gpu/nvpool.py .rw7 2>&1 | tee $OUT/r19/nvpool.txt
