#!/bin/bash
# session 35 (s35f): a GPU run loads and warms with two PyTorch CPU threads (this checkout, "new") against main's head
# 47e6455 (.gpu/trees/main): the one-clip command alone (interleaved ×3), four at once under MPS (×2 each), eight (×1
# each); the 64-clip archive over --processes 4 once each (its workers had one thread already).
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
C=/root/rc; mkdir -p $C
cp -r .rw4/blazeface $C/
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/pynvvideocodec*.whl .rw4/nvidia_cudnn*.whl .rw4/face_alignment*.whl 2>&1 | grep -v "already exists" | tail -2
R=$OUT/s35f; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/table.txt
PYTHONPATH=/tmp/site python3 -c "
import sys; sys.path.insert(0, 'benchmarks'); import synthetic; from pathlib import Path
synthetic.random_checkpoint(Path('$C/w.pth'))"
mkdir -p $C/clips && for i in $(seq -w 0 63); do cp .rw4/clip10s_720p_h264.mp4 $C/clips/c$i.mp4; done
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log PATH=$PATH:/usr/local/nvidia/bin
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
/usr/local/nvidia/bin/nvidia-cuda-mps-control -d && echo "MPS daemon started" | tee -a $R/table.txt
mkdir -p /tmp/here; cd /tmp/here
O="--weights $C/w.pth --detector blazeface_back --models-dir $C/blazeface --no-progress"
CLIP=$ROOT/.rw4/clip10s_720p_h264.mp4
tree() { if [ "$1" = main ]; then echo $ROOT/.gpu/trees/main; else echo $ROOT; fi; }
together() {  # label tree count
  rm -rf /tmp/p; mkdir -p /tmp/p; local t0=$(date +%s.%N)
  for i in $(seq 1 $3); do
    PYTHONPATH=$(tree $2):/tmp/site timeout 120 python3 -m emopipe $CLIP -o /tmp/p/$1-$i.csv $O > $R/$1-$i.log 2>&1 &
  done; wait
  echo "$1: $3 at once, wall $(python3 -c "print(round($(date +%s.%N)-$t0,2))") s; $(python3 -c "
import json, glob; ss=[json.load(open(f)) for f in sorted(glob.glob('/tmp/p/$1-*.summary.json'))]
print('first rows', sorted(round(s['startup']['first_row_s'], 2) for s in ss), 'load', sorted(round(s['startup']['load_s'], 2) for s in ss), 'frames', sum(s['frames'] for s in ss))" 2>&1 | tail -1)" | tee -a $R/table.txt
}
many() {  # label tree
  rm -rf /tmp/o; local t0=$(date +%s.%N)
  (PYTHONPATH=$(tree $2):/tmp/site timeout 200 python3 -m emopipe $C/clips -o /tmp/o $O --processes 4 > $R/$1.log 2>&1)
  local rc=$?
  echo "$1: rc=$rc wall=$(python3 -c "print(round($(date +%s.%N)-$t0,2))") s; $(python3 -c "
import json; s=json.load(open('/tmp/o/summary.json')); p = s['processes']; t = p['timeline']
print(s['ok'], 'ok,', p['worker_failures'], 'died;', {k: round(v, 2) for k, v in t.items()})" 2>&1 | tail -1)" | tee -a $R/table.txt
}
together prime-new new 1; together prime-main main 1
for r in 1 2 3; do together alone-main-$r main 1; together alone-new-$r new 1; done
for r in 1 2; do together four-main-$r main 4; together four-new-$r new 4; done
together eight-main main 8; together eight-new new 8
many archive-main main; many archive-new new
echo quit | /usr/local/nvidia/bin/nvidia-cuda-mps-control
grep -h "Fatal\|malloc\|corrupt\|Traceback" $R/*.log | sort | uniq -c | head -20 >> $R/table.txt
cp $R/table.txt $OUT/table-f.txt
(cd $R && tar czf $OUT/s35f-logs.tar.gz *.log *.txt && rm -f *.log)
