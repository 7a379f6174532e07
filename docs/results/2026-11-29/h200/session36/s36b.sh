#!/bin/bash
# session 36 (s36b): where a split video's workers spend their time: the 9-minute video in 4 parts over --processes 4
# (the workers' own rates and stages), the same with OMP_NUM_THREADS=2 in the workers, with 6 workers, and 4
# independent commands over the same 4 stretches (--start/--end) as session 35 ran them.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
C=/root/rc; mkdir -p $C
cp -r .rw4/blazeface $C/
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/pynvvideocodec*.whl .rw4/nvidia_cudnn*.whl .rw4/face_alignment*.whl 2>&1 | grep -v "already exists" | tail -2
R=$OUT/s36b; mkdir -p $R
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
workers() {  # label: each worker's frames, fps, stage seconds from summary.json
  python3 -c "
import json; s = json.load(open('/tmp/o/$1/summary.json'))
for w in s['processes']['worker_summaries']:
    print('   ', w['name'], 'frames', w.get('frames'), 'fps', round(w.get('fps') or 0), 'seconds', w.get('seconds'), 'stages', {k: round(v, 2) for k, v in (w.get('stage_seconds') or {}).items()})
" 2>&1 | tee -a $R/table.txt
}
apart() {  # label: four emopipe commands at once over the four stretches of the split
  rm -rf /tmp/p; mkdir -p /tmp/p; local t0=$(date +%s.%N)
  for w in "0 135.0" "133.0 270.0" "268.0 405.0" "403.0 540.0"; do
    set -- $w; local extra="--start $1 --end $2"; [ "$1" = 0 ] && extra="--end $2"
    timeout 200 python3 -m emopipe $V -o /tmp/p/$1.csv $O $extra > $R/apart-$1.log 2>&1 &
  done; wait
  local wall=$(python3 -c "print(round($(date +%s.%N)-$t0,2))")
  echo "four apart: wall=$wall s $(python3 -c "
import json, glob
ss = [json.load(open(p)) for p in sorted(glob.glob('/tmp/p/*.summary.json'))]
print('frames', sum(s['frames'] for s in ss), 'first rows', [round(s['startup']['first_row_s'], 2) for s in ss], 'each', [round(s['fps']) for s in ss], 'frames/s; stages', [{k: round(v, 2) for k, v in s['stage_seconds'].items()} for s in ss])" 2>&1 | tail -1)" | tee -a $R/table.txt
}
one prime $V --end 20
many split4 $V --processes 4; workers split4
OMP_NUM_THREADS=2 many split4-omp2 $V --processes 4; workers split4-omp2
many split6 $V --processes 6; workers split6
apart
many split4-b $V --processes 4; workers split4-b
echo quit | /usr/local/nvidia/bin/nvidia-cuda-mps-control
grep -h "Fatal\|malloc\|corrupt\|Traceback\|died" $R/*.log | sort | uniq -c | head -20 >> $R/table.txt
cp $R/table.txt $OUT/table-b.txt
(cd $R && tar czf $OUT/s36b-logs.tar.gz *.log *.txt && rm -f *.log)
