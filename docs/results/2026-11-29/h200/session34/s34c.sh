#!/bin/bash
# session 34 (s34c): where one process's interpreter lock goes (py-spy record --gil, and every thread's time with
# --idle), one 3-minute 720p video and one 60-s four-face video; main's head (this checkout); the NVDEC GPU tests.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
C=/root/rc; mkdir -p $C
cp -r .rw4/blazeface $C/
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl .rwP/*.whl 2>&1 | grep -v "already exists" | tail -2
R=$OUT/s34c; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/table.txt
PYTHONPATH=/tmp/site python3 -c "
import sys; sys.path.insert(0, 'benchmarks'); import synthetic; from pathlib import Path
synthetic.random_checkpoint(Path('$C/w.pth'))"
(PYTHONPATH=$ROOT:/tmp/site timeout 300 python3 -m pytest -q -p no:cacheprovider tests/test_gpu.py -k "nvdec or NVDEC" > $R/gputests.log 2>&1; echo "gpu tests: rc=$? $(tail -1 $R/gputests.log)" | tee -a $R/table.txt)
mkdir -p /tmp/here; cd /tmp/here
O="--weights $C/w.pth --detector blazeface_back --models-dir $C/blazeface --no-progress"
SPY=/tmp/site/bin/py-spy; [ -x $SPY ] || SPY=$(find /tmp/site -name py-spy -type f | head -1)
one() {  # label file [py-spy options]
  rm -rf /tmp/o1; mkdir -p /tmp/o1; local t0=$(date +%s.%N)
  if [ -n "${3:-}" ]; then
    (PYTHONPATH=$ROOT:/tmp/site timeout 200 $SPY record $3 -r 250 -f raw -o $R/$1.txt -- python3 -m emopipe $2 -o /tmp/o1/rows.csv $O > $R/$1.log 2>&1)
  else
    (PYTHONPATH=$ROOT:/tmp/site timeout 200 python3 -m emopipe $2 -o /tmp/o1/rows.csv $O > $R/$1.log 2>&1)
  fi
  echo "$1: rc=$? wall=$(python3 -c "print(round($(date +%s.%N)-$t0,2))") s $(python3 -c "
import json; s=json.load(open('/tmp/o1/rows.summary.json')); st=s['startup']
print('fps %.0f frames %d faces %d decoder %s stages' % (s.get('fps') or 0, s['frames'], s['faces'], s.get('decoder')), {k: round(v, 2) for k, v in (s.get('stage_seconds') or {}).items()})" 2>&1 | tail -1)" | tee -a $R/table.txt
}
LONG=$ROOT/.rw5/video180s_720p_1face_h264.mp4
FOUR=$ROOT/.rw5/video60s_720p_4face_h264.mp4
one prime $ROOT/.rw4/clip10s_720p_h264.mp4
one long-1 $LONG; one long-2 $LONG
one long-gil $LONG "--gil"
one long-idle $LONG "--idle"
one four-1 $FOUR
one four-gil $FOUR "--gil"
cp $R/table.txt $OUT/table-c.txt
(cd $R && tar czf $OUT/s34c-logs.tar.gz *.log *.txt && rm -f *.log)
