#!/bin/bash
# session 34 (s34g): the command leaves its engines to the process's end (this checkout, "new": no full collection of
# the heap after the last frame) against main's head e54dea6 (.gpu/trees/main): whole one-clip commands and one
# 3-minute video in one process, interleaved.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
C=/root/rc; mkdir -p $C
cp -r .rw4/blazeface $C/
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl 2>&1 | grep -v "already exists" | tail -2
R=$OUT/s34g; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/table.txt
PYTHONPATH=/tmp/site python3 -c "
import sys, shutil; sys.path.insert(0, 'benchmarks'); import synthetic; from pathlib import Path
synthetic.random_checkpoint(Path('$C/w.pth'))
"
mkdir -p /tmp/here; cd /tmp/here
O="--weights $C/w.pth --detector blazeface_back --models-dir $C/blazeface --no-progress"
tree() { if [ "$1" = main ]; then echo $ROOT/.gpu/trees/main; else echo $ROOT; fi; }
one() {  # label tree file
  rm -rf /tmp/o1; mkdir -p /tmp/o1; local t0=$(date +%s.%N)
  (PYTHONPATH=$(tree $2):/tmp/site timeout 150 python3 -m emopipe $3 -o /tmp/o1/rows.csv $O > $R/$1.log 2>&1)
  local rc=$? wall=$(python3 -c "print(round($(date +%s.%N)-$t0,2))")
  echo "$1: rc=$rc wall=$wall s $(python3 -c "
import json; s=json.load(open('/tmp/o1/rows.summary.json')); st=s['startup']
print('first row %.2f s, frames %d in %.2f s (%.0f frames/s), after the last frame %.2f s' % (st['first_row_s'], s['frames'], s['seconds'], s['fps'] or 0, $wall - st['first_row_s'] - s['seconds']))" 2>&1 | tail -1)" | tee -a $R/table.txt
}
many() {  # label tree folder options
  rm -rf /tmp/o; local t0=$(date +%s.%N)
  (PYTHONPATH=$(tree $2):/tmp/site timeout 200 python3 -m emopipe $C/$3 -o /tmp/o $O $4 > $R/$1.log 2>&1)
  local rc=$?
  cp /tmp/o/summary.json $R/$1.summary.json 2>/dev/null
  echo "$1: rc=$rc wall=$(python3 -c "print(round($(date +%s.%N)-$t0,2))") s; $(python3 -c "
import json; s=json.load(open('/tmp/o/summary.json')); p = s['processes']; t = p['timeline']
print(s['ok'], 'ok,', p['worker_failures'], 'died;', {k: round(v, 2) for k, v in t.items()})" 2>&1 | tail -1)" | tee -a $R/table.txt
}
CLIP=$ROOT/.rw4/clip10s_720p_h264.mp4
LONG=$ROOT/.rw5/video180s_720p_1face_h264.mp4
one prime-new new $CLIP; one prime-main main $CLIP
for r in 1 2 3 4 5; do one clip-main-$r main $CLIP; one clip-new-$r new $CLIP; done
for r in 1 2; do one long-main-$r main $LONG; one long-new-$r new $LONG; done
grep -h "died\|Fatal\|malloc\|corrupt\|Traceback" $R/*.log | sort | uniq -c | head -20 >> $R/table.txt
cp $R/table.txt $OUT/table-g.txt
(cd $R && tar czf $OUT/s34g-logs.tar.gz *.log *.summary.json *.txt && rm -f *.log *.summary.json)
