#!/bin/bash
# session 18: the GPU tests on the working tree sent (this session's final code).
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
C=/root/rc; mkdir -p $C/assets/models $C/assets/data/faces
cp -r .rw4/* $C/; cp -r .rw4/blazeface $C/assets/models/; cp .rw4/faces/*.png $C/assets/data/faces/
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl 2>&1 | grep -v "already exists" | tail -2
R=$OUT/s18t; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/table.txt
T=$ROOT
t0=$(date +%s)
(cd $T && PYTHONPATH=$T:/tmp/site EMOPIPE_TEST_ASSETS=$C/assets timeout 300 python3 -m pytest -q -p no:cacheprovider -rs \
  tests/test_gpu.py tests/test_cudnn_epilogue.py tests/test_nvdec.py > $R/pytest.txt 2>&1)
echo "pytest rc=$? in $(( $(date +%s) - t0 )) s: $(tail -1 $R/pytest.txt)" | tee -a $R/table.txt
grep -a "FAILED" $R/pytest.txt | head -5 | tee -a $R/table.txt
