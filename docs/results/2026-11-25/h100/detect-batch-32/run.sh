#!/bin/bash
# Issue 21: default frames per detector call for BlazeFace on files now 32 (network input built 8 frames at a
# time): throughput against --detect-batch 8, rows against 8, peak GPU memory at 720p and 4K; S3FD at 8 vs 16.
set -u
cd "$(dirname "$0")/.."
[ -d /tmp/site/PyNvVideoCodec ] || python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl 2>&1 | tail -2
export PYTHONPATH=$PWD:/tmp/site PATH=/tmp/site/bin:$PATH
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
git log --oneline | head -1
M=$PWD/.rw4/blazeface
R=$OUT/r10; mkdir -p $R
[ -f /tmp/a9/emonet_random.pth ] || timeout 150 python3 benchmarks/archive.py --out /tmp/a9 --clip .rw4/clip10s_720p_h264.mp4 --clips 64 --baseline 0 --models-dir $M > $R/setup.txt 2>&1
mkdir -p /tmp/long; for i in 0 1 2 3; do cp .rw4/video_720p_h264.mp4 /tmp/long/long$i.mp4; done
run() {  # $1 name, $2 input, rest: options; peak GPU memory sampled every 50 ms
  local name=$1 input=$2; shift 2
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 50 > $R/$name.mem 2>/dev/null & local smi=$!
  local t0=$(date +%s.%N)
  timeout 150 python3 -m emopipe $input -o /tmp/o-$name --weights /tmp/a9/emonet_random.pth --no-progress --models-dir $M "$@" > $R/$name.txt 2>&1
  local rc=$? t1=$(date +%s.%N)
  kill $smi 2>/dev/null; wait $smi 2>/dev/null
  cp /tmp/o-$name/summary.json $R/$name-summary.json 2>/dev/null || cp /tmp/o-$name.summary.json $R/$name-summary.json 2>/dev/null
  echo "$name rc=$rc wall=$(python3 -c "print(round($t1-$t0,1))") peak_MiB=$(sort -n $R/$name.mem | tail -1) $(python3 -c "
import json; s=json.load(open('$R/$name-summary.json')); p=s.get('pipeline') or s
print('fps', round(p['fps']), 'frames', s['frames'], 'faces', s['faces'], {k: round(v/s['frames']*1000,3) for k,v in p['stage_seconds'].items()}, 'ms/frame')" 2>&1 | tail -1)"
}
for r in 1 2; do
  run long-bf32-r$r /tmp/long --detector blazeface_back
  run long-bf8-r$r /tmp/long --detector blazeface_back --detect-batch 8
done
run arch-bf32 /tmp/a9/clips --detector blazeface_back
run arch-bf8 /tmp/a9/clips --detector blazeface_back --detect-batch 8
run k4-bf32 .rw5/clip_4k.mp4 --detector blazeface_back
run k4-bf8 .rw5/clip_4k.mp4 --detector blazeface_back --detect-batch 8
run k4-sfd8 .rw5/clip_4k.mp4
run long-sfd8 /tmp/long
run long-sfd16 /tmp/long --detect-batch 16
python3 - <<'PY' | tee $R/parity.txt
import csv, glob
import numpy as np
def rows(d):
    f = sorted(glob.glob(d + "/long0*.csv"))[0]
    return list(csv.DictReader(open(f)))
a, b = rows("/tmp/o-long-bf32-r1"), rows("/tmp/o-long-bf8-r1")
print("rows", len(a), len(b), "columns", list(a[0])[:12])
num = [k for k in a[0] if k not in ("source",) and all(r[k] not in ("",) for r in a[:5])]
diffs = {}
for k in num:
    try:
        x = np.array([float(r[k]) for r in a]); y = np.array([float(r[k]) for r in b])
    except ValueError:
        continue
    diffs[k] = float(np.abs(x - y).max()) if len(x) == len(y) else None
print("max |32 - 8| per column:", diffs)
PY
cd $OUT && tar czf r10.tgz r10 && rm -rf r10
