#!/bin/bash
# NVDEC decoders kept from source to source (reconfigure_decoder) against a new decoder per source (before):
# the 64-clip archive interleaved, the four-reader stress, the NVDEC and GPU tests.
set -u
cd "$(dirname "$0")/.."
[ -d /tmp/site/PyNvVideoCodec ] || python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl 2>&1 | tail -2
export PYTHONPATH=$PWD:/tmp/site PATH=/tmp/site/bin:$PATH
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
M=$PWD/.rw4/blazeface
R=$OUT/r22; mkdir -p $R
timeout 150 python3 benchmarks/archive.py --out /tmp/a22 --clip .rw4/clip10s_720p_h264.mp4 --clips 64 --baseline 0 --models-dir $M > $R/setup.txt 2>&1
tail -1 $R/setup.txt
run() {  # $1 name, $2 program, $3 input, rest: options
  local name=$1 prog=$2 input=$3; shift 3
  local t0=$(date +%s.%N)
  timeout 150 python3 $prog $input -o /tmp/o-$name --weights /tmp/a22/emonet_random.pth --detector blazeface_back --no-progress --models-dir $M "$@" > $R/$name.txt 2>&1
  local rc=$? t1=$(date +%s.%N)
  cp /tmp/o-$name/summary.json $R/$name-summary.json 2>/dev/null
  echo "$name rc=$rc wall=$(python3 -c "print(round($t1-$t0,1))") $(grep -c '^emopipe: ok' $R/$name.txt) ok $(grep -a -i -m1 'malloc\|corrupt\|abort\|fault\|free()' $R/$name.txt) $(python3 -c "
import json; s=json.load(open('$R/$name-summary.json')); p=s['pipeline']
print('pipeline', round(p['fps']), 'frames/s', s['frames'], 'frames, decode', p['stage_seconds']['decode'], 's, decoder', p['decoder'])" 2>&1 | tail -1)"
}
for r in 1 2; do run arch-pool-$r "-m emopipe" /tmp/a22/clips; run arch-before-$r .gpu/before.py /tmp/a22/clips; done
python3 - /tmp/o-arch-pool-1 /tmp/o-arch-before-1 <<'PY'
import sys, pathlib
a, b = (pathlib.Path(p) for p in sys.argv[1:])
fa = sorted(p.name for p in a.rglob("*.csv")); fb = sorted(p.name for p in b.rglob("*.csv"))
same = sum((a / n).read_bytes() == (b / n).read_bytes() for n in fa if (b / n).exists())
print(f"rows files: pool {len(fa)}, before {len(fb)}, byte-identical {same}")
PY
st() { local name=$1; shift; timeout 80 python3 .gpu/nvstress5.py .rw4/clip10s_720p_h264.mp4 4 30 "$@" > $R/stress-$name.txt 2>&1; echo "$name rc=$? $(grep -a -m1 'threads 4\|Fatal\|malloc\|free()' $R/stress-$name.txt)"; }
st pool-1 emopipe; st pool-2 emopipe; st pool-3 emopipe
timeout 200 python3 -m pytest -q -p no:cacheprovider tests/test_nvdec.py tests/test_gpu.py 2>&1 | tail -4
cd $OUT && tar czf r22.tgz r22 && rm -rf r22
