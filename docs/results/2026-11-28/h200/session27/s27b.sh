#!/bin/bash
# session 27 (s27b): the host runs Python with PYTHONDONTWRITEBYTECODE=1 and PyTorch's 2 141 modules have no cached
# bytecode, so every process compiles them again. Same tree (main), two environments, interleaved:
#   host: as the host is (no bytecode cached, none written);
#   pyc:  PYTHONDONTWRITEBYTECODE unset, PYTHONPYCACHEPREFIX=/tmp/pyc (bytecode cached there after a priming run),
#         what a normal `pip install` gives (it compiles bytecode at install).
# One clip warm (three pairs), a fresh machine emulated (one pair: CUDA, Triton and plan caches emptied), the 64-clip
# archive over --processes 4 under MPS (two pairs); `import torch` alone.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
C=/root/rc; mkdir -p $C
cp -r .rw4/blazeface $C/
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl 2>&1 | grep -v "already exists" | tail -2
R=$OUT/s27b; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/table.txt
PYTHONPATH=/tmp/site python3 -c "
import sys, shutil; sys.path.insert(0, 'benchmarks'); import synthetic; from pathlib import Path
synthetic.random_checkpoint(Path('$C/w.pth'))
d = Path('$C') / 'clips'; d.mkdir(exist_ok=True)
for i in range(64): shutil.copy('.rw4/clip10s_720p_h264.mp4', d / f'clip{i:02d}.mp4')"
mkdir -p /tmp/here; cd /tmp/here
O="--weights $C/w.pth --detector blazeface_back --models-dir $C/blazeface --no-progress"
envof() { if [ $1 = pyc ]; then echo "env -u PYTHONDONTWRITEBYTECODE PYTHONPYCACHEPREFIX=/tmp/pyc"; else echo env; fi; }
one() {  # label env
  local label=$1 e=$2
  rm -rf /tmp/o1; mkdir -p /tmp/o1; local t0=$(date +%s.%N)
  ($(envof $e) PYTHONPATH=$ROOT:/tmp/site timeout 150 python3 -m emopipe $ROOT/.rw4/clip10s_720p_h264.mp4 \
    -o /tmp/o1/rows.csv $O > $R/$label.log 2>&1)
  local rc=$?
  local wall=$(python3 -c "print(round($(date +%s.%N)-$t0,2))")
  echo "$label: rc=$rc wall=$wall s $(python3 -c "
import json; s=json.load(open('/tmp/o1/rows.summary.json')); st=s['startup']
print({k: (round(v, 2) if isinstance(v, float) else v) for k, v in st.items() if k.endswith('_s')}, 'fps', round(s.get('fps') or 0))" 2>&1 | tail -1)" | tee -a $R/table.txt
}
one first-host host
one prime-pyc pyc
for i in 1 2 3; do one warm-host-$i host; one warm-pyc-$i pyc; done
for e in host pyc host pyc; do
  t0=$(date +%s.%N); $(envof $e) python3 -c "import torch"; echo "import torch ($e): $(python3 -c "print(round($(date +%s.%N)-$t0,2))") s" | tee -a $R/table.txt
done
for e in pyc host; do
  rm -rf /root/.nv /root/.triton $C/blazeface/cache
  one fresh-$e $e
done
run() {  # label env extra...
  local label=$1 e=$2; shift 2
  rm -rf /tmp/o; local t0=$(date +%s.%N)
  ($(envof $e) PYTHONPATH=$ROOT:/tmp/site timeout 150 python3 -m emopipe $C/clips -o /tmp/o $O "$@" > $R/$label.log 2>&1)
  local rc=$? t1=$(date +%s.%N)
  echo "$label: rc=$rc wall=$(python3 -c "print(round($t1-$t0,2))") s; $(python3 -c "
import json; s=json.load(open('/tmp/o/summary.json')); p = s.get('processes') or {}; t = p.get('timeline') or {}
print(s['ok'], 'ok;', s['frames'], 'frames;', 'run wall_s', s['wall_s'], 'workers', p.get('workers'), 'timeline', {k: round(v, 2) for k, v in t.items()})" 2>&1 | tail -1)" | tee -a $R/table.txt
}
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
/usr/local/nvidia/bin/nvidia-cuda-mps-control -d && echo "MPS daemon started" | tee -a $R/table.txt
export PATH=$PATH:/usr/local/nvidia/bin
run p4-prime pyc --processes 4
for i in 1 2; do run p4-host-$i host --processes 4; run p4-pyc-$i pyc --processes 4; done
echo quit | /usr/local/nvidia/bin/nvidia-cuda-mps-control; sleep 1
du -sh /tmp/pyc | tee -a $R/table.txt
cp $R/table.txt $OUT/table-b.txt
(cd $R && tar czf $OUT/s27b-logs.tar.gz *.log)
rm -rf $R
