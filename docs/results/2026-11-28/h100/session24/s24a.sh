#!/bin/bash
# session 24 (s24a): where a fresh machine's first one-clip command spends its 30-40 s. The machine's first command
# under py-spy (every cache empty), then commands with one cache emptied at a time (cuDNN plans, Triton's kernels,
# CUDA's compute cache), then the plan-build probe (s24_plans.py: one thread against a pool).
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
C=/root/rc; mkdir -p $C
cp -r .rw4/blazeface $C/
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl .rwF/*.whl 2>&1 | grep -v "already exists" | tail -2
R=$OUT/s24a; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/table.txt
ls -d /root/.nv /root/.triton /root/.cache 2>&1 | tee -a $R/table.txt
PYTHONPATH=/tmp/site python3 -c "
import sys; sys.path.insert(0, 'benchmarks'); import synthetic; from pathlib import Path
synthetic.random_checkpoint(Path('$C/w.pth'))"
mkdir -p /tmp/here; cd /tmp/here
O="--weights $C/w.pth --detector blazeface_back --models-dir $C/blazeface --no-progress"
one() {  # label [prefix...]
  local label=$1; shift
  rm -rf /tmp/o1; mkdir -p /tmp/o1; local t0=$(date +%s.%N)
  (PYTHONPATH=$ROOT:/tmp/site timeout 150 "${@:-python3}" -m emopipe $ROOT/.rw4/clip10s_720p_h264.mp4 \
    -o /tmp/o1/rows.csv $O > $R/$label.log 2>&1)
  local rc=$?
  local wall=$(python3 -c "print(round($(date +%s.%N)-$t0,2))")
  echo "$label: rc=$rc wall=$wall s $(python3 -c "
import json; s=json.load(open('/tmp/o1/rows.summary.json')); st=s['startup']
print({k: (round(v, 2) if isinstance(v, float) else v) for k, v in st.items() if k.endswith('_s')}, 'fps', round(s.get('fps') or 0))" 2>&1 | tail -1)" | tee -a $R/table.txt
}
caches() { echo "  caches: plans $(ls $C/blazeface/cache/cudnn 2>/dev/null | wc -l), triton $(ls $C/blazeface/cache/triton 2>/dev/null | wc -l), computecache $(du -sh /root/.nv 2>/dev/null | cut -f1)" | tee -a $R/table.txt; }
one cold-spy /tmp/site/bin/py-spy record --idle --threads --nonblocking -r 100 -f speedscope -o $R/spy-cold.json -- python3
caches
python3 $ROOT/.gpu/s23_timeline.py $R/spy-cold.json 1.0 '""' > $R/timeline-cold.txt 2>&1
python3 $ROOT/.gpu/s23_timeline.py $R/spy-cold.json 1.0 'triton' >> $R/timeline-cold.txt 2>&1
one warm-1
rm -rf $C/blazeface/cache/cudnn; one no-plans; caches
rm -rf $C/blazeface/cache/triton; one no-triton; caches
rm -rf /root/.nv; one no-computecache; caches
rm -rf /root/.nv $C/blazeface/cache/cudnn; one no-plans-no-cc; caches
rm -rf /root/.nv /root/.triton $C/blazeface/cache; one cold-2; caches
one warm-2
rm -rf /root/.nv
(cd $ROOT && PYTHONPATH=$ROOT:/tmp/site timeout 200 python3 .gpu/s24_plans.py 1 8 1 4 2>&1 | tail -8) | tee -a $R/table.txt
cp $R/table.txt $OUT/table-a.txt; cp $R/timeline-cold.txt $OUT/
(cd $R && tar czf $OUT/s24a-logs.tar.gz *.log spy-cold.json)
rm -rf $R
