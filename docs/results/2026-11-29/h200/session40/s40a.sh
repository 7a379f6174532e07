#!/bin/bash
# session 40 (s40a): the session's code on the GPU — a transport stream cut inside a packet (.ts remuxed from the
# 10-second 720p clip, cut at half its bytes + 100) read by NVDEC and by OpenCV: the whole one exit 0, the cut one
# exit 8 (was: read as complete), a folder of both exit 9; then tests/test_gpu.py + tests/test_nvdec.py.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/pynvvideocodec*.whl .rw4/nvidia_cudnn*.whl .rw4/face_alignment*.whl 2>&1 | grep -v "already exists" | tail -2
python3 -m pip install -q --no-index --no-deps --target /tmp/iofsite /root/iof/*.whl 2>&1 | tail -2
R=$OUT/s40a; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,compute_mode --format=csv,noheader | tee $R/table.txt
C=/root/rc; mkdir -p $C; cp -r .rw4/blazeface $C/
PYTHONPATH=/tmp/site python3 -c "
import sys; sys.path.insert(0, 'benchmarks'); import synthetic; from pathlib import Path
synthetic.random_checkpoint(Path('$C/w.pth'))"
mkdir -p /tmp/ts/v && cp .rwT/clip10s.ts /tmp/ts/v/whole.ts && cp .rwT/cut.ts /tmp/ts/v/cut.ts
cd /tmp/ts
O="--weights $C/w.pth --detector blazeface_back --models-dir $C/blazeface --no-progress"
export PYTHONPATH=$ROOT:/tmp/site
run() {  # label args...
  local label=$1; shift; local t0=$(date +%s.%N)
  timeout 110 python3 -m emopipe "$@" $O > $R/$label.log 2>&1; local rc=$?
  echo "$label: rc=$rc wall=$(python3 -c "print(round($(date +%s.%N)-$t0,2))") s; $(grep -h 'error\|ended early\|truncated\|sources:\|frames,' $R/$label.log | tail -2 | tr '\n' ' ')" | tee -a $R/table.txt
}
run whole-nvdec v/whole.ts -o whole-nvdec.csv
run cut-nvdec v/cut.ts -o cut-nvdec.csv
run whole-opencv v/whole.ts -o whole-opencv.csv --decoder opencv
run cut-opencv v/cut.ts -o cut-opencv.csv --decoder opencv
run folder v -o out
python3 -c "
import json
for line in open('out/manifest.jsonl'): e = json.loads(line); print(' ', e['source'], e['status'], e.get('frames'), e.get('error'))
print('  decoder of whole-nvdec:', json.load(open('whole-nvdec.summary.json')).get('decoder'))" 2>&1 | tee -a $R/table.txt
cd $ROOT
(PYTHONPATH=$ROOT:/tmp/site:/tmp/iofsite EMOPIPE_TEST_ASSETS=$ROOT/.rwH/shared timeout 420 python3 -m pytest -q -p no:cacheprovider tests/test_gpu.py tests/test_nvdec.py > $R/pytest.log 2>&1; echo "pytest rc=$?") | tee -a $R/table.txt
grep -E "passed|failed|skipped|Error" $R/pytest.log | tail -6 | tee -a $R/table.txt
(cd $R && tar czf $OUT/s40a-logs.tar.gz *.log && rm -f *.log)
