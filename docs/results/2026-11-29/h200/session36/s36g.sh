#!/bin/bash
# session 36 (s36g): the final code (parts joined as a stream, no part tracks in the workers): the 9-minute one-face video
# and a 9-minute four-face one (session 31's 60-s four-face video nine times over) over --processes 4, cut and whole
# (--no-split), and in one process; the join's seconds; rows, tracks and segments compared (cmp).
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
C=/root/rc; mkdir -p $C
cp -r .rw4/blazeface $C/
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/pynvvideocodec*.whl .rw4/nvidia_cudnn*.whl .rw4/face_alignment*.whl 2>&1 | grep -v "already exists" | tail -2
R=$OUT/s36g; mkdir -p $R
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
workers() {  # label: each worker's frames and rate
  python3 -c "
import json; s = json.load(open('/tmp/o/$1/summary.json'))
print('   workers (frames, fps)', [(w['frames'], round(w['fps'])) for w in s['processes']['worker_summaries']])" 2>&1 | tee -a $R/table.txt
}
V4=/root/vid/video540s_720p_4face_h264.mp4
joined() {  # label stem: the video's summary (parts, join_s)
  python3 -c "
import json; s = json.load(open('/tmp/o/$1/$2.emotions.summary.json'))
print('   video: frames', s['frames'], 'faces', s['faces'], 'parts', s.get('parts'), 'join_s', s.get('join_s'), 'tracks', len(s.get('tracks') or []))" 2>&1 | tee -a $R/table.txt
}
same4() {  # a b
  for f in emotions.csv emotions.tracks.csv emotions.segments.csv; do
    cmp -s /tmp/o/$1/video540s_720p_4face_h264.$f /tmp/o/$2/video540s_720p_4face_h264.$f && r=same || r=DIFFER
    echo "  $1 vs $2 $f: $r" | tee -a $R/table.txt
  done
}
one prime $V --end 20
many split1-a $V --processes 4; workers split1-a; joined split1-a video540s_720p_1face_h264
many whole1 $V --processes 4 --no-split
many split1-b $V --processes 4; workers split1-b; joined split1-b video540s_720p_1face_h264
same split1-a whole1; same split1-a split1-b
many split4-a $V4 --processes 4; workers split4-a; joined split4-a video540s_720p_4face_h264
many whole4 $V4 --processes 4 --no-split
rm -rf /tmp/o/one4; mkdir -p /tmp/o/one4; t0=$(date +%s.%N)
timeout 200 python3 -m emopipe $V4 -o /tmp/o/one4/video540s_720p_4face_h264.emotions.csv $O > $R/one4.log 2>&1
echo "one4: rc=$? wall=$(python3 -c "print(round($(date +%s.%N)-$t0,2))") s $(python3 -c "
import json; s = json.load(open('/tmp/o/one4/video540s_720p_4face_h264.emotions.summary.json')); print('frames', s['frames'], 'faces', s['faces'], 'fps', round(s['fps']), 'faces/s', round(s['faces_per_s']))")" | tee -a $R/table.txt
many split4-b $V4 --processes 4; workers split4-b; joined split4-b video540s_720p_4face_h264
python3 -c "
import json
for l in ('split4-a', 'whole4', 'split4-b'):
    s = json.load(open(f'/tmp/o/{l}/summary.json')); print('  ', l, 'faces', s['faces'], 'faces/s over the command', round(s['faces'] / s['wall_s']))" | tee -a $R/table.txt
same4 split4-a whole4; same4 split4-a one4; same4 split4-a split4-b
many split180 $V --processes 4 --end 180; workers split180; joined split180 video540s_720p_1face_h264
echo quit | /usr/local/nvidia/bin/nvidia-cuda-mps-control
grep -h "Fatal\|malloc\|corrupt\|Traceback\|died" $R/*.log | sort | uniq -c | head -20 >> $R/table.txt
cp $R/table.txt $OUT/table-g.txt
(cd $R && tar czf $OUT/s36g-logs.tar.gz *.log *.txt && rm -f *.log)
