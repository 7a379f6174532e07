#!/bin/bash
# session 18: camera fleets on one GPU — one process (the fused BlazeFace's head) against one command over Ray workers
# sharing the GPU under MPS (`--ray local`: Ray started by the command, its workers opening the cameras through the
# paced:// capture plug-in benchmarks/fleet.py installs). Arg 1: "one" (install Ray's wheel, one-process fleets,
# then Ray 4 workers) or "more" (other worker counts and fleet sizes).
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
PART=${1:-one}
C=/root/rc; mkdir -p $C
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rwF/*.whl 2>&1 | grep -v "already exists" | tail -2
if [ ! -d /tmp/raysite/ray ]; then
  cp .rwB/ray.part01 /root/raycache/
  cat /root/raycache/ray.part00 /root/raycache/ray.part01 > /root/raycache/ray-2.60.0-cp312-cp312-manylinux2014_x86_64.whl
  python3 -m pip install -q --no-index --no-deps --target /tmp/raysite /root/raycache/ray-2.60.0-*.whl 2>&1 | grep -v "already exists" | tail -2
  for pair in click:click filelock:filelock jsonschema:jsonschema jsonschema_specifications:jsonschema_specifications \
      referencing:referencing rpds:rpds_py attrs:attrs msgpack:msgpack google.protobuf:protobuf yaml:pyyaml; do
    mod=${pair%%:*}; whl=${pair##*:}
    python3 -c "import $mod" 2>/dev/null || python3 -m pip install -q --no-index --no-deps --target /tmp/raysite .rwC/$whl-*.whl 2>&1 | grep -v "already exists" | tail -1
  done
fi
R=$OUT/s18a-$PART; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/table.txt
nproc | tee -a $R/table.txt
T=$ROOT  # the tree a fleet runs (the "ab" part: .gpu/base18, main's head before settle_heap, against the working tree)
fleet() {  # label, timeout, fleet.py arguments
  local label=$1 limit=$2; shift 2
  local t0=$(date +%s)
  (cd $T && PYTHONPATH=$T:/tmp/site:/tmp/raysite timeout $limit python3 benchmarks/fleet.py --models-dir $ROOT/.rwF/blazeface \
    --out $R/$label "$@" > $R/$label.txt 2>&1)
  echo "== $label (rc=$?, $(( $(date +%s) - t0 )) s): $*" | tee -a $R/table.txt
  find $R/$label -name "*.csv" -delete  # (rows, tracks, segments: the summaries and logs stay)
  grep -A8 "^cameras" $R/$label.txt | tee -a $R/table.txt
}
if [ $PART = one ] || [ $PART = h100 ]; then
  fleet one-process 120 --counts 28 32 --seconds 15
fi
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
/usr/local/nvidia/bin/nvidia-cuda-mps-control -d && echo "MPS daemon started" | tee -a $R/table.txt
export PATH=$PATH:/usr/local/nvidia/bin
if [ $PART = one ]; then
  fleet ray-w4 300 --counts 32 48 --seconds 15 -- --ray local
elif [ $PART = most ]; then
  fleet ray-w8-most 300 --counts 80 96 --seconds 15 -- --ray local --ray-workers 8 --ray-gpus-per-worker 0.125
elif [ $PART = h100b ]; then
  fleet ray-w8 300 --counts 32 48 --seconds 15 -- --ray local --ray-workers 8 --ray-gpus-per-worker 0.125
elif [ $PART = h100c ]; then
  fleet ray-w8-again 150 --counts 32 --seconds 15 -- --ray local --ray-workers 8 --ray-gpus-per-worker 0.125
  fleet ray-w6 150 --counts 32 --seconds 15 -- --ray local --ray-workers 6 --ray-gpus-per-worker 0.16
elif [ $PART = h100d ]; then
  fleet ray-w8-counts 300 --counts 24 28 32 --seconds 15 -- --ray local --ray-workers 8 --ray-gpus-per-worker 0.125
elif [ $PART = ab ]; then
  W="--ray local --ray-workers 8 --ray-gpus-per-worker 0.125"
  T=$ROOT/.gpu/base18; fleet base-w8-a 150 --counts 32 --seconds 15 -- $W
  T=$ROOT; fleet new-w8-a 150 --counts 32 --seconds 15 -- $W
  T=$ROOT; fleet new-w8-b 150 --counts 32 --seconds 15 -- $W
  T=$ROOT/.gpu/base18; fleet base-w8-b 150 --counts 32 --seconds 15 -- $W
elif [ $PART = h100 ]; then
  fleet ray-w4 300 --counts 32 64 --seconds 15 -- --ray local
else
  fleet ray-w2 150 --counts 32 --seconds 15 -- --ray local --ray-workers 2 --ray-gpus-per-worker 0.5
  fleet ray-w4-64 150 --counts 64 --seconds 15 -- --ray local
  fleet ray-w8 150 --counts 64 --seconds 15 -- --ray local --ray-workers 8 --ray-gpus-per-worker 0.125
fi
echo quit | /usr/local/nvidia/bin/nvidia-cuda-mps-control; sleep 1
(cd $R && for d in */; do tar czf ${d%/}.tar.gz $d && rm -rf $d; done)
