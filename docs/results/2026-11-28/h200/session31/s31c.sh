#!/bin/bash
# session 31 (s31c): a fresh machine as `pip install` leaves it: Python's bytecode kept (pip compiles it; here the
# command's own <models>/cache/python), every other cache emptied (CUDA's compute cache, Triton's, the cuDNN plan
# folder). Three rounds, each: the 64-clip archive over --processes auto under MPS, then a one-clip command; then the
# archive and a one-clip command warm. Tree: this checkout (974bd33).
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
C=/root/rc; mkdir -p $C
cp -r .rw4/blazeface $C/
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl 2>&1 | grep -v "already exists" | tail -2
R=$OUT/s31c; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/table.txt
PYTHONPATH=/tmp/site python3 -c "
import sys, shutil; sys.path.insert(0, 'benchmarks'); import synthetic; from pathlib import Path
synthetic.random_checkpoint(Path('$C/w.pth'))
d = Path('$C') / 'clips'; d.mkdir(exist_ok=True)
for i in range(64): shutil.copy('.rw4/clip10s_720p_h264.mp4', d / f'clip{i:02d}.mp4')"
# everything but the bytecode (<models>/cache/python) and what pip installed
fresh() { rm -rf /root/.nv /root/.triton; find $C/blazeface/cache -mindepth 1 -maxdepth 1 ! -name python -exec rm -rf {} +; }
mkdir -p /tmp/here; cd /tmp/here
O="--weights $C/w.pth --detector blazeface_back --models-dir $C/blazeface --no-progress"
one() {  # label
  rm -rf /tmp/o1; mkdir -p /tmp/o1; local t0=$(date +%s.%N)
  (PYTHONPATH=$ROOT:/tmp/site timeout 150 python3 -m emopipe $ROOT/.rw4/clip10s_720p_h264.mp4 \
    -o /tmp/o1/rows.csv $O > $R/$1.log 2>&1)
  local rc=$?
  echo "$1: rc=$rc wall=$(python3 -c "print(round($(date +%s.%N)-$t0,2))") s $(python3 -c "
import json; s=json.load(open('/tmp/o1/rows.summary.json')); st=s['startup']
print({k: round(v, 2) for k, v in st.items() if k.endswith('_s') and isinstance(v, float)})" 2>&1 | tail -1) | $(grep -h "built\|waited" $R/$1.log | tr '\n' ' ')" | tee -a $R/table.txt
}
run() {  # label
  rm -rf /tmp/o; local t0=$(date +%s.%N)
  (PYTHONPATH=$ROOT:/tmp/site timeout 150 python3 -m emopipe $C/clips -o /tmp/o $O --processes auto > $R/$1.log 2>&1)
  local rc=$? t1=$(date +%s.%N)
  echo "$1: rc=$rc wall=$(python3 -c "print(round($t1-$t0,2))") s; $(python3 -c "
import json; s=json.load(open('/tmp/o/summary.json')); p = s.get('processes') or {}; t = p.get('timeline') or {}
print(s['ok'], 'ok;', s['frames'], 'frames;', 'workers', p.get('workers'), 'timeline', {k: round(v, 2) for k, v in t.items()})" 2>&1 | tail -1) | $(grep -h "built\|waited" $R/$1.log | sort | uniq -c | tr '\n' ' ')" | tee -a $R/table.txt
}
one loan-first; ls $C/blazeface/cache | tee -a $R/table.txt; du -sh $C/blazeface/cache/python | tee -a $R/table.txt
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log PATH=$PATH:/usr/local/nvidia/bin
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
mps_on() { /usr/local/nvidia/bin/nvidia-cuda-mps-control -d; }
mps_off() { echo quit | /usr/local/nvidia/bin/nvidia-cuda-mps-control; sleep 1; }
# (the archive under MPS, as --processes auto wants it; the one-clip commands without, as in the earlier sessions)
for i in 1 2 3; do fresh; mps_on; run archive-fresh-$i; mps_off; fresh; one oneclip-fresh-$i; done
for i in 1 2; do mps_on; run archive-warm-$i; mps_off; one oneclip-warm-$i; done
cp $R/table.txt $OUT/table-c.txt
(cd $R && tar czf $OUT/s31c-logs.tar.gz *.log)
rm -rf $R
