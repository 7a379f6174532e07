#!/bin/bash
# session 33 (s33a): the final head of session 32 (ec59cfd, this checkout, "new") run as a whole, against session
# 31's head b54a2c8 ("main", .gpu/trees/main) where interleaved: one-clip commands (the loan's first, then warm),
# the 64-clip archive over --processes auto (4 under MPS), sixteen 60-s videos over --processes 8, eight four-face
# 60-s videos over --processes 4.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
C=/root/rc; mkdir -p $C
cp -r .rw4/blazeface $C/
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl 2>&1 | grep -v "already exists" | tail -2
R=$OUT/s33a; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/table.txt
PYTHONPATH=/tmp/site python3 -c "
import sys, shutil; sys.path.insert(0, 'benchmarks'); import synthetic; from pathlib import Path
synthetic.random_checkpoint(Path('$C/w.pth'))
d = Path('$C') / 'clips'; d.mkdir(exist_ok=True)
for i in range(64): shutil.copy('.rw4/clip10s_720p_h264.mp4', d / f'clip{i:02d}.mp4')
d = Path('$C') / 'long16'; d.mkdir(exist_ok=True)
for i in range(16): shutil.copy('.rw5/video60s_720p_1face_h264.mp4', d / f'long16-{i:02d}.mp4')
d = Path('$C') / 'four8'; d.mkdir(exist_ok=True)
for i in range(8): shutil.copy('.rw5/video60s_720p_4face_h264.mp4', d / f'four8-{i:02d}.mp4')"
mkdir -p /tmp/here; cd /tmp/here
O="--weights $C/w.pth --detector blazeface_back --models-dir $C/blazeface --no-progress"
tree() { if [ "$1" = main ]; then echo $ROOT/.gpu/trees/main; else echo $ROOT; fi; }
one() {  # label tree
  rm -rf /tmp/o1; mkdir -p /tmp/o1; local t0=$(date +%s.%N)
  (PYTHONPATH=$(tree $2):/tmp/site timeout 150 python3 -m emopipe $ROOT/.rw4/clip10s_720p_h264.mp4 -o /tmp/o1/rows.csv $O > $R/$1.log 2>&1)
  echo "$1: rc=$? wall=$(python3 -c "print(round($(date +%s.%N)-$t0,2))") s $(python3 -c "
import json; s=json.load(open('/tmp/o1/rows.summary.json')); st=s['startup']
print({k: round(v, 2) for k, v in st.items() if k.endswith('_s') and isinstance(v, float)})" 2>&1 | tail -1)" | tee -a $R/table.txt
}
many() {  # label tree folder options
  rm -rf /tmp/o; local t0=$(date +%s.%N)
  (PYTHONPATH=$(tree $2):/tmp/site timeout 200 python3 -m emopipe $C/$3 -o /tmp/o $O $4 > $R/$1.log 2>&1)
  local rc=$?
  cp /tmp/o/summary.json $R/$1.summary.json 2>/dev/null
  echo "$1: rc=$rc wall=$(python3 -c "print(round($(date +%s.%N)-$t0,2))") s; $(python3 -c "
import json; s=json.load(open('/tmp/o/summary.json')); p = s['processes']; t = p['timeline']; ws = p['worker_summaries']
full = t['done_s'] - t['ready_s']
print(s['ok'], 'ok,', p['worker_failures'], 'died;', {k: round(v, 2) for k, v in t.items()},
      '| frames/s ready->done %d, first row->done %d, summed %d; faces/s ready->done %d' % (s['frames'] / full, s['frames'] / (t['done_s'] - t['first_row_s']), sum(w['fps'] or 0 for w in ws), s['faces'] / full),
      '| workers ready', [round(w['start']['ready_s'], 2) for w in ws], 'first row', [round(w['startup']['first_row_s'], 2) for w in ws],
      'detector warm-up', [round(w['startup']['detector_warmup_s'], 2) for w in ws], 'EmoNet warm-up', [round(w['startup']['engine_warmup_s'], 2) for w in ws])" 2>&1 | tail -1)" | tee -a $R/table.txt
}
one loan-first new; one warm-main-1 main; one warm-new-1 new; one warm-main-2 main; one warm-new-2 new; one warm-new-3 new
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log PATH=$PATH:/usr/local/nvidia/bin
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
/usr/local/nvidia/bin/nvidia-cuda-mps-control -d && echo "MPS daemon started" | tee -a $R/table.txt
many archive-prime new clips "--processes auto"
for r in 1 2 3; do
  many archive-main-$r main clips "--processes auto"
  many archive-new-$r new clips "--processes auto"
done
many long16-new-1 new long16 "--processes 8"
many long16-main-1 main long16 "--processes 8"
many long16-new-2 new long16 "--processes 8"
many four8-new-1 new four8 "--processes 4"
echo quit | /usr/local/nvidia/bin/nvidia-cuda-mps-control
grep -h "died\|Error\|error\|malloc\|corrupt" $R/*.log | sort | uniq -c | head -20 >> $R/table.txt
cp $R/table.txt $OUT/table-a.txt
(cd $R && tar czf $OUT/s33a-logs.tar.gz *.log *.summary.json *.txt && rm -f *.log *.summary.json)
