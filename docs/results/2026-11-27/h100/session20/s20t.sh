#!/bin/bash
# session 20, last: the GPU tests on the final tree (no FFmpeg on the host: the annotated videos by OpenCV there).
set -u
cd "$(dirname "$0")/.."
C=/root/rc; mkdir -p $C/assets/models $C/assets/data/faces
cp -r .rw4/blazeface $C/assets/models/; cp .rw4/faces/*.png $C/assets/data/faces/
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl 2>&1 | grep -v "already exists" | tail -2
R=$OUT/s20t; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/table.txt
t0=$(date +%s)
(PYTHONPATH=$PWD:/tmp/site EMOPIPE_TEST_ASSETS=$C/assets timeout 300 python3 -m pytest -q -p no:cacheprovider -rs \
  tests/test_gpu.py tests/test_cudnn_epilogue.py tests/test_nvdec.py > $R/pytest.txt 2>&1)
echo "pytest rc=$? in $(( $(date +%s) - t0 )) s: $(tail -1 $R/pytest.txt)" | tee -a $R/table.txt
grep -a "FAILED" $R/pytest.txt | head -5 | tee -a $R/table.txt
cp $R/table.txt $OUT/table-t.txt; tar czf $OUT/s20t.tgz -C $OUT s20t
