#!/bin/bash
# Issue 21: frames per detector call for files (--detect-batch 8, the default, against 16 and 32) on 4 long 720p
# videos and the 64-clip archive, one process; and where the GIL holder's time goes (py-spy --gil) at the default.
set -u
cd "$(dirname "$0")/.."
[ -d /tmp/site/PyNvVideoCodec ] || python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl 2>&1 | tail -2
export PYTHONPATH=$PWD:/tmp/site PATH=/tmp/site/bin:$PATH
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
M=$PWD/.rw4/blazeface
R=$OUT/r9; mkdir -p $R
timeout 150 python3 benchmarks/archive.py --out /tmp/a9 --clip .rw4/clip10s_720p_h264.mp4 --clips 64 --baseline 0 --models-dir $M > $R/setup.txt 2>&1
tail -2 $R/setup.txt
mkdir -p /tmp/long; for i in 0 1 2 3; do cp .rw4/video_720p_h264.mp4 /tmp/long/long$i.mp4; done
run() {  # $1 name, $2 input, rest: options
  local name=$1 input=$2; shift 2
  local t0=$(date +%s.%N)
  timeout 150 python3 -m emopipe $input -o /tmp/o-$name --weights /tmp/a9/emonet_random.pth --detector blazeface_back --no-progress --models-dir $M "$@" > $R/$name.txt 2>&1
  local rc=$? t1=$(date +%s.%N)
  cp /tmp/o-$name/summary.json $R/$name-summary.json 2>/dev/null
  echo "$name rc=$rc wall=$(python3 -c "print(round($t1-$t0,1))") $(python3 -c "import json; s=json.load(open('$R/$name-summary.json')); p=s['pipeline']; print('fps', round(p['fps']), {k: round(v/s['frames']*1000,3) for k,v in p['stage_seconds'].items()}, 'ms/frame')" 2>&1 | tail -1)"
}
for round in 1 2; do
  for db in 8 16 32; do run long-db$db-r$round /tmp/long --detect-batch $db; done
done
for db in 8 16 32; do run arch-db$db /tmp/a9/clips --detect-batch $db; done
py-spy record --gil --nonblocking -r 200 --format raw -o $R/long-gil.txt -- python3 -m emopipe /tmp/long -o /tmp/o-spy --weights /tmp/a9/emonet_random.pth --detector blazeface_back --no-progress --models-dir $M > $R/spy.txt 2>&1
echo "py-spy rc=$?"; tail -2 $R/spy.txt
cd $OUT && tar czf r9.tgz r9 && rm -rf r9
