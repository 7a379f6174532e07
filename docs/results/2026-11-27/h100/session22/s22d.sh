#!/bin/bash
# session 22: the detector's first pass profiled, autotuning on and off (s22d.py)
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl 2>&1 | grep -v "already exists" | tail -2
mkdir -p $OUT/s22d
for v in bench heur; do
  PYTHONPATH=$ROOT:/tmp/site timeout 90 python3 .gpu/s22d.py $v $ROOT/.rw4/blazeface > $OUT/s22d/profile-$v.txt 2>&1
done
cat $OUT/s22d/profile-bench.txt $OUT/s22d/profile-heur.txt | cut -c1-200
