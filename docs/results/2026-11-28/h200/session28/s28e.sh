#!/bin/bash
# session 28 (s28e): the GPU paths' tests on the tree: cuDNN's epilogue and plans, the fused networks, the GPU
# metrics test, the collector's block.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
C=/root/rc; mkdir -p $C/assets/models $C/assets/data/faces
cp -r .rw4/blazeface $C/assets/models/; cp .rw4/faces/*.png $C/assets/data/faces/
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl 2>&1 | grep -v "already exists" | tail -2
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/table-e.txt
PYTHONPATH=$ROOT:/tmp/site EMOPIPE_TEST_ASSETS=$C/assets timeout 480 python3 -m pytest -q -p no:cacheprovider -rs \
  tests/test_cudnn_epilogue.py tests/test_fusion.py tests/test_heap.py tests/test_metrics.py > $OUT/pytest-e.txt 2>&1
echo "rc=$?: $(tail -1 $OUT/pytest-e.txt)" | tee -a $OUT/table-e.txt
grep -E "FAILED|SKIPPED|Fatal" $OUT/pytest-e.txt | head -20 | tee -a $OUT/table-e.txt
