#!/bin/bash
set -u
cd "$(dirname "$0")/.."
[ -d /tmp/site/PyNvVideoCodec ] || python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw3/*.whl 2>&1 | tail -2
export PYTHONPATH=$PWD:/tmp/site
mkdir -p $OUT/r20
for b in f_444_h264.mp4 missing.mp4 text.mp4 g_720p_hevc10.mp4; do
  timeout 20 python3 .gpu/nvpool.py .rw7 bad $b > $OUT/r20/bad-$b.txt 2>&1; echo "bad $b rc=$? $(grep -a -m2 'bad \|after it\|what()\|Error Type' $OUT/r20/bad-$b.txt | tr '\n' ' ')"
done
timeout 120 python3 .gpu/nvpool.py .rw7 time 2>&1 | tee $OUT/r20/time.txt
