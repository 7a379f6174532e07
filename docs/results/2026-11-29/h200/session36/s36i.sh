#!/bin/bash
# session 36 (s36i): the 64-clip archive over --processes 4, this code against main's 4331e63 (.gpu/trees/base: git archive),
# interleaved ×3 on one loan, then ×3 the other way round (s36j: the same script; its first call ran a-c only).
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
C=/root/rc; mkdir -p $C
cp -r .rw4/blazeface $C/
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/pynvvideocodec*.whl .rw4/nvidia_cudnn*.whl .rw4/face_alignment*.whl 2>&1 | grep -v "already exists" | tail -2
R=$OUT/s36i; mkdir -p $R
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
many prime $C/clips --processes 4
PYTHONPATH=$ROOT/.gpu/trees/base:/tmp/site many prime-base $C/clips --processes 4
for k in ${PAIRS_FIRST:-a b c}; do
  PYTHONPATH=$ROOT:/tmp/site many new-$k $C/clips --processes 4
  PYTHONPATH=$ROOT/.gpu/trees/base:/tmp/site many base-$k $C/clips --processes 4
done
for k in d e f; do  # (the other order)
  PYTHONPATH=$ROOT/.gpu/trees/base:/tmp/site many base-$k $C/clips --processes 4
  PYTHONPATH=$ROOT:/tmp/site many new-$k $C/clips --processes 4
done
echo quit | /usr/local/nvidia/bin/nvidia-cuda-mps-control
cp $R/table.txt $OUT/table-i.txt
(cd $R && tar czf $OUT/s36i-logs.tar.gz *.log *.txt && rm -f *.log)
