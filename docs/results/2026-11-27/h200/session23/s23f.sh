#!/bin/bash
# session 23 (s23f): the final tree's GPU tests (the plan lookup made one, the CUDA context ahead, fusion, kernels,
# NVDEC), then one one-clip command and its startup phases.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
C=/root/rc; mkdir -p $C/assets/models $C/assets/data/faces
cp -r .rw4/blazeface $C/; cp -r .rw4/blazeface $C/assets/models/; cp .rw4/faces/*.png $C/assets/data/faces/
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl 2>&1 | grep -v "already exists" | tail -2
R=$OUT/s23f; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/table.txt
t0=$(date +%s)
(PYTHONPATH=$ROOT:/tmp/site EMOPIPE_TEST_ASSETS=$C/assets timeout 420 python3 -m pytest -q -p no:cacheprovider -rs \
  tests/test_gpu.py tests/test_cudnn_epilogue.py tests/test_cuda_context.py tests/test_nvdec.py > $R/pytest.txt 2>&1)
echo "pytest rc=$? in $(( $(date +%s) - t0 )) s: $(tail -1 $R/pytest.txt)" | tee -a $R/table.txt
grep -a "FAILED\|Error" $R/pytest.txt | head -8 | tee -a $R/table.txt
PYTHONPATH=/tmp/site python3 -c "
import sys; sys.path.insert(0, 'benchmarks'); import synthetic; from pathlib import Path
synthetic.random_checkpoint(Path('$C/w.pth'))"
mkdir -p /tmp/here; cd /tmp/here
for k in 1 2; do
  rm -rf /tmp/o1; mkdir -p /tmp/o1
  PYTHONPATH=$ROOT:/tmp/site timeout 120 python3 -m emopipe $ROOT/.rw4/clip10s_720p_h264.mp4 -o /tmp/o1/rows.csv \
    --weights $C/w.pth --detector blazeface_back --models-dir $C/blazeface --no-progress > $R/one-$k.log 2>&1
  echo "one-$k: rc=$? $(grep -a 'startup:' $R/one-$k.log)" | tee -a $R/table.txt
done
cp $R/table.txt $OUT/table-f.txt
