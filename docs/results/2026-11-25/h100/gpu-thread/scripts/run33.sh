#!/bin/bash
# The GPU thread's GIL switch interval (the pipeline sets 0.5 ms): 0.1 and 2 ms against it, 4 long videos (1 and 4 faces).
set -u
cd "$(dirname "$0")/.."
[ -d /tmp/site/PyNvVideoCodec ] || python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl 2>&1 | tail -2
export PYTHONPATH=$PWD:/tmp/site
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
M=$PWD/.rw4/blazeface R=$OUT/r33; mkdir -p $R
python3 -c "import sys; sys.path.insert(0, 'benchmarks'); import synthetic; from pathlib import Path; synthetic.random_checkpoint(Path('/tmp/w33.pth'))"
mkdir -p /tmp/long-1face /tmp/long-4faces
for i in 0 1 2 3; do cp .rw4/video_720p_h264.mp4 /tmp/long-1face/long$i.mp4; cp .rw4/video_720p_4faces_h264.mp4 /tmp/long-4faces/long$i.mp4; done
run() {  # $1 name, $2 switch seconds, $3 input
  local name=$1 s=$2 input=$3
  timeout 120 python3 .gpu/switch.py $s $input -o /tmp/o-$name --weights /tmp/w33.pth --detector blazeface_back --no-progress --models-dir $M > $R/$name.txt 2>&1
  local rc=$?
  cp /tmp/o-$name/summary.json $R/$name-summary.json 2>/dev/null
  echo "$name rc=$rc $(python3 -c "
import json; s=json.load(open('$R/$name-summary.json')); p=s['pipeline']
print('pipeline', round(p['fps']), 'frames/s', round(p['faces_per_s']), 'faces/s', {k: round(v, 2) for k, v in p['stage_seconds'].items()})" 2>&1 | tail -1)"
}
run 1face-s05ms-a 0.0005 /tmp/long-1face; run 1face-s01ms-a 0.0001 /tmp/long-1face
run 1face-s05ms-b 0.0005 /tmp/long-1face; run 1face-s01ms-b 0.0001 /tmp/long-1face
run 4faces-s05ms 0.0005 /tmp/long-4faces; run 4faces-s01ms 0.0001 /tmp/long-4faces
cd $OUT && tar czf r33.tgz r33 && rm -rf r33
