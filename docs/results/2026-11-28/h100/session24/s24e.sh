#!/bin/bash
# session 24 (s24e): H100, a machine started for it. Its first emopipe command (this tree, 7b089c7: nothing
# cached, not even the operating system's copy of PyTorch's libraries beyond one import), then a fresh machine
# emulated for main (6d4307e) and this tree (CUDA's compute cache, Triton's and the plan cache emptied), then
# a warm command of this tree.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
C=/root/rc; mkdir -p $C/assets/models $C/assets/data/faces
cp -r .rw4/blazeface $C/; cp -r .rw4/blazeface $C/assets/models/; cp .rw4/faces/*.png $C/assets/data/faces/
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl .rwF/*.whl 2>&1 | grep -v "already exists" | tail -2
R=$OUT/s24e; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/table.txt
PYTHONPATH=/tmp/site python3 -c "
import sys; sys.path.insert(0, 'benchmarks'); import synthetic; from pathlib import Path
synthetic.random_checkpoint(Path('$C/w.pth'))"
mkdir -p /tmp/here; cd /tmp/here
O="--weights $C/w.pth --detector blazeface_back --models-dir $C/blazeface --no-progress"
tree() { [ "$1" = base ] && echo "$ROOT/.rwE/base" || echo "$ROOT"; }
one() {  # label tree [prefix...]
  local label=$1 t=$2; shift 2
  rm -rf /tmp/o1; mkdir -p /tmp/o1; local t0=$(date +%s.%N)
  (PYTHONPATH=$(tree $t):/tmp/site timeout 150 "${@:-python3}" -m emopipe $ROOT/.rw4/clip10s_720p_h264.mp4 \
    -o /tmp/o1/rows.csv $O > $R/$label.log 2>&1)
  local rc=$?
  local wall=$(python3 -c "print(round($(date +%s.%N)-$t0,2))")
  cp /tmp/o1/rows.csv $R/$label.csv 2>/dev/null
  echo "$label: rc=$rc wall=$wall s $(python3 -c "
import json; s=json.load(open('/tmp/o1/rows.summary.json')); st=s['startup']
print({k: (round(v, 2) if isinstance(v, float) else v) for k, v in st.items() if k.endswith('_s')}, 'fps', round(s.get('fps') or 0))" 2>&1 | tail -1)" | tee -a $R/table.txt
  grep -a "cuDNN plans:\|plan builder\|Triton" $R/$label.log | sed 's/^/    /' | tee -a $R/table.txt
}
cold() { rm -rf /root/.nv /root/.triton $C/blazeface/cache; }
ls -d /root/.nv /root/.triton $C/blazeface/cache 2>&1 | tee -a $R/table.txt
one first-new new
cold; one cold-base base
cold; one cold-new new
one warm-new new
cp $R/table.txt $OUT/table-e.txt
(cd $R && tar czf $OUT/s24e-logs.tar.gz *.log)
rm -rf $R
