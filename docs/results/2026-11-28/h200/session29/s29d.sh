#!/bin/bash
# session 29 (s29d): (1) the very first command emulated, three interleaved rounds: the tree (the early build's
# processes at a lower priority, nice 10) / trees/early (d205e35: the early build at the command's priority) / main's
# head (trees/main, 591c31b); (2) the 64-clip archive over --processes auto under MPS with every cache emptied, the
# tree against main, two interleaved pairs; the host's CPUs.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
C=/root/rc; mkdir -p $C
cp -r .rw4/blazeface $C/
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl 2>&1 | grep -v "already exists" | tail -2
R=$OUT/s29d; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/table.txt
lscpu | grep -E "^CPU\(s\)|Thread|Core|Socket|Model name" | tee -a $R/table.txt
PYTHONPATH=/tmp/site python3 -c "
import sys, shutil; sys.path.insert(0, 'benchmarks'); import synthetic; from pathlib import Path
synthetic.random_checkpoint(Path('$C/w.pth'))
d = Path('$C') / 'clips'; d.mkdir(exist_ok=True)
for i in range(64): shutil.copy('.rw4/clip10s_720p_h264.mp4', d / f'clip{i:02d}.mp4')"
empty() { rm -rf /root/.nv /root/.triton $C/blazeface/cache /root/.cache/emopipe/cache/python; for t in $ROOT $ROOT/.gpu/trees/main $ROOT/.gpu/trees/early; do rm -rf $t/models/cache/python; done; }
treeof() { case $1 in new) echo $ROOT;; early) echo $ROOT/.gpu/trees/early;; main) echo $ROOT/.gpu/trees/main;; esac; }
mkdir -p /tmp/here; cd /tmp/here
O="--weights $C/w.pth --detector blazeface_back --models-dir $C/blazeface --no-progress"
one() {  # label tree
  local label=$1 t=$2
  rm -rf /tmp/o1; mkdir -p /tmp/o1; local t0=$(date +%s.%N)
  (PYTHONPATH=$(treeof $t):/tmp/site timeout 150 python3 -m emopipe $ROOT/.rw4/clip10s_720p_h264.mp4 \
    -o /tmp/o1/rows.csv $O > $R/$label.log 2>&1)
  local rc=$?
  local wall=$(python3 -c "print(round($(date +%s.%N)-$t0,2))")
  echo "$label: rc=$rc wall=$wall s $(python3 -c "
import json; s=json.load(open('/tmp/o1/rows.summary.json')); st=s['startup']
print({k: (round(v, 2) if isinstance(v, float) else v) for k, v in st.items() if k.endswith('_s')}, 'fps', round(s.get('fps') or 0))" 2>&1 | tail -1) | $(grep -h "built\|waited" $R/$label.log | tr '\n' ' ')" | tee -a $R/table.txt
}
run() {  # label tree
  local label=$1 t=$2
  rm -rf /tmp/o; local t0=$(date +%s.%N)
  (PYTHONPATH=$(treeof $t):/tmp/site timeout 150 python3 -m emopipe $C/clips -o /tmp/o $O --processes auto > $R/$label.log 2>&1)
  local rc=$? t1=$(date +%s.%N)
  echo "$label: rc=$rc wall=$(python3 -c "print(round($t1-$t0,2))") s; $(python3 -c "
import json; s=json.load(open('/tmp/o/summary.json')); p = s.get('processes') or {}; t = p.get('timeline') or {}
print(s['ok'], 'ok;', s['frames'], 'frames;', 'workers', p.get('workers'), 'timeline', {k: round(v, 2) for k, v in t.items()})" 2>&1 | tail -1) | $(grep -h "built\|waited" $R/$label.log | sort | uniq -c | tr '\n' ' ')" | tee -a $R/table.txt
}
echo "== (1) the very first command emulated: new (nice) / early / main" | tee -a $R/table.txt
for i in 1 2 3; do for v in new early main; do empty; one veryfirst-$v-$i $v; done; done
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
/usr/local/nvidia/bin/nvidia-cuda-mps-control -d && echo "MPS daemon started" | tee -a $R/table.txt
export PATH=$PATH:/usr/local/nvidia/bin
echo "== (2) the archive, --processes auto under MPS, every cache emptied: new / main" | tee -a $R/table.txt
for i in 1 2; do for v in new main; do empty; run archive-cold-$v-$i $v; done; done
echo "== (3) the same, warm" | tee -a $R/table.txt
for i in 1 2; do for v in new main; do run archive-warm-$v-$i $v; done; done
echo quit | /usr/local/nvidia/bin/nvidia-cuda-mps-control; sleep 1
cp $R/table.txt $OUT/table-d.txt
(cd $R && tar czf $OUT/s29d-logs.tar.gz *.log)
rm -rf $R
