#!/bin/bash
# session 12, last call (one GPU): main's final code — the GPU tests, then the 64-clip archive in one process
# against --ray local (one worker), interleaved twice (the Ray driver now reads the progress board every 0.5 s and
# records each source as its worker finishes it).
set -u
cd "$(dirname "$0")/.."
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
R=$OUT/s12c; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/table.txt
export PYTHONPATH=$PWD:/tmp/site
t0=$(date +%s)
EMOPIPE_TEST_ASSETS=$C/assets timeout 300 python3 -m pytest -q -p no:cacheprovider -rs tests/test_gpu.py \
  tests/test_cudnn_epilogue.py tests/test_nvdec.py > $R/pytest.txt 2>&1
echo "pytest rc=$? in $(( $(date +%s) - t0 )) s: $(tail -1 $R/pytest.txt)" | tee -a $R/table.txt
grep -a "FAILED" $R/pytest.txt | head -5
python3 -c "
import sys, shutil; sys.path.insert(0, 'benchmarks'); import synthetic; from pathlib import Path
synthetic.random_checkpoint(Path('$C/w.pth'))
d = Path('$C/clips'); d.mkdir(exist_ok=True)
for i in range(64): shutil.copy('$C/clip10s_720p_h264.mp4', d / f'clip{i:02d}.mp4')"
export PYTHONPATH=$PWD:/tmp/site:/tmp/raysite
O="--weights $C/w.pth --detector blazeface_back --models-dir $C/blazeface --no-progress"
run() {  # label, extra options
  rm -rf /tmp/o; local t0=$(date +%s.%N)
  timeout 200 python3 -m emopipe $C/clips -o /tmp/o $O $2 > $R/$1.log 2>&1; local rc=$?
  echo "$1: rc=$rc wall=$(python3 -c "print(round($(date +%s.%N)-$t0,2))") s; $(python3 -c "
import json; s=json.load(open('/tmp/o/summary.json')); print(s['ok'], 'ok;', s.get('frames'), 'frames;', json.dumps(s.get('ray', {}).get('timeline'))[:300])" 2>&1 | tail -1)" | tee -a $R/table.txt
}
run warm-one ""
for round in 1 2; do run one-$round ""; run ray-$round "--ray local"; done
ray stop --force > /dev/null 2>&1 || true
