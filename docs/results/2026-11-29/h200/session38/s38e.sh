#!/bin/bash
# session 38 (s38e): the command's own MPS (--mps) against a daemon of the machine's (started here, as sessions 15-37
# ran), the same --processes 4, interleaved on one loan: does a command's own daemon (its MPS server started by its
# first worker) cost anything? The 64-clip archive and the 9-minute 720p video (.rw6, copied to /root/vid before).
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
export PATH=$PATH:/usr/local/nvidia/bin
C=/root/rc; mkdir -p $C
cp -r .rw4/blazeface $C/
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/pynvvideocodec*.whl .rw4/nvidia_cudnn*.whl .rw4/face_alignment*.whl 2>&1 | grep -v "already exists" | tail -2
R=$OUT/s38e; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,compute_mode --format=csv,noheader | tee $R/table.txt
PYTHONPATH=/tmp/site python3 -c "
import sys; sys.path.insert(0, 'benchmarks'); import synthetic; from pathlib import Path
synthetic.random_checkpoint(Path('$C/w.pth'))"
mkdir -p $C/clips && for i in $(seq -w 0 63); do cp .rw4/clip10s_720p_h264.mp4 $C/clips/c$i.mp4; done
mkdir -p /tmp/here; cd /tmp/here
O="--weights $C/w.pth --detector blazeface_back --models-dir $C/blazeface --no-progress"
V=/root/vid/video540s_720p_1face_h264.mp4
export PYTHONPATH=$ROOT:/tmp/site
many() {  # label args...: a many-source command into /tmp/o/label
  local label=$1; shift; rm -rf /tmp/o/$label; local t0=$(date +%s.%N)
  timeout 240 python3 -m emopipe "$@" -o /tmp/o/$label $O > $R/$label.log 2>&1; local rc=$?
  local wall=$(python3 -c "print(round($(date +%s.%N)-$t0,2))")
  echo "$label: rc=$rc wall=$wall s $(python3 -c "
import json; s = json.load(open('/tmp/o/$label/summary.json')); p = s.get('processes') or {}
t = p.get('timeline', {})
print('run wall_s', s['wall_s'], '=', round(s['frames'] / s['wall_s']), 'frames/s;', 'mps', p.get('mps'), [w.get('mps') for w in p.get('worker_summaries', [])],
      'first row', t.get('first_row_s'), 'ready', t.get('ready_s'), 'first ready', t.get('first_ready_s'), 'workers fps', [round(w.get('fps') or 0) for w in p.get('worker_summaries', [])])" 2>&1 | tail -1)" | tee -a $R/table.txt
}
machine() {  # on|off: the machine's daemon (default pipe directory)
  if [ $1 = on ]; then nvidia-cuda-mps-control -d; sleep 0.3; else echo quit | nvidia-cuda-mps-control; sleep 0.5; fi
}
many prime $C/clips/c00.mp4 --processes 4 --mps
for k in a b c; do
  machine on; many arch-machine-$k $C/clips --processes 4; machine off
  many arch-own-$k $C/clips --processes 4 --mps
  many long-own-$k $V --processes 4 --mps
  machine on; many long-machine-$k $V --processes 4; machine off
done
for f in /tmp/o/arch-own-a/c07.emotions.csv /tmp/o/arch-own-a/clips/c07.emotions.csv; do [ -e $f ] && cmp $f ${f/arch-own-a/arch-machine-a} && echo "archive c07 rows: same" | tee -a $R/table.txt; done
ls /tmp/o/arch-own-a | head -3 | tee -a $R/table.txt
cmp /tmp/o/long-own-a/video540s_720p_1face_h264.emotions.csv /tmp/o/long-machine-a/video540s_720p_1face_h264.emotions.csv && echo "long rows: same" | tee -a $R/table.txt
(cd $R && tar czf $OUT/s38e-logs.tar.gz *.log && rm -f *.log)
