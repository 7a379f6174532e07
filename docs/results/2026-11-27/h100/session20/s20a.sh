#!/bin/bash
# session 20: what stalls a one-process camera fleet on some H100 loans — a 24- and 32-camera fleet traced
# (tailwatch: every frame's latency, collections, slow GPU-thread steps) under sysprobe (cgroup CPU throttling,
# steal, page faults, run-queue waits, compaction: one clock), glibc's malloc as it is against malloc kept from
# trimming and mapping (frames served from its heaps, no page faults after the first), interleaved.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
C=/root/rc; mkdir -p $C; cp -r .rw4/blazeface $C/
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl 2>&1 | grep -v "already exists" | tail -2
R=$OUT/s20a; mkdir -p $R
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc; grep -m1 "model name" /proc/cpuinfo;
  cat /sys/fs/cgroup/cpu.max 2>/dev/null; cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us 2>/dev/null;
  cat /sys/kernel/mm/transparent_hugepage/enabled; uname -r; ldd --version | head -1; } | tee $R/table.txt
MALLOC="MALLOC_MMAP_THRESHOLD_=33554432 MALLOC_TRIM_THRESHOLD_=17179869184"
run() {  # label, env, count
  local label=$1 envs=$2 count=$3
  env $envs PYTHONPATH=$ROOT:/tmp/site timeout 150 python3 .gpu/sysprobe.py $R/$label.probe.tsv -- \
    python3 .gpu/tailwatch.py $R/$label.trace.txt --models-dir $C/blazeface --out $R/$label --counts $count --seconds 15 > $R/$label.txt 2>&1
  echo "== $label ($envs) rc=$?" | tee -a $R/table.txt
  grep -A3 "^cameras" $R/$label.txt | grep -v "^---\|^target" | tee -a $R/table.txt
  tail -1 $R/$label.probe.tsv | tee -a $R/table.txt
}
run a24 "X=1" 24; run b24 "$MALLOC" 24; run b24r "$MALLOC" 24; run a24r "X=1" 24
run a32 "X=1" 32; run b32 "$MALLOC" 32
find $R -name "*.csv" -delete; gzip $R/*.trace.txt
cp $R/table.txt $OUT/table-a.txt; tar czf $OUT/s20a.tgz -C $OUT s20a && rm -rf $R
