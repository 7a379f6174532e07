#!/bin/bash
# NVDEC crash hunt, round 2: the library lock did not stop it (a native decoding thread crashes). Four reader
# threads, 40 s a run: ThreadedDecoder as emopipe uses it (x3), without the first-frame probe (x2), and a
# SimpleDecoder reading in the caller's thread, with the lock (x2) and without (x2).
set -u
cd "$(dirname "$0")/.."
[ -d /tmp/site/PyNvVideoCodec ] || python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl 2>&1 | tail -2
export PYTHONPATH=$PWD:/tmp/site PATH=/tmp/site/bin:$PATH
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
R=$OUT/r15; mkdir -p $R
st() { local name=$1; shift; timeout 100 python3 .gpu/nvstress4.py .rw4/clip10s_720p_h264.mp4 4 40 "$@" > $R/stress-$name.txt 2>&1; echo "$name rc=$? $(grep -a -m1 'threads 4\|Fatal\|malloc\|free()' $R/stress-$name.txt)"; }
for i in 1 2 3; do st threaded-$i threaded lock; st simple-lock-$i simple lock; done
for i in 1 2; do st noprobe-$i noprobe lock; st simple-nolock-$i simple nolock; done
cd $OUT && tar czf r15.tgz r15 && rm -rf r15
