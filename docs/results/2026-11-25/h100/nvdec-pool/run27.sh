#!/bin/bash
# The final pool (keyed by OpenCV's pixel format): archive pool / before / pool, and the eight-reader stress once.
set -u
cd "$(dirname "$0")/.."
sed -i 's#^R=\$OUT/r22.*#R=$OUT/r27; mkdir -p $R#; s#/tmp/a22#/tmp/a27#g; s#r22.tgz r22 && rm -rf r22#r27.tgz r27 \&\& rm -rf r27#' .gpu/run22.sh
grep -n "r27\|a27" .gpu/run22.sh | head -3
[ -d /tmp/site/PyNvVideoCodec ] || python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl 2>&1 | tail -2
export PYTHONPATH=$PWD:/tmp/site PATH=/tmp/site/bin:$PATH
M=$PWD/.rw4/blazeface
R=$OUT/r27; mkdir -p $R
timeout 150 python3 benchmarks/archive.py --out /tmp/a27 --clip .rw4/clip10s_720p_h264.mp4 --clips 64 --baseline 0 --models-dir $M > $R/setup.txt 2>&1
tail -1 $R/setup.txt
eval "$(sed -n '/^run() {/,/^}/p' .gpu/run22.sh)"
run arch-pool-1 "-m emopipe" /tmp/a27/clips; run arch-before-1 .gpu/before.py /tmp/a27/clips; run arch-pool-2 "-m emopipe" /tmp/a27/clips
timeout 90 python3 .gpu/nvstress6.py .rw4/clip10s_720p_h264.mp4 8 40 pool > $R/stress-pool-8.txt 2>&1; echo "stress rc=$? $(grep -a -m1 'threads 8\|Fatal\|malloc\|free()' $R/stress-pool-8.txt)"
cd $OUT && tar czf r27.tgz r27 && rm -rf r27
