#!/bin/bash
# session 22 (s22f): BlazeFace's depthwise convolutions through PyTorch's own kernel (s22f_native.py) against cuDNN
# (main's head 4e02386 as it is): interleaved pairs of a one-clip command (10 s 720p H.264, one face) and of the
# 64-clip archive in one process; each command's start-up phases (summary) and pipeline frames/s.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
C=/root/rc; mkdir -p $C
cp -r .rw4/blazeface $C/
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl 2>&1 | grep -v "already exists" | tail -2
R=$OUT/s22f; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/table.txt
PYTHONPATH=/tmp/site python3 -c "
import sys, shutil; sys.path.insert(0, 'benchmarks'); import synthetic; from pathlib import Path
synthetic.random_checkpoint(Path('$C/w.pth'))
d = Path('$C') / 'clips'; d.mkdir(exist_ok=True)
for i in range(64): shutil.copy('.rw4/clip10s_720p_h264.mp4', d / f'clip{i:02d}.mp4')"
mkdir -p /tmp/here; cd /tmp/here
O="--weights $C/w.pth --detector blazeface_back --models-dir $C/blazeface --no-progress"
cmd() { [ "$1" = native ] && echo "python3 $ROOT/.gpu/s22f_native.py" || echo "python3 -m emopipe"; }
one() {  # label variant
  rm -rf /tmp/o1; mkdir -p /tmp/o1; local t0=$(date +%s.%N)
  (PYTHONPATH=$ROOT:/tmp/site timeout 120 $(cmd $2) $ROOT/.rw4/clip10s_720p_h264.mp4 -o /tmp/o1/rows.csv $O > $R/$1.log 2>&1)
  local rc=$?
  local wall=$(python3 -c "print(round($(date +%s.%N)-$t0,2))")
  echo "$1: rc=$rc wall=$wall s $(python3 -c "
import json; s=json.load(open('/tmp/o1/rows.summary.json')); st=s['startup']
print({k: (round(v, 2) if isinstance(v, float) else v) for k, v in st.items() if k.endswith('_s')}, 'fps', round(s.get('fps') or 0))" 2>&1 | tail -1)" | tee -a $R/table.txt
}
many() {  # label variant
  rm -rf /tmp/o; local t0=$(date +%s.%N)
  (PYTHONPATH=$ROOT:/tmp/site timeout 150 $(cmd $2) $C/clips -o /tmp/o $O > $R/$1.log 2>&1)
  local rc=$?
  local wall=$(python3 -c "print(round($(date +%s.%N)-$t0,2))")
  echo "$1: rc=$rc wall=$wall s $(python3 -c "
import json; s=json.load(open('/tmp/o/summary.json')); p=s.get('pipeline') or {}; st=p.get('startup') or {}
print(s['ok'], 'ok;', s.get('frames'), 'frames; pipeline fps', round(p.get('fps') or 0),
      {k: (round(v, 2) if isinstance(v, float) else v) for k, v in st.items() if k.endswith('_s')})" 2>&1 | tail -1)" | tee -a $R/table.txt
}
one warm-up-run cudnn
for i in 1 2 3 4; do one one-cudnn-$i cudnn; one one-native-$i native; done
for i in 1 2 3; do many many-cudnn-$i cudnn; many many-native-$i native; done
cp $R/table.txt $OUT/table-f.txt
(cd $R && tar czf logs.tar.gz *.log && rm *.log)
