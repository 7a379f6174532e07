#!/bin/bash
# session 19: the largest one-process fleet that holds, after the frame copies (the final tree) — 24 and 28 paced
# 720p30 cameras, and main's head before the session at 28.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rwF/*.whl 2>&1 | grep -v "already exists" | tail -2
R=$OUT/s19e; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/table.txt
fleet() {  # label, tree, counts...
  local label=$1 tree=$2; shift 2
  (cd $tree && PYTHONPATH=$tree:/tmp/site timeout 200 python3 benchmarks/fleet.py --models-dir $ROOT/.rwF/blazeface --out $R/$label --counts "$@" --seconds 15 > $R/$label.txt 2>&1)
  echo "== $label (rc=$?)" | tee -a $R/table.txt; find $R/$label -name "*.csv" -delete
  grep -A5 "^cameras" $R/$label.txt | grep -v "^---\|^target" | tee -a $R/table.txt
}
fleet final $ROOT 24 28; fleet base $ROOT/.gpu/base19 28; fleet final-again $ROOT 28
cp $R/table.txt $OUT/table-e.txt; tar czf $OUT/s19e.tgz -C $OUT s19e && rm -rf $R
