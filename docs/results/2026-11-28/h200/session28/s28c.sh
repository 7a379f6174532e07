#!/bin/bash
# session 28 (s28c): the 64-clip archive over worker processes (--processes auto, under MPS), warm, main's head
# (trees/head) against the tree (the collector off while the command and its workers import); each primed once,
# then three interleaved pairs; then three more interleaved pairs of the warm one-clip command.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
C=/root/rc; mkdir -p $C
cp -r .rw4/blazeface $C/
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl 2>&1 | grep -v "already exists" | tail -2
R=$OUT/s28c; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/table.txt
PYTHONPATH=/tmp/site python3 -c "
import sys, shutil; sys.path.insert(0, 'benchmarks'); import synthetic; from pathlib import Path
synthetic.random_checkpoint(Path('$C/w.pth'))
d = Path('$C') / 'clips'; d.mkdir(exist_ok=True)
for i in range(64): shutil.copy('.rw4/clip10s_720p_h264.mp4', d / f'clip{i:02d}.mp4')"
mkdir -p /tmp/here; cd /tmp/here
O="--weights $C/w.pth --detector blazeface_back --models-dir $C/blazeface --no-progress"
treeof() { if [ $1 = new ]; then echo $ROOT; else echo $ROOT/.gpu/trees/head; fi; }
run() {  # label tree extra...
  local label=$1 t=$2; shift 2
  rm -rf /tmp/o; local t0=$(date +%s.%N)
  (PYTHONPATH=$(treeof $t):/tmp/site timeout 150 python3 -m emopipe $C/clips -o /tmp/o $O "$@" > $R/$label.log 2>&1)
  local rc=$? t1=$(date +%s.%N)
  echo "$label: rc=$rc wall=$(python3 -c "print(round($t1-$t0,2))") s; $(python3 -c "
import json; s=json.load(open('/tmp/o/summary.json')); p = s.get('processes') or {}; t = p.get('timeline') or {}
print(s['ok'], 'ok;', s['frames'], 'frames;', 'run wall_s', s['wall_s'], 'workers', p.get('workers'), 'timeline', {k: round(v, 2) for k, v in t.items()})" 2>&1 | tail -1)" | tee -a $R/table.txt
}
one() {  # label tree
  local label=$1 t=$2
  rm -rf /tmp/o1; mkdir -p /tmp/o1; local t0=$(date +%s.%N)
  (PYTHONPATH=$(treeof $t):/tmp/site timeout 150 python3 -m emopipe $ROOT/.rw4/clip10s_720p_h264.mp4 \
    -o /tmp/o1/rows.csv $O > $R/$label.log 2>&1)
  local rc=$?
  local wall=$(python3 -c "print(round($(date +%s.%N)-$t0,2))")
  echo "$label: rc=$rc wall=$wall s $(python3 -c "
import json; s=json.load(open('/tmp/o1/rows.summary.json')); st=s['startup']
print({k: (round(v, 2) if isinstance(v, float) else v) for k, v in st.items() if k.endswith('_s')}, 'fps', round(s.get('fps') or 0))" 2>&1 | tail -1)" | tee -a $R/table.txt
}
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
/usr/local/nvidia/bin/nvidia-cuda-mps-control -d && echo "MPS daemon started" | tee -a $R/table.txt
export PATH=$PATH:/usr/local/nvidia/bin
one prime-head head; one prime-new new
run archive-prime-head head --processes auto; run archive-prime-new new --processes auto
for i in 1 2 3; do run archive-head-$i head --processes auto; run archive-new-$i new --processes auto; done
for i in 1 2 3; do one warm-head-$i head; one warm-new-$i new; done
echo quit | /usr/local/nvidia/bin/nvidia-cuda-mps-control; sleep 1
cp $R/table.txt $OUT/table-c.txt
(cd $R && tar czf $OUT/s28c-logs.tar.gz *.log)
rm -rf $R
