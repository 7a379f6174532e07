#!/bin/bash
# session 14, one process (no Ray): the GPU tests on this session's final tree, then the 64-clip archive, base
# 5160596 against the final tree interleaved twice, and four long / four four-face 720p videos in one process.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
C=/root/rc; mkdir -p $C/assets/models $C/assets/data/faces
cp -r .rw4/* $C/; cp -r .rw4/blazeface $C/assets/models/; cp .rw4/faces/*.png $C/assets/data/faces/
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl 2>&1 | grep -v "already exists" | tail -2
R=$OUT/s14b; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/table.txt
t0=$(date +%s)
PYTHONPATH=$ROOT:/tmp/site EMOPIPE_TEST_ASSETS=$C/assets timeout 240 python3 -m pytest -q -p no:cacheprovider -rs \
  tests/test_gpu.py tests/test_cudnn_epilogue.py tests/test_nvdec.py > $R/pytest.txt 2>&1
echo "pytest rc=$? in $(( $(date +%s) - t0 )) s: $(tail -1 $R/pytest.txt)" | tee -a $R/table.txt
grep -a "FAILED" $R/pytest.txt | head -5 | tee -a $R/table.txt
PYTHONPATH=/tmp/site python3 -c "
import sys, shutil; sys.path.insert(0, 'benchmarks'); import synthetic; from pathlib import Path
synthetic.random_checkpoint(Path('$C/w.pth'))
for name, src, n in (('clips', 'clip10s_720p_h264.mp4', 64), ('long', 'video_720p_h264.mp4', 4), ('four', 'video_720p_4faces_h264.mp4', 4)):
    d = Path('$C') / name; d.mkdir(exist_ok=True)
    for i in range(n): shutil.copy(Path('$C') / src, d / f'{name}{i:02d}.mp4')"
O="--weights $C/w.pth --detector blazeface_back --models-dir $C/blazeface --no-progress"
tree() { [ $1 = base ] && echo $ROOT/.gpu/base14 || echo $ROOT; }
run() {  # label, tree, input
  rm -rf /tmp/o; local t0=$(date +%s.%N)
  (cd $(tree $2) && PYTHONPATH=$(tree $2):/tmp/site timeout 200 python3 -m emopipe $3 -o /tmp/o $O > $R/$1.log 2>&1); local rc=$?
  echo "$1: rc=$rc wall=$(python3 -c "print(round($(date +%s.%N)-$t0,2))") s; $(python3 -c "
import json; s=json.load(open('/tmp/o/summary.json')); p = s.get('pipeline') or {}
print(s['ok'], 'ok;', s.get('frames'), 'frames;', s.get('faces'), 'faces; pipeline fps', round(p.get('fps') or 0), 'first row', (p.get('startup') or {}).get('first_row_s'))" 2>&1 | tail -1)" | tee -a $R/table.txt
}
run warm head $C/clips
for round in 1 2; do run base-$round base $C/clips; run head-$round head $C/clips; done
run long-head head $C/long
run four-head head $C/four
(cd $R && tar czf logs.tar.gz *.log && rm *.log)
