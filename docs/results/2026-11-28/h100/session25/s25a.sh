#!/bin/bash
# session 25 (s25a): H100. The 64-clip archive (ten-second 720p H.264 clips, one face each) as one command from a fresh
# process, caches on disk warm: one process against --processes 4 and 8 (worker processes of this machine, under
# NVIDIA MPS), interleaved; every number a whole command (its wall clock from the shell) and its summary.json.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
C=/root/rc; mkdir -p $C
cp -r .rw4/blazeface $C/
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl 2>&1 | grep -v "already exists" | tail -2
R=$OUT/s25a; mkdir -p $R
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
  local rc=$?
  echo "$label: rc=$rc wall=$(python3 -c "print(round($(date +%s.%N)-$t0,2))") s; $(python3 -c "
import json; s=json.load(open('/tmp/o/summary.json')); p = s.get('processes') or {}; t = p.get('timeline') or {}
ws = p.get('worker_summaries') or []; st = ((s.get('pipeline') or {}).get('startup')) or {}
steady = s['frames'] / (t['done_s'] - t['ready_s']) if t.get('ready_s') is not None and t.get('done_s') else 0
print(s['ok'], 'ok;', s['frames'], 'frames;', 'run wall_s', s['wall_s'], 'first_row_s', st.get('first_row_s') or t.get('first_row_s'),
      'steady_fps', round(steady), 'worker_ready_s', [w.get('start', {}).get('ready_s') for w in ws],
      'timeline', {k: round(v, 2) for k, v in t.items()})" 2>&1 | tail -1)" | tee -a $R/table.txt
}
run warm-up-one
run warm-up-p4 --processes 4
for i in 1 2 3; do run one-$i; run p4-$i --processes 4; run p8-$i --processes 8; done
echo quit | /usr/local/nvidia/bin/nvidia-cuda-mps-control; sleep 1
run p4-nomps --processes 4
cp $R/table.txt $OUT/table-a.txt
(cd $R && tar czf logs.tar.gz *.log && rm *.log)
