#!/bin/bash
# session 42 (s42e): the final head on the GPU (after the fifth QA pass: the detector keeps CUDA graphs for its 4
# latest frame sizes, install and API fixes): tests/test_gpu.py + tests/test_nvdec.py, and one clip's command.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
export PATH=$PATH:/usr/local/nvidia/bin
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/pynvvideocodec*.whl .rw4/nvidia_cudnn*.whl .rw4/face_alignment*.whl 2>&1 | grep -v "already exists" | tail -2
R=$OUT/s42e; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/table.txt
export PYTHONPATH=$ROOT:/tmp/site
C=/root/rc; mkdir -p $C /tmp/o; cp -r .rw4/blazeface $C/
PYTHONPATH=/tmp/site python3 -c "
import sys; sys.path.insert(0, 'benchmarks'); import synthetic; from pathlib import Path
synthetic.random_checkpoint(Path('$C/w.pth'))"
python3 -m emopipe .rw4/clip10s_720p_h264.mp4 -o /tmp/o/one.csv --weights $C/w.pth --detector blazeface_back --models-dir $C/blazeface --no-progress > $R/one.log 2>&1; echo "one clip: rc=$? $(grep -h 'frames/s\|first row' $R/one.log | cut -c1-160 | tr '\n' ' ')" | tee -a $R/table.txt
(EMOPIPE_TEST_ASSETS=$ROOT/.rwH/shared timeout 280 python3 -m pytest -q -p no:cacheprovider tests/test_gpu.py tests/test_nvdec.py > $R/pytest.log 2>&1; echo "pytest rc=$?") | tee -a $R/table.txt
grep -E "passed|failed|skipped|Error" $R/pytest.log | tail -6 | tee -a $R/table.txt
