#!/bin/bash
# session 28 (s28a): (1) importing the command's modules with Python's cycle collector on and off (the host's
# Python, bytecode kept); (2) warm one-clip commands, main's head (trees/head) against the tree (the collector off
# while the command imports, emopipe/_heap.py), each primed once, then interleaved pairs; (3) cuDNN's autotuning at a
# warm start (s28_cudnn.py: tuned, the detector on heuristics, everything on heuristics), two rounds interleaved.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
C=/root/rc; mkdir -p $C
cp -r .rw4/blazeface $C/
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl 2>&1 | grep -v "already exists" | tail -2
R=$OUT/s28a; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/table.txt
PYTHONPATH=/tmp/site python3 -c "
import sys; sys.path.insert(0, 'benchmarks'); import synthetic; from pathlib import Path
synthetic.random_checkpoint(Path('$C/w.pth'))"
mkdir -p /tmp/here; cd /tmp/here
echo "== (1) import of the command's modules, s (bytecode kept under $ROOT/models/cache/python)" | tee -a $R/table.txt
for i in 1 2 3 4 5; do for m in on off; do
  env -u PYTHONDONTWRITEBYTECODE PYTHONPYCACHEPREFIX=$ROOT/models/cache/python PYTHONPATH=$ROOT:/tmp/site python3 -c "
import gc, sys, time
t = time.perf_counter()
if '$m' == 'off': gc.disable()
import emopipe.api, emopipe.pipeline.models
t1 = time.perf_counter(); gc.enable(); t2 = time.perf_counter(); gc.collect(); t3 = time.perf_counter()
print('$m', f'import {t1-t:.3f} s, a full collection after {t3-t2:.3f} s')" 2>&1 | tail -1 | tee -a $R/table.txt
done; done
O="--weights $C/w.pth --detector blazeface_back --models-dir $C/blazeface --no-progress"
one() {  # label tree
  local label=$1 tree=$2
  rm -rf /tmp/o1; mkdir -p /tmp/o1; local t0=$(date +%s.%N)
  (PYTHONPATH=$tree:/tmp/site timeout 150 python3 -m emopipe $ROOT/.rw4/clip10s_720p_h264.mp4 \
    -o /tmp/o1/rows.csv $O > $R/$label.log 2>&1)
  local rc=$?
  local wall=$(python3 -c "print(round($(date +%s.%N)-$t0,2))")
  echo "$label: rc=$rc wall=$wall s $(python3 -c "
import json; s=json.load(open('/tmp/o1/rows.summary.json')); st=s['startup']
print({k: (round(v, 2) if isinstance(v, float) else v) for k, v in st.items() if k.endswith('_s')}, 'fps', round(s.get('fps') or 0))" 2>&1 | tail -1)" | tee -a $R/table.txt
  cp /tmp/o1/rows.csv $R/$label.csv 2>/dev/null
}
echo "== (2) one clip, first row (head = main 1b29c6b; new = the collector off while importing)" | tee -a $R/table.txt
one prime-head $ROOT/.gpu/trees/head
one prime-new $ROOT
for i in 1 2 3 4; do one head-$i $ROOT/.gpu/trees/head; one new-$i $ROOT; done
python3 - <<PY | tee -a $R/table.txt
import csv
a = list(csv.DictReader(open("$R/head-1.csv"))); b = list(csv.DictReader(open("$R/new-1.csv")))
print("rows", len(a), len(b), "same frames", [r["frame"] for r in a] == [r["frame"] for r in b])
PY
echo "== (3) cuDNN autotuning at a warm start (720p, BlazeFace back; tree = new)" | tee -a $R/table.txt
for round in 1 2; do for mode in tuned det-heuristic all-heuristic; do
  PYTHONPATH=$ROOT:/tmp/site timeout 150 python3 $ROOT/.gpu/s28_cudnn.py $C/w.pth $C/blazeface $mode 2> $R/cudnn-$mode-$round.log | tail -1 | tee -a $R/table.txt
done; done
cp $R/table.txt $OUT/table-a.txt
(cd $R && tar czf $OUT/s28a-logs.tar.gz *.log)
rm -rf $R
