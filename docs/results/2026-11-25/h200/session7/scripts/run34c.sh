#!/bin/bash
# Call C: two knobs without code changes on the head, 4 long 720p (one and four faces): --detect-batch 64, --batch-size 128.
set -u
cd "$(dirname "$0")/.."
C=/root/rc; cp .rwB/*.whl .rwB/ray.part01 $C/
NEW=$PWD OLD=$PWD/.rw5/old M=$C/blazeface
R=$OUT/r34c; mkdir -p $R
nvidia-smi --query-gpu=name --format=csv,noheader
run() {  # $1 name, $2 tree, $3 input, rest: options
  local name=$1 tree=$2 input=$3; shift 3
  local t0=$(date +%s.%N)
  (cd $tree && PYTHONPATH=$tree:/tmp/site timeout 120 python3 -m emopipe $input -o /tmp/o-$name --weights $C/w.pth --detector blazeface_back --no-progress --models-dir $M "$@" > $R/$name.txt 2>&1)
  local rc=$? t1=$(date +%s.%N)
  cp /tmp/o-$name/summary.json $R/$name-summary.json 2>/dev/null
  echo "$name rc=$rc wall=$(python3 -c "print(round($t1-$t0,2))") $(python3 -c "
import json; s=json.load(open('$R/$name-summary.json')); p=s['pipeline']
print('pipeline', round(p['fps']), 'frames/s', round(p['faces_per_s']), 'faces/s', s['frames'], 'frames; startup', {k: round(v, 2) for k, v in (p.get('startup') or {}).items() if isinstance(v, (int, float))})" 2>&1 | tail -1)"
}
run l1-db64 $NEW $C/long-1face --detect-batch 64; run l1-new-3 $NEW $C/long-1face; run l1-bs128 $NEW $C/long-1face --batch-size 128
run l4-db64 $NEW $C/long-4faces --detect-batch 64; run l4-new-2 $NEW $C/long-4faces; run l4-bs128 $NEW $C/long-4faces --batch-size 128
cd $OUT && tar czf r34c.tgz r34c && rm -rf r34c
