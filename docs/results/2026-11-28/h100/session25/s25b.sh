#!/bin/bash
# session 25 (s25b): H100. Why --processes 4's workers took 11-14 s to be warm (s25a) when Ray's took 6-7.7 s: PyTorch's
# import alone, one process and four or eight at once; then --processes 4 with each worker's start-up phases
# (summary.json's processes.worker_summaries[].startup), with and without OMP_NUM_THREADS=1 (as Ray sets it).
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
C=/root/rc; mkdir -p $C
cp -r .rw4/blazeface $C/
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl 2>&1 | grep -v "already exists" | tail -2
R=$OUT/s25b; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/table.txt
PYTHONPATH=/tmp/site python3 -c "
import sys, shutil; sys.path.insert(0, 'benchmarks'); import synthetic; from pathlib import Path
synthetic.random_checkpoint(Path('$C/w.pth'))
d = Path('$C') / 'clips'; d.mkdir(exist_ok=True)
for i in range(64): shutil.copy('.rw4/clip10s_720p_h264.mp4', d / f'clip{i:02d}.mp4')"
imp() { python3 -c "import time; t=time.perf_counter(); import torch; print(round(time.perf_counter()-t, 2))"; }
imp > /dev/null
echo "import torch alone: $(imp) $(imp)" | tee -a $R/table.txt
echo "import torch, 4 at once: $( (for i in 1 2 3 4; do imp & done; wait) | tr '\n' ' ')" | tee -a $R/table.txt
echo "import torch, 8 at once: $( (for i in 1 2 3 4 5 6 7 8; do imp & done; wait) | tr '\n' ' ')" | tee -a $R/table.txt
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
/usr/local/nvidia/bin/nvidia-cuda-mps-control -d && echo "MPS daemon started" | tee -a $R/table.txt
export PATH=$PATH:/usr/local/nvidia/bin
mkdir -p /tmp/here; cd /tmp/here
O="--weights $C/w.pth --detector blazeface_back --models-dir $C/blazeface --no-progress"
run() {  # label env extra...
  local label=$1 env=$2; shift 2
  rm -rf /tmp/o; local t0=$(date +%s.%N)
  (env $env PYTHONPATH=$ROOT:/tmp/site timeout 150 python3 -m emopipe $C/clips -o /tmp/o $O "$@" > $R/$label.log 2>&1)
  local rc=$?
  cp /tmp/o/summary.json $R/$label.summary.json 2>/dev/null
  echo "$label: rc=$rc wall=$(python3 -c "print(round($(date +%s.%N)-$t0,2))") s; $(python3 -c "
import json; s=json.load(open('/tmp/o/summary.json')); p = s.get('processes') or {}; t = p.get('timeline') or {}
st = ((s.get('pipeline') or {}).get('startup')) or {}
print('run wall_s', s['wall_s'], 'pipeline startup', {k: round(v, 2) for k, v in st.items() if k.endswith('_s') and v is not None}, 'timeline', {k: round(v, 2) for k, v in t.items()})
for w in p.get('worker_summaries') or []:
    print('   ', w['name'], 'ready_s', w['start']['ready_s'], {k: round(v, 2) for k, v in (w.get('startup') or {}).items() if k.endswith('_s') and v is not None})" 2>&1)" | tee -a $R/table.txt
}
run warm-up X=1 --processes 4
run one X=1
run p4-a X=1 --processes 4
run p4-omp1-a OMP_NUM_THREADS=1 --processes 4
run p4-b X=1 --processes 4
run p4-omp1-b OMP_NUM_THREADS=1 --processes 4
run p1 X=1 --processes 1
echo quit | /usr/local/nvidia/bin/nvidia-cuda-mps-control; sleep 1
cp $R/table.txt $OUT/table-b.txt
(cd $R && tar czf logs.tar.gz *.log *.summary.json && rm *.log *.summary.json)
