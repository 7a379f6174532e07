#!/bin/bash
# session 23 (s23e): on an H100, the steady state of long 720p videos in one command on a standing Ray cluster of this
# machine whose 8 workers share the GPU under NVIDIA MPS (--ray-keep-warm), as session 21's s21c but with sixteen
# 60-s videos as well as eight (each worker then decodes two one after the other, so the aggregate is measured over a
# longer span in which every worker is busy), on this tree (session 23's start-up changes).
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
C=/root/rc; mkdir -p $C/assets/models $C/assets/data/faces
cp -r .rw4/blazeface $C/; cp -r .rw4/blazeface $C/assets/models/; cp .rw4/faces/*.png $C/assets/data/faces/
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl 2>&1 | grep -v "already exists" | tail -2
R=$OUT/s23e; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/table.txt
nproc | tee -a $R/table.txt
git log --oneline -1 2>/dev/null | tee -a $R/table.txt
[ -d /tmp/raysite/ray ] || echo "NO RAY (a fresh machine)" | tee -a $R/table.txt
PYTHONPATH=/tmp/site python3 -c "
import sys, shutil; sys.path.insert(0, 'benchmarks'); import synthetic; from pathlib import Path
synthetic.random_checkpoint(Path('$C/w.pth'))
for name, src, n in (('long', 'video_720p_h264.mp4', 8), ('long16', 'video_720p_h264.mp4', 16)):
    d = Path('$C') / name; d.mkdir(exist_ok=True)
    for i in range(n): shutil.copy(Path('.rw4') / src, d / f'{name}{i}.mp4')"
O="--weights $C/w.pth --detector blazeface_back --models-dir $C/blazeface --no-progress"
run() {  # label, input folder, extra options
  rm -rf /tmp/o; local t0=$(date +%s.%N)
  (PYTHONPATH=$ROOT:/tmp/site:/tmp/raysite timeout 150 python3 -m emopipe $C/$2 -o /tmp/o $O $3 > $R/$1.log 2>&1)
  local rc=$?
  echo "$1: rc=$rc wall=$(python3 -c "print(round($(date +%s.%N)-$t0,2))") s; $(python3 -c "
import json; s=json.load(open('/tmp/o/summary.json')); r = s.get('ray', {}); t = r.get('timeline') or {}
ws = r.get('worker_summaries') or []; p = s.get('pipeline') or {}
span = (t['done_s'] - t['ready_s']) if t.get('ready_s') is not None and t.get('done_s') else 0
print(s['ok'], 'ok;', s.get('frames'), 'frames;', s.get('faces'), 'faces;', 'pipeline fps %s faces/s %s' % (round(p.get('fps') or 0), round(p.get('faces_per_s') or 0)),
      'steady_fps', round(s['frames'] / span) if span else 0, 'steady_faces_per_s', round(s['faces'] / span) if span else 0,
      'worker_fps', [round(w.get('fps') or 0) for w in ws])" 2>&1 | tail -1)" | tee -a $R/table.txt
}
ray_up() {
  (PYTHONPATH=$ROOT:/tmp/site:/tmp/raysite python3 -m ray.scripts.scripts start --head --node-ip-address=127.0.0.1 \
    --port=6379 --num-gpus=1 --include-dashboard=false --disable-usage-stats > $R/ray-start.log 2>&1)
  echo "ray start rc=$?" | tee -a $R/table.txt
}
ray_down() { PYTHONPATH=/tmp/site:/tmp/raysite python3 -m ray.scripts.scripts stop --force > /dev/null 2>&1 || true; sleep 1; }
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
/usr/local/nvidia/bin/nvidia-cuda-mps-control -d && echo "MPS daemon started" | tee -a $R/table.txt
export PATH=$PATH:/usr/local/nvidia/bin
run one-long16 long16 ""
ray_up
A="--ray 127.0.0.1:6379 --ray-keep-warm 600 --ray-workers 8 --ray-gpus-per-worker 0.125"
run w8-long16-cold long16 "$A"
run w8-long16-warm-a long16 "$A"
run w8-long-warm-a long "$A"
run w8-long16-warm-b long16 "$A"
run w8-long-warm-b long "$A"
run w8-long16-warm-c long16 "$A"
ray_down
echo quit | /usr/local/nvidia/bin/nvidia-cuda-mps-control; sleep 1
cp $R/table.txt $OUT/table-e.txt
(cd $R && tar czf logs.tar.gz *.log && rm *.log)

