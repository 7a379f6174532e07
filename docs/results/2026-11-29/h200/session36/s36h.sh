#!/bin/bash
# session 36 (s36h): the final code on what parts do not touch: the 64-clip archive over --processes 4 (as many sources as
# workers: nothing cut, no video probed) ×3, and the one-clip command's first row ×2 (one process).
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
C=/root/rc; mkdir -p $C
cp -r .rw4/blazeface $C/
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/pynvvideocodec*.whl .rw4/nvidia_cudnn*.whl .rw4/face_alignment*.whl 2>&1 | grep -v "already exists" | tail -2
R=$OUT/s36h; mkdir -p $R
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
V=/root/vid/video540s_720p_1face_h264.mp4  # (copied there by the call before: the two do not fit one carry)
export PYTHONPATH=$ROOT:/tmp/site
many() {  # label args...: a many-source command into /tmp/o/label
  local label=$1; shift; rm -rf /tmp/o/$label; local t0=$(date +%s.%N)
  timeout 200 python3 -m emopipe "$@" -o /tmp/o/$label $O > $R/$label.log 2>&1; local rc=$?
  local wall=$(python3 -c "print(round($(date +%s.%N)-$t0,2))")
  echo "$label: rc=$rc wall=$wall s $(python3 -c "
import json; s = json.load(open('/tmp/o/$label/summary.json')); p = s.get('processes') or {}
t = p.get('timeline', {}); w = p.get('per_worker', {})
print('frames', s['frames'], 'rows', s['rows'], 'run wall_s', s['wall_s'], '=', round(s['frames'] / s['wall_s']), 'frames/s;',
      'first row', t.get('first_row_s'), 'ready', t.get('ready_s'), 'done', t.get('done_s'), '; workers frames', [x['frames'] for x in w.values()])" 2>&1 | tail -1)" | tee -a $R/table.txt
}
one() {  # label args...: one process, a rows file
  local label=$1; shift; rm -rf /tmp/o/$label; mkdir -p /tmp/o/$label; local t0=$(date +%s.%N)
  timeout 200 python3 -m emopipe "$@" -o /tmp/o/$label/video540s_720p_1face_h264.emotions.csv $O > $R/$label.log 2>&1; local rc=$?
  local wall=$(python3 -c "print(round($(date +%s.%N)-$t0,2))")
  echo "$label: rc=$rc wall=$wall s $(python3 -c "
import json; s = json.load(open('/tmp/o/$label/video540s_720p_1face_h264.emotions.summary.json'))
print('frames', s['frames'], 'faces', s['faces'], 'fps', round(s['fps']), 'first row', s['startup'].get('first_row_s'))" 2>&1 | tail -1)" | tee -a $R/table.txt
}
same() {  # a b: rows, tracks, segments
  for f in emotions.csv emotions.tracks.csv emotions.segments.csv; do
    cmp -s /tmp/o/$1/video540s_720p_1face_h264.$f /tmp/o/$2/video540s_720p_1face_h264.$f && r=same || r=DIFFER
    echo "  $1 vs $2 $f: $r" | tee -a $R/table.txt
  done
}
CLIP=$ROOT/.rw4/clip10s_720p_h264.mp4
clip() {  # label: the one-clip command
  rm -rf /tmp/o/$1; mkdir -p /tmp/o/$1; local t0=$(date +%s.%N)
  timeout 100 python3 -m emopipe $CLIP -o /tmp/o/$1/clip.emotions.csv $O > $R/$1.log 2>&1; local rc=$?
  echo "$1: rc=$rc wall=$(python3 -c "print(round($(date +%s.%N)-$t0,2))") s first row $(python3 -c "
import json; print(json.load(open('/tmp/o/$1/clip.emotions.summary.json'))['startup']['first_row_s'])")" | tee -a $R/table.txt
}
clip prime
for k in a b c; do many archive64-$k $C/clips --processes 4; done
clip clip-a; clip clip-b
echo quit | /usr/local/nvidia/bin/nvidia-cuda-mps-control
cp $R/table.txt $OUT/table-h.txt
(cd $R && tar czf $OUT/s36h-logs.tar.gz *.log *.txt && rm -f *.log)
