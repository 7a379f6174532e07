#!/bin/bash
# The crash A/B: emopipe's NVDEC reader before (a new threaded decoder per source) and with the pool, 8 threads,
# 40 s a run, interleaved, four runs each.
set -u
cd "$(dirname "$0")/.."
[ -d /tmp/site/PyNvVideoCodec ] || python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl 2>&1 | tail -2
export PYTHONPATH=$PWD:/tmp/site
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
R=$OUT/r23; mkdir -p $R
st() { local name=$1; shift; timeout 90 python3 .gpu/nvstress6.py .rw4/clip10s_720p_h264.mp4 8 40 "$@" > $R/stress-$name.txt 2>&1; echo "$name rc=$? $(grep -a -m1 'threads 8\|Fatal\|malloc\|free()' $R/stress-$name.txt)"; }
for i in 1 2 3 4; do st before-$i before; st pool-$i pool; done
cd $OUT && tar czf r23.tgz r23 && rm -rf r23
