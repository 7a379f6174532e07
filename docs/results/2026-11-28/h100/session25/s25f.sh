#!/bin/bash
# session 25 (s25f): H100, another loan, the final tree: the 64-clip archive as one cold command, one process against
# --processes 4 and 6 under NVIDIA MPS, interleaved (how much the machine lent moves the result: s25d against s25e).
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
C=/root/rc; mkdir -p $C
cp -r .rw4/blazeface $C/
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl 2>&1 | grep -v "already exists" | tail -2
R=$OUT/s25f; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/table.txt
nproc | sed 's/^/cores: /' | tee -a $R/table.txt
PYTHONPATH=/tmp/site python3 -c "
import sys, shutil; sys.path.insert(0, 'benchmarks'); import synthetic; from pathlib import Path
synthetic.random_checkpoint(Path('$C/w.pth'))
d = Path('$C') / 'clips'; d.mkdir(exist_ok=True)
for i in range(64): shutil.copy('.rw4/clip10s_720p_h264.mp4', d / f'clip{i:02d}.mp4')"
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
/usr/local/nvidia/bin/nvidia-cuda-mps-control -d && echo "MPS daemon started" | tee -a $R/table.txt
export PATH=$PATH:/usr/local/nvidia/bin
mkdir -p /tmp/here; cd /tmp/here  # (python -m emopipe imports the emopipe of the working folder first)
O="--weights $C/w.pth --detector blazeface_back --models-dir $C/blazeface --no-progress"
run() {  # label extra...
  local label=$1; shift
  rm -rf /tmp/o; local t0=$(date +%s.%N)
  (PYTHONPATH=$ROOT:/tmp/site timeout 150 python3 -m emopipe $C/clips -o /tmp/o $O "$@" > $R/$label.log 2>&1)
  local rc=$? t1=$(date +%s.%N)
  cp /tmp/o/summary.json $R/$label.summary.json 2>/dev/null
  echo "$label: rc=$rc wall=$(python3 -c "print(round($t1-$t0,2))") s exit_s=$(python3 -c "import os; print(round($t1-os.stat('/tmp/o/summary.json').st_mtime,2))"); $(python3 -c "
import json; s=json.load(open('/tmp/o/summary.json')); p = s.get('processes') or {}; t = p.get('timeline') or {}
ws = p.get('worker_summaries') or []; st = ((s.get('pipeline') or {}).get('startup')) or {}
steady = s['frames'] / (t['done_s'] - t['ready_s']) if t.get('ready_s') is not None and t.get('done_s') else 0
print(s['ok'], 'ok;', s['frames'], 'frames;', 'run wall_s', s['wall_s'], 'first_row_s', st.get('first_row_s') or t.get('first_row_s'),
      'steady_fps', round(steady), 'worker_ready_s', [w.get('start', {}).get('ready_s') for w in ws],
      'timeline', {k: round(v, 2) for k, v in t.items()})" 2>&1 | tail -1)" | tee -a $R/table.txt
}
run warm-up-p4 --processes 4
run one-1
for i in 1 2 3; do run p4-$i --processes 4; run p6-$i --processes 6; done
echo quit | /usr/local/nvidia/bin/nvidia-cuda-mps-control; sleep 1
cp $R/table.txt $OUT/table-f.txt
(cd $R && tar czf logs.tar.gz *.log *.summary.json && rm *.log *.summary.json)
