#!/bin/bash
# (1) Does the once-seen malloc abort come from NVDEC readers opened/ended on several threads at once? A stress of
# that alone, plain and under glibc's heap checker. (2) --ray local with the autoscaler monitor killed before Ray's
# stop: the 64-clip archive, one process against --ray local, two interleaved pairs.
set -u
cd "$(dirname "$0")/.."
C=/root/rc
[ -f $C/ray-2.60.0-cp312-cp312-manylinux2014_x86_64.whl ] || cat $C/ray.part00 $C/ray.part01 > $C/ray-2.60.0-cp312-cp312-manylinux2014_x86_64.whl
rm -f $C/ray.part0*
[ -d /tmp/site/ray ] || python3 -m pip install -q --no-index --no-deps --target /tmp/site $C/*.whl .rw3/*.whl 2>&1 | tail -2
export PYTHONPATH=$PWD:/tmp/site PATH=/tmp/site/bin:$PATH
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
git log --oneline | head -1
M=$C/blazeface
R=$OUT/r12; mkdir -p $R
DBG=$(ls /lib/x86_64-linux-gnu/libc_malloc_debug.so.0 /usr/lib/x86_64-linux-gnu/libc_malloc_debug.so.0 2>/dev/null | head -1)
echo "malloc debug lib: ${DBG:-none}"
st() { local name=$1; shift; timeout 100 python3 .gpu/nvstress.py "$@" > $R/stress-$name.txt 2>&1; echo "stress $name rc=$? $(grep -i -m1 'malloc\|corrupt\|abort\|readers' $R/stress-$name.txt)"; }
st t2 $C/clip10s_720p_h264.mp4 2 40 60
st t4 $C/clip10s_720p_h264.mp4 4 40 60
st t4-full $C/clip10s_720p_h264.mp4 4 40 100000
[ -n "$DBG" ] && { export GLIBC_TUNABLES=glibc.malloc.check=3; LD_PRELOAD=$DBG st t4-check $C/clip10s_720p_h264.mp4 4 40 30; unset GLIBC_TUNABLES; }
timeout 150 python3 benchmarks/archive.py --out /tmp/a12 --clip $C/clip10s_720p_h264.mp4 --clips 64 --baseline 0 --models-dir $M > $R/setup.txt 2>&1
tail -2 $R/setup.txt
run() {  # $1 name, rest: options
  local name=$1; shift
  local t0=$(date +%s.%N)
  timeout 150 python3 -m emopipe /tmp/a12/clips -o /tmp/o-$name --weights /tmp/a12/emonet_random.pth --detector blazeface_back --no-progress --models-dir $M "$@" > $R/$name.txt 2>&1
  local rc=$? t1=$(date +%s.%N)
  cp /tmp/o-$name/summary.json $R/$name-summary.json 2>/dev/null
  echo "$name rc=$rc wall=$(python3 -c "print(round($t1-$t0,1))") $(grep -c '^emopipe: ok' $R/$name.txt) ok; $(grep -m1 'Ray stopped' $R/$name.txt) $(grep -i -m1 'malloc\|corrupt\|abort' $R/$name.txt)"
}
for p in 1 2; do run one-$p; run ray-$p --ray local; done
cd $OUT && tar czf r12.tgz r12 && rm -rf r12
