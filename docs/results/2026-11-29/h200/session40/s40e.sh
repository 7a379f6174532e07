#!/bin/bash
# session 40 (s40e): the session's final code on the GPU — a folder of the clip as .mp4, .ts, .mkv and a cut .ts,
# in one process and over `--processes auto --mps` (a worker opening a .ts after an .mp4 of the same format: the
# abort of s40b); `emopipe report` of the folder; then tests/test_gpu.py + tests/test_nvdec.py.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/pynvvideocodec*.whl .rw4/nvidia_cudnn*.whl .rw4/face_alignment*.whl 2>&1 | grep -v "already exists" | tail -2
python3 -m pip install -q --no-index --no-deps --target /tmp/iofsite /root/iof/*.whl 2>&1 | tail -2
R=$OUT/s40e; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,compute_mode --format=csv,noheader | tee $R/table.txt
C=/root/rc; mkdir -p $C; cp -r .rw4/blazeface $C/
PYTHONPATH=/tmp/site python3 -c "
import sys; sys.path.insert(0, 'benchmarks'); import synthetic; from pathlib import Path
synthetic.random_checkpoint(Path('$C/w.pth'))"
mkdir -p /tmp/mix/v && cp .rw4/clip10s_720p_h264.mp4 /tmp/mix/v/a.mp4 && cp .rwT/clip10s.ts /tmp/mix/v/b.ts && cp .rwT/clip.mkv /tmp/mix/v/c.mkv && cp .rwT/cut.ts /tmp/mix/v/d.ts && cp .rwT/clip.avi /tmp/mix/v/e.avi
cd /tmp/mix
O="--weights $C/w.pth --detector blazeface_back --models-dir $C/blazeface --no-progress"
export PYTHONPATH=$ROOT:/tmp/site
run() {  # label args...
  local label=$1; shift; local t0=$(date +%s.%N)
  timeout 120 python3 -m emopipe "$@" $O > $R/$label.log 2>&1; local rc=$?
  echo "$label: rc=$rc wall=$(python3 -c "print(round($(date +%s.%N)-$t0,2))") s; $(grep -h 'sources:' $R/$label.log | tail -1)" | tee -a $R/table.txt
  [ -f $2/manifest.jsonl ] && python3 -c "
import json
for line in open('$2/manifest.jsonl'): e = json.loads(line); print('  ', e['source'], e['status'], e.get('frames'), (e.get('error') or '')[:90])" | tee -a $R/table.txt
  grep -h "damaged\|NVDEC\|Aborted\|core dumped" $R/$label.log | head -4 | sed 's/^/   log: /' | tee -a $R/table.txt
}
run one v -o one
run mps v -o mps --processes auto --mps
python3 -m emopipe report one/*.emotions.csv -o one/report.html > $R/report.log 2>&1; echo "report: rc=$? $(tail -1 $R/report.log)" | tee -a $R/table.txt
cd $ROOT
(PYTHONPATH=$ROOT:/tmp/site:/tmp/iofsite EMOPIPE_TEST_ASSETS=$ROOT/.rwH/shared timeout 420 python3 -m pytest -q -p no:cacheprovider tests/test_gpu.py tests/test_nvdec.py > $R/pytest.log 2>&1; echo "pytest rc=$?") | tee -a $R/table.txt
grep -E "passed|failed|skipped|Error" $R/pytest.log | tail -6 | tee -a $R/table.txt
(cd $R && tar czf $OUT/s40e-logs.tar.gz *.log && rm -f *.log)
