#!/bin/bash
# NVDEC: every PyNvVideoCodec call under one process lock. (1) the four-thread stress with and without it (native
# crashes; readers' frames/s); (2) the 64-clip archive, one process, three runs with the lock (crash check, speed,
# the summary's decoder) and one without; (3) 4 long 720p videos with and without (what the lock costs).
set -u
cd "$(dirname "$0")/.."
[ -d /tmp/site/PyNvVideoCodec ] || python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl 2>&1 | tail -2
export PYTHONPATH=$PWD:/tmp/site PATH=/tmp/site/bin:$PATH
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
M=$PWD/.rw4/blazeface
R=$OUT/r14; mkdir -p $R
st() { local name=$1; shift; timeout 100 python3 .gpu/nvstress3.py .rw4/clip10s_720p_h264.mp4 "$@" > $R/stress-$name.txt 2>&1; echo "stress $name rc=$? $(grep -a -m1 'threads\|Fatal\|malloc\|free()' $R/stress-$name.txt)"; }
st lock-1 4 60 lock
st nolock-1 4 40 nolock
st lock-2 4 60 lock
timeout 150 python3 benchmarks/archive.py --out /tmp/a14 --clip .rw4/clip10s_720p_h264.mp4 --clips 64 --baseline 0 --models-dir $M > $R/setup.txt 2>&1
tail -1 $R/setup.txt
mkdir -p /tmp/long; for i in 0 1 2 3; do cp .rw4/video_720p_h264.mp4 /tmp/long/long$i.mp4; done
run() {  # $1 name, $2 program, $3 input, rest: options
  local name=$1 prog=$2 input=$3; shift 3
  local t0=$(date +%s.%N)
  timeout 150 python3 $prog $input -o /tmp/o-$name --weights /tmp/a14/emonet_random.pth --detector blazeface_back --no-progress --models-dir $M "$@" > $R/$name.txt 2>&1
  local rc=$? t1=$(date +%s.%N)
  cp /tmp/o-$name/summary.json $R/$name-summary.json 2>/dev/null
  echo "$name rc=$rc wall=$(python3 -c "print(round($t1-$t0,1))") $(grep -c '^emopipe: ok' $R/$name.txt) ok $(grep -a -i -m1 'malloc\|corrupt\|abort\|fault\|free()' $R/$name.txt) $(python3 -c "
import json; s=json.load(open('$R/$name-summary.json')); p=s['pipeline']
print('pipeline', round(p['fps']), 'frames/s', s['frames'], 'frames, decoder', p['decoder'])" 2>&1 | tail -1)"
}
run arch-lock-1 "-m emopipe" /tmp/a14/clips
run arch-nolock ".gpu/nolock.py" /tmp/a14/clips
run arch-lock-2 "-m emopipe" /tmp/a14/clips
run long-lock "-m emopipe" /tmp/long
run long-nolock ".gpu/nolock.py" /tmp/long
run arch-lock-3 "-m emopipe" /tmp/a14/clips
run long-lock-2 "-m emopipe" /tmp/long
cd $OUT && tar czf r14.tgz r14 && rm -rf r14
