#!/bin/bash
# session 38 (s38h): the GPU tests (tests/test_gpu.py: parity of the fast paths, NVDEC against OpenCV, NVDEC's seeks;
# tests/test_nvdec.py) on the final code, after a QA pass changed how sources are opened (names that are not UTF-8:
# OpenCV given /proc/self/fd/N, NVDEC refusing them); and such a name through --decoder auto / nvdec.
# imageio-ffmpeg's wheel (.rwF) came in a call of its own before this one, copied to /root/iof.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/pynvvideocodec*.whl .rw4/nvidia_cudnn*.whl .rw4/face_alignment*.whl 2>&1 | grep -v "already exists" | tail -2
python3 -m pip install -q --no-index --no-deps --target /tmp/iofsite /root/iof/*.whl 2>&1 | tail -2
R=$OUT/s38h; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/table.txt
C=/root/rc; mkdir -p $C; cp -r .rw4/blazeface $C/
PYTHONPATH=/tmp/site python3 -c "
import sys; sys.path.insert(0, 'benchmarks'); import synthetic; from pathlib import Path
synthetic.random_checkpoint(Path('$C/w.pth'))"
(PYTHONPATH=$ROOT:/tmp/site:/tmp/iofsite EMOPIPE_TEST_ASSETS=$ROOT/.rwH/shared timeout 420 python3 -m pytest -q -p no:cacheprovider -x tests/test_gpu.py tests/test_nvdec.py > $R/pytest.log 2>&1; echo "pytest rc=$?") | tee -a $R/table.txt
grep -E "passed|failed|skipped|Error" $R/pytest.log | tail -6 | tee -a $R/table.txt
mkdir -p /tmp/bad/v && cp .rw4/clip10s_720p_h264.mp4 /tmp/bad/v/good.mp4 && cp .rw4/clip10s_720p_h264.mp4 $'/tmp/bad/v/zz\xe9.mp4'
cd /tmp/bad
O="--weights $C/w.pth --detector blazeface_back --models-dir $C/blazeface --no-progress"
export PYTHONPATH=$ROOT:/tmp/site
for d in nvdec auto; do
  python3 -m emopipe $'v/zz\xe9.mp4' -o one-$d.csv --decoder $d --max-frames 60 $O > $R/one-$d.log 2>&1; echo "one source, --decoder $d: rc=$? $(grep -h 'error\|decoder\|frames,' $R/one-$d.log | tail -2 | tr '\n' ' ')" | tee -a $R/table.txt
done
python3 -m emopipe v -o many --max-frames 60 $O > $R/many.log 2>&1; echo "folder (good + not UTF-8), --decoder auto: rc=$?" | tee -a $R/table.txt
tail -3 $R/many.log | tee -a $R/table.txt
python3 -c "import json; [print('  ', l['status'], l['source'], l.get('frames')) for l in map(json.loads, open('many/manifest.jsonl'))]" | tee -a $R/table.txt
(cd $R && tar czf $OUT/s38h-logs.tar.gz *.log && rm -f *.log)
