#!/bin/bash
# Final H100 call of 2026-11-25 (3): --ray local against one process (the 64-clip archive, two interleaved pairs),
# the GIL switch interval of the GPU thread (0.5 ms now, 0.1, 2), new vs head on the 4 long videos.
set -u
cd "$(dirname "$0")/.."
C=/root/rc
cp .rwC/ray.part02 $C/
[ -f $C/ray-2.60.0-cp312-cp312-manylinux2014_x86_64.whl ] || cat $C/ray.part00 $C/ray.part01 $C/ray.part02 > $C/ray-2.60.0-cp312-cp312-manylinux2014_x86_64.whl
ls -la $C/ray-2.60.0-cp312-cp312-manylinux2014_x86_64.whl | awk '{print $5}'
[ -d /tmp/site/ray ] || python3 -m pip install -q --no-index --no-deps --target /tmp/site $C/*.whl 2>&1 | tail -2
NEW=$PWD HEAD=$PWD/.rw5/head
export PYTHONPATH=$NEW:/tmp/site PATH=/tmp/site/bin:$PATH
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import ray, PyNvVideoCodec; print('ray', ray.__version__)"
M=$C/blazeface
R=$OUT/r32; mkdir -p $R
timeout 150 python3 benchmarks/archive.py --out /tmp/a32 --clip $C/clip10s_720p_h264.mp4 --clips 64 --baseline 0 --models-dir $M > $R/setup.txt 2>&1
tail -1 $R/setup.txt
mkdir -p /tmp/long-1face; for i in 0 1 2 3; do cp $C/video_720p_h264.mp4 /tmp/long-1face/long$i.mp4; done
run() {  # $1 name, $2 tree, $3 program, $4 input, rest: options
  local name=$1 tree=$2 prog=$3 input=$4; shift 4
  local t0=$(date +%s.%N)
  (cd $tree && PYTHONPATH=$tree:/tmp/site timeout 170 python3 $prog $input -o /tmp/o-$name --weights /tmp/a32/emonet_random.pth --detector blazeface_back --no-progress --models-dir $M "$@" > $R/$name.txt 2>&1)
  local rc=$? t1=$(date +%s.%N)
  cp /tmp/o-$name/summary.json $R/$name-summary.json 2>/dev/null
  echo "$name rc=$rc wall=$(python3 -c "print(round($t1-$t0,1))") $(grep -c '^emopipe: ok' $R/$name.txt) ok $(grep -a -m1 'Ray stopped' $R/$name.txt) $(python3 -c "
import json; s=json.load(open('$R/$name-summary.json')); p=s['pipeline']
print('pipeline', round(p['fps']), 'frames/s', s['frames'], 'frames, first row', p.get('startup', {}).get('first_row_s'), {k: round(v, 2) for k, v in p['stage_seconds'].items()})" 2>&1 | tail -1)"
}
for p in 1 2; do run one-$p $NEW "-m emopipe" /tmp/a32/clips; run ray-$p $NEW "-m emopipe" /tmp/a32/clips --ray local; done
python3 - <<'PY'
import pathlib
a, b = pathlib.Path("/tmp/o-one-1"), pathlib.Path("/tmp/o-ray-1")
fa = sorted(p.relative_to(a) for p in a.rglob("*.csv"))
same = sum((a / n).read_bytes() == (b / n).read_bytes() for n in fa if (b / n).exists())
print(f"rows files: one process {len(fa)}, byte-identical in the Ray run {same}")
PY
for s in 0.0005 0.0001 0.002; do run switch-$s $NEW ".gpu/switch.py $s" /tmp/long-1face; done
run long-new-1 $NEW "-m emopipe" /tmp/long-1face; run long-head-1 $HEAD "-m emopipe" /tmp/long-1face
cd $OUT && tar czf r32.tgz r32 && rm -rf r32
