#!/bin/bash
# session 35 (s35h): a fresh machine as `pip install` leaves it (bytecode kept, every other cache emptied), this
# checkout ("new": a GPU run loads and warms with two CPU threads; NVDEC seeks) against main's head 47e6455
# (.gpu/trees/main), interleaved: a one-clip command ×3 each; the 64-clip archive over --processes auto (4, MPS) ×2 with
# the new tree (its workers had one CPU thread already).
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
C=/root/rc; mkdir -p $C
cp -r .rw4/blazeface $C/
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/pynvvideocodec*.whl .rw4/nvidia_cudnn*.whl .rw4/face_alignment*.whl 2>&1 | grep -v "already exists" | tail -2
R=$OUT/s35h; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/table.txt
PYTHONPATH=/tmp/site python3 -c "
import sys, shutil; sys.path.insert(0, 'benchmarks'); import synthetic; from pathlib import Path
synthetic.random_checkpoint(Path('$C/w.pth'))
d = Path('$C') / 'clips'; d.mkdir(exist_ok=True)
for i in range(64): shutil.copy('.rw4/clip10s_720p_h264.mp4', d / f'clip{i:02d}.mp4')
"
fresh() { rm -rf /root/.nv /root/.triton; find $C/blazeface/cache -mindepth 1 -maxdepth 1 ! -name python -exec rm -rf {} +; }
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
full, run = t['done_s'] - t['ready_s'], t['done_s'] - t['first_row_s']
print(s['ok'], 'ok,', p['worker_failures'], 'died;', {k: round(v, 2) for k, v in t.items()},
      '| frames/s ready->done %d, first row->done %d, summed %d | faces/s %d, %d, %d' % (s['frames'] / full, s['frames'] / run, sum(w['fps'] or 0 for w in ws), s['faces'] / full, s['faces'] / run, sum(w['faces_per_s'] or 0 for w in ws)),
      '| workers ready', [round(w['start']['ready_s'], 2) for w in ws], 'first row', [round(w['startup']['first_row_s'], 2) for w in ws])" 2>&1 | tail -1)" | tee -a $R/table.txt
}
one loan-first-new new
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log PATH=$PATH:/usr/local/nvidia/bin
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
mps_on() { /usr/local/nvidia/bin/nvidia-cuda-mps-control -d; }
mps_off() { echo quit | /usr/local/nvidia/bin/nvidia-cuda-mps-control; sleep 1; }
for r in 1 2 3; do for t in main new; do fresh; one oneclip-fresh-$t-$r $t; done; done
for r in 1 2; do fresh; mps_on; many archive-fresh-new-$r new clips "--processes auto"; mps_off; done
grep -h "died\|Error\|error\|malloc\|corrupt" $R/*.log | sort | uniq -c | head -20 >> $R/table.txt
cp $R/table.txt $OUT/table-h.txt
(cd $R && tar czf $OUT/s35h-logs.tar.gz *.log *.summary.json *.txt && rm -f *.log *.summary.json)
