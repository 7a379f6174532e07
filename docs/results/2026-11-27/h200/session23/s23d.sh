#!/bin/bash
# session 23 (s23d): the 64-clip archive in one command over Ray workers sharing the GPU under MPS (--ray local),
# main (ac13276, .rwE/base) against this tree (the start-up changes of s23b and s23c), interleaved; Ray
# 2.60.0 installed into /tmp/raysite by the two calls before (the wheel carried in parts).
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
C=/root/rc; mkdir -p $C
cp -r .rw4/blazeface $C/
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl 2>&1 | grep -v "already exists" | tail -2
R=$OUT/s23d; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/table.txt
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
tree() { [ "$1" = base ] && echo "$ROOT/.rwE/base" || echo "$ROOT"; }
run() {  # label tree extra
  rm -rf /tmp/o; local t0=$(date +%s.%N)
  (PYTHONPATH=$(tree $2):/tmp/site:/tmp/raysite timeout 150 python3 -m emopipe $C/clips -o /tmp/o $O $3 > $R/$1.log 2>&1)
  local rc=$?
  echo "$1: rc=$rc wall=$(python3 -c "print(round($(date +%s.%N)-$t0,2))") s; $(python3 -c "
import json; s=json.load(open('/tmp/o/summary.json')); r = s.get('ray', {}); t = r.get('timeline') or {}
ws = r.get('worker_summaries') or []; p = s.get('pipeline') or {}; st = p.get('startup') or {}
steady = s['frames'] / (t['done_s'] - t['ready_s']) if t.get('ready_s') is not None and t.get('done_s') else 0
print(s['ok'], 'ok;', 'first_row_s', st.get('first_row_s') or t.get('first_row_s'), 'steady_fps', round(steady),
      'worker_ready_s', [w.get('start', {}).get('ready_s') for w in ws],
      'timeline', {k: round(v, 2) for k, v in t.items()})" 2>&1 | tail -1)" | tee -a $R/table.txt
}
run warm-up-base base "--ray local"
run warm-up-new new "--ray local"
for i in 1 2 3 4; do run local-base-$i base "--ray local"; run local-new-$i new "--ray local"; done
echo quit | /usr/local/nvidia/bin/nvidia-cuda-mps-control; sleep 1
cp $R/table.txt $OUT/table-d.txt
(cd $R && tar czf logs.tar.gz *.log && rm *.log)
