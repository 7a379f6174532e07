#!/bin/bash
# NVDEC read by a SimpleDecoder on the source's reader thread (no ThreadedDecoder: its native thread crashed the
# process): one long 720p video, four, the 64-clip archive, against the ThreadedDecoder version (interleaved);
# the four-reader stress twice; the NVDEC and GPU tests.
set -u
cd "$(dirname "$0")/.."
[ -d /tmp/site/PyNvVideoCodec ] || python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl 2>&1 | tail -2
export PYTHONPATH=$PWD:/tmp/site PATH=/tmp/site/bin:$PATH
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
M=$PWD/.rw4/blazeface
R=$OUT/r16; mkdir -p $R
timeout 150 python3 benchmarks/archive.py --out /tmp/a16 --clip .rw4/clip10s_720p_h264.mp4 --clips 64 --baseline 0 --models-dir $M > $R/setup.txt 2>&1
tail -1 $R/setup.txt
mkdir -p /tmp/long /tmp/one; for i in 0 1 2 3; do cp .rw4/video_720p_h264.mp4 /tmp/long/long$i.mp4; done; cp .rw4/video_720p_h264.mp4 /tmp/one/
run() {  # $1 name, $2 program, $3 input, rest: options
  local name=$1 prog=$2 input=$3; shift 3
  local t0=$(date +%s.%N)
  timeout 150 python3 $prog $input -o /tmp/o-$name --weights /tmp/a16/emonet_random.pth --detector blazeface_back --no-progress --models-dir $M "$@" > $R/$name.txt 2>&1
  local rc=$? t1=$(date +%s.%N)
  cp /tmp/o-$name/summary.json $R/$name-summary.json 2>/dev/null
  echo "$name rc=$rc wall=$(python3 -c "print(round($t1-$t0,1))") $(grep -c '^emopipe: ok' $R/$name.txt) ok $(grep -a -i -m1 'malloc\|corrupt\|abort\|fault\|free()' $R/$name.txt) $(python3 -c "
import json; s=json.load(open('$R/$name-summary.json')); p=s['pipeline']
print('pipeline', round(p['fps']), 'frames/s', s['frames'], 'frames, decode', p['stage_seconds']['decode'], 's, decoder', p['decoder'])" 2>&1 | tail -1)"
}
for r in 1 2; do
  run one-simple-$r "-m emopipe" /tmp/one; run one-threaded-$r .gpu/threaded.py /tmp/one
  run long-simple-$r "-m emopipe" /tmp/long; run long-threaded-$r .gpu/threaded.py /tmp/long
done
run arch-simple-1 "-m emopipe" /tmp/a16/clips; run arch-threaded-1 .gpu/threaded.py /tmp/a16/clips; run arch-simple-2 "-m emopipe" /tmp/a16/clips
st() { local name=$1; shift; timeout 100 python3 .gpu/nvstress4.py .rw4/clip10s_720p_h264.mp4 4 40 "$@" > $R/stress-$name.txt 2>&1; echo "$name rc=$? $(grep -a -m1 'threads 4\|Fatal\|malloc\|free()' $R/stress-$name.txt)"; }
st simple-1 current nolock; st simple-2 current nolock
timeout 200 python3 -m pytest -q -p no:cacheprovider tests/test_nvdec.py tests/test_gpu.py 2>&1 | tail -4
cd $OUT && tar czf r16.tgz r16 && rm -rf r16
