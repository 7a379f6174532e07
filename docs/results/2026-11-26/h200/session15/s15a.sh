#!/bin/bash
# session 15: CUDA MPS (the Multi-Process Service) for several emopipe processes on one GPU. P processes at once,
# each a one-process many-source run (four long 720p videos, 7 200 frames; or four four-face videos), first without
# MPS (time-slicing), then with an MPS control daemon started for these runs only (its own pipe directory) and quit
# after. Main's head tree (.gpu/new15).
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
C=/root/rc; mkdir -p $C
cp -r .rw4/* $C/
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl 2>&1 | grep -v "already exists" | tail -2
R=$OUT/s15a; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,compute_mode --format=csv,noheader | tee $R/table.txt
ls -la $(command -v nvidia-cuda-mps-control nvidia-cuda-mps-server) 2>&1 | tee -a $R/table.txt
nproc | tee -a $R/table.txt
PYTHONPATH=/tmp/site python3 -c "
import sys, shutil; sys.path.insert(0, 'benchmarks'); import synthetic; from pathlib import Path
synthetic.random_checkpoint(Path('$C/w.pth'))
for p in range(4):
    for name, src in (('long', 'video_720p_h264.mp4'), ('four', 'video_720p_4faces_h264.mp4')):
        d = Path('$C') / f'{name}{p}'; d.mkdir(exist_ok=True)
        for i in range(4): shutil.copy(Path('$C') / src, d / f'{name}{p}_{i}.mp4')"
O="--weights $C/w.pth --detector blazeface_back --models-dir $C/blazeface --no-progress"
T=${TREE:-$ROOT/.gpu/new15}
batch() {  # label, what (long/four), P processes at once
  local t0=$(date +%s.%N)
  for p in $(seq 0 $(( $3 - 1 ))); do
    rm -rf /tmp/o$p
    (cd $T && PYTHONPATH=$T:/tmp/site timeout 200 python3 -m emopipe $C/$2$p -o /tmp/o$p $O > $R/$1-p$p.log 2>&1; echo $? > /tmp/rc$p) &
  done
  wait
  local wall=$(python3 -c "print(round($(date +%s.%N)-$t0,2))")
  echo "$1: P=$3 wall=$wall s; $(python3 -c "
import json
fps, faces, rows = [], 0, []
for p in range($3):
    try:
        s = json.load(open(f'/tmp/o{p}/summary.json')); pl = s.get('pipeline') or {}
        fps.append(round(pl.get('fps') or 0)); faces += s.get('faces') or 0
        rows.append((s['ok'], pl.get('seconds'), (pl.get('startup') or {}).get('first_row_s')))
    except Exception as e: rows.append(('no summary', open(f'/tmp/rc{p}').read().strip()))
print('pipeline fps per process', fps, 'sum', sum(fps), '| faces', faces, '| (ok, pipeline s, first row s)', rows)" 2>&1 | tail -1)" | tee -a $R/table.txt
}
suite() {  # mode label
  batch $1-long-1 long 1
  batch $1-long-2 long 2
  batch $1-long-4 long 4
  batch $1-four-1 four 1
  batch $1-four-4 four 4
}
suite nomps
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
if nvidia-cuda-mps-control -d; then
  echo "MPS daemon started" | tee -a $R/table.txt
  suite mps
  echo quit | nvidia-cuda-mps-control; sleep 1
  cp $CUDA_MPS_LOG_DIRECTORY/*.log $R/ 2>/dev/null
else
  echo "MPS daemon did not start" | tee -a $R/table.txt
fi
(cd $R && tar czf logs.tar.gz *.log && rm *.log)
