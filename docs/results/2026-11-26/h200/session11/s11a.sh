#!/bin/bash
# session 11, call 1 (one GPU): the writer's share of one process's throughput — 4 long 720p videos (one face, four
# faces) with the rows written as now, with RecordSink.write a no-op, and with it keeping each frame's arrays only.
set -u
cd "$(dirname "$0")/.."
C=/root/rc; mkdir -p $C/assets/models $C/assets/data/faces
cp -r .rw4/* $C/; cp -r .rw4/blazeface $C/assets/models/; cp .rw4/faces/*.png $C/assets/data/faces/
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl 2>&1 | grep -v "already exists" | tail -2
export PYTHONPATH=$PWD:/tmp/site
R=$OUT/s11a; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt; nproc | tee -a $R/gpu.txt
python3 -c "
import sys, shutil; sys.path.insert(0, 'benchmarks'); import synthetic; from pathlib import Path
synthetic.random_checkpoint(Path('$C/w.pth'))
for kind, src in (('one', 'video_720p_h264.mp4'), ('four', 'video_720p_4faces_h264.mp4')):
    d = Path('$C/long' + kind); d.mkdir(exist_ok=True)
    for i in range(4): shutil.copy('$C/' + src, d / f'v{i}.mp4')"
O="--weights $C/w.pth --detector blazeface_back --models-dir $C/blazeface --no-progress"
for round in 1 2; do for kind in one four; do for v in normal null pack; do
  rm -rf /tmp/o; t0=$(date +%s.%N)
  timeout 120 python3 .gpu/s11run.py $v $C/long$kind -o /tmp/o $O > $R/$kind-$v-$round.txt 2>&1; rc=$?
  cp /tmp/o/summary.json $R/$kind-$v-$round-summary.json 2>/dev/null
  echo "$kind $v round $round: rc=$rc wall=$(python3 -c "print(round($(date +%s.%N)-$t0,1))") s; $(python3 -c "
import json; s=json.load(open('/tmp/o/summary.json')); p=s['pipeline']; print(s['frames'], 'frames', s['faces'], 'faces; pipeline', round(p['fps']), 'frames/s', round(p['faces_per_s']), 'faces/s; write stage', p.get('stage_seconds',{}).get('write'))" 2>&1 | tail -1)" | tee -a $R/table.txt
done; done; done
