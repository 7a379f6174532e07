#!/bin/bash
# 2026-11-25 session 7, call A: set-up (wheels, clips, assets), the GPU test files, the archive's clips.
set -u
cd "$(dirname "$0")/.."
C=/root/rc; mkdir -p $C/assets/models $C/assets/data/faces
cp -r .rw4/* $C/; cp -r .rw4/blazeface $C/assets/models/; cp .rw4/faces/*.png $C/assets/data/faces/
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl 2>&1 | tail -2
export PYTHONPATH=$PWD:/tmp/site
R=$OUT/r34a; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee $R/gpu.txt
python3 -c "import torch, importlib.util as u; print('torch', torch.__version__, 'cudnn', torch.backends.cudnn.version(), 'triton', u.find_spec('triton') is not None, 'cudnn-frontend', u.find_spec('cudnn') is not None)" | tee -a $R/gpu.txt
t0=$(date +%s)
EMOPIPE_TEST_ASSETS=$C/assets timeout 330 python3 -m pytest -q -p no:cacheprovider -rs tests/test_gpu.py tests/test_cudnn_epilogue.py > $R/pytest.txt 2>&1
echo "pytest rc=$? in $(( $(date +%s) - t0 )) s: $(tail -1 $R/pytest.txt)"
grep -a "SKIPPED\|FAILED" $R/pytest.txt | head -20
# the archive's 64 clips and a random checkpoint, made once for calls B and C
timeout 100 python3 -c "
import sys, shutil; sys.path.insert(0, 'benchmarks'); import synthetic; from pathlib import Path
synthetic.random_checkpoint(Path('$C/w.pth'))
d = Path('$C/clips'); d.mkdir(exist_ok=True)
for i in range(64): shutil.copy('$C/clip10s_720p_h264.mp4', d / f'clip{i:02d}.mp4')
for kind, src in (('long-1face', 'video_720p_h264.mp4'), ('long-4faces', 'video_720p_4faces_h264.mp4')):
    d = Path('$C') / kind; d.mkdir(exist_ok=True)
    for i in range(4): shutil.copy(Path('$C') / src, d / f'long{i}.mp4')
d = Path('$C/one'); d.mkdir(exist_ok=True); shutil.copy('$C/clip10s_720p_h264.mp4', d / 'clip.mp4')
print('clips ready')"
cd $OUT && tar czf r34a.tgz r34a && rm -rf r34a
