#!/bin/bash
# session 35 (s35e): reading the kept cuDNN plans back (plan_read_probe.py) in 1, 4 and 8 processes at once: with the
# driver's compute cache as it is, disabled, and one of its own per process (a copy of the primed one). What the plan
# files hold (PTX or binaries).
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
C=/root/rc; mkdir -p $C
cp -r .rw4/blazeface $C/
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/pynvvideocodec*.whl .rw4/nvidia_cudnn*.whl .rw4/face_alignment*.whl 2>&1 | grep -v "already exists" | tail -2
R=$OUT/s35e; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/table.txt
PYTHONPATH=/tmp/site python3 -c "
import sys; sys.path.insert(0, 'benchmarks'); import synthetic; from pathlib import Path
synthetic.random_checkpoint(Path('$C/w.pth'))"
mkdir -p /tmp/here; cd /tmp/here
O="--weights $C/w.pth --detector blazeface_back --models-dir $C/blazeface --no-progress --max-frames 30"
CLIP=$ROOT/.rw4/clip10s_720p_h264.mp4
PYTHONPATH=$ROOT:/tmp/site timeout 120 python3 -m emopipe $CLIP -o /tmp/prime.csv $O > $R/prime.log 2>&1; echo "prime rc=$?" | tee -a $R/table.txt
P=$C/blazeface/cache/cudnn
ls $P | wc -l | sed 's/^/plan files: /' | tee -a $R/table.txt
du -sh $P | tee -a $R/table.txt
for f in $(ls $P/*.plan | head -3); do echo "$(basename $f): $(stat -c %s $f) bytes, '.version' (PTX) $(grep -c -a '\.version' $f), ELF $(grep -c -a 'ELF' $f)"; done | tee -a $R/table.txt
ls -la /root/.nv/ComputeCache 2>&1 | head -3 | tee -a $R/table.txt; du -sh /root/.nv 2>&1 | tee -a $R/table.txt
probe() {  # label count [env]
  local at=$(python3 -c "import time; print(time.time() + 8)")
  for i in $(seq 1 $2); do
    if [ "${3:-}" = own ]; then rm -rf /tmp/nv$i; cp -r /root/.nv/ComputeCache /tmp/nv$i 2>/dev/null || mkdir -p /tmp/nv$i; E="CUDA_CACHE_PATH=/tmp/nv$i"; elif [ -n "${3:-}" ]; then E="$3"; else E="X=1"; fi
    env $E PYTHONPATH=$ROOT:/tmp/site timeout 120 python3 $ROOT/.gpu/plan_read_probe.py $P $at > $R/$1-$i.json 2> $R/$1-$i.err &
  done; wait
  echo "$1 ($2 at once${3:+, $3}): $(python3 -c "
import json, glob; r=[json.load(open(f)) for f in sorted(glob.glob('$R/$1-*.json'))]
print('read', [x['read'] for x in r][:1], 'of', r[0]['plans'], 'seconds each', sorted(x['seconds'] for x in r), 'slowest plans', r[0]['slowest'])" 2>&1 | tail -1)" | tee -a $R/table.txt
}
probe one 1; probe one-again 1
probe four 4; probe eight 8
probe four-nocache 4 CUDA_CACHE_DISABLE=1; probe one-nocache 1 CUDA_CACHE_DISABLE=1
probe four-own 4 own; probe eight-own 8 own
probe four-again 4
cp $R/table.txt $OUT/table-e.txt
(cd $R && tar czf $OUT/s35e-logs.tar.gz *.log *.json *.err *.txt && rm -f *.log *.json *.err)
