#!/bin/bash
# session 11, call 5 (one GPU): main's final code — the GPU tests, the 64-clip archive twice, a long video with
# --detect-every 3.
set -u
cd "$(dirname "$0")/.."
C=/root/rc; mkdir -p $C/assets/models $C/assets/data/faces
cp -r .rw4/* $C/; cp -r .rw4/blazeface $C/assets/models/; cp .rw4/faces/*.png $C/assets/data/faces/
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl 2>&1 | grep -v "already exists" | tail -2
export PYTHONPATH=$PWD:/tmp/site
R=$OUT/s11e; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
t0=$(date +%s)
EMOPIPE_TEST_ASSETS=$C/assets timeout 300 python3 -m pytest -q -p no:cacheprovider -rs tests/test_gpu.py tests/test_cudnn_epilogue.py tests/test_nvdec.py > $R/pytest.txt 2>&1
echo "pytest rc=$? in $(( $(date +%s) - t0 )) s: $(tail -1 $R/pytest.txt)" | tee -a $R/table.txt
grep -a "FAILED" $R/pytest.txt | head
python3 -c "
import sys, shutil; sys.path.insert(0, 'benchmarks'); import synthetic; from pathlib import Path
synthetic.random_checkpoint(Path('$C/w.pth'))
d = Path('$C/clips'); d.mkdir(exist_ok=True)
for i in range(64): shutil.copy('$C/clip10s_720p_h264.mp4', d / f'clip{i:02d}.mp4')"
O="--weights $C/w.pth --detector blazeface_back --models-dir $C/blazeface --no-progress"
for i in 1 2; do
  t0=$(date +%s.%N)
  timeout 150 python3 -m emopipe $C/clips -o /tmp/arch$i $O > $R/arch$i.txt 2>&1; rc=$?
  echo "archive $i: rc=$rc wall=$(python3 -c "print(round($(date +%s.%N)-$t0,1))") s; $(tail -1 $R/arch$i.txt | cut -c1-160)" | tee -a $R/table.txt
done
t0=$(date +%s.%N)
timeout 120 python3 -m emopipe $C/video_720p_h264.mp4 -o /tmp/de3.csv --detect-every 3 $O > $R/de3.txt 2>&1
echo "detect-every 3: rc=$? wall=$(python3 -c "print(round($(date +%s.%N)-$t0,1))") s; $(python3 -c "
import json; s=json.load(open('/tmp/de3.summary.json')); print(s['frames'], 'frames', s['frames_detected'], 'detected', round(s['fps']), 'frames/s')")" | tee -a $R/table.txt
