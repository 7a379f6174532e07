#!/bin/bash
# Call B: 03f0bad (session 4's last measured code) against this head, interleaved on one host: 4 long 720p
# (one face) twice, 4 long four-face once, the 64-clip archive once, one short clip (start-up).
set -u
cd "$(dirname "$0")/.."
C=/root/rc; cp .rwA/ray.part00 $C/
NEW=$PWD OLD=$PWD/.rw5/old M=$C/blazeface
R=$OUT/r34b; mkdir -p $R
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
for p in 1 2; do run l1-old-$p $OLD $C/long-1face; run l1-new-$p $NEW $C/long-1face; done
run l4-old $OLD $C/long-4faces; run l4-new $NEW $C/long-4faces
run arch-old $OLD $C/clips; run arch-new $NEW $C/clips
for p in 1 2; do run one-old-$p $OLD $C/one; run one-new-$p $NEW $C/one; done
cd $OUT && tar czf r34b.tgz r34b && rm -rf r34b
