#!/bin/bash
# session 8, call 8 (one H200): fleets with --detect-every (8f912de: each camera its own key frames).
set -u
cd "$(dirname "$0")/.."
C=/root/rc; mkdir -p $C/assets/models
cp -r .rw4/blazeface $C/assets/models/ 2>/dev/null
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/face_alignment-*.whl 2>&1 | grep -v "already exists" | tail -2
export PYTHONPATH=$PWD:/tmp/site
R=$OUT/s8; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt; nproc | tee -a $R/gpu.txt
v() {  # $1 name, $2 count, rest: emopipe options
  local name=$1 count=$2; shift 2
  timeout 90 python3 benchmarks/fleet.py --models-dir $C/assets/models/blazeface --counts $count --seconds 15 \
    --out /tmp/f-$name -- "$@" > $R/$name.txt 2>&1
  echo "$name rc=$? $(grep -a -A2 '^cameras' $R/$name.txt | tail -1)"
  cp /tmp/f-$name/results.json $R/$name-results.json 2>/dev/null
}
v default-32 32
v every2-32 32 --detect-every 2
v every2-36 36 --detect-every 2
v every3-40 40 --detect-every 3
v every2-wait10-36 36 --detect-every 2 --max-wait-ms 10
cd $OUT && tar czf s8.tgz s8 && rm -rf s8
