#!/bin/bash
# session 34 (s34d): the tracks' change points found in NumPy (this checkout, "new": no ruptures, hence no SciPy
# statistics and spatial modules, imported at the end of a run) against main's head 421785a (ruptures;
# .gpu/trees/main): whole one-clip commands, one 3-minute video in one process, the 64-clip archive over
# --processes auto (4 under MPS), interleaved.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
C=/root/rc; mkdir -p $C
cp -r .rw4/blazeface $C/
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl 2>&1 | grep -v "already exists" | tail -2
R=$OUT/s34d; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/table.txt
PYTHONPATH=/tmp/site python3 -c "
import sys, shutil; sys.path.insert(0, 'benchmarks'); import synthetic; from pathlib import Path
synthetic.random_checkpoint(Path('$C/w.pth'))
d = Path('$C') / 'clips'; d.mkdir(exist_ok=True)
for i in range(64): shutil.copy('.rw4/clip10s_720p_h264.mp4', d / f'clip{i:02d}.mp4')"
for t in main new; do T=$ROOT; [ $t = main ] && T=$ROOT/.gpu/trees/main
  echo "$t: $(cd /tmp && PYTHONPATH=$T:/tmp/site python3 -X importtime -c 'import torch, cv2, numpy; from emopipe.report import segments; import emopipe.report.outputs' 2>&1 | grep -E ' ruptures$| scipy$' | tr -s ' ')" | tee -a $R/table.txt
  echo "$t ruptures import alone: $(cd /tmp && PYTHONPATH=$T:/tmp/site python3 -c 'import time, torch, cv2, numpy; t=time.perf_counter(); import ruptures; print(round(time.perf_counter()-t, 3), "s")' 2>&1 | tail -1)" | tee -a $R/table.txt
done
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
for r in 1 2 3 4; do one clip-main-$r main $CLIP; one clip-new-$r new $CLIP; done
for r in 1 2; do one long-main-$r main $LONG; one long-new-$r new $LONG; done
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log PATH=$PATH:/usr/local/nvidia/bin
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
/usr/local/nvidia/bin/nvidia-cuda-mps-control -d && echo "MPS daemon started" | tee -a $R/table.txt
many p4-prime-new new clips "--processes auto"
for r in 1 2 3 4; do many p4-main-$r main clips "--processes auto"; many p4-new-$r new clips "--processes auto"; done
echo quit | /usr/local/nvidia/bin/nvidia-cuda-mps-control
grep -h "died\|Fatal\|malloc\|corrupt\|Traceback" $R/*.log | sort | uniq -c | head -20 >> $R/table.txt
cp $R/table.txt $OUT/table-d.txt
(cd $R && tar czf $OUT/s34d-logs.tar.gz *.log *.summary.json *.txt && rm -f *.log *.summary.json)
