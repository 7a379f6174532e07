#!/bin/bash
# session 22: BlazeFace back's warm-up, fused or plain, autotuning on or off (s22c.py), four rounds interleaved
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl 2>&1 | grep -v "already exists" | tail -2
mkdir -p $OUT/s22c
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/s22c/table.txt
for r in 1 2 3 4; do for v in "fused bench" "plain bench" "fused heur" "plain heur"; do
  PYTHONPATH=$ROOT:/tmp/site timeout 60 python3 .gpu/s22c.py $v $ROOT/.rw4/blazeface 2>&1 | tail -1 | tee -a $OUT/s22c/table.txt
done; done
