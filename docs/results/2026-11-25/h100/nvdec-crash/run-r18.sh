#!/bin/bash
# NVDEC crash: emopipe's reader (a ThreadedDecoder per source) against one ThreadedDecoder per thread reused through
# reconfigure_decoder; four threads, 40 s a run, interleaved, three runs each.
set -u
cd "$(dirname "$0")/.."
[ -d /tmp/site/PyNvVideoCodec ] || python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw3/*.whl 2>&1 | tail -2
export PYTHONPATH=$PWD:/tmp/site
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
R=$OUT/r18; mkdir -p $R
st() { local name=$1; shift; timeout 100 python3 .gpu/nvstress5.py .rw6/clip10s_720p_h264.mp4 4 40 "$@" > $R/stress-$name.txt 2>&1; echo "$name rc=$? $(grep -a -m1 'threads 4\|Fatal\|malloc\|free()' $R/stress-$name.txt)"; }
for i in 1 2 3; do st emopipe-$i emopipe; st reconfigure-$i reconfigure; done
cd $OUT && tar czf r18.tgz r18 && rm -rf r18
