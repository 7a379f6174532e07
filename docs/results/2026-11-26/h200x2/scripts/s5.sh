#!/bin/bash
# session 8, call 5: the 256-clip archive in one process (no Ray) on GPU 0; the 2-GPU fleet again at 26 and 28 per GPU.
set -u
cd "$(dirname "$0")/.."
C=/root/rc
export PATH=/tmp/site/bin:$PATH PYTHONPATH=$PWD:/tmp/site
R=$OUT/s5; mkdir -p $R
t0=$(date +%s.%N)
CUDA_VISIBLE_DEVICES=0 timeout 200 python3 -m emopipe /tmp/sc/clips -o /tmp/one256 --weights /tmp/sc/emonet_random.pth \
  --detector blazeface_back --models-dir $C/blazeface --no-progress > $R/one256.txt 2>&1
echo "one process, 256 clips: rc=$? wall=$(python3 -c "print(round($(date +%s.%N)-$t0,1))") s $(python3 -c "
import json; s=json.load(open('/tmp/one256/summary.json')); print('frames', s['frames'], 'pipeline fps', round(s['pipeline']['fps']))")"
cp /tmp/one256/summary.json $R/one256-summary.json
rm -rf /tmp/fl2
timeout 300 python3 benchmarks/scaling.py --out /tmp/fl2 --models-dir $C/assets/models/blazeface \
  --fleet 26,28 --fleet-gpus 2 --fleet-seconds 20 > $R/scaling.txt 2>&1
echo "fleet rc=$?"; tail -5 $R/scaling.txt
cp /tmp/fl2/scaling.json /tmp/fl2/log-* $R/ 2>/dev/null
cd $OUT && tar czf s5.tgz s5 && rm -rf s5
