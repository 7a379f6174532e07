#!/bin/bash
# One NVDEC copy stream per GPU (was one per source): the 64-clip archive's peak GPU memory and speed, two runs;
# 4 long videos; the NVDEC and GPU tests.
set -u
cd "$(dirname "$0")/.."
[ -d /tmp/site/PyNvVideoCodec ] || python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl 2>&1 | tail -2
export PYTHONPATH=$PWD:/tmp/site PATH=/tmp/site/bin:$PATH
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
M=$PWD/.rw4/blazeface
R=$OUT/r11; mkdir -p $R
timeout 150 python3 benchmarks/archive.py --out /tmp/a9 --clip .rw4/clip10s_720p_h264.mp4 --clips 64 --baseline 0 --models-dir $M > $R/setup.txt 2>&1
tail -2 $R/setup.txt
mkdir -p /tmp/long; for i in 0 1 2 3; do cp .rw4/video_720p_h264.mp4 /tmp/long/long$i.mp4; done
run() {
  local name=$1 input=$2; shift 2
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 50 > $R/$name.mem 2>/dev/null & local smi=$!
  local t0=$(date +%s.%N)
  timeout 150 python3 -m emopipe $input -o /tmp/o-$name --weights /tmp/a9/emonet_random.pth --no-progress --models-dir $M "$@" > $R/$name.txt 2>&1
  local rc=$? t1=$(date +%s.%N)
  kill $smi 2>/dev/null; wait $smi 2>/dev/null
  cp /tmp/o-$name/summary.json $R/$name-summary.json 2>/dev/null
  echo "$name rc=$rc wall=$(python3 -c "print(round($t1-$t0,1))") peak_MiB=$(sort -n $R/$name.mem | tail -1) $(python3 -c "
import json; s=json.load(open('$R/$name-summary.json')); p=s.get('pipeline') or s
print('fps', round(p['fps']), 'frames', s['frames'], 'faces', s['faces'], 'ok', s.get('ok'))" 2>&1 | tail -1)"
}
run arch-1 /tmp/a9/clips --detector blazeface_back
run arch-2 /tmp/a9/clips --detector blazeface_back
run long-1 /tmp/long --detector blazeface_back
run arch-opencv /tmp/a9/clips --detector blazeface_back --decoder opencv
timeout 200 python3 -m pytest -q -p no:cacheprovider tests/test_nvdec.py tests/test_gpu.py 2>&1 | tail -3
cd $OUT && tar czf r11.tgz r11 && rm -rf r11
