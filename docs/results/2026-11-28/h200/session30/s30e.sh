#!/bin/bash
# session 30 (s30e): the very first command emulated (CUDA's, Triton's, the plan folder's and the bytecode caches
# emptied), the working tree ("new": 45 plans built from the start) against 4512f84 ("head": 33), three interleaved
# pairs; each kept plan's read-back time by kind.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
C=/root/rc; mkdir -p $C
cp -r .rw4/blazeface $C/
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl 2>&1 | grep -v "already exists" | tail -2
R=$OUT/s30e; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/table.txt
PYTHONPATH=/tmp/site python3 -c "
import sys; sys.path.insert(0, 'benchmarks'); import synthetic; from pathlib import Path
synthetic.random_checkpoint(Path('$C/w.pth'))"
tree() { [ $1 = new ] && echo $ROOT || echo $ROOT/.gpu/trees/head; }
empty() { rm -rf /root/.nv /root/.triton $C/blazeface/cache /root/.cache/emopipe/cache/python; for t in $ROOT $ROOT/.gpu/trees/head; do rm -rf $t/models/cache/python; done; }
mkdir -p /tmp/here; cd /tmp/here
O="--weights $C/w.pth --detector blazeface_back --models-dir $C/blazeface --no-progress"
one() {  # label tree
  local label=$1 t=$(tree $2)
  rm -rf /tmp/o1; mkdir -p /tmp/o1; local t0=$(date +%s.%N)
  (PYTHONPATH=$t:/tmp/site timeout 150 python3 -m emopipe $ROOT/.rw4/clip10s_720p_h264.mp4 \
    -o /tmp/o1/rows.csv $O > $R/$label.log 2>&1)
  local rc=$?
  local wall=$(python3 -c "print(round($(date +%s.%N)-$t0,2))")
  echo "$label: rc=$rc wall=$wall s $(python3 -c "
import json; s=json.load(open('/tmp/o1/rows.summary.json')); st=s['startup']
print({k: (round(v, 2) if isinstance(v, float) else v) for k, v in st.items() if k.endswith('_s')}, 'fps', round(s.get('fps') or 0), 'faces', s.get('faces'))" 2>&1 | tail -1) | $(grep -h "built\|waited" $R/$label.log | tr '\n' ' ')" | tee -a $R/table.txt
}
echo "== the very first command emulated, interleaved" | tee -a $R/table.txt
for i in 1 2 3; do empty; one veryfirst-new-$i new; empty; one veryfirst-head-$i head; done
one warm-new new
echo "== each kept plan read back (a fresh process, no PyTorch)" | tee -a $R/table.txt
PYTHONPATH=$ROOT:/tmp/site timeout 60 python3 $ROOT/.gpu/s30_plans.py $C/blazeface/cache/cudnn "emonet b64 half" "blazeface_back b32 half" 2>&1 | tail -30 | tee -a $R/table.txt
cp $R/table.txt $OUT/table-e.txt
(cd $R && tar czf $OUT/s30e-logs.tar.gz *.log)
rm -rf $R
