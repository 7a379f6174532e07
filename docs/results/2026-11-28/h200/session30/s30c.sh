#!/bin/bash
# session 30 (s30c): the working tree ("new": EmoNet's and BlazeFace's other convolutions through kept cuDNN plans,
# the recipes recorded in s30b) against 4512f84 ("head"): the loan's first command (new), a primer of head; steady
# speed and warm-ups in fresh processes, alternated; the first passes taken apart (s26_warm.py); warm one-clip
# commands, interleaved pairs, rows compared; then the GPU tests of the plans, the fused networks and the warm-ups.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
C=/root/rc; mkdir -p $C/assets/models $C/assets/data/faces
cp -r .rw4/blazeface $C/; cp -r .rw4/blazeface $C/assets/models/; cp .rw4/faces/*.png $C/assets/data/faces/
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl 2>&1 | grep -v "already exists" | tail -2
R=$OUT/s30c; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/table.txt
PYTHONPATH=/tmp/site python3 -c "
import sys; sys.path.insert(0, 'benchmarks'); import synthetic; from pathlib import Path
synthetic.random_checkpoint(Path('$C/w.pth'))"
tree() { [ $1 = new ] && echo $ROOT || echo $ROOT/.gpu/trees/head; }
mkdir -p /tmp/here; cd /tmp/here
O="--weights $C/w.pth --detector blazeface_back --models-dir $C/blazeface --no-progress"
one() {  # label tree
  local label=$1 t=$(tree $2)
  rm -rf /tmp/o1; mkdir -p /tmp/o1; local t0=$(date +%s.%N)
  (PYTHONPATH=$t:/tmp/site timeout 150 python3 -m emopipe $ROOT/.rw4/clip10s_720p_h264.mp4 \
    -o /tmp/o1/rows.csv $O > $R/$label.log 2>&1)
  local rc=$?
  local wall=$(python3 -c "print(round($(date +%s.%N)-$t0,2))")
  cp /tmp/o1/rows.csv $R/$label.csv 2>/dev/null
  echo "$label: rc=$rc wall=$wall s $(python3 -c "
import json; s=json.load(open('/tmp/o1/rows.summary.json')); st=s['startup']
print({k: (round(v, 2) if isinstance(v, float) else v) for k, v in st.items() if k.endswith('_s')}, 'fps', round(s.get('fps') or 0), 'faces', s.get('faces'))" 2>&1 | tail -1) | $(grep -h "built\|waited" $R/$label.log | tr '\n' ' ')" | tee -a $R/table.txt
}
one loan-first-new new; one primer-head head; one primer-new new
echo "== steady speed and warm-ups, fresh processes" | tee -a $R/table.txt
for i in 1 2 3; do for t in head new; do
  PYTHONPATH=$(tree $t):/tmp/site timeout 120 python3 $ROOT/.gpu/s26_speed.py $C/w.pth $C/blazeface $t 2>&1 | tail -1 | tee -a $R/table.txt
done; done
echo "== the first passes taken apart (s26_warm.py), fresh processes" | tee -a $R/table.txt
for t in head new; do
  echo "$t: $(PYTHONPATH=$(tree $t):/tmp/site timeout 120 python3 $ROOT/.gpu/s26_warm.py $C/w.pth $C/blazeface 2>&1 | tail -1)" | tee -a $R/table.txt
done
echo "== warm one-clip commands, interleaved" | tee -a $R/table.txt
for i in 1 2 3 4; do one warm-head-$i head; one warm-new-$i new; done
python3 $ROOT/.gpu/s30_rows.py $R/warm-new-1.csv $R/warm-head-1.csv | tee -a $R/table.txt
echo "== GPU tests" | tee -a $R/table.txt
cd $ROOT
EMOPIPE_TEST_ASSETS=$C/assets PYTHONPATH=$ROOT:/tmp/site timeout 330 python3 -m pytest -q -p no:cacheprovider -rs \
  tests/test_cudnn_epilogue.py tests/test_early_plans.py tests/test_detect.py tests/test_fusion.py tests/test_gpu.py \
  tests/test_kernels.py > $OUT/pytest-c.txt 2>&1
tail -8 $OUT/pytest-c.txt | tee -a $R/table.txt
cp $R/table.txt $OUT/table-c.txt
(cd $R && tar czf $OUT/s30c-logs.tar.gz *.log *.csv)
rm -rf $R
