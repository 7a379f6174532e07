#!/bin/bash
# session 19: the H100's latency tail common to all cameras — a one-process fleet of 24 paced 720p30 cameras (the
# tree sent) with every frame's latency, every collection and every slow step of the GPU thread on one clock.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rwF/*.whl 2>&1 | grep -v "already exists" | tail -2
R=$OUT/s19g; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/table.txt
PYTHONPATH=$ROOT:/tmp/site timeout 200 python3 .gpu/tailwatch.py $R/trace.txt --models-dir $ROOT/.rwF/blazeface --out $R/f --counts 24 --seconds 15 > $R/fleet.txt 2>&1
echo "rc=$?" | tee -a $R/table.txt; find $R/f -name "*.csv" -delete
grep -A3 "^cameras" $R/fleet.txt | tee -a $R/table.txt
gzip $R/trace.txt
PYTHONPATH=$ROOT:/tmp/site timeout 200 python3 benchmarks/fleet.py --models-dir $ROOT/.rwF/blazeface --out $R/p --counts 24 28 32 --seconds 15 > $R/plain.txt 2>&1
echo "plain rc=$?" | tee -a $R/table.txt; find $R/p -name "*.csv" -delete
grep -A5 "^cameras" $R/plain.txt | tee -a $R/table.txt
cp $R/table.txt $OUT/table-g.txt; tar czf $OUT/s19g.tgz -C $OUT s19g && rm -rf $R
