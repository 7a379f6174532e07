#!/bin/bash
# session 22: depthwise convolutions through cuDNN or PyTorch's own kernel (s22e.py), four rounds interleaved
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl 2>&1 | grep -v "already exists" | tail -2
mkdir -p $OUT/s22e
for r in 1 2 3 4; do for v in cudnn native; do
  PYTHONPATH=$ROOT:/tmp/site timeout 90 python3 .gpu/s22e.py $v $ROOT/.rw4/blazeface $ROOT/.rw4/faces 2>&1 | tail -1 | tee -a $OUT/s22e/table.txt
done; done
