#!/bin/bash
# session 29 (s29c): the tree (cuDNN plans built from the command's start, begun once the CUDA context is made;
# the detector's pass while Triton compiles EmoNet's kernels) against the same tree with the early build off
# (EMOPIPE_EARLY_PLANS=0) and main's head (trees/main = 591c31b): the very first command emulated (every cache
# emptied, bytecode too), three interleaved rounds; warm one-clip commands, three rounds after a primer each; then
# the GPU tests of the plans, kernels and warm-ups (with the shared assets) and tests/test_gpu.py.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
C=/root/rc; mkdir -p $C/assets/models $C/assets/data/faces
cp -r .rw4/blazeface $C/; cp -r .rw4/blazeface $C/assets/models/; cp .rw4/faces/*.png $C/assets/data/faces/
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl 2>&1 | grep -v "already exists" | tail -2
R=$OUT/s29c; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/table.txt
PYTHONPATH=/tmp/site python3 -c "
import sys; sys.path.insert(0, 'benchmarks'); import synthetic; from pathlib import Path
synthetic.random_checkpoint(Path('$C/w.pth'))"
empty() { rm -rf /root/.nv /root/.triton $C/blazeface/cache $ROOT/models/cache/python $ROOT/.gpu/trees/main/models/cache/python /root/.cache/emopipe/cache/python; }
mkdir -p /tmp/here; cd /tmp/here
O="--weights $C/w.pth --detector blazeface_back --models-dir $C/blazeface --no-progress"
one() {  # label variant
  local label=$1 variant=$2 tree=$ROOT flag="EMOPIPE_EARLY_PLANS=1"
  [ $variant = off ] && flag="EMOPIPE_EARLY_PLANS=0"
  [ $variant = main ] && tree=$ROOT/.gpu/trees/main
  rm -rf /tmp/o1; mkdir -p /tmp/o1; local t0=$(date +%s.%N)
  (env $flag PYTHONPATH=$tree:/tmp/site timeout 150 python3 -m emopipe $ROOT/.rw4/clip10s_720p_h264.mp4 \
    -o /tmp/o1/rows.csv $O > $R/$label.log 2>&1)
  local rc=$?
  local wall=$(python3 -c "print(round($(date +%s.%N)-$t0,2))")
  echo "$label: rc=$rc wall=$wall s $(python3 -c "
import json; s=json.load(open('/tmp/o1/rows.summary.json')); st=s['startup']
print({k: (round(v, 2) if isinstance(v, float) else v) for k, v in st.items() if k.endswith('_s')}, 'fps', round(s.get('fps') or 0), 'faces', s.get('faces'))" 2>&1 | tail -1) | $(grep -h "built\|waited" $R/$label.log | tr '\n' ' ')" | tee -a $R/table.txt
  cp /tmp/o1/rows.csv $R/$label.rows.csv 2>/dev/null
}
echo "== the very first command emulated: new / off / main" | tee -a $R/table.txt
for i in 1 2 3; do for v in new off main; do empty; one veryfirst-$v-$i $v; done; done
echo "== warm: new / off / main" | tee -a $R/table.txt
for v in new off main; do one primer-$v $v; done
for i in 1 2 3; do for v in new off main; do one warm-$v-$i $v; done; done
python3 - >> $R/table.txt 2>&1 <<PY
import csv
def rows(p):
    with open(p) as f: return list(csv.DictReader(f))
a, b = rows("$R/warm-new-1.rows.csv"), rows("$R/warm-main-1.rows.csv")
keys = [k for k in a[0] if k.startswith(("valence", "arousal"))]
print("rows new/main", len(a), len(b), "largest V/A difference", max(abs(float(x[k]) - float(y[k])) for x, y in zip(a, b) for k in keys))
PY
cp $R/table.txt $OUT/table-c.txt
cd $ROOT
echo "== tests" | tee -a $OUT/table-c.txt
EMOPIPE_TEST_ASSETS=$C/assets PYTHONPATH=$ROOT:/tmp/site timeout 420 python3 -m pytest -q -p no:cacheprovider -rs \
  tests/test_early_plans.py tests/test_cudnn_epilogue.py tests/test_kernels.py tests/test_gpu.py \
  "tests/test_pipeline.py::test_the_detectors_pass_runs_within_the_window_that_compiles_emonets_kernels" 2>&1 | tail -15 | tee -a $OUT/table-c.txt
(cd $R && tar czf $OUT/s29c-logs.tar.gz *.log)
rm -rf $R
