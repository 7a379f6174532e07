#!/bin/bash
set -u
cd "$(dirname "$0")/.."
[ -d /tmp/site/PyNvVideoCodec ] || python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw3/*.whl 2>&1 | tail -2
export PYTHONPATH=$PWD:/tmp/site
timeout 60 python3 .gpu/nvpool2.py .rw7 meta 2>&1 | tail -30
for b in missing.mp4 text.mp4; do echo "== $b"; timeout 20 python3 .gpu/nvpool2.py .rw7 $b 2>&1 | tail -4; echo "rc=$?"; done
