#!/bin/bash
# session 8, call 4: camera fleets, one emopipe process per GPU, on 1 and 2 GPUs.
set -u
cd "$(dirname "$0")/.."
C=/root/rc
export PATH=/tmp/site/bin:$PATH PYTHONPATH=$PWD:/tmp/site
R=$OUT/s4; mkdir -p $R
timeout 540 python3 benchmarks/scaling.py --out /tmp/fl --models-dir $C/assets/models/blazeface \
  --fleet ${FLEET:-24,28} --fleet-gpus ${FGPUS:-1,2} --fleet-seconds ${FSEC:-20} > $R/scaling.txt 2>&1
echo "fleet rc=$?"; tail -12 $R/scaling.txt
cp /tmp/fl/scaling.json /tmp/fl/log-* $R/ 2>/dev/null
cd $OUT && tar czf s4.tgz s4 && rm -rf s4
