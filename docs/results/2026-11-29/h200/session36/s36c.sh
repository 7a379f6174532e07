#!/bin/bash
# session 36 (s36c): why a --processes worker's pipeline runs a part at ~650 frames/s where an emopipe command over the same
# stretch runs ~845 (s36b): py-spy (--gil: the thread holding the GIL; and --idle off) of one worker of a split run and of one of
# four commands over the four stretches, 3 s each from 5.5 s after the start.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
C=/root/rc; mkdir -p $C
cp -r .rw4/blazeface $C/
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/pynvvideocodec*.whl .rw4/nvidia_cudnn*.whl .rw4/face_alignment*.whl .rwP/*.whl 2>&1 | grep -v "already exists" | tail -2
R=$OUT/s36c; mkdir -p $R
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
SPY=/tmp/site/bin/py-spy; [ -x $SPY ] || SPY=$(find /tmp/site -name py-spy -type f | head -1)
spy() {  # label pid
  $SPY record -d 3 -r 250 --gil -f raw -o $R/$1-gil.txt -p $2 > $R/$1-spy.log 2>&1 &
  $SPY record -d 3 -r 250 -f raw -o $R/$1-all.txt -p $2 > $R/$1-spy2.log 2>&1 &
}
top() {  # label kind: the leaf frames most sampled
  python3 - $R/$1-$2.txt <<'PY' | tee -a $R/table.txt
import sys, collections
leaf, fn, total = collections.Counter(), collections.Counter(), 0
for line in open(sys.argv[1]):
    stack, _, n = line.rstrip().rpartition(" ")
    n = int(n); total += n
    frames = stack.split(";")
    leaf[frames[-1]] += n
    for f in set(frames):
        fn[f] += n
print(sys.argv[1].rsplit("/", 1)[-1], "samples", total)
for f, n in leaf.most_common(14): print("  leaf %5.1f%%  %s" % (100 * n / total, f[:150]))
for f, n in fn.most_common(40): print("  incl %5.1f%%  %s" % (100 * n / total, f[:150]))
PY
}
one prime $V --end 20
rm -rf /tmp/o/split; (timeout 200 python3 -m emopipe $V --processes 4 -o /tmp/o/split $O > $R/split.log 2>&1 &)
sleep 5.5; W=$(pgrep -f "emopipe.process_worker" | head -1); echo "worker pid $W" | tee -a $R/table.txt; spy worker $W; sleep 8
rm -rf /tmp/p; mkdir -p /tmp/p
for w in "0 135.0" "133.0 270.0" "268.0 405.0" "403.0 540.0"; do
  set -- $w; extra="--start $1 --end $2"; [ "$1" = 0 ] && extra="--end $2"
  timeout 200 python3 -m emopipe $V -o /tmp/p/$1.csv $O $extra > $R/apart-$1.log 2>&1 &
done
sleep 5.5; A=$(pgrep -f "emopipe /root/vid.*--start 133" | head -1); echo "apart pid $A" | tee -a $R/table.txt; spy apart $A; wait; sleep 1
for k in worker apart; do for g in gil all; do top $k $g; done; done
echo quit | /usr/local/nvidia/bin/nvidia-cuda-mps-control
cp $R/table.txt $OUT/table-c.txt
(cd $R && tar czf $OUT/s36c-logs.tar.gz *.log *.txt && rm -f *.log)
