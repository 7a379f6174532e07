#!/bin/bash
# session 12, after s12c on the same machine: the 64-clip archive with --ray local, base fd81244 against main's
# final code (each source recorded as its worker finishes it; the board read every 0.5 s), interleaved twice.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
C=/root/rc
R=$OUT/s12d; mkdir -p $R
export PYTHONPATH=/tmp/site:/tmp/raysite
O="--weights $C/w.pth --detector blazeface_back --models-dir $C/blazeface --no-progress --ray local"
tree() { [ $1 = base ] && echo $ROOT/.gpu/base12 || echo $ROOT; }
for round in 1 2; do for t in base head; do
  rm -rf /tmp/o; t0=$(date +%s.%N)
  (cd $(tree $t) && timeout 200 python3 -m emopipe $C/clips -o /tmp/o $O > $R/$t-$round.log 2>&1); rc=$?
  echo "ray $t $round: rc=$rc wall=$(python3 -c "print(round($(date +%s.%N)-$t0,2))") s; $(python3 -c "
import json; s=json.load(open('/tmp/o/summary.json')); print(s['ok'], 'ok;', json.dumps(s['ray']['timeline']))" 2>&1 | tail -1)" | tee -a $R/table.txt
done; done
ray stop --force > /dev/null 2>&1 || true
