#!/bin/bash
# session 17: BlazeFace's blocks fused (each block two cuDNN calls: depthwise without its bias, then the pointwise
# convolution with bias + shortcut + ReLU applied as it writes). 1) the GPU tests on the working tree; 2) the
# detector's device time per 32-frame call, fused against unfused (benchmarks/detector_warmup.py, a process per
# variant); 3) whole commands, main's head (.gpu/base17) against the working tree, interleaved: one process over four
# long 720p videos, then four processes at once under MPS (long videos, then four-face videos).
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
C=/root/rc; mkdir -p $C/assets/models $C/assets/data/faces
cp -r .rw4/* $C/; cp -r .rw4/blazeface $C/assets/models/; cp .rw4/faces/*.png $C/assets/data/faces/
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl 2>&1 | grep -v "already exists" | tail -2
R=$OUT/s17a; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/table.txt
nproc | tee -a $R/table.txt
t0=$(date +%s)
PYTHONPATH=$ROOT:/tmp/site EMOPIPE_TEST_ASSETS=$C/assets timeout 240 python3 -m pytest -q -p no:cacheprovider -rs \
  tests/test_gpu.py tests/test_fusion.py tests/test_cudnn_epilogue.py tests/test_nvdec.py > $R/pytest.txt 2>&1
echo "pytest rc=$? in $(( $(date +%s) - t0 )) s: $(tail -1 $R/pytest.txt)" | tee -a $R/table.txt
grep -a "FAILED\|Error" $R/pytest.txt | head -8 | tee -a $R/table.txt
PYTHONPATH=$ROOT:/tmp/site timeout 150 python3 benchmarks/detector_warmup.py --models-dir $C/blazeface \
  --faces $C/faces/4faces.png --rounds 2 --only "NHWC tuned" --out $R/detector.json > $R/detector.txt 2>&1
echo "detector_warmup rc=$?" | tee -a $R/table.txt; tail -7 $R/detector.txt | tee -a $R/table.txt
PYTHONPATH=/tmp/site python3 -c "
import sys, shutil; sys.path.insert(0, 'benchmarks'); import synthetic; from pathlib import Path
synthetic.random_checkpoint(Path('$C/w.pth'))
for p in range(4):
    for name, src in (('long', 'video_720p_h264.mp4'), ('four', 'video_720p_4faces_h264.mp4')):
        d = Path('$C') / f'{name}{p}'; d.mkdir(exist_ok=True)
        for i in range(4): shutil.copy(Path('$C') / src, d / f'{name}{p}_{i}.mp4')"
O="--weights $C/w.pth --detector blazeface_back --models-dir $C/blazeface --no-progress"
batch() {  # label, tree, what (long/four), P processes at once
  local t0=$(date +%s.%N)
  for p in $(seq 0 $(( $4 - 1 ))); do
    rm -rf /tmp/o$p
    (cd $2 && PYTHONPATH=$2:/tmp/site timeout 100 python3 -m emopipe $C/$3$p -o /tmp/o$p $O > $R/$1-p$p.log 2>&1; echo $? > /tmp/rc$p) &
  done
  wait
  local wall=$(python3 -c "print(round($(date +%s.%N)-$t0,2))")
  echo "$1: P=$4 wall=$wall s; $(python3 -c "
import json
fps, faces, rows = [], 0, []
for p in range($4):
    try:
        s = json.load(open(f'/tmp/o{p}/summary.json')); pl = s.get('pipeline') or {}
        fps.append(round(pl.get('fps') or 0)); faces += s.get('faces') or 0
        rows.append((s['ok'], round(pl.get('seconds') or 0, 2)))
    except Exception as e: rows.append(('no summary', open(f'/tmp/rc{p}').read().strip()))
print('pipeline fps per process', fps, 'sum', sum(fps), '| faces', faces, '| (ok, pipeline s)', rows)" 2>&1 | tail -1)" | tee -a $R/table.txt
}
B=$ROOT/.gpu/base17; N=$ROOT
batch base-long-1a $B long 1; batch new-long-1a $N long 1
batch new-long-1b $N long 1; batch base-long-1b $B long 1
batch base-four-1 $B four 1; batch new-four-1 $N four 1
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
if /usr/local/nvidia/bin/nvidia-cuda-mps-control -d; then
  echo "MPS daemon started" | tee -a $R/table.txt
  batch mps-base-long-4 $B long 4; batch mps-new-long-4 $N long 4
  batch mps-new-four-4 $N four 4; batch mps-base-four-4 $B four 4
  echo quit | /usr/local/nvidia/bin/nvidia-cuda-mps-control; sleep 1
else
  echo "MPS daemon did not start" | tee -a $R/table.txt
fi
(cd $R && tar czf logs.tar.gz *.log && rm *.log)
