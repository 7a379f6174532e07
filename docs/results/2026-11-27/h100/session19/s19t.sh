#!/bin/bash
# session 19: the GPU tests on the working tree sent (this session's final code), then a fleet of 32 paced cameras in
# one process, main's head before the session (.gpu/base19) and after, one run each.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
C=/root/rc; mkdir -p $C/assets/models $C/assets/data/faces
cp -r .rw4/* $C/; cp -r .rw4/blazeface $C/assets/models/; cp .rw4/faces/*.png $C/assets/data/faces/
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl 2>&1 | grep -v "already exists" | tail -2
R=$OUT/s19t; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/table.txt
t0=$(date +%s)
(PYTHONPATH=$ROOT:/tmp/site EMOPIPE_TEST_ASSETS=$C/assets timeout 300 python3 -m pytest -q -p no:cacheprovider -rs \
  tests/test_gpu.py tests/test_cudnn_epilogue.py tests/test_nvdec.py > $R/pytest.txt 2>&1)
echo "pytest rc=$? in $(( $(date +%s) - t0 )) s: $(tail -1 $R/pytest.txt)" | tee -a $R/table.txt
grep -a "FAILED" $R/pytest.txt | head -5 | tee -a $R/table.txt
fleet() {  # label, tree
  (cd $2 && PYTHONPATH=$2:/tmp/site timeout 150 python3 benchmarks/fleet.py --models-dir $C/blazeface --out $R/$1 --counts 32 --seconds 15 > $R/$1.txt 2>&1)
  echo "== $1 (rc=$?)" | tee -a $R/table.txt; find $R/$1 -name "*.csv" -delete
  grep -A3 "^cameras" $R/$1.txt | grep -v "^---\|^target" | tee -a $R/table.txt
}
fleet fleet-final $ROOT; fleet fleet-base $ROOT/.gpu/base19
cp $R/table.txt $OUT/table-t.txt; tar czf $OUT/s19t.tgz -C $OUT s19t && rm -rf $R
