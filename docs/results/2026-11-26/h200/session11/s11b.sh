#!/bin/bash
# session 11, call 2 (one GPU): EmoNet's batches collected 2 or 3 launches behind (not 1), and cuDNN's epilogue
# (the [cudnn] extra: nvidia-cudnn-frontend), on 4 long 720p videos with one and four faces, interleaved.
set -u
cd "$(dirname "$0")/.."
C=/root/rc; mkdir -p $C/assets/models $C/assets/data/faces
cp -r .rw4/* $C/; cp -r .rw4/blazeface $C/assets/models/; cp .rw4/faces/*.png $C/assets/data/faces/
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl 2>&1 | grep -v "already exists" | tail -2
python3 -m pip install -q --no-index --no-deps --target /tmp/cfsite .rw8/*.whl 2>&1 | grep -v "already exists" | tail -2
export PYTHONPATH=$PWD:/tmp/site
R=$OUT/s11b; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/table.txt
python3 -c "
import sys, shutil; sys.path.insert(0, 'benchmarks'); import synthetic; from pathlib import Path
synthetic.random_checkpoint(Path('$C/w.pth'))
for kind, src in (('one', 'video_720p_h264.mp4'), ('four', 'video_720p_4faces_h264.mp4')):
    d = Path('$C/long' + kind); d.mkdir(exist_ok=True)
    for i in range(4): shutil.copy('$C/' + src, d / f'v{i}.mp4')"
O="--weights $C/w.pth --detector blazeface_back --models-dir $C/blazeface --no-progress"
for round in 1 2; do for kind in four one; do for v in normal depth2 depth3 epi epi-depth2; do
  rm -rf /tmp/o; t0=$(date +%s.%N)
  case $v in epi) pp=/tmp/cfsite; pv=normal;; epi-depth2) pp=/tmp/cfsite; pv=depth2;; *) pp=; pv=$v;; esac
  PYTHONPATH=$PYTHONPATH${pp:+:$pp} timeout 120 python3 .gpu/s11run.py $pv $C/long$kind -o /tmp/o $O > $R/log.txt 2>&1; rc=$?
  echo "$kind $v round $round: rc=$rc wall=$(python3 -c "print(round($(date +%s.%N)-$t0,1))") s; $(python3 -c "
import json; s=json.load(open('/tmp/o/summary.json')); p=s['pipeline']; st=p['stage_seconds']
print(round(p['fps']), 'frames/s', round(p['faces_per_s']), 'faces/s; epilogue', p['engine']['cudnn_epilogue'], '; infer', st.get('infer'), 'nms', st.get('nms'), 'first row', p['startup']['first_row_s'])" 2>&1 | tail -1)" | tee -a $R/table.txt
  [ $rc = 0 ] || tail -3 $R/log.txt >> $R/table.txt
done; done; done
