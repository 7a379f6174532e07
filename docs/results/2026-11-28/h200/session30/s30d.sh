#!/bin/bash
# session 30 (s30d): the working tree ("new") against 4512f84 ("head") on another loan: each kept plan's read-back
# time (s30_plans.py), six interleaved pairs of warm one-clip commands, and the 64-clip archive over
# --processes auto under MPS, warm, two interleaved pairs.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
C=/root/rc; mkdir -p $C
cp -r .rw4/blazeface $C/
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl 2>&1 | grep -v "already exists" | tail -2
R=$OUT/s30d; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/table.txt
PYTHONPATH=/tmp/site python3 -c "
import sys, shutil; sys.path.insert(0, 'benchmarks'); import synthetic; from pathlib import Path
synthetic.random_checkpoint(Path('$C/w.pth'))
d = Path('$C') / 'clips'; d.mkdir(exist_ok=True)
for i in range(64): shutil.copy('.rw4/clip10s_720p_h264.mp4', d / f'clip{i:02d}.mp4')"
tree() { [ $1 = new ] && echo $ROOT || echo $ROOT/.gpu/trees/head; }
mkdir -p /tmp/here; cd /tmp/here
O="--weights $C/w.pth --detector blazeface_back --models-dir $C/blazeface --no-progress"
one() {  # label tree
  local label=$1 t=$(tree $2)
  rm -rf /tmp/o1; mkdir -p /tmp/o1; local t0=$(date +%s.%N)
  (PYTHONPATH=$t:/tmp/site timeout 150 python3 -m emopipe $ROOT/.rw4/clip10s_720p_h264.mp4 \
    -o /tmp/o1/rows.csv $O > $R/$label.log 2>&1)
  local rc=$?
  local wall=$(python3 -c "print(round($(date +%s.%N)-$t0,2))")
  echo "$label: rc=$rc wall=$wall s $(python3 -c "
import json; s=json.load(open('/tmp/o1/rows.summary.json')); st=s['startup']
print({k: (round(v, 2) if isinstance(v, float) else v) for k, v in st.items() if k.endswith('_s')}, 'fps', round(s.get('fps') or 0), 'faces', s.get('faces'))" 2>&1 | tail -1) | $(grep -h "built\|waited" $R/$label.log | tr '\n' ' ')" | tee -a $R/table.txt
}
run() {  # label tree
  local label=$1 t=$(tree $2)
  rm -rf /tmp/o; local t0=$(date +%s.%N)
  (PYTHONPATH=$t:/tmp/site timeout 150 python3 -m emopipe $C/clips -o /tmp/o $O --processes auto > $R/$label.log 2>&1)
  local rc=$? t1=$(date +%s.%N)
  echo "$label: rc=$rc wall=$(python3 -c "print(round($t1-$t0,2))") s; $(python3 -c "
import json; s=json.load(open('/tmp/o/summary.json')); p = s.get('processes') or {}; t = p.get('timeline') or {}
print(s['ok'], 'ok;', s['frames'], 'frames;', 'workers', p.get('workers'), 'timeline', {k: round(v, 2) for k, v in t.items()})" 2>&1 | tail -1) | $(grep -h "built\|waited" $R/$label.log | sort | uniq -c | tr '\n' ' ')" | tee -a $R/table.txt
}
one loan-first-head head; one primer-new new; one primer-head head
echo "== each kept plan read back (fresh processes, no PyTorch)" | tee -a $R/table.txt
for i in 1 2; do
PYTHONPATH=$ROOT:/tmp/site timeout 60 python3 $ROOT/.gpu/s30_plans.py $C/blazeface/cache/cudnn "emonet b64 half" "blazeface_back b32 half" 2>&1 | tail -12 | tee -a $R/table.txt
done
echo "== warm one-clip commands, interleaved" | tee -a $R/table.txt
for i in 1 2 3 4 5 6; do one warm-new-$i new; one warm-head-$i head; done
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
/usr/local/nvidia/bin/nvidia-cuda-mps-control -d && echo "MPS daemon started" | tee -a $R/table.txt
echo "== the 64-clip archive, --processes auto under MPS, warm" | tee -a $R/table.txt
run archive-primer-new new
for i in 1 2; do run archive-head-$i head; run archive-new-$i new; done
echo quit | /usr/local/nvidia/bin/nvidia-cuda-mps-control; sleep 1
cp $R/table.txt $OUT/table-d.txt
(cd $R && tar czf $OUT/s30d-logs.tar.gz *.log)
rm -rf $R
