#!/bin/bash
# session 35 (s35d): why "load" (weights read, engines built) takes 0.5 s in one command and 6 s / 12.5 s in each of
# four / eight commands started together (s35c): py-spy record --idle of each command, four at once with MPS and
# without, one alone; the one-clip command with --max-frames 30.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
C=/root/rc; mkdir -p $C
cp -r .rw4/blazeface $C/
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/pynvvideocodec*.whl .rw4/nvidia_cudnn*.whl .rw4/face_alignment*.whl .rwP/*.whl 2>&1 | grep -v "already exists" | tail -2
R=$OUT/s35d; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/table.txt
PYTHONPATH=/tmp/site python3 -c "
import sys; sys.path.insert(0, 'benchmarks'); import synthetic; from pathlib import Path
synthetic.random_checkpoint(Path('$C/w.pth'))"
mkdir -p /tmp/here; cd /tmp/here
O="--weights $C/w.pth --detector blazeface_back --models-dir $C/blazeface --no-progress --max-frames 30"
SPY=/tmp/site/bin/py-spy; [ -x $SPY ] || SPY=$(find /tmp/site -name py-spy -type f | head -1)
CLIP=$ROOT/.rw4/clip10s_720p_h264.mp4
cmd() {  # label spy(0/1)
  if [ "$2" = 1 ]; then
    PYTHONPATH=$ROOT:/tmp/site timeout 120 $SPY record --idle -r 200 -f raw -o $R/$1.txt -- python3 -m emopipe $CLIP -o /tmp/p/$1.csv $O > $R/$1.log 2>&1
  else
    PYTHONPATH=$ROOT:/tmp/site timeout 120 python3 -m emopipe $CLIP -o /tmp/p/$1.csv $O > $R/$1.log 2>&1
  fi
}
together() {  # label count spy
  rm -rf /tmp/p; mkdir -p /tmp/p; local t0=$(date +%s.%N)
  for i in $(seq 1 $2); do cmd $1-$i $3 & done; wait
  echo "$1: $2 at once, wall $(python3 -c "print(round($(date +%s.%N)-$t0,2))") s" | tee -a $R/table.txt
  grep -h "startup:" $R/$1-*.log | sed 's/emopipe: startup: /  /' | tee -a $R/table.txt
}
together prime 1 0
together alone 1 0; together alone-spy 1 1
together four-nomps 4 0; together four-nomps-spy 4 1
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log PATH=$PATH:/usr/local/nvidia/bin
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
/usr/local/nvidia/bin/nvidia-cuda-mps-control -d && echo "MPS daemon started" | tee -a $R/table.txt
together four-mps 4 0; together four-mps-spy 4 1
together eight-mps 8 0
echo quit | /usr/local/nvidia/bin/nvidia-cuda-mps-control
cp $R/table.txt $OUT/table-d.txt
(cd $R && tar czf $OUT/s35d-logs.tar.gz *.log *.txt && rm -f *.log)
