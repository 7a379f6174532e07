#!/bin/bash
# session 9, call 4: the 256-clip archive in one process (no Ray) on GPU 0; camera fleets, one emopipe per GPU,
# 24 and 28 cameras a GPU on 4 GPUs (FLEET / FGPUS override).
set -u
cd "$(dirname "$0")/.."
C=/root/rc
export PATH=/tmp/site/bin:$PATH PYTHONPATH=$PWD:/tmp/site
R=$OUT/q4; mkdir -p $R
t0=$(date +%s.%N)
CUDA_VISIBLE_DEVICES=0 timeout 200 python3 -m emopipe /tmp/sc/clips -o /tmp/one256 --weights /tmp/sc/emonet_random.pth \
  --detector blazeface_back --models-dir $C/blazeface --no-progress > $R/one256.txt 2>&1
echo "one process, 256 clips: rc=$? wall=$(python3 -c "print(round($(date +%s.%N)-$t0,1))") s $(python3 -c "
import json; s=json.load(open('/tmp/one256/summary.json')); print('frames', s['frames'], 'pipeline fps', round(s['pipeline']['fps']))")"
cp /tmp/one256/summary.json $R/one256-summary.json
timeout 360 python3 benchmarks/scaling.py --out /tmp/fl --models-dir $C/assets/models/blazeface \
  --fleet ${FLEET:-24,28} --fleet-gpus ${FGPUS:-4} --fleet-seconds 20 > $R/scaling.txt 2>&1
echo "fleet rc=$?"; grep "^|" $R/scaling.txt
cp /tmp/fl/scaling.json /tmp/fl/log-* $R/ 2>/dev/null
cd $OUT && tar czf q4.tgz q4 && rm -rf q4
