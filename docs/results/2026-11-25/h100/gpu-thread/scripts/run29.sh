#!/bin/bash
# A/B of the vectorised host work (new) against 4b0eb58 (old), interleaved; where one process's interpreter time goes (py-spy --gil).
set -u
cd "$(dirname "$0")/.."
NEW=$PWD OLD=$PWD/.rw5/old
[ -d /tmp/site/PyNvVideoCodec ] || python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl 2>&1 | tail -2
[ -x /tmp/site/bin/py-spy ] || python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw6/*.whl 2>&1 | tail -2
export PATH=/tmp/site/bin:$PATH
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
M=$PWD/.rw4/blazeface
R=$OUT/r29; mkdir -p $R
export PYTHONPATH=$NEW:/tmp/site
[ -d /tmp/a28/clips ] || timeout 150 python3 benchmarks/archive.py --out /tmp/a28 --clip .rw4/clip10s_720p_h264.mp4 --clips 64 --baseline 0 --models-dir $M > $R/setup.txt 2>&1
v1=.rw4/video_720p_h264.mp4; v4=.rw4/video_720p_4faces_h264.mp4
mkdir -p /tmp/long-1face /tmp/long-4faces
for i in 0 1 2 3; do cp $v1 /tmp/long-1face/long$i.mp4; cp $v4 /tmp/long-4faces/long$i.mp4; done
run() {  # $1 name, $2 tree, $3 input, [$4 prefix command]
  local name=$1 tree=$2 input=$3 pre=${4:-}
  local t0=$(date +%s.%N)
  (cd $tree && PYTHONPATH=$tree:/tmp/site timeout 150 $pre python3 -m emopipe $input -o /tmp/o-$name --weights /tmp/a28/emonet_random.pth --detector blazeface_back --no-progress --models-dir $M > $R/$name.txt 2>&1)
  local rc=$? t1=$(date +%s.%N)
  cp /tmp/o-$name/summary.json $R/$name-summary.json 2>/dev/null
  echo "$name rc=$rc wall=$(python3 -c "print(round($t1-$t0,1))") $(grep -c '^emopipe: ok' $R/$name.txt) ok $(python3 -c "
import json; s=json.load(open('$R/$name-summary.json')); p=s['pipeline']
print('pipeline', round(p['fps']), 'frames/s', round(p.get('faces_per_s', 0)), 'faces/s', s['frames'], 'frames', {k: round(v, 2) for k, v in p['stage_seconds'].items()})" 2>&1 | tail -1)"
}
run long-old-1 $OLD /tmp/long-1face; run long-new-1 $NEW /tmp/long-1face
run long-new-2 $NEW /tmp/long-1face; run long-old-2 $OLD /tmp/long-1face
run faces-old-1 $OLD /tmp/long-4faces; run faces-new-1 $NEW /tmp/long-4faces
run arch-old-1 $OLD /tmp/a28/clips; run arch-new-1 $NEW /tmp/a28/clips
python3 - <<'PY'
import pathlib
for t in ("long", "faces", "arch"):
    a, b = pathlib.Path(f"/tmp/o-{t}-new-1"), pathlib.Path(f"/tmp/o-{t}-old-1")
    fa = sorted(p.relative_to(a) for p in a.rglob("*.csv"))
    same = sum((a / n).read_bytes() == (b / n).read_bytes() for n in fa if (b / n).exists())
    lines = sorted({(len((a / n).read_text().splitlines()), len((b / n).read_text().splitlines())) for n in fa if (b / n).exists()})
    print(f"{t}: rows files {len(fa)}, byte-identical {same}, lines new/old {lines[:4]}")
PY
for t in 1face 4faces; do
  run spy-$t $NEW /tmp/long-$t "py-spy record --gil --threads --nonblocking --rate 250 --format raw --output $R/spy-$t.raw --"
  ls -la $R/spy-$t.raw 2>&1 | tail -1
done
cd $OUT && tar czf r29.tgz r29 && rm -rf r29
