#!/bin/bash
# session 19: is the H100's latency tail common to all cameras the cycle collector? A one-process fleet of 24 paced
# 720p30 cameras (the final tree; rerun with the live settle: 24 and 28) with every collection of 5 ms or more (and every full one) logged.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rwF/*.whl 2>&1 | grep -v "already exists" | tail -2
R=$OUT/s19f; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/table.txt
PYTHONPATH=$ROOT:/tmp/site timeout 200 python3 .gpu/gcwatch.py $R/gc.txt --models-dir $ROOT/.rwF/blazeface --out $R/f --counts 24 28 --seconds 15 > $R/fleet.txt 2>&1
echo "rc=$?" | tee -a $R/table.txt; find $R/f -name "*.csv" -delete
grep -A4 "^cameras" $R/fleet.txt | tee -a $R/table.txt
echo "collections logged: $(wc -l < $R/gc.txt); full ones: $(grep -c ' gen2 ' $R/gc.txt); 5 ms or more:" | tee -a $R/table.txt
awk '$3 >= 5' $R/gc.txt | tail -40 | tee -a $R/table.txt
cp $R/table.txt $OUT/table-f.txt; tar czf $OUT/s19f.tgz -C $OUT s19f && rm -rf $R
