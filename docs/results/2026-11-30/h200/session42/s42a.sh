#!/bin/bash
# session 42 (s42a): NVDEC against OpenCV on the files the session's QA pass found mis-read on the CPU (fixed there):
# an MP4 trimmed without re-encoding (edit list), audio outlasting the video (mkv), a video starting 1 s after its audio,
# rotation metadata, a variable frame rate, HEVC, AV1, VP9 — each run with --decoder nvdec and --decoder opencv, the
# rows compared (frames, timestamps, boxes) with the exit codes; then tests/test_gpu.py + tests/test_nvdec.py.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
export PATH=$PATH:/usr/local/nvidia/bin
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/pynvvideocodec*.whl .rw4/nvidia_cudnn*.whl .rw4/face_alignment*.whl 2>&1 | grep -v "already exists" | tail -2
R=$OUT/s42a; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,compute_mode --format=csv,noheader | tee $R/table.txt
echo "main: $(git -C $ROOT log --oneline -1 2>/dev/null | cut -c1-60)" | tee -a $R/table.txt
C=/root/rc; mkdir -p $C; cp -r .rw4/blazeface $C/
[ -f $C/w.pth ] || PYTHONPATH=/tmp/site python3 -c "
import sys; sys.path.insert(0, 'benchmarks'); import synthetic; from pathlib import Path
synthetic.random_checkpoint(Path('$C/w.pth'))"
O="--weights $C/w.pth --detector blazeface_back --models-dir $C/blazeface --no-progress"
export PYTHONPATH=$ROOT:/tmp/site
mkdir -p /tmp/o
echo "== A. NVDEC against OpenCV" | tee -a $R/table.txt
for f in base.mp4 trimmed.mp4 lateaudio.mkv videolate.mp4 rot90.mp4 vfr.mp4 hevc.mp4 av1.mkv vp9.webm; do
  for d in nvdec opencv; do
    rm -f /tmp/o/$f.$d.*
    python3 -m emopipe $ROOT/.rwQ/$f -o /tmp/o/$f.$d.csv --decoder $d $O > $R/$f.$d.log 2>&1; echo $? > /tmp/o/$f.$d.rc
  done
  echo "$f: rc nvdec $(cat /tmp/o/$f.nvdec.rc) opencv $(cat /tmp/o/$f.opencv.rc); $(python3 .gpu/compare_rows.py /tmp/o/$f.nvdec.csv /tmp/o/$f.opencv.csv)" | tee -a $R/table.txt
  grep -h "error" $R/$f.*.log | head -2 | cut -c1-300 | sed 's/^/   /' | tee -a $R/table.txt
done
for f in trimmed.mp4 vfr.mp4 videolate.mp4; do
  for d in nvdec opencv; do
    rm -f /tmp/o/s$f.$d.*
    python3 -m emopipe $ROOT/.rwQ/$f -o /tmp/o/s$f.$d.csv --start 1.2 --end 2.2 --decoder $d $O > $R/s$f.$d.log 2>&1; echo $? > /tmp/o/s$f.$d.rc
  done
  echo "$f --start 1.2 --end 2.2: rc nvdec $(cat /tmp/o/s$f.nvdec.rc) opencv $(cat /tmp/o/s$f.opencv.rc); $(python3 .gpu/compare_rows.py /tmp/o/s$f.nvdec.csv /tmp/o/s$f.opencv.csv)" | tee -a $R/table.txt
done
echo "== B. GPU tests" | tee -a $R/table.txt
(EMOPIPE_TEST_ASSETS=$ROOT/.rwH/shared timeout 300 python3 -m pytest -q -p no:cacheprovider tests/test_gpu.py tests/test_nvdec.py > $R/pytest.log 2>&1; echo "pytest rc=$?") | tee -a $R/table.txt
grep -E "passed|failed|skipped|Error" $R/pytest.log | tail -6 | tee -a $R/table.txt
