#!/bin/bash
# session 37 (s37d): --detect-every with worker processes. The 9-minute one-face video over --processes 4 with
# --detect-every 3, cut into parts (which now begin on one process's key frames and read on to the next) against
# whole (--no-split) and one process; rows and segments compared (cmp), frames_detected. Then the 64-clip archive
# over --processes 4 --detect-every 3 (before the fix a worker's last source never finished: its frames after its
# last key frame waited for a next source). The video (.rw6) came in the call before, copied to /root/vid.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
C=/root/rc; mkdir -p $C
cp -r .rw4/blazeface $C/
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/pynvvideocodec*.whl .rw4/nvidia_cudnn*.whl .rw4/face_alignment*.whl 2>&1 | grep -v "already exists" | tail -2
R=/tmp/s37d; mkdir -p $R $OUT/s37d
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
V=/root/vid/video540s_720p_1face_h264.mp4
S1=video540s_720p_1face_h264
export PYTHONPATH=$ROOT:/tmp/site
many() {  # label args...
  local label=$1; shift; rm -rf /tmp/o/$label; local t0=$(date +%s.%N)
  timeout 150 python3 -m emopipe "$@" -o /tmp/o/$label $O > $R/$label.log 2>&1; local rc=$?
  local wall=$(python3 -c "print(round($(date +%s.%N)-$t0,2))")
  echo "$label: rc=$rc wall=$wall s $(python3 -c "
import json; s = json.load(open('/tmp/o/$label/summary.json')); p = s.get('processes') or {}
print(s['ok'], 'ok', s['failed'], 'failed', s.get('interrupted'), 'interrupted;', 'frames', s['frames'], 'faces', s['faces'], 'run wall_s', s['wall_s'], '=', round(s['frames'] / s['wall_s']), 'frames/s;',
      'workers frames', [x['frames'] for x in p.get('per_worker', {}).values()])" 2>&1 | tail -1)" | tee -a $R/table.txt
}
video() {  # label: the video's summary
  python3 -c "
import json; s = json.load(open('/tmp/o/$1/$S1.emotions.summary.json'))
print('   video: frames', s['frames'], 'frames_detected', s.get('frames_detected'), 'faces', s['faces'], 'parts', s.get('parts'), 'join_s', s.get('join_s'))" 2>&1 | tee -a $R/table.txt
}
same() {  # a b
  for f in emotions.csv emotions.segments.csv; do
    cmp -s /tmp/o/$1/$S1.$f /tmp/o/$2/$S1.$f && r=same || r=DIFFER
    echo "  $1 vs $2 $f: $r" | tee -a $R/table.txt
  done
}
many prime $V --end 20 --processes 4
many split-a $V --processes 4 --detect-every 3; video split-a
many whole $V --processes 4 --detect-every 3 --no-split; video whole
many split-b $V --processes 4 --detect-every 3; video split-b
same split-a whole; same split-a split-b
many split-1 $V --processes 4; video split-1
many archive $C/clips --processes 4 --detect-every 3
many archive-1 $C/clips --processes 4
echo quit | /usr/local/nvidia/bin/nvidia-cuda-mps-control
cp $R/table.txt $OUT/s37d/; (cd /tmp && tar czf $OUT/s37d/logs.tar.gz s37d)
