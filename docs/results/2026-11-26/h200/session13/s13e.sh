#!/bin/bash
# session 13: --ray-keep-warm on a Ray cluster started beside the runs (ray start --head, one GPU): the 64-clip
# archive and a one-clip folder, the first run starting its workers, the next ones claiming them warm; one process
# for comparison, on the same machine.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
C=/root/rc; mkdir -p $C/assets/models $C/assets/data/faces
cp -r .rw4/* $C/; cp -r .rw4/blazeface $C/assets/models/; cp .rw4/faces/*.png $C/assets/data/faces/
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl 2>&1 | grep -v "already exists" | tail -2
cat /root/raycache/ray.part00 /root/raycache/ray.part01 > /root/raycache/ray-2.60.0-cp312-cp312-manylinux2014_x86_64.whl
python3 -m pip install -q --no-index --no-deps --target /tmp/raysite /root/raycache/ray-2.60.0-*.whl 2>&1 | tail -2
for pair in click:click filelock:filelock jsonschema:jsonschema jsonschema_specifications:jsonschema_specifications \
    referencing:referencing rpds:rpds_py attrs:attrs msgpack:msgpack google.protobuf:protobuf yaml:pyyaml; do
  mod=${pair%%:*}; whl=${pair##*:}
  python3 -c "import $mod" 2>/dev/null || python3 -m pip install -q --no-index --no-deps --target /tmp/raysite .rwC/$whl-*.whl 2>&1 | tail -1
done
R=$OUT/${S13:-s13d}; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/table.txt
python3 -c "
import sys, shutil; sys.path.insert(0, 'benchmarks'); import synthetic; from pathlib import Path
synthetic.random_checkpoint(Path('$C/w.pth'))
d = Path('$C/clips'); d.mkdir(exist_ok=True)
for i in range(64): shutil.copy('$C/clip10s_720p_h264.mp4', d / f'clip{i:02d}.mp4')
d = Path('$C/one'); d.mkdir(exist_ok=True); shutil.copy('$C/clip10s_720p_h264.mp4', d / 'clip.mp4')"
T=$ROOT/.gpu/warm
export PYTHONPATH=$T:/tmp/site:/tmp/raysite
O="--weights $C/w.pth --detector blazeface_back --models-dir $C/blazeface --no-progress"
run() {  # label, input folder, extra options
  rm -rf /tmp/o; local t0=$(date +%s.%N)
  (cd $T && timeout 150 python3 -m emopipe $2 -o /tmp/o $O $3 > $R/$1.log 2>&1); local rc=$?
  echo "$1: rc=$rc wall=$(python3 -c "print(round($(date +%s.%N)-$t0,2))") s; $(python3 -c "
import json; s=json.load(open('/tmp/o/summary.json')); r = s.get('ray', {})
print(s['ok'], 'ok;', s.get('frames'), 'frames;', json.dumps(r.get('timeline')), json.dumps({n: (w.get('warm_from_an_earlier_run'), w.get('where')) for n, w in r.get('per_worker', {}).items()}))" 2>&1 | tail -1)" | tee -a $R/table.txt
}
run warm-one $C/clips ""
run one-1 $C/clips ""
run clip-one-1 $C/one ""
python3 -m ray.scripts.scripts start --head --node-ip-address=127.0.0.1 --port=6379 --num-gpus=1 --include-dashboard=false \
  --disable-usage-stats > $R/ray-start.log 2>&1; echo "ray start rc=$?" | tee -a $R/table.txt; tail -3 $R/ray-start.log
A="--ray 127.0.0.1:6379 --ray-keep-warm 600"
run ray-cold $C/clips "$A"
run ray-warm-1 $C/clips "$A"
run ray-warm-2 $C/clips "$A"
run clip-ray-warm-1 $C/one "$A"
run clip-ray-warm-2 $C/one "$A"
python3 -m ray.scripts.scripts stop --force > /dev/null 2>&1 || true
run one-2 $C/clips ""
run clip-one-2 $C/one ""
(cd $R && tar czf logs.tar.gz *.log && rm *.log)
