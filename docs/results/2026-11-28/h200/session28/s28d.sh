#!/bin/bash
# session 28 (s28d): the very first command, emulated — every cache emptied (CUDA's, Triton's, the plan folder and
# both trees' compiled bytecode) — main's head (trees/head) against the tree (the collector off while importing, which
# here also compiles ~1 000 modules), three interleaved pairs, after the loan's own first command (the tree).
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
C=/root/rc; mkdir -p $C
cp -r .rw4/blazeface $C/
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl 2>&1 | grep -v "already exists" | tail -2
R=$OUT/s28d; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/table.txt
PYTHONPATH=/tmp/site python3 -c "
import sys; sys.path.insert(0, 'benchmarks'); import synthetic; from pathlib import Path
synthetic.random_checkpoint(Path('$C/w.pth'))"
mkdir -p /tmp/here; cd /tmp/here
O="--weights $C/w.pth --detector blazeface_back --models-dir $C/blazeface --no-progress"
treeof() { if [ $1 = new ]; then echo $ROOT; else echo $ROOT/.gpu/trees/head; fi; }
empty() { rm -rf /root/.nv /root/.triton $C/blazeface/cache $ROOT/models/cache/python /root/.cache/emopipe/cache/python; }
one() {  # label tree
  local label=$1 t=$2
  rm -rf /tmp/o1; mkdir -p /tmp/o1; local t0=$(date +%s.%N)
  (PYTHONPATH=$(treeof $t):/tmp/site timeout 150 python3 -m emopipe $ROOT/.rw4/clip10s_720p_h264.mp4 \
    -o /tmp/o1/rows.csv $O > $R/$label.log 2>&1)
  local rc=$?
  local wall=$(python3 -c "print(round($(date +%s.%N)-$t0,2))")
  echo "$label: rc=$rc wall=$wall s $(python3 -c "
import json; s=json.load(open('/tmp/o1/rows.summary.json')); st=s['startup']
print({k: (round(v, 2) if isinstance(v, float) else v) for k, v in st.items() if k.endswith('_s')}, 'fps', round(s.get('fps') or 0))" 2>&1 | tail -1)" | tee -a $R/table.txt
}
empty; one loan-first-new new
for i in 1 2 3; do empty; one veryfirst-head-$i head; empty; one veryfirst-new-$i new; done
cp $R/table.txt $OUT/table-d.txt
(cd $R && tar czf $OUT/s28d-logs.tar.gz *.log)
rm -rf $R
