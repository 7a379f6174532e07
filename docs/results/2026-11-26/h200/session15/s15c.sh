#!/bin/bash
# session 15 (s15c, the tree of fa53825: under MPS a cluster on this machine runs 4 workers a GPU by default):
# as s15b, with the default sizing (no --ray-workers), then 8 workers; eight long and eight four-face videos too.
# s15b's header follows.
# session 15: Ray workers sharing one GPU under CUDA MPS. Part "standing": an MPS daemon (its own pipe directory,
# quit at the end), a Ray cluster started beside the runs with `ray start --head` (it inherits the MPS pipe), and
# --ray-workers W --ray-gpus-per-worker 1/W --ray-keep-warm: the 64-clip archive cold then warm twice for each W, then
# four long and four four-face videos with the warm workers. Part "local": one process against `--ray local` (no
# standing cluster) with W workers, interleaved, all under MPS. Tree: .gpu/new15 (main's head).
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
PART=${1:-standing}
C=/root/rc; mkdir -p $C
cp -r .rw4/* $C/
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl 2>&1 | grep -v "already exists" | tail -2
if [ ! -d /tmp/raysite/ray ]; then
  cat /root/raycache/ray.part00 /root/raycache/ray.part01 > /root/raycache/ray-2.60.0-cp312-cp312-manylinux2014_x86_64.whl
  python3 -m pip install -q --no-index --no-deps --target /tmp/raysite /root/raycache/ray-2.60.0-*.whl 2>&1 | grep -v "already exists" | tail -2
  for pair in click:click filelock:filelock jsonschema:jsonschema jsonschema_specifications:jsonschema_specifications \
      referencing:referencing rpds:rpds_py attrs:attrs msgpack:msgpack google.protobuf:protobuf yaml:pyyaml; do
    mod=${pair%%:*}; whl=${pair##*:}
    python3 -c "import $mod" 2>/dev/null || python3 -m pip install -q --no-index --no-deps --target /tmp/raysite .rwC/$whl-*.whl 2>&1 | grep -v "already exists" | tail -1
  done
fi
R=$OUT/${TAG:-s15c}-$PART; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/table.txt
PYTHONPATH=/tmp/site python3 -c "
import sys, shutil; sys.path.insert(0, 'benchmarks'); import synthetic; from pathlib import Path
synthetic.random_checkpoint(Path('$C/w.pth'))
for name, src, n in (('clips', 'clip10s_720p_h264.mp4', 64), ('long', 'video_720p_h264.mp4', 8), ('four', 'video_720p_4faces_h264.mp4', 8)):
    d = Path('$C') / name; d.mkdir(exist_ok=True)
    for i in range(n): shutil.copy(Path('$C') / src, d / f'{name}{i:02d}.mp4')"
O="--weights $C/w.pth --detector blazeface_back --models-dir $C/blazeface --no-progress"
T=${TREE:-$ROOT/.gpu/new15b}
run() {  # label, input folder, extra options
  rm -rf /tmp/o; local t0=$(date +%s.%N)
  (cd $T && PYTHONPATH=$T:/tmp/site:/tmp/raysite timeout 150 python3 -m emopipe $2 -o /tmp/o $O $3 > $R/$1.log 2>&1); local rc=$?
  echo "$1: rc=$rc wall=$(python3 -c "print(round($(date +%s.%N)-$t0,2))") s; $(python3 -c "
import json; s=json.load(open('/tmp/o/summary.json')); r = s.get('ray', {}); t = r.get('timeline') or {}
ws = r.get('worker_summaries') or []; p = s.get('pipeline') or {}
steady = s['frames'] / (t['done_s'] - t['ready_s']) if t.get('ready_s') is not None and t.get('done_s') else 0
print(s['ok'], 'ok;', s.get('frames'), 'frames;', s.get('faces'), 'faces;', json.dumps(t) if t else 'pipeline fps %s' % round(p.get('fps') or 0),
      'steady_fps', round(steady), 'worker_fps', [round(w.get('fps') or 0) for w in ws])" 2>&1 | tail -1)" | tee -a $R/table.txt
}
ray_up() {
  (cd $T && PYTHONPATH=$T:/tmp/site:/tmp/raysite python3 -m ray.scripts.scripts start --head --node-ip-address=127.0.0.1 \
    --port=6379 --num-gpus=${NGPU:-1} --include-dashboard=false --disable-usage-stats > $R/ray-start.log 2>&1)
  echo "ray start rc=$?" | tee -a $R/table.txt
}
ray_down() { PYTHONPATH=/tmp/site:/tmp/raysite python3 -m ray.scripts.scripts stop --force > /dev/null 2>&1 || true; sleep 1; }
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
nvidia-cuda-mps-control -d && echo "MPS daemon started" | tee -a $R/table.txt
frac() { python3 -c "print(round(1/$1, 4))"; }
if [ $PART = standing ]; then
  ray_up
  A="--ray 127.0.0.1:6379 --ray-keep-warm 600"
  run archive-default-cold $C/clips "$A"
  grep -h "NVIDIA MPS\|share each GPU" $R/archive-default-cold.log | tee -a $R/table.txt
  run archive-default-warm-a $C/clips "$A"
  run archive-default-warm-b $C/clips "$A"
  run long8-default-warm $C/long "$A"
  run four8-default-warm $C/four "$A"
  ray_down
  [ -n "${ONLY_DEFAULT:-}" ] && { echo quit | nvidia-cuda-mps-control; (cd $R && tar czf logs.tar.gz *.log && rm *.log); exit 0; }
  ray_up
  A="--ray 127.0.0.1:6379 --ray-keep-warm 600 --ray-workers 8 --ray-gpus-per-worker 0.125"
  run archive-w8-cold $C/clips "$A"
  run archive-w8-warm-a $C/clips "$A"
  run long8-w8-warm $C/long "$A"
  run four8-w8-warm $C/four "$A"
  run long8-w8-warm-b $C/long "$A"
  run four8-w8-warm-b $C/four "$A"
  ray_down
else
  for round in 1 2; do
    run one-$round $C/clips ""
    run local-default-$round $C/clips "--ray local"
    grep -h "NVIDIA MPS\|share each GPU" $R/local-default-$round.log | tee -a $R/table.txt
  done
  run one-long8 $C/long ""
  run one-four8 $C/four ""
fi
echo quit | nvidia-cuda-mps-control; sleep 1
(cd $R && tar czf logs.tar.gz *.log && rm *.log)
