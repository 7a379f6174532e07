#!/bin/bash
# session 19: where the time goes — (1) a one-clip command's start-up (summary's startup phases, py-spy of the whole
# command by wall time per thread, -X importtime); (2) a fleet of 32 paced cameras in one process, py-spy sampling
# only the thread holding the interpreter lock (--gil), against the same fleet unprofiled.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
PART=${1:-all}
C=/root/rc; mkdir -p $C
cp -n .rw4/clip10s_720p_h264.mp4 $C/ 2>/dev/null
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rwF/*.whl .rw4/pynvvideocodec*.whl 2>&1 | grep -v "already exists" | tail -2
SPY=/tmp/site/bin/py-spy; [ -x $SPY ] || SPY=$(ls /tmp/site/*/py-spy 2>/dev/null | head -1)
R=$OUT/s19a-$PART; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/table.txt
echo "py-spy: $SPY" | tee -a $R/table.txt
export PYTHONPATH=$ROOT:/tmp/site
python3 -c "
import sys, shutil; sys.path.insert(0, 'benchmarks'); import synthetic; from pathlib import Path
synthetic.random_checkpoint(Path('$C/w.pth'))
d = Path('$C/one'); d.mkdir(exist_ok=True); shutil.copy('$C/clip10s_720p_h264.mp4', d / 'clip.mp4')"
O="--weights $C/w.pth --detector blazeface_back --models-dir $ROOT/.rwF/blazeface --no-progress"
startup() {  # label, prefix command
  local label=$1; shift
  rm -rf /tmp/o; local t0=$(date +%s.%N)
  timeout 150 "$@" -m emopipe $C/one -o /tmp/o $O ${X:-} > $R/$label.log 2>&1; local rc=$?
  echo "$label: rc=$rc wall=$(python3 -c "print(round($(date +%s.%N)-$t0,2))") s; $(python3 -c "
import json; s=json.load(open('/tmp/o/summary.json'))
print(json.dumps((s.get('pipeline') or {}).get('startup')))" 2>&1 | tail -1)" | tee -a $R/table.txt
}
if [ $PART = all ] || [ $PART = startup ]; then
  startup first python3
  startup warm-a python3
  startup warm-b python3
  startup importtime python3 -X importtime
  startup spy $SPY record --idle --threads --nonblocking -r 200 -f raw -o $R/spy-startup.txt -- python3
  startup warm-c python3
  X=--no-cudnn-benchmark startup heuristics-a python3
  grep "import time" $R/importtime.log | sort -t'|' -k2 -n -r | head -40 > $R/importtime-top.txt
fi
fleet() {  # label, prefix..., -- fleet args
  local label=$1; shift
  local t0=$(date +%s)
  timeout 200 "$@" benchmarks/fleet.py --models-dir $ROOT/.rwF/blazeface --out $R/$label --counts 32 --seconds 15 > $R/$label.txt 2>&1
  echo "== $label (rc=$?, $(( $(date +%s) - t0 )) s)" | tee -a $R/table.txt
  find $R/$label -name "*.csv" -delete
  grep -A4 "^cameras" $R/$label.txt | tee -a $R/table.txt
}
if [ $PART = all ] || [ $PART = fleet ]; then
  fleet fleet32 python3
  fleet fleet32-gil $SPY record --gil --threads --nonblocking -r 200 -f raw -o $R/spy-fleet-gil.txt -- python3
  fleet fleet32-all $SPY record --idle --threads --nonblocking -r 100 -f raw -o $R/spy-fleet-all.txt -- python3
fi
cp $R/table.txt $OUT/table-$PART.txt; tar czf $OUT/s19a-$PART.tgz -C $OUT s19a-$PART && rm -rf $R; ls -la $OUT
