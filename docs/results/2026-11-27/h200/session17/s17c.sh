#!/bin/bash
# session 17, third call: Ray workers sharing one GPU under MPS (a standing cluster on this machine, workers kept
# warm), main's head before the fusion (.gpu/base17) against the working tree (66b17ff): the 64-clip archive (cold,
# then warm), eight long 720p videos and eight four-face videos with warm workers, for the default sizing (4 workers
# on the GPU) and for 8 workers; then `--ray local` (Ray started by the command) over the eight long videos.
# Ray's wheel was put together and installed to /tmp/raysite by the call before (s17-ray-install).
set -u
cd "$(dirname "$0")"
ROOT=$PWD
C=/root/rc; mkdir -p $C
cp -r .rw4/* $C/
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl 2>&1 | grep -v "already exists" | tail -2
R=$OUT/s17c; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/table.txt
PYTHONPATH=/tmp/site python3 -c "
import sys, shutil; sys.path.insert(0, 'benchmarks'); import synthetic; from pathlib import Path
synthetic.random_checkpoint(Path('$C/w.pth'))
for name, src, n in (('clips', 'clip10s_720p_h264.mp4', 64), ('long', 'video_720p_h264.mp4', 8), ('four', 'video_720p_4faces_h264.mp4', 8)):
    d = Path('$C') / name; d.mkdir(exist_ok=True)
    for i in range(n): shutil.copy(Path('$C') / src, d / f'{name}{i:02d}.mp4')"
O="--weights $C/w.pth --detector blazeface_back --models-dir $C/blazeface --no-progress"
run() {  # label, input folder, extra options
  rm -rf /tmp/o; local t0=$(date +%s.%N)
  (cd $T && PYTHONPATH=$T:/tmp/site:/tmp/raysite timeout 120 python3 -m emopipe $2 -o /tmp/o $O $3 > $R/$1.log 2>&1); local rc=$?
  echo "$1: rc=$rc wall=$(python3 -c "print(round($(date +%s.%N)-$t0,2))") s; $(python3 -c "
import json; s=json.load(open('/tmp/o/summary.json')); r = s.get('ray', {}); t = r.get('timeline') or {}
ws = r.get('worker_summaries') or []; p = s.get('pipeline') or {}
steady = s['frames'] / (t['done_s'] - t['ready_s']) if t.get('ready_s') is not None and t.get('done_s') else 0
print(s['ok'], 'ok;', s.get('frames'), 'frames;', s.get('faces'), 'faces;', 'pipeline fps %s' % round(p.get('fps') or 0),
      'steady_fps', round(steady), 'worker_fps', [round(w.get('fps') or 0) for w in ws])" 2>&1 | tail -1)" | tee -a $R/table.txt
}
ray_up() {
  (cd $T && PYTHONPATH=$T:/tmp/site:/tmp/raysite python3 -m ray.scripts.scripts start --head --node-ip-address=127.0.0.1 \
    --port=6379 --num-gpus=1 --include-dashboard=false --disable-usage-stats > $R/ray-start.log 2>&1)
  echo "ray start rc=$?" | tee -a $R/table.txt
}
ray_down() { PYTHONPATH=/tmp/site:/tmp/raysite python3 -m ray.scripts.scripts stop --force > /dev/null 2>&1 || true; sleep 1; }
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
/usr/local/nvidia/bin/nvidia-cuda-mps-control -d && echo "MPS daemon started" | tee -a $R/table.txt
export PATH=$PATH:/usr/local/nvidia/bin
for tree in base new; do
  T=$ROOT; [ $tree = base ] && T=$ROOT/.gpu/base17
  ray_up
  A="--ray 127.0.0.1:6379 --ray-keep-warm 600"
  run $tree-archive-w4-cold $C/clips "$A"
  grep -h "NVIDIA MPS\|share each GPU" $R/$tree-archive-w4-cold.log | head -2 | tee -a $R/table.txt
  run $tree-archive-w4-warm $C/clips "$A"
  run $tree-long8-w4-warm $C/long "$A"
  run $tree-four8-w4-warm $C/four "$A"
  ray_down
  ray_up
  A="--ray 127.0.0.1:6379 --ray-keep-warm 600 --ray-workers 8 --ray-gpus-per-worker 0.125"
  run $tree-long8-w8-cold $C/long "$A"
  run $tree-long8-w8-warm $C/long "$A"
  run $tree-four8-w8-warm $C/four "$A"
  ray_down
done
for tree in base new; do
  T=$ROOT; [ $tree = base ] && T=$ROOT/.gpu/base17
  run $tree-long8-local $C/long "--ray local"
done
echo quit | /usr/local/nvidia/bin/nvidia-cuda-mps-control; sleep 1
(cd $R && tar czf logs.tar.gz *.log && rm *.log)
