#!/bin/bash
# session 40 (s40d): the session's final code against session 39's numbers on the same commands: the 64-clip archive
# and the 9-minute 720p video, `--processes auto` (one process: its tip line) and `--processes auto --mps` (4 workers
# under the command's own MPS), interleaved; a warm one-clip command's first row; the GPU out of memory
# (--batch-size 400000: 157 GB of fp16 input) said as such.
# The 9-minute video (.rw6) came in a call of its own before this one, copied to /root/vid.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
export PATH=$PATH:/usr/local/nvidia/bin
C=/root/rc; mkdir -p $C
cp -r .rw4/blazeface $C/
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/pynvvideocodec*.whl .rw4/nvidia_cudnn*.whl .rw4/face_alignment*.whl 2>&1 | grep -v "already exists" | tail -2
R=$OUT/s40d; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,compute_mode --format=csv,noheader | tee $R/table.txt
echo "machine's MPS: $(echo get_server_list | nvidia-cuda-mps-control 2>&1 | head -1)" | tee -a $R/table.txt
PYTHONPATH=/tmp/site python3 -c "
import sys; sys.path.insert(0, 'benchmarks'); import synthetic; from pathlib import Path
synthetic.random_checkpoint(Path('$C/w.pth'))"
mkdir -p $C/clips && for i in $(seq -w 0 63); do cp .rw4/clip10s_720p_h264.mp4 $C/clips/c$i.mp4; done
mkdir -p /tmp/here; cd /tmp/here
O="--weights $C/w.pth --detector blazeface_back --models-dir $C/blazeface --no-progress"
V=/root/vid/video540s_720p_1face_h264.mp4
export PYTHONPATH=$ROOT:/tmp/site
leftover() { echo "   MPS processes left: $(ps -eo pid,comm | grep -i mps | grep -v grep | tr -s ' ' | tr '\n' ';' || true)"; }
many() {  # label args...: a many-source command into /tmp/o/label
  local label=$1; shift; rm -rf /tmp/o/$label; local t0=$(date +%s.%N)
  timeout 240 python3 -m emopipe "$@" -o /tmp/o/$label $O > $R/$label.log 2>&1; local rc=$?
  local wall=$(python3 -c "print(round($(date +%s.%N)-$t0,2))")
  echo "$label: rc=$rc wall=$wall s $(python3 -c "
import json; s = json.load(open('/tmp/o/$label/summary.json')); p = s.get('processes') or {}
t = p.get('timeline', {})
print('frames', s['frames'], 'faces', s['faces'], 'run wall_s', s['wall_s'], '=', round(s['frames'] / s['wall_s']), 'frames/s;',
      'workers', p.get('workers'), 'mps', p.get('mps'), 'workers under MPS', [w.get('mps') for w in p.get('worker_summaries', [])],
      'first row', t.get('first_row_s'), 'ready', t.get('ready_s'))" 2>&1 | tail -1)" | tee -a $R/table.txt
  grep -h "mps\|MPS\|--processes auto" $R/$label.log | head -3 | sed 's/^/   log: /' | tee -a $R/table.txt
  leftover | tee -a $R/table.txt
}
same() {
  for f in emotions.csv emotions.segments.csv; do
    cmp -s /tmp/o/$1/$3.$f /tmp/o/$2/$3.$f && r=same || r=DIFFER
    echo "  $1 vs $2 $f: $r" | tee -a $R/table.txt
  done
}
many prime $C/clips/c00.mp4 --processes auto --mps
many arch-auto-a $C/clips --processes auto
many arch-mps-a $C/clips --processes auto --mps
many arch-auto-b $C/clips --processes auto
many arch-mps-b $C/clips --processes auto --mps
many long-auto $V --processes auto
many long-mps-a $V --processes auto --mps
many long-mps-b $V --processes auto --mps
same long-auto long-mps-a video540s_720p_1face_h264
for k in 1 2 3; do
  t0=$(date +%s.%N); python3 -m emopipe $C/clips/c01.mp4 -o /tmp/o/one$k.csv $O > $R/one$k.log 2>&1; rc=$?
  echo "one clip #$k: rc=$rc wall=$(python3 -c "print(round($(date +%s.%N)-$t0,2))") s first row $(python3 -c "
import json; print(json.load(open('/tmp/o/one$k.summary.json'))['startup'].get('first_row_s'))" 2>&1 | tail -1) s" | tee -a $R/table.txt
done
for k in 1; do
  t0=$(date +%s.%N); python3 -m emopipe $C/clips/c02.mp4 -o /tmp/o/oom.csv $O --batch-size 400000 > $R/oom.log 2>&1; rc=$?
  echo "oom: rc=$rc wall=$(python3 -c "print(round($(date +%s.%N)-$t0,2))") s: $(tail -1 $R/oom.log)" | tee -a $R/table.txt
done
grep -h "tip:" $R/arch-auto-a.log $R/long-auto.log | sed 's/^/   tip: /' | tee -a $R/table.txt
(cd $R && tar czf $OUT/s40d-logs.tar.gz *.log && rm -f *.log)
