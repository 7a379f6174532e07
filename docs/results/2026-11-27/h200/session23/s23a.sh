#!/bin/bash
# session 23 (s23a): where a one-clip command's start goes on main (ac13276): the startup phases of plain runs, the
# main thread's timeline under py-spy (speedscope, by wall time), -X importtime; and the CUDA context made on a
# thread while PyTorch imports (s23_ctx.py) against PyTorch making it at its first call.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
C=/root/rc; mkdir -p $C
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl .rwF/*.whl 2>&1 | grep -v "already exists" | tail -2
SPY=/tmp/site/bin/py-spy
R=$OUT/s23a; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/table.txt
mkdir -p /tmp/here; cd /tmp/here
export PYTHONPATH=$ROOT:/tmp/site
for m in plain plain early plain early plain early; do python3 $ROOT/.gpu/s23_ctx.py $m 2>&1 | tail -1 | tee -a $R/table.txt; done
python3 -c "
import sys, shutil; sys.path.insert(0, '$ROOT/benchmarks'); import synthetic; from pathlib import Path
synthetic.random_checkpoint(Path('$C/w.pth'))"
O="--weights $C/w.pth --detector blazeface_back --models-dir $C/blazeface --no-progress"
cp -r $ROOT/.rw4/blazeface $C/
one() {  # label, prefix command...
  local label=$1; shift
  rm -rf /tmp/o1; mkdir -p /tmp/o1; local t0=$(date +%s.%N)
  timeout 150 "$@" -m emopipe $ROOT/.rw4/clip10s_720p_h264.mp4 -o /tmp/o1/rows.csv $O > $R/$label.log 2>&1; local rc=$?
  echo "$label: rc=$rc wall=$(python3 -c "print(round($(date +%s.%N)-$t0,2))") s $(python3 -c "
import json; s=json.load(open('/tmp/o1/rows.summary.json')); st=s['startup']
print({k: (round(v, 2) if isinstance(v, float) else v) for k, v in st.items() if k.endswith('_s')})" 2>&1 | tail -1)" | tee -a $R/table.txt
}
one first python3
one warm-a python3
one warm-b python3
one spy-a $SPY record --idle --threads --nonblocking -r 200 -f speedscope -o $R/spy-a.json -- python3
one spy-b $SPY record --idle --threads --nonblocking -r 200 -f speedscope -o $R/spy-b.json -- python3
one importtime python3 -X importtime
one warm-c python3
grep "import time" $R/importtime.log | sort -t'|' -k2 -n -r | head -60 > $R/importtime-top.txt
grep "import time" $R/importtime.log | sort -t'|' -k1.13 -n -r | head -40 > $R/importtime-self.txt
for s in a b; do python3 $ROOT/.gpu/s23_timeline.py $R/spy-$s.json 0.25 > $R/timeline-$s.txt 2>&1; done
python3 $ROOT/.gpu/s23_timeline.py $R/spy-a.json 0.5 "" > $R/timeline-a-threads.txt 2>&1
cp $R/table.txt $OUT/table-a.txt
