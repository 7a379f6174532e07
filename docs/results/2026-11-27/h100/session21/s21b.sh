#!/bin/bash
# session 21, second call (s21a's machine held): interleaved pairs; first, the GPU tests on the final tree; the 64-clip archive (10 s 720p H.264 clips, one face) in one
# process against one command on a standing Ray cluster of this machine whose workers share the GPU under NVIDIA MPS
# (--ray-keep-warm: the first run starts the workers, the next ones find them warm), and once with --ray local.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
C=/root/rc; mkdir -p $C/assets/models $C/assets/data/faces
cp -r .rw4/blazeface $C/; cp -r .rw4/blazeface $C/assets/models/; cp .rw4/faces/*.png $C/assets/data/faces/
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl 2>&1 | grep -v "already exists" | tail -2
R=$OUT/s21b; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/table.txt
nproc | tee -a $R/table.txt
git log --oneline -1 2>/dev/null | tee -a $R/table.txt
grep -a "FAILED" $R/pytest.txt | head -5 | tee -a $R/table.txt
PYTHONPATH=/tmp/site python3 -c "
import sys, shutil; sys.path.insert(0, 'benchmarks'); import synthetic; from pathlib import Path
synthetic.random_checkpoint(Path('$C/w.pth'))
d = Path('$C') / 'clips'; d.mkdir(exist_ok=True)
for i in range(64): shutil.copy('.rw4/clip10s_720p_h264.mp4', d / f'clip{i:02d}.mp4')"
O="--weights $C/w.pth --detector blazeface_back --models-dir $C/blazeface --no-progress"
run() {  # label, extra options
  rm -rf /tmp/o; local t0=$(date +%s.%N)
  (PYTHONPATH=$ROOT:/tmp/site:/tmp/raysite timeout 150 python3 -m emopipe $C/clips -o /tmp/o $O $2 > $R/$1.log 2>&1)
  local rc=$?
  echo "$1: rc=$rc wall=$(python3 -c "print(round($(date +%s.%N)-$t0,2))") s; $(python3 -c "
import json; s=json.load(open('/tmp/o/summary.json')); r = s.get('ray', {}); t = r.get('timeline') or {}
ws = r.get('worker_summaries') or []; p = s.get('pipeline') or {}; st = p.get('startup') or {}
steady = s['frames'] / (t['done_s'] - t['ready_s']) if t.get('ready_s') is not None and t.get('done_s') else 0
print(s['ok'], 'ok;', s.get('frames'), 'frames;', 'pipeline fps %s' % round(p.get('fps') or 0),
      'first_row_s', st.get('first_row_s') or t.get('first_row_s'), 'steady_fps', round(steady),
      'worker_fps', [round(w.get('fps') or 0) for w in ws], 'timeline', {k: round(v, 2) for k, v in t.items()})" 2>&1 | tail -1)" | tee -a $R/table.txt
}
[ -d /tmp/raysite/ray ] || echo "NO RAY (a fresh machine)" | tee -a $R/table.txt
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
export PATH=$PATH:/usr/local/nvidia/bin
run one-process-warmup ""
for k in a b c; do
  run one-process-$k ""
  /usr/local/nvidia/bin/nvidia-cuda-mps-control -d && echo "MPS daemon started" | tee -a $R/table.txt
  run ray-local-mps-$k "--ray local"
  run one-process-under-mps-$k ""
  echo quit | /usr/local/nvidia/bin/nvidia-cuda-mps-control; sleep 1
done
run ray-local-no-mps "--ray local"
cp $R/table.txt $OUT/table-b.txt
(cd $R && tar czf logs.tar.gz *.log && rm *.log)
tar czf $OUT/s21b.tgz -C $OUT s21b && rm -rf $R
