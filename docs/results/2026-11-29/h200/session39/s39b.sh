#!/bin/bash
# session 39 (s39b): after 66bb026 (the command's exit no longer joins idle thread-pool workers without telling the
# pools to end) and the QA fixes of session 39: the folder runs that hung in s39a (a good clip + one whose name is not
# UTF-8, --max-frames 60; the same with --decoder opencv), a one-clip --decoder opencv run, and the GPU tests.
# imageio-ffmpeg's wheel (.rwF) came in a call of its own before this one, copied to /root/iof.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/pynvvideocodec*.whl .rw4/nvidia_cudnn*.whl .rw4/face_alignment*.whl 2>&1 | grep -v "already exists" | tail -2
python3 -m pip install -q --no-index --no-deps --target /tmp/iofsite /root/iof/*.whl 2>&1 | tail -2
R=$OUT/s39b; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/table.txt
git log --oneline -1 2>/dev/null | tee -a $R/table.txt
C=/root/rc; mkdir -p $C; cp -r .rw4/blazeface $C/
PYTHONPATH=/tmp/site python3 -c "
import sys; sys.path.insert(0, 'benchmarks'); import synthetic; from pathlib import Path
synthetic.random_checkpoint(Path('$C/w.pth'))"
mkdir -p /tmp/bad/v && cp .rw4/clip10s_720p_h264.mp4 /tmp/bad/v/good.mp4 && cp .rw4/clip10s_720p_h264.mp4 $'/tmp/bad/v/zz\xe9.mp4'
cd /tmp/bad
O="--weights $C/w.pth --detector blazeface_back --models-dir $C/blazeface --no-progress"
export PYTHONPATH=$ROOT:/tmp/site
run() {  # label args...
  local label=$1; shift; local t0=$(date +%s.%N)
  timeout 110 python3 -m emopipe "$@" $O > $R/$label.log 2>&1; local rc=$?
  echo "$label: rc=$rc wall=$(python3 -c "print(round($(date +%s.%N)-$t0,2))") s; $(grep -h 'sources:\|frames,' $R/$label.log | tail -1)" | tee -a $R/table.txt
  grep -q "Thread 0x" $R/$label.log && echo "  STACKS PRINTED (hung)" | tee -a $R/table.txt
}
run A-good+bad-max60 v -o oA --max-frames 60
run F-good+bad-opencv v -o oF --max-frames 60 --decoder opencv
run G-one-opencv v/good.mp4 -o oG.csv --decoder opencv
run H-folder-opencv-whole v -o oH --decoder opencv
cd $ROOT
(PYTHONPATH=$ROOT:/tmp/site:/tmp/iofsite EMOPIPE_TEST_ASSETS=$ROOT/.rwH/shared timeout 400 python3 -m pytest -q -p no:cacheprovider -x tests/test_gpu.py tests/test_nvdec.py > $R/pytest.log 2>&1; echo "pytest rc=$?") | tee -a $R/table.txt
grep -E "passed|failed|skipped|Error" $R/pytest.log | tail -6 | tee -a $R/table.txt
(cd $R && tar czf $OUT/s39b-logs.tar.gz *.log && rm -f *.log)
