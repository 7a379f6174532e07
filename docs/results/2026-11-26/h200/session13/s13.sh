#!/bin/bash
# session 13, first call (one GPU): Ray's worker processes import PyTorch and the pipeline as a local Ray starts
# (RAY_preload_python_modules, one prestarted worker per expected worker + 1) — the 64-clip archive in one process,
# then --ray local with base ce80ca5 (no preload) and with the working tree, interleaved three times.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
C=/root/rc; mkdir -p $C/assets/models $C/assets/data/faces
cp -r .rw4/* $C/; cp -r .rw4/blazeface $C/assets/models/; cp .rw4/faces/*.png $C/assets/data/faces/
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl 2>&1 | grep -v "already exists" | tail -2
cat /root/raycache/ray.part00 /root/raycache/ray.part01 > /root/raycache/ray-2.60.0-cp312-cp312-manylinux2014_x86_64.whl
python3 -m pip install -q --no-index --no-deps --target /tmp/raysite /root/raycache/ray-2.60.0-*.whl 2>&1 | tail -2
# Ray's dependencies, only those the host lacks (a newer protobuf beside the host's onnx would shadow its own)
for pair in click:click filelock:filelock jsonschema:jsonschema jsonschema_specifications:jsonschema_specifications \
    referencing:referencing rpds:rpds_py attrs:attrs msgpack:msgpack google.protobuf:protobuf yaml:pyyaml; do
  mod=${pair%%:*}; whl=${pair##*:}
  python3 -c "import $mod" 2>/dev/null || python3 -m pip install -q --no-index --no-deps --target /tmp/raysite .rwC/$whl-*.whl 2>&1 | tail -1
done
R=$OUT/${S13:-s13a}; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/table.txt
nproc | sed 's/^/cores: /' | tee -a $R/table.txt
python3 -c "
import sys, shutil; sys.path.insert(0, 'benchmarks'); import synthetic; from pathlib import Path
synthetic.random_checkpoint(Path('$C/w.pth'))
d = Path('$C/clips'); d.mkdir(exist_ok=True)
for i in range(64): shutil.copy('$C/clip10s_720p_h264.mp4', d / f'clip{i:02d}.mp4')"
export PYTHONPATH=/tmp/site:/tmp/raysite
O="--weights $C/w.pth --detector blazeface_back --models-dir $C/blazeface --no-progress"
tree() { [ $1 = base ] && echo $ROOT/.gpu/base13 || echo $ROOT; }
run() {  # label, tree, extra options
  rm -rf /tmp/o; local t0=$(date +%s.%N)
  (cd $(tree $2) && PYTHONPATH=$(tree $2):$PYTHONPATH timeout 200 python3 -m emopipe $C/clips -o /tmp/o $O $3 > $R/$1.log 2>&1) &
  local pid=$!
  sleep 6; echo "$1 at 6 s: $(pgrep -fc 'ray::') Ray worker processes" >> $R/workers.txt
  wait $pid; local rc=$?
  echo "$1: rc=$rc wall=$(python3 -c "print(round($(date +%s.%N)-$t0,2))") s; $(python3 -c "
import json; s=json.load(open('/tmp/o/summary.json')); r = s.get('ray', {}); w = (r.get('worker_summaries') or [{}])[-1]
print(s['ok'], 'ok;', s.get('frames'), 'frames;', json.dumps(r.get('timeline')), 'worker:', json.dumps(w.get('start')), 'load', w.get('load_s'), 'warmup', w.get('warmup_s'))" 2>&1 | tail -1)" | tee -a $R/table.txt
}
[ -z "${S13:-}" ] && run warm-one head ""
for round in 1 2 3; do
  run one-$round head ""; run ray-base-$round base "--ray local"; run ray-head-$round head "--ray local"
done
cat $R/workers.txt >> $R/table.txt; rm $R/workers.txt
grep -h "preload" /tmp/ray/session_latest/logs/worker-*.err | sort | uniq -c >> $R/table.txt
(cd $R && tar czf logs.tar.gz *.log && rm *.log)
ray stop --force > /dev/null 2>&1 || true
