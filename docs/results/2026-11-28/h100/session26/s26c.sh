#!/bin/bash
# session 26 (s26c): H100, a loan started for it. The tree's first command on the machine (nothing cached: the
# detector's plans found in EmoNet's warm-up window), a fresh machine emulated base/new, then the 64-clip archive in
# one process and over --processes 4 under MPS (caches warm), and the GPU tests of the engines and plans.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
C=/root/rc; mkdir -p $C/assets/models $C/assets/data/faces
cp -r .rw4/blazeface $C/; cp -r .rw4/blazeface $C/assets/models/; cp .rw4/faces/*.png $C/assets/data/faces/
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl 2>&1 | grep -v "already exists" | tail -2
R=$OUT/s26c; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/table.txt
ls -d /root/.nv /root/.triton $C/blazeface/cache 2>&1 | tee -a $R/table.txt
PYTHONPATH=/tmp/site python3 -c "
import sys, shutil; sys.path.insert(0, 'benchmarks'); import synthetic; from pathlib import Path
synthetic.random_checkpoint(Path('$C/w.pth'))
d = Path('$C') / 'clips'; d.mkdir(exist_ok=True)
for i in range(64): shutil.copy('.rw4/clip10s_720p_h264.mp4', d / f'clip{i:02d}.mp4')"
mkdir -p /tmp/here; cd /tmp/here
O="--weights $C/w.pth --detector blazeface_back --models-dir $C/blazeface --no-progress"
tree() { [ "$1" = base ] && echo "$ROOT/.gpu/trees/base" || echo "$ROOT"; }
one() {  # label tree
  local label=$1
  rm -rf /tmp/o1; mkdir -p /tmp/o1; local t0=$(date +%s.%N)
  (PYTHONPATH=$(tree $2):/tmp/site timeout 150 python3 -m emopipe $ROOT/.rw4/clip10s_720p_h264.mp4 \
    -o /tmp/o1/rows.csv $O > $R/$label.log 2>&1)
  local rc=$?
  local wall=$(python3 -c "print(round($(date +%s.%N)-$t0,2))")
  echo "$label: rc=$rc wall=$wall s $(python3 -c "
import json; s=json.load(open('/tmp/o1/rows.summary.json')); st=s['startup']
print({k: (round(v, 2) if isinstance(v, float) else v) for k, v in st.items() if k.endswith('_s')}, 'fps', round(s.get('fps') or 0))" 2>&1 | tail -1)" | tee -a $R/table.txt
  grep -a "cuDNN plans:" $R/$label.log | sed 's/^/    /' | tee -a $R/table.txt
}
cold() { rm -rf /root/.nv /root/.triton $C/blazeface/cache; }
one first-new new
cold; one cold-base base; cold; one cold-new new
one warm-new new
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
/usr/local/nvidia/bin/nvidia-cuda-mps-control -d && echo "MPS daemon started" | tee -a $R/table.txt
export PATH=$PATH:/usr/local/nvidia/bin
run() {  # label extra...
  local label=$1; shift
  rm -rf /tmp/o; local t0=$(date +%s.%N)
  (PYTHONPATH=$ROOT:/tmp/site timeout 150 python3 -m emopipe $C/clips -o /tmp/o $O "$@" > $R/$label.log 2>&1)
  local rc=$? t1=$(date +%s.%N)
  echo "$label: rc=$rc wall=$(python3 -c "print(round($t1-$t0,2))") s; $(python3 -c "
import json; s=json.load(open('/tmp/o/summary.json')); p = s.get('processes') or {}; t = p.get('timeline') or {}
st = ((s.get('pipeline') or {}).get('startup')) or {}
steady = s['frames'] / (t['done_s'] - t['ready_s']) if t.get('ready_s') is not None and t.get('done_s') else 0
print(s['ok'], 'ok;', s['frames'], 'frames;', 'run wall_s', s['wall_s'], 'first_row_s', st.get('first_row_s') or t.get('first_row_s'),
      'steady_fps', round(steady), 'timeline', {k: round(v, 2) for k, v in t.items()})" 2>&1 | tail -1)" | tee -a $R/table.txt
  echo "    'using your weights file' said $(grep -c 'using your weights file' $R/$label.log) time(s)" | tee -a $R/table.txt
}
run warm-up-p4 --processes 4
run one-1
for i in 1 2 3; do run p4-$i --processes 4; done
run one-2
echo quit | /usr/local/nvidia/bin/nvidia-cuda-mps-control; sleep 1
(cd $ROOT && PYTHONPATH=$ROOT:/tmp/site EMOPIPE_TEST_ASSETS=$C/assets timeout 300 python3 -m pytest -q -p no:cacheprovider -rs \
  tests/test_gpu.py tests/test_cudnn_epilogue.py tests/test_kernels.py > $R/pytest.txt 2>&1)
echo "pytest rc=$?: $(tail -1 $R/pytest.txt)" | tee -a $R/table.txt
cp $R/table.txt $OUT/table-c.txt
(cd $R && tar czf $OUT/s26c-logs.tar.gz *.log pytest.txt)
rm -rf $R
