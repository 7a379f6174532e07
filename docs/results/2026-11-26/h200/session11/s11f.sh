#!/bin/bash
# session 11, call 6 (one GPU, the machine of call 5): the 64-clip archive, a92f7f2 (base: after the start-up work)
# against main's final head (crash-safe renames, inputs, metrics, ONNX and CLI fixes), interleaved twice; each tree
# run from its own folder.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
C=/root/rc
export PYTHONPATH=/tmp/site
R=$OUT/s11f; mkdir -p $R
O="--weights $C/w.pth --detector blazeface_back --models-dir $C/blazeface --no-progress"
tree() { [ $1 = base ] && echo $ROOT/.gpu/base11 || echo $ROOT; }
for round in 1 2; do for t in base head; do
  rm -rf /tmp/arch; t0=$(date +%s.%N)
  (cd $(tree $t) && timeout 150 python3 -m emopipe $C/clips -o /tmp/arch $O > $R/log.txt 2>&1); rc=$?
  echo "archive $t round $round: rc=$rc wall=$(python3 -c "print(round($(date +%s.%N)-$t0,2))") s; $(python3 -c "
import json; s=json.load(open('/tmp/arch/summary.json')); p=s['pipeline']; print(s['ok'], 'ok;', round(p['fps']), 'frames/s; write', p['stage_seconds'].get('write'), '; first row', p['startup']['first_row_s'])" 2>&1 | tail -1)" | tee -a $R/table.txt
done; done
