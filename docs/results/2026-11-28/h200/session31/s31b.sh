#!/bin/bash
# session 31 (s31b): as s31a (one command over worker processes, `--processes N`, under NVIDIA MPS), how many workers:
# 4, 6 and 8 (and 8 with --parallel 1) interleaved over two rounds on sixteen 60-s one-face videos, 4 against 8 on
# the 64-clip archive and on eight four-face videos; each worker's own rate from its summary (7e6c8fd). Tree: this
# checkout (7e6c8fd).
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
C=/root/rc; mkdir -p $C
cp -r .rw4/blazeface $C/
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl 2>&1 | grep -v "already exists" | tail -2
R=$OUT/s31b; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/table.txt
nproc | tee -a $R/table.txt
PYTHONPATH=/tmp/site python3 -c "
import sys, shutil; sys.path.insert(0, 'benchmarks'); import synthetic; from pathlib import Path
synthetic.random_checkpoint(Path('$C/w.pth'))
for name, src, n in (('long16', 'video60s_720p_1face_h264.mp4', 16), ('long4', 'video60s_720p_1face_h264.mp4', 4),
                     ('four8', 'video60s_720p_4face_h264.mp4', 8)):
    d = Path('$C') / name; d.mkdir(exist_ok=True)
    for i in range(n): shutil.copy(Path('.rw5') / src, d / f'{name}-{i:02d}.mp4')
d = Path('$C') / 'clips'; d.mkdir(exist_ok=True)
for i in range(64): shutil.copy(Path('.rw4') / 'clip10s_720p_h264.mp4', d / f'clip{i:02d}.mp4')"
O="--weights $C/w.pth --detector blazeface_back --models-dir $C/blazeface --no-progress"
mkdir -p /tmp/here; cd /tmp/here
one() {  # label: one 10-s clip, the first row
  rm -rf /tmp/o1; mkdir -p /tmp/o1; local t0=$(date +%s.%N)
  (PYTHONPATH=$ROOT:/tmp/site timeout 150 python3 -m emopipe $ROOT/.rw4/clip10s_720p_h264.mp4 \
    -o /tmp/o1/rows.csv $O > $R/$1.log 2>&1)
  local rc=$?
  echo "$1: rc=$rc wall=$(python3 -c "print(round($(date +%s.%N)-$t0,2))") s $(python3 -c "
import json; s=json.load(open('/tmp/o1/rows.summary.json')); st=s['startup']
print({k: round(v, 2) for k, v in st.items() if k.endswith('_s') and isinstance(v, float)}, 'fps', round(s.get('fps') or 0))" 2>&1 | tail -1)" | tee -a $R/table.txt
}
many() {  # label, input folder, extra options
  rm -rf /tmp/o; local t0=$(date +%s.%N)
  (PYTHONPATH=$ROOT:/tmp/site timeout 200 python3 -m emopipe $C/$2 -o /tmp/o $O $3 > $R/$1.log 2>&1)
  local rc=$?
  cp /tmp/o/summary.json $R/$1.summary.json 2>/dev/null
  echo "$1: rc=$rc wall=$(python3 -c "print(round($(date +%s.%N)-$t0,2))") s; $(python3 -c "
import json; s=json.load(open('/tmp/o/summary.json')); pr = s.get('processes') or {}; t = pr.get('timeline') or {}
ws = pr.get('worker_summaries') or []; p = s.get('pipeline') or {}
full = (t['done_s'] - t['ready_s']) if t.get('ready_s') is not None and t.get('done_s') else 0
wide = (t['done_s'] - t['first_ready_s']) if t.get('first_ready_s') is not None and t.get('done_s') else 0
print(s['ok'], 'ok;', s['frames'], 'frames;', s['faces'], 'faces;', 'timeline', json.dumps(t),
      '| frames/s: all workers ready->done %d, first ready->done %d, workers summed %d | faces/s: %d, %d, %d' % (
      s['frames'] / full if full else 0, s['frames'] / wide if wide else 0, sum(w.get('fps') or 0 for w in ws),
      s['faces'] / full if full else 0, s['faces'] / wide if wide else 0, sum(w.get('faces_per_s') or 0 for w in ws)),
      '| one process: pipeline %d frames/s %d faces/s' % (p.get('fps') or 0, p.get('faces_per_s') or 0) if p else '',
      '| per worker frames/s', [round(w.get('fps') or 0) for w in ws], 'seconds', [round(w.get('seconds') or 0, 2) for w in ws], 'p99 ms', [round(1000 * (w.get('steady_latency_p99_s') or 0)) for w in ws])" 2>&1 | tail -1)" | tee -a $R/table.txt
}
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
one loan-first; one warm-1; one warm-2
/usr/local/nvidia/bin/nvidia-cuda-mps-control -d && echo "MPS daemon started" | tee -a $R/table.txt
export PATH=$PATH:/usr/local/nvidia/bin
for r in a b; do
  many p4-long16-$r long16 "--processes 4"
  many p8-long16-$r long16 "--processes 8"
  many p6-long16-$r long16 "--processes 6"
  many p8par1-long16-$r long16 "--processes 8 --parallel 1"
  many p4-clips-$r clips "--processes 4"
  many p8-clips-$r clips "--processes 8"
  many p4-four8-$r four8 "--processes 4"
  many p8-four8-$r four8 "--processes 8"
done
echo quit | /usr/local/nvidia/bin/nvidia-cuda-mps-control; sleep 1
one warm-3; one warm-4
cp $R/table.txt $OUT/table-b.txt
(cd $R && tar czf $OUT/s31b-logs.tar.gz *.log *.json)
rm -rf $R
