#!/bin/bash
# Call D: --ray local against one process on the 64-clip archive, two interleaved pairs; rows compared.
set -u
cd "$(dirname "$0")/.."
C=/root/rc; cp .rwC/ray.part02 $C/
W=$C/ray-2.60.0-cp312-cp312-manylinux2014_x86_64.whl
[ -f $W ] || cat $C/ray.part00 $C/ray.part01 $C/ray.part02 > $W
[ -d /tmp/site/ray ] || python3 -m pip install -q --no-index --no-deps --target /tmp/site $W $C/*.whl 2>&1 | grep -v "already exists" | tail -2
export PATH=/tmp/site/bin:$PATH
M=$C/blazeface R=$OUT/r34d; mkdir -p $R
PYTHONPATH=/tmp/site python3 -c "import ray; print('ray', ray.__version__)"
run() {  # $1 name, rest: options
  local name=$1; shift
  local t0=$(date +%s.%N)
  PYTHONPATH=$PWD:/tmp/site timeout 150 python3 -m emopipe $C/clips -o /tmp/o-$name --weights $C/w.pth --detector blazeface_back --no-progress --models-dir $M "$@" > $R/$name.txt 2>&1
  local rc=$? t1=$(date +%s.%N)
  cp /tmp/o-$name/summary.json $R/$name-summary.json 2>/dev/null
  echo "$name rc=$rc wall=$(python3 -c "print(round($t1-$t0,2))") $(grep -a -m1 'Ray stopped' $R/$name.txt) $(python3 -c "
import json; s=json.load(open('$R/$name-summary.json')); p=s['pipeline']
print('pipeline', round(p['fps']), 'frames/s', s['frames'], 'frames')" 2>&1 | tail -1)"
}
for p in 1 2; do run one-$p; run ray-$p --ray local; done
python3 - <<'PY'
import pathlib
a, b = pathlib.Path("/tmp/o-one-1"), pathlib.Path("/tmp/o-ray-1")
fa = sorted(p.relative_to(a) for p in a.rglob("*.csv"))
same = sum((a / n).read_bytes() == (b / n).read_bytes() for n in fa if (b / n).exists())
print(f"rows files: one process {len(fa)}, byte-identical in the Ray run {same}")
PY
cd $OUT && tar czf r34d.tgz r34d && rm -rf r34d
