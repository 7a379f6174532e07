#!/bin/bash
# session 35 (s35g): s35c's parts of one long video again, with the final code (engines loaded and warmed with two CPU
# threads): the 3-minute 720p video in one process against 4 and 8 emopipe processes started together under MPS,
# each over its own part (--start/--end, NVDEC seeks).
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
C=/root/rc; mkdir -p $C
cp -r .rw4/blazeface $C/
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/pynvvideocodec*.whl .rw4/nvidia_cudnn*.whl .rw4/face_alignment*.whl 2>&1 | grep -v "already exists" | tail -2
R=$OUT/s35g; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/table.txt
PYTHONPATH=/tmp/site python3 -c "
import sys; sys.path.insert(0, 'benchmarks'); import synthetic; from pathlib import Path
synthetic.random_checkpoint(Path('$C/w.pth'))
"
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log PATH=$PATH:/usr/local/nvidia/bin
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
/usr/local/nvidia/bin/nvidia-cuda-mps-control -d && echo "MPS daemon started" | tee -a $R/table.txt
mkdir -p /tmp/here; cd /tmp/here
O="--weights $C/w.pth --detector blazeface_back --models-dir $C/blazeface --no-progress"
LONG=$ROOT/.rw5/video180s_720p_1face_h264.mp4
part() {  # label index count
  local len=$(python3 -c "print(180 / $3)") ; local a=$(python3 -c "print($2 * 180 / $3)") b=$(python3 -c "print(($2 + 1) * 180 / $3)")
  local extra="--start $a --end $b"; [ "$2" = 0 ] && extra="--end $b"
  PYTHONPATH=$ROOT:/tmp/site timeout 150 python3 -m emopipe $LONG -o /tmp/p/$1-$2.csv $O $extra > $R/$1-$2.log 2>&1
}
split() {  # label parts
  rm -rf /tmp/p; mkdir -p /tmp/p; local t0=$(date +%s.%N)
  for i in $(seq 0 $(($2 - 1))); do part $1 $i $2 & done; wait
  local wall=$(python3 -c "print(round($(date +%s.%N)-$t0,2))")
  echo "$1: $2 parts wall=$wall s $(python3 -c "
import json, glob
ss = [json.load(open(p)) for p in sorted(glob.glob('/tmp/p/$1-*.summary.json'))]
frames = sum(s['frames'] for s in ss)
print('frames', frames, '=', round(frames / $wall), 'frames/s over the wall; first rows', [round(s['startup']['first_row_s'], 2) for s in ss], 'each part', [round(s['fps']) for s in ss], 'frames/s')" 2>&1 | tail -1)" | tee -a $R/table.txt
}
split prime 1
split whole-1 1; split four-1 4; split eight-1 8; split four-2 4
echo quit | /usr/local/nvidia/bin/nvidia-cuda-mps-control
grep -h "Fatal\|malloc\|corrupt\|Traceback" $R/*.log | sort | uniq -c | head -20 >> $R/table.txt
cp $R/table.txt $OUT/table-g.txt
(cd $R && tar czf $OUT/s35g-logs.tar.gz *.log *.txt && rm -f *.log)
