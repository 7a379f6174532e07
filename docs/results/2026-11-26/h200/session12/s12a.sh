#!/bin/bash
# session 12, call 1 (one GPU): set-up, the GPU tests on main's head, then base (fd81244, the last stop's code)
# against head interleaved: the 64-clip archive, 4 long videos (one face), 4 long videos (four faces).
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
C=/root/rc; mkdir -p $C/assets/models $C/assets/data/faces
cp -r .rw4/* $C/; cp -r .rw4/blazeface $C/assets/models/; cp .rw4/faces/*.png $C/assets/data/faces/
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl 2>&1 | grep -v "already exists" | tail -2
R=$OUT/s12a; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
nproc | tee -a $R/gpu.txt
export PYTHONPATH=/tmp/site
t0=$(date +%s)
(export PYTHONPATH=$ROOT:/tmp/site; EMOPIPE_TEST_ASSETS=$C/assets timeout 300 python3 -m pytest -q -p no:cacheprovider -rs \
  tests/test_gpu.py tests/test_cudnn_epilogue.py tests/test_nvdec.py > $R/pytest.txt 2>&1)
echo "pytest rc=$? in $(( $(date +%s) - t0 )) s: $(tail -1 $R/pytest.txt)" | tee -a $R/table.txt
grep -a "FAILED\|Error" $R/pytest.txt | head -5
python3 -c "
import sys, shutil; sys.path.insert(0, '$ROOT/benchmarks'); sys.path.insert(0, '$ROOT'); import synthetic; from pathlib import Path
synthetic.random_checkpoint(Path('$C/w.pth'))
for name, src, n in (('clips', 'clip10s_720p_h264.mp4', 64), ('long', 'video_720p_h264.mp4', 4), ('four', 'video_720p_4faces_h264.mp4', 4)):
    d = Path('$C') / name; d.mkdir(exist_ok=True)
    for i in range(n): shutil.copy('$C/' + src, d / f'{name}{i:02d}.mp4')"
O="--weights $C/w.pth --detector blazeface_back --models-dir $C/blazeface --no-progress"
tree() { [ $1 = base ] && echo $ROOT/.gpu/base12 || echo $ROOT; }
run() {  # tree, input folder, label
  rm -rf /tmp/o; local t0=$(date +%s.%N)
  (cd $(tree $1) && timeout 150 python3 -m emopipe $C/$2 -o /tmp/o $O > $R/$3-$1.log 2>&1); local rc=$?
  echo "$3 $1: rc=$rc wall=$(python3 -c "print(round($(date +%s.%N)-$t0,2))") s; $(python3 -c "
import json; s=json.load(open('/tmp/o/summary.json')); p=s['pipeline']; print(s['ok'], 'ok;', round(p['fps']), 'frames/s;', round(p['faces_per_s']), 'faces/s; first row', p['startup']['first_row_s'])" 2>&1 | tail -1)" | tee -a $R/table.txt
}
run head clips warm-archive
for round in 1 2; do for t in base head; do run $t clips archive; done; done
for round in 1 2; do for t in base head; do run $t long long; run $t four four; done; done
