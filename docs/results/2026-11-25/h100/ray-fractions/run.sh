#!/bin/bash
# Issues 21/22: several Ray workers sharing the one GPU (--ray-gpus-per-worker 0.5 / 0.25: worker processes
# inside one command) against one process: the 64-clip archive, 4 long 720p videos, 4 copies of the 4-face video.
set -u
cd "$(dirname "$0")/.."
C=/root/rc
[ -f $C/ray-2.60.0-cp312-cp312-manylinux2014_x86_64.whl ] || cat $C/ray.part00 $C/ray.part01 > $C/ray-2.60.0-cp312-cp312-manylinux2014_x86_64.whl
rm -f $C/ray.part0*
[ -d /tmp/site/ray ] || python3 -m pip install -q --no-index --no-deps --target /tmp/site $C/*.whl .rw3/*.whl 2>&1 | tail -2
export PYTHONPATH=$PWD:/tmp/site PATH=/tmp/site/bin:$PATH
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
M=$C/blazeface
R=$OUT/r8; mkdir -p $R
timeout 150 python3 benchmarks/archive.py --out /tmp/a8 --clip $C/clip10s_720p_h264.mp4 --clips 64 --baseline 0 --models-dir $M > $R/setup.txt 2>&1
tail -3 $R/setup.txt
mkdir -p /tmp/long /tmp/f4
for i in 0 1 2 3; do cp $C/video_720p_h264.mp4 /tmp/long/long$i.mp4; cp $C/faces4_720p_h264.mp4 /tmp/f4/faces$i.mp4; done
run() {  # $1 name, $2 input, rest: options
  local name=$1 input=$2; shift 2
  local t0=$(date +%s.%N)
  timeout 150 python3 -m emopipe $input -o /tmp/o-$name --weights /tmp/a8/emonet_random.pth --detector blazeface_back --no-progress --models-dir $M "$@" > $R/$name.txt 2>&1
  local rc=$? t1=$(date +%s.%N)
  cp /tmp/o-$name/summary.json $R/$name-summary.json 2>/dev/null
  echo "$name rc=$rc wall=$(python3 -c "print(round($t1-$t0,1))") $(grep -c '^emopipe: ok' $R/$name.txt) ok $(grep -i -m1 'malloc\|corrupt\|fault\|abort\|error' $R/$name.txt)"
}
run arch-one /tmp/a8/clips
run arch-ray1 /tmp/a8/clips --ray local
run arch-ray2 /tmp/a8/clips --ray local --ray-gpus-per-worker 0.5
run arch-ray4 /tmp/a8/clips --ray local --ray-gpus-per-worker 0.25
run arch-one-b /tmp/a8/clips
run arch-ray4-b /tmp/a8/clips --ray local --ray-gpus-per-worker 0.25
run long-one /tmp/long
run long-ray4 /tmp/long --ray local --ray-gpus-per-worker 0.25
run f4-one /tmp/f4
run f4-ray4 /tmp/f4 --ray local --ray-gpus-per-worker 0.25
python3 - <<'PY' > $R/table.txt
import json, glob, os
for f in sorted(glob.glob(os.environ["OUT"] + "/r8/*-summary.json")):
    s = json.load(open(f)); r = s.get("ray") or {}; p = s.get("pipeline") or {}
    print(os.path.basename(f), "frames", s.get("frames"), "faces", s.get("faces"), "pipeline_fps", p.get("fps"),
          "faces/s", p.get("faces_per_s"), "workers", r.get("workers"), "timeline", r.get("timeline"),
          "busy", {k: round(v.get("busy_s", 0), 1) for k, v in (r.get("per_worker") or {}).items()})
PY
cat $R/table.txt
