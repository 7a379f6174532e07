#!/bin/bash
# session 31 (s31e): the change itself on another loan: "head" = fab89a3 (.gpu/trees/head), "new" = f0608b5
# (.gpu/trees/new: ruptures imported where first used). Five interleaved pairs of warm one-clip commands; one 60-s
# 720p video, whole command, three pairs; the 64-clip archive over --processes auto under MPS, two pairs.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
C=/root/rc; mkdir -p $C
cp -r .rw4/blazeface $C/
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl 2>&1 | grep -v "already exists" | tail -2
R=$OUT/s31e; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/table.txt
PYTHONPATH=/tmp/site python3 -c "
import sys, shutil; sys.path.insert(0, 'benchmarks'); import synthetic; from pathlib import Path
synthetic.random_checkpoint(Path('$C/w.pth'))
d = Path('$C') / 'clips'; d.mkdir(exist_ok=True)
for i in range(64): shutil.copy('.rw4/clip10s_720p_h264.mp4', d / f'clip{i:02d}.mp4')"
mkdir -p /tmp/here; cd /tmp/here
O="--weights $C/w.pth --detector blazeface_back --models-dir $C/blazeface --no-progress"
one() {  # label tree
  rm -rf /tmp/o1; mkdir -p /tmp/o1; local t0=$(date +%s.%N)
  (PYTHONPATH=$ROOT/.gpu/trees/$2:/tmp/site timeout 150 python3 -m emopipe $ROOT/.rw4/clip10s_720p_h264.mp4 \
    -o /tmp/o1/rows.csv $O > $R/$1.log 2>&1)
  local rc=$?
  echo "$1: rc=$rc wall=$(python3 -c "print(round($(date +%s.%N)-$t0,2))") s $(python3 -c "
import json; s=json.load(open('/tmp/o1/rows.summary.json')); st=s['startup']
print({k: round(v, 2) for k, v in st.items() if k.endswith('_s') and isinstance(v, float)}, 'tracks', len(s.get('tracks') or []))" 2>&1 | tail -1)" | tee -a $R/table.txt
}
run() {  # label tree
  rm -rf /tmp/o; local t0=$(date +%s.%N)
  (PYTHONPATH=$ROOT/.gpu/trees/$2:/tmp/site timeout 150 python3 -m emopipe $C/clips -o /tmp/o $O --processes auto > $R/$1.log 2>&1)
  local rc=$? t1=$(date +%s.%N)
  echo "$1: rc=$rc wall=$(python3 -c "print(round($t1-$t0,2))") s; $(python3 -c "
import json; s=json.load(open('/tmp/o/summary.json')); p = s.get('processes') or {}; t = p.get('timeline') or {}
print(s['ok'], 'ok;', s['frames'], 'frames;', 'workers', p.get('workers'), 'timeline', {k: round(v, 2) for k, v in t.items()},
      'worker engine warm-ups', [w['startup'].get('engine_warmup_s') for w in p.get('worker_summaries') or []])" 2>&1 | tail -1)" | tee -a $R/table.txt
}
long() {  # label tree: one 60-s video, the whole command
  rm -rf /tmp/o1; mkdir -p /tmp/o1; local t0=$(date +%s.%N)
  (PYTHONPATH=$ROOT/.gpu/trees/$2:/tmp/site timeout 150 python3 -m emopipe $ROOT/.rw5/video60s_720p_1face_h264.mp4 \
    -o /tmp/o1/rows.csv $O > $R/$1.log 2>&1)
  local rc=$?
  echo "$1: rc=$rc wall=$(python3 -c "print(round($(date +%s.%N)-$t0,2))") s $(python3 -c "
import json; s=json.load(open('/tmp/o1/rows.summary.json')); st=s['startup']
print('first row', round(st['first_row_s'], 2), 'engine warm-up', round(st['engine_warmup_s'], 2), 'frames', s['frames'], 'pipeline fps', round(s['fps']), 'seconds', round(s['seconds'], 2))" 2>&1 | tail -1)" | tee -a $R/table.txt
}
one loan-first head
for i in 1 2 3 4 5; do one head-$i head; one new-$i new; done
for i in 1 2 3; do long long-head-$i head; long long-new-$i new; done
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log PATH=$PATH:/usr/local/nvidia/bin
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
/usr/local/nvidia/bin/nvidia-cuda-mps-control -d && echo "MPS daemon started" | tee -a $R/table.txt
for i in 1 2; do run archive-head-$i head; run archive-new-$i new; done
echo quit | /usr/local/nvidia/bin/nvidia-cuda-mps-control; sleep 1
cp $R/table.txt $OUT/table-e.txt
(cd $R && tar czf $OUT/s31e-logs.tar.gz *.log)
rm -rf $R
