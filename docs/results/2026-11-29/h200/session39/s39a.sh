#!/bin/bash
# session 39 (s39a): the GPU folder run that did not end after its summary (s38h): reproduce it and narrow it down —
# the same folder (a good clip + one whose name is not UTF-8, --max-frames 60); two good clips with and without
# --max-frames; one clip alone. The command now prints every thread's stack and exits 1 when its exit hangs 60 s.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/pynvvideocodec*.whl .rw4/nvidia_cudnn*.whl .rw4/face_alignment*.whl 2>&1 | grep -v "already exists" | tail -2
R=$OUT/s39a; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/table.txt
C=/root/rc; mkdir -p $C; cp -r .rw4/blazeface $C/
PYTHONPATH=/tmp/site python3 -c "
import sys; sys.path.insert(0, 'benchmarks'); import synthetic; from pathlib import Path
synthetic.random_checkpoint(Path('$C/w.pth'))"
mkdir -p /tmp/bad/v /tmp/bad/g && cp .rw4/clip10s_720p_h264.mp4 /tmp/bad/v/good.mp4 && cp .rw4/clip10s_720p_h264.mp4 $'/tmp/bad/v/zz\xe9.mp4'
cp .rw4/clip10s_720p_h264.mp4 /tmp/bad/g/a.mp4 && cp .rw4/clip10s_720p_h264.mp4 /tmp/bad/g/b.mp4
cd /tmp/bad
O="--weights $C/w.pth --detector blazeface_back --models-dir $C/blazeface --no-progress --debug"
export PYTHONPATH=$ROOT:/tmp/site
run() {  # label args...
  local label=$1; shift; local t0=$(date +%s.%N)
  timeout 110 python3 -m emopipe "$@" $O > $R/$label.log 2>&1; local rc=$?
  echo "$label: rc=$rc wall=$(python3 -c "print(round($(date +%s.%N)-$t0,2))") s; summary line: $(grep -h 'sources\|frames,' $R/$label.log | grep -v DEBUG | tail -1)" | tee -a $R/table.txt
  grep -q "Thread 0x\|Current thread" $R/$label.log && { echo "  stacks:"; grep -A40 "Thread 0x\|Current thread" $R/$label.log | grep -v "^$" | head -80; } | tee -a $R/table.txt
}
run A-good+bad-max60 v -o oA --max-frames 60
run B-two-good-max60 g -o oB --max-frames 60
run C-two-good g -o oC
run D-one-max60 g/a.mp4 -o oD.csv --max-frames 60
run E-good+bad-max60-again v -o oE --max-frames 60
run F-good+bad-opencv v -o oF --max-frames 60 --decoder opencv
(cd $R && tar czf $OUT/s39a-logs.tar.gz *.log && rm -f *.log)
