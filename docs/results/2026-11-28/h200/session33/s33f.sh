#!/bin/bash
# session 33 (s33f): a 2 x H200 host again, main's head a4611dd (faulthandler in the command and its workers): the
# 64-clip archive over `--processes auto` (8 workers under MPS) sixteen times, looking for a worker's crash at its
# start as in s33f, now with its threads' stacks printed.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
C=/root/rc; mkdir -p $C
cp -r .rw4/blazeface $C/
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl 2>&1 | grep -v "already exists" | tail -2
R=$OUT/s33f; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/table.txt
nproc | sed 's/^/cores: /' | tee -a $R/table.txt
PYTHONPATH=/tmp/site python3 -c "
import sys, shutil; sys.path.insert(0, 'benchmarks'); import synthetic; from pathlib import Path
synthetic.random_checkpoint(Path('$C/w.pth'))
for name, n in (('clips', 64),):
    d = Path('$C') / name; d.mkdir(exist_ok=True)
    for i in range(n): shutil.copy('.rw4/clip10s_720p_h264.mp4', d / f'clip{i:03d}.mp4')
"
mkdir -p /tmp/here; cd /tmp/here
O="--weights $C/w.pth --detector blazeface_back --models-dir $C/blazeface --no-progress"
rm -rf /tmp/o1; mkdir -p /tmp/o1; t0=$(date +%s.%N)
(PYTHONPATH=$ROOT:/tmp/site timeout 150 python3 -m emopipe $ROOT/.rw4/clip10s_720p_h264.mp4 -o /tmp/o1/rows.csv $O > $R/loan-first.log 2>&1)
echo "loan-first: rc=$? wall=$(python3 -c "print(round($(date +%s.%N)-$t0,2))") s first row $(python3 -c "
import json; print(round(json.load(open('/tmp/o1/rows.summary.json'))['startup']['first_row_s'], 2))" 2>&1 | tail -1)" | tee -a $R/table.txt
many() {  # label folder options
  rm -rf /tmp/o; local t0=$(date +%s.%N)
  (PYTHONPATH=$ROOT:/tmp/site timeout 240 python3 -m emopipe $C/$2 -o /tmp/o $O $3 > $R/$1.log 2>&1)
  local rc=$?
  cp /tmp/o/summary.json $R/$1.summary.json 2>/dev/null
  echo "$1: rc=$rc wall=$(python3 -c "print(round($(date +%s.%N)-$t0,2))") s; $(python3 -c "
import json, collections; s=json.load(open('/tmp/o/summary.json')); p = s['processes']; t = p['timeline']; ws = p['worker_summaries']
print(s['ok'], 'ok,', p['worker_failures'], 'died;', len(ws), 'workers;', {k: round(v, 2) for k, v in t.items()},
      '| frames/s first row->done %d, summed %d' % (s['frames'] / (t['done_s'] - t['first_row_s']), sum(w['fps'] or 0 for w in ws)),
      '| workers ready', [round(w['start']['ready_s'], 2) for w in ws], 'first row', [round(w['startup']['first_row_s'], 2) for w in ws])" 2>&1 | tail -1)" | tee -a $R/table.txt
}
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log PATH=$PATH:/usr/local/nvidia/bin
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
/usr/local/nvidia/bin/nvidia-cuda-mps-control -d && echo "MPS daemon started" | tee -a $R/table.txt
for r in $(seq 1 16); do many archive-auto-$r clips "--processes auto"; done
echo quit | /usr/local/nvidia/bin/nvidia-cuda-mps-control
grep -h "died\|Error\|error\|malloc\|corrupt\|Fatal" $R/*.log | sort | uniq -c | head -20 >> $R/table.txt
for f in $R/*.log; do grep -q "Fatal Python" $f && { echo "== $(basename $f)"; grep -A40 "Fatal Python" $f | head -80; } >> $R/table.txt; done
cp $R/table.txt $OUT/table-f.txt
(cd $R && tar czf $OUT/s33f-logs.tar.gz *.log *.summary.json *.txt && rm -f *.log *.summary.json)
