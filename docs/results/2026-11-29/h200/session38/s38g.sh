#!/bin/bash
# session 38 (s38g): where a command under its own MPS spends its extra ~0.4 s (s38e, s38f): --debug, each line timestamped; the command's own MPS (--mps) against a daemon of the machine's (started here, as sessions 15-37
# ran), the same --processes 4, interleaved on one loan: does a command's own daemon (its MPS server started by its
# first worker) cost anything? The 64-clip archive and the 9-minute 720p video (.rw6, copied to /root/vid before).
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
export PATH=$PATH:/usr/local/nvidia/bin
C=/root/rc; mkdir -p $C
cp -r .rw4/blazeface $C/
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/pynvvideocodec*.whl .rw4/nvidia_cudnn*.whl .rw4/face_alignment*.whl 2>&1 | grep -v "already exists" | tail -2
R=$OUT/s38g; mkdir -p $R
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
stamp() { python3 -c "
import sys, time
t0 = float(sys.argv[1])
for line in sys.stdin: print(f'{time.time() - t0:7.3f} {line}', end='', flush=True)" $1; }
dbg() {  # label args...
  local label=$1; shift; rm -rf /tmp/o/$label; local t0=$(date +%s.%N)
  python3 -m emopipe "$@" -o /tmp/o/$label $O --debug 2>&1 | stamp $t0 > $R/$label.log
  echo "$label: wall $(python3 -c "print(round($(date +%s.%N)-$t0,3))") s" | tee -a $R/table.txt
  grep -E "MPS|to do over|worker processes|sources: |ready|summary" $R/$label.log | grep -v "^ *[0-9.]* *DEBUG.*cudnn" | cut -c1-160 | tail -14 | tee -a $R/table.txt
  tail -3 $R/$label.log | cut -c1-160 | tee -a $R/table.txt
}
many prime $C/clips/c00.mp4 --processes 4 --mps
dbg own-a $C/clips --processes 4 --mps
machine on; dbg machine-a $C/clips --processes 4; machine off
dbg own-b $C/clips --processes 4 --mps
(cd $R && tar czf $OUT/s38g-logs.tar.gz *.log && rm -f *.log)
