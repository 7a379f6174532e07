#!/bin/bash
# session 9, call 5: fleets at 16 and 20 cameras a GPU on 4 GPUs and 28 on one (this host's baseline); then
# 512 clips over 4 and 1 GPUs (does the whole command's efficiency rise with the archive?).
set -u
cd "$(dirname "$0")/.."
C=/root/rc
export PATH=/tmp/site/bin:$PATH PYTHONPATH=$PWD:/tmp/site
R=$OUT/q5; mkdir -p $R
timeout 200 python3 benchmarks/scaling.py --out /tmp/fl4 --models-dir $C/assets/models/blazeface \
  --fleet 16,20 --fleet-gpus 4 --fleet-seconds 20 > $R/fleet4.txt 2>&1
echo "fleet 4 rc=$?"; grep "^|" $R/fleet4.txt | tail -2
timeout 80 python3 benchmarks/scaling.py --out /tmp/fl1 --models-dir $C/assets/models/blazeface \
  --fleet 28 --fleet-gpus 1 --fleet-seconds 20 > $R/fleet1.txt 2>&1
echo "fleet 1 rc=$?"; grep "^|" $R/fleet1.txt | tail -1
for d in fl4 fl1; do mkdir -p $R/$d; cp /tmp/$d/scaling.json /tmp/$d/log-* $R/$d/ 2>/dev/null; done
timeout 300 python3 benchmarks/scaling.py --out /tmp/sc512 --clip $C/clip10s_720p_h264.mp4 --clips 512 \
  --models-dir $C/blazeface --gpus 4,1 > $R/scaling512.txt 2>&1
echo "scaling 512 rc=$?"; grep "^|" $R/scaling512.txt
cp /tmp/sc512/scaling.json $R/scaling512.json 2>/dev/null
for d in /tmp/sc512/run*; do cp $d/summary.json $R/512-$(basename $d)-summary.json 2>/dev/null; done
cd $OUT && tar czf q5.tgz q5 && rm -rf q5
