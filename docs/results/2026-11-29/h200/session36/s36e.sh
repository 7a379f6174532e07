#!/bin/bash
# session 36 (s36e): is it the worker process or the shared driver? Four commands over the four stretches of the 9-minute
# video each with --processes 1 (a driver and one worker each) against four plain commands and the split over --processes 4;
# a worker's startup section (its warm-ups, graphs).
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
C=/root/rc; mkdir -p $C
cp -r .rw4/blazeface $C/
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/pynvvideocodec*.whl .rw4/nvidia_cudnn*.whl .rw4/face_alignment*.whl 2>&1 | grep -v "already exists" | tail -2
R=$OUT/s36e; mkdir -p $R
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
apart() {  # label extra-options: four commands at once over the four stretches
  local label=$1; shift
  rm -rf /tmp/p; mkdir -p /tmp/p; local t0=$(date +%s.%N)
  for w in "0 135.0" "133.0 270.0" "268.0 405.0" "403.0 540.0"; do
    set -- $w "$@"; local a=$1 b=$2; shift 2; local extra="--start $a --end $b"; [ "$a" = 0 ] && extra="--end $b"
    if [ "$*" = "--processes 1" ]; then out=/tmp/p/$a; else out=/tmp/p/$a/video540s_720p_1face_h264.emotions.csv; mkdir -p /tmp/p/$a; fi
    timeout 200 python3 -m emopipe $V -o $out $O $extra "$@" > $R/$label-$a.log 2>&1 &
  done; wait
  local wall=$(python3 -c "print(round($(date +%s.%N)-$t0,2))")
  echo "$label: wall=$wall s $(python3 -c "
import json, glob
out = []
for d in sorted(glob.glob('/tmp/p/*')):
    s = json.load(open(d + '/video540s_720p_1face_h264.emotions.summary.json'))
    out.append((s['frames'], round(s['fps']), [round(v, 2) for v in s.get('stage_seconds', {}).values()]))
ws = []
for d in sorted(glob.glob('/tmp/p/*')):
    try: ws += [round(w['fps']) for w in json.load(open(d + '/summary.json'))['processes']['worker_summaries']]
    except Exception: pass
print('per source (frames, fps)', [o[:2] for o in out], 'workers fps', ws)" 2>&1 | tail -1)" | tee -a $R/table.txt
}
one prime $V --end 20
many split4 $V --processes 4
python3 -c "
import json; s = json.load(open('/tmp/o/split4/summary.json'))
for w in s['processes']['worker_summaries']: print('  ', w['name'], 'fps', round(w['fps']), 'p50', w.get('steady_latency_p50_s'))
print('   startup of a worker', json.dumps(s['processes']['worker_summaries'][0].get('startup'))[:1500])" | tee -a $R/table.txt
apart plain
apart procs1 --processes 1
apart plain-b
apart procs1-b --processes 1
python3 -c "
import json; s = json.load(open('/tmp/p/0/summary.json'))
print('   startup of a procs1 worker', json.dumps(s['processes']['worker_summaries'][0].get('startup'))[:1500])" | tee -a $R/table.txt
python3 -c "
import json; s = json.load(open('/tmp/o/prime/video540s_720p_1face_h264.emotions.summary.json'))
print('   startup of a plain command', json.dumps(s.get('startup'))[:1500])" | tee -a $R/table.txt
echo quit | /usr/local/nvidia/bin/nvidia-cuda-mps-control
cp $R/table.txt $OUT/table-e.txt
(cd $R && tar czf $OUT/s36e-logs.tar.gz *.log *.txt && rm -f *.log)
