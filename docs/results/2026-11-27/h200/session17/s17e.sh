#!/bin/bash
# session 17, fifth call: the fused BlazeFace's GPU tests widened (a camera's one frame, fp32 without graphs) and
# test_fusion's CUDA tests on the working tree; the back model's variants once (NCHW and fp32 are fused too now).
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
C=/root/rc; mkdir -p $C/assets/models $C/assets/data/faces
cp -r .rw4/* $C/; cp -r .rw4/blazeface $C/assets/models/; cp .rw4/faces/*.png $C/assets/data/faces/
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl 2>&1 | grep -v "already exists" | tail -2
R=$OUT/s17e; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/table.txt
t0=$(date +%s)
PYTHONPATH=$ROOT:/tmp/site EMOPIPE_TEST_ASSETS=$C/assets timeout 200 python3 -m pytest -q -p no:cacheprovider -rs \
  tests/test_gpu.py tests/test_fusion.py -k "blazeface or cuda" > $R/pytest.txt 2>&1
echo "pytest rc=$? in $(( $(date +%s) - t0 )) s: $(tail -1 $R/pytest.txt)" | tee -a $R/table.txt
grep -a "FAILED\|Error" $R/pytest.txt | head -8 | tee -a $R/table.txt
PYTHONPATH=$ROOT:/tmp/site timeout 150 python3 benchmarks/detector_warmup.py --models-dir $C/blazeface \
  --faces $C/faces/4faces.png --rounds 1 --only "blazeface_back" --out $R/detector.json > $R/detector.txt 2>&1
echo "detector_warmup rc=$?" | tee -a $R/table.txt; tail -8 $R/detector.txt | tee -a $R/table.txt
