#!/bin/bash
# session 31 (s31f): the final head (this checkout, 5449cb0): a --processes 4 run under MPS says no library's INFO
# (PyNvVideoCodec's NVENC lines), its workers' summaries carry their rates; warm one-clip commands.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
C=/root/rc; mkdir -p $C
cp -r .rw4/blazeface $C/
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl 2>&1 | grep -v "already exists" | tail -2
R=$OUT/s31f; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/table.txt
PYTHONPATH=/tmp/site python3 -c "
import sys, shutil; sys.path.insert(0, 'benchmarks'); import synthetic; from pathlib import Path
synthetic.random_checkpoint(Path('$C/w.pth'))
d = Path('$C') / 'clips'; d.mkdir(exist_ok=True)
for i in range(64): shutil.copy('.rw4/clip10s_720p_h264.mp4', d / f'clip{i:02d}.mp4')"
mkdir -p /tmp/here; cd /tmp/here
O="--weights $C/w.pth --detector blazeface_back --models-dir $C/blazeface --no-progress"
one() {
  rm -rf /tmp/o1; mkdir -p /tmp/o1; local t0=$(date +%s.%N)
  (PYTHONPATH=$ROOT:/tmp/site timeout 150 python3 -m emopipe $ROOT/.rw4/clip10s_720p_h264.mp4 -o /tmp/o1/rows.csv $O > $R/$1.log 2>&1)
  echo "$1: rc=$? wall=$(python3 -c "print(round($(date +%s.%N)-$t0,2))") s $(python3 -c "
import json; s=json.load(open('/tmp/o1/rows.summary.json')); st=s['startup']
print({k: round(v, 2) for k, v in st.items() if k.endswith('_s') and isinstance(v, float)})" 2>&1 | tail -1)" | tee -a $R/table.txt
}
one loan-first; one warm-1; one warm-2; one warm-3
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log PATH=$PATH:/usr/local/nvidia/bin
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
/usr/local/nvidia/bin/nvidia-cuda-mps-control -d
for i in 1 2; do
  rm -rf /tmp/o; t0=$(date +%s.%N)
  (PYTHONPATH=$ROOT:/tmp/site timeout 150 python3 -m emopipe $C/clips -o /tmp/o $O --processes auto > $R/archive-$i.log 2>&1)
  echo "archive-$i: rc=$? wall=$(python3 -c "print(round($(date +%s.%N)-$t0,2))") s; lines $(wc -l < $R/archive-$i.log), NVENC lines $(grep -c NVENC $R/archive-$i.log); $(python3 -c "
import json; s=json.load(open('/tmp/o/summary.json')); p = s['processes']; t = p['timeline']
print(s['ok'], 'ok;', {k: round(v, 2) for k, v in t.items()}, 'workers fps', [round(w['fps']) for w in p['worker_summaries']], 'seconds', [round(w['seconds'], 2) for w in p['worker_summaries']])" 2>&1 | tail -1)" | tee -a $R/table.txt
done
echo quit | /usr/local/nvidia/bin/nvidia-cuda-mps-control
echo "== the archive's output (run 2)" >> $R/table.txt; cat $R/archive-2.log >> $R/table.txt
cp $R/table.txt $OUT/table-f.txt
