#!/bin/bash
# (1) NVDEC readers on several threads: which PyNvVideoCodec calls race (one thread / two / four; construction+end
# under a lock; every call under it), with Python's fault handler for the stacks. (2) Ray's worker pipeline runs
# slower than one process's: is it Ray's OMP_NUM_THREADS=1 (one PyTorch CPU thread against two)? A pair with
# OMP_NUM_THREADS=2 for both.
set -u
cd "$(dirname "$0")/.."
C=/root/rc
[ -f $C/ray-2.60.0-cp312-cp312-manylinux2014_x86_64.whl ] || cat $C/ray.part00 $C/ray.part01 > $C/ray-2.60.0-cp312-cp312-manylinux2014_x86_64.whl
rm -f $C/ray.part0*
[ -d /tmp/site/ray ] || python3 -m pip install -q --no-index --no-deps --target /tmp/site $C/*.whl .rw3/*.whl 2>&1 | tail -2
export PYTHONPATH=$PWD:/tmp/site PATH=/tmp/site/bin:$PATH
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
M=$C/blazeface
R=$OUT/r13; mkdir -p $R
st() { local name=$1; shift; timeout 100 python3 .gpu/nvstress2.py $C/clip10s_720p_h264.mp4 "$@" > $R/stress-$name.txt 2>&1; echo "stress $name rc=$? $(grep -a -m1 'mode\|Fatal' $R/stress-$name.txt) last: $(grep -a readers $R/stress-$name.txt | tail -1)"; }
st none-t1 1 40 100000 none
st none-t2 2 40 100000 none
st create-t4 4 40 100000 create
st all-t4 4 40 100000 all
st none-t4 4 40 100000 none
timeout 150 python3 benchmarks/archive.py --out /tmp/a13 --clip $C/clip10s_720p_h264.mp4 --clips 64 --baseline 0 --models-dir $M > $R/setup.txt 2>&1
tail -1 $R/setup.txt
run() {  # $1 name, rest: options
  local name=$1; shift
  local t0=$(date +%s.%N)
  timeout 150 python3 -m emopipe /tmp/a13/clips -o /tmp/o-$name --weights /tmp/a13/emonet_random.pth --detector blazeface_back --no-progress --models-dir $M "$@" > $R/$name.txt 2>&1
  local rc=$? t1=$(date +%s.%N)
  cp /tmp/o-$name/summary.json $R/$name-summary.json 2>/dev/null
  echo "$name rc=$rc wall=$(python3 -c "print(round($t1-$t0,1))") $(grep -c '^emopipe: ok' $R/$name.txt) ok; $(grep -m1 'Ray stopped' $R/$name.txt) $(grep -i -m1 'malloc\|corrupt\|abort\|fault' $R/$name.txt)"
}
run one; run ray --ray local
export OMP_NUM_THREADS=2
run one-omp2; run ray-omp2 --ray local
python3 - <<'PY'
import json, os
for n in ["one", "ray", "one-omp2", "ray-omp2"]:
    try: s = json.load(open(f"{os.environ['OUT']}/r13/{n}-summary.json"))
    except Exception as e: print(n, e); continue
    w = (s.get("ray") or {}).get("worker_summaries") or [s.get("pipeline")]
    print(n, "wall_s", s["wall_s"], "timeline", (s.get("ray") or {}).get("timeline"), "pipeline s", w[0]["seconds"], "fps", round(w[0]["fps"]), w[0]["stage_seconds"])
PY
cd $OUT && tar czf r13.tgz r13 && rm -rf r13
