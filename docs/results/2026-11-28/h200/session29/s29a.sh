#!/bin/bash
# session 29 (s29a): (1) the plan recipes recorded (benchmarks/record_plan_recipes.py), the library layout that the
# early build loads cuDNN's libraries from; (2) the early build alone on an empty plan folder; (3) the very first
# command emulated (every cache emptied, the bytecode's too), the early build on against off (EMOPIPE_EARLY_PLANS=0),
# three interleaved pairs; (4) warm one-clip commands, on against off, three interleaved pairs after a primer;
# (5) the cuDNN plan tests.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
C=/root/rc; mkdir -p $C
cp -r .rw4/blazeface $C/
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl 2>&1 | grep -v "already exists" | tail -2
R=$OUT/s29a; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/table.txt
PYTHONPATH=/tmp/site python3 -c "
import sys; sys.path.insert(0, 'benchmarks'); import synthetic; from pathlib import Path
synthetic.random_checkpoint(Path('$C/w.pth'))"
python3 -c "import torch, sys; print('torch', torch.__version__, torch.__file__); print(sys.path)" >> $R/table.txt 2>&1
python3 - >> $R/table.txt 2>&1 <<'PY'
import glob, os, sys
for e in sys.path:
    for f in sorted(glob.glob(os.path.join(e or ".", "nvidia", "*", "lib", "lib*"))):
        if any(k in f for k in ("nvrtc", "nvJitLink", "cudnn.so")):
            print(f)
PY
empty() { rm -rf /root/.nv /root/.triton $C/blazeface/cache $ROOT/models/cache/python /root/.cache/emopipe/cache/python; }
echo "== (1) recipes" | tee -a $R/table.txt
empty
(PYTHONPATH=$ROOT:/tmp/site timeout 300 python3 benchmarks/record_plan_recipes.py --models-dir $C/blazeface > $R/record.log 2>&1; echo "record rc=$?") | tee -a $R/table.txt
tail -8 $R/record.log | tee -a $R/table.txt
cp emopipe/model/plan_recipes.json $OUT/ 2>/dev/null
mkdir -p /tmp/here; cd /tmp/here
echo "== (2) the early build alone, an empty plan folder and CUDA cache" | tee -a $R/table.txt
empty; t0=$(date +%s.%N)
PYTHONPATH=$ROOT:/tmp/site python3 -m emopipe.model.early_plans 0 $C/blazeface/cache/cudnn $ROOT/emopipe/model/plan_recipes.json info "emonet b64 half" "blazeface_back b32 half" 2>&1 | tee -a $R/table.txt
echo "rc=${PIPESTATUS[0]} wall $(python3 -c "print(round($(date +%s.%N)-$t0,2))") s, plans $(ls $C/blazeface/cache/cudnn/*.plan | wc -l)" | tee -a $R/table.txt
t0=$(date +%s.%N)
PYTHONPATH=$ROOT:/tmp/site python3 -m emopipe.model.early_plans 0 $C/blazeface/cache/cudnn $ROOT/emopipe/model/plan_recipes.json info "emonet b64 half" "blazeface_back b32 half" 2>&1 | tee -a $R/table.txt
echo "again (every plan on disk): wall $(python3 -c "print(round($(date +%s.%N)-$t0,2))") s" | tee -a $R/table.txt
O="--weights $C/w.pth --detector blazeface_back --models-dir $C/blazeface --no-progress"
one() {  # label on|off
  local label=$1 mode=$2 flag=""
  [ $mode = off ] && flag="EMOPIPE_EARLY_PLANS=0"
  rm -rf /tmp/o1; mkdir -p /tmp/o1; local t0=$(date +%s.%N)
  (env $flag PYTHONPATH=$ROOT:/tmp/site timeout 150 python3 -m emopipe $ROOT/.rw4/clip10s_720p_h264.mp4 \
    -o /tmp/o1/rows.csv $O > $R/$label.log 2>&1)
  local rc=$?
  local wall=$(python3 -c "print(round($(date +%s.%N)-$t0,2))")
  echo "$label: rc=$rc wall=$wall s $(python3 -c "
import json; s=json.load(open('/tmp/o1/rows.summary.json')); st=s['startup']
print({k: (round(v, 2) if isinstance(v, float) else v) for k, v in st.items() if k.endswith('_s')}, 'fps', round(s.get('fps') or 0), 'rows', s.get('rows'))" 2>&1 | tail -1) | $(grep -h "built from\|waited\|plans:" $R/$label.log | tr '\n' ' ')" | tee -a $R/table.txt
}
echo "== (3) the very first command emulated: on / off" | tee -a $R/table.txt
for i in 1 2 3; do empty; one veryfirst-on-$i on; empty; one veryfirst-off-$i off; done
echo "== (4) warm: on / off" | tee -a $R/table.txt
one primer on
for i in 1 2 3; do one warm-on-$i on; one warm-off-$i off; done
cp $R/table.txt $OUT/table-a.txt
cd $ROOT
echo "== (5) tests" | tee -a $OUT/table-a.txt
EMOPIPE_TEST_ASSETS=$C/assets PYTHONPATH=$ROOT:/tmp/site timeout 200 python3 -m pytest -q -x -p no:cacheprovider tests/test_cudnn_epilogue.py tests/test_early_plans.py 2>&1 | tail -15 | tee -a $OUT/table-a.txt
(cd $R && tar czf $OUT/s29a-logs.tar.gz *.log)
rm -rf $R
