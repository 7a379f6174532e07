#!/bin/bash
# session 19, last: the GPU tests on the final tree; a one-process fleet of 24 paced 720p30 cameras traced (every
# frame's latency, collections, slow steps), then 24 / 28 / 32 plain, and main's head before the session at 24.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
C=/root/rc; mkdir -p $C/assets/models $C/assets/data/faces
cp -r .rw4/* $C/; cp -r .rw4/blazeface $C/assets/models/; cp .rw4/faces/*.png $C/assets/data/faces/
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl 2>&1 | grep -v "already exists" | tail -2
R=$OUT/s19h; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/table.txt
t0=$(date +%s)
(PYTHONPATH=$ROOT:/tmp/site EMOPIPE_TEST_ASSETS=$C/assets timeout 300 python3 -m pytest -q -p no:cacheprovider -rs \
  tests/test_gpu.py tests/test_cudnn_epilogue.py tests/test_nvdec.py > $R/pytest.txt 2>&1)
echo "pytest rc=$? in $(( $(date +%s) - t0 )) s: $(tail -1 $R/pytest.txt)" | tee -a $R/table.txt
grep -a "FAILED" $R/pytest.txt | head -5 | tee -a $R/table.txt
PYTHONPATH=$ROOT:/tmp/site timeout 200 python3 .gpu/tailwatch.py $R/trace.txt --models-dir $C/blazeface --out $R/f --counts 24 --seconds 15 > $R/traced.txt 2>&1
echo "traced rc=$?" | tee -a $R/table.txt; grep -A3 "^cameras" $R/traced.txt | grep -v "^---\|^target" | tee -a $R/table.txt
gzip $R/trace.txt
fleet() {  # label, tree, counts...
  local label=$1 tree=$2; shift 2
  (cd $tree && PYTHONPATH=$tree:/tmp/site timeout 200 python3 benchmarks/fleet.py --models-dir $C/blazeface --out $R/$label --counts "$@" --seconds 15 > $R/$label.txt 2>&1)
  echo "== $label (rc=$?)" | tee -a $R/table.txt
  grep -A5 "^cameras" $R/$label.txt | grep -v "^---\|^target" | tee -a $R/table.txt
}
fleet final $ROOT 24 28 32; fleet base $ROOT/.gpu/base19 24
find $R -name "*.csv" -delete
cp $R/table.txt $OUT/table-h.txt; tar czf $OUT/s19h.tgz -C $OUT s19h && rm -rf $R
