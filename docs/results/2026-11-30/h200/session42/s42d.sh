#!/bin/bash
# session 42 (s42d): after s42c — H.264 in Matroska to OpenCV, the audio-outlasts-video check through FFmpeg's framecrc
# lines (imageio-ffmpeg's FFmpeg 7 here): the files of s42c with --decoder auto against opencv, then tests/test_gpu.py +
# tests/test_nvdec.py. imageio-ffmpeg's wheel (.rwF) came in a call of its own.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
export PATH=$PATH:/usr/local/nvidia/bin
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/pynvvideocodec*.whl .rw4/nvidia_cudnn*.whl .rw4/face_alignment*.whl 2>&1 | grep -v "already exists" | tail -2
python3 -m pip install -q --no-index --no-deps --target /tmp/iofsite /root/iof/*.whl 2>&1 | tail -2
R=$OUT/s42d; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,compute_mode --format=csv,noheader | tee $R/table.txt
C=/root/rc; mkdir -p $C; cp -r .rw4/blazeface $C/
[ -f $C/w.pth ] || PYTHONPATH=/tmp/site python3 -c "
import sys; sys.path.insert(0, 'benchmarks'); import synthetic; from pathlib import Path
synthetic.random_checkpoint(Path('$C/w.pth'))"
O="--weights $C/w.pth --detector blazeface_back --models-dir $C/blazeface --no-progress"
export PYTHONPATH=$ROOT:/tmp/site:/tmp/iofsite
mkdir -p /tmp/o
secs() { python3 -c "print(round($(date +%s.%N)-$1,2))"; }

echo "== A. Matroska with audio: --decoder auto against opencv" | tee -a $R/table.txt
for f in lateaudio.mkv mkv_sameaudio.mkv mkv_opus.mkv mkv_noaudio.mkv hevc_audio.mkv webm_audio.webm avi_audio.avi flv_audio.flv mov_lateaudio.mov trimmed.mp4; do
  for d in auto opencv; do
    rm -f /tmp/o/$f.$d.*
    python3 -m emopipe $ROOT/.rwQ/$f -o /tmp/o/$f.$d.csv --decoder $d $O > $R/$f.$d.log 2>&1; echo $? > /tmp/o/$f.$d.rc
  done
  echo "$f: rc auto $(cat /tmp/o/$f.auto.rc) opencv $(cat /tmp/o/$f.opencv.rc); decoder $(grep -ho 'decoder: [a-z]*' $R/$f.auto.log); $(python3 .gpu/compare_rows.py /tmp/o/$f.auto.csv /tmp/o/$f.opencv.csv)" | tee -a $R/table.txt
  grep -h "error\|CPU instead" $R/$f.*.log | head -2 | cut -c1-300 | sed 's/^/   /' | tee -a $R/table.txt
done
f=mkv_sameaudio.mkv
python3 -m emopipe $ROOT/.rwQ/$f -o /tmp/o/s$f.nvdec.csv --decoder nvdec $O > $R/s$f.nvdec.log 2>&1; echo "$f --decoder nvdec: rc=$? $(grep -h 'error' $R/s$f.nvdec.log | cut -c1-300)" | tee -a $R/table.txt
for d in auto opencv; do python3 -m emopipe $ROOT/.rwQ/$f -o /tmp/o/s$f.$d.csv --start 1.2 --end 2.2 --decoder $d $O > $R/s$f.$d.log 2>&1; done
echo "$f --start 1.2 --end 2.2: $(python3 .gpu/compare_rows.py /tmp/o/s$f.auto.csv /tmp/o/s$f.opencv.csv)" | tee -a $R/table.txt

cd $ROOT
echo "== C. GPU tests" | tee -a $R/table.txt
cd $ROOT
(EMOPIPE_TEST_ASSETS=$ROOT/.rwH/shared timeout 330 python3 -m pytest -q -p no:cacheprovider tests/test_gpu.py tests/test_nvdec.py > $R/pytest.log 2>&1; echo "pytest rc=$?") | tee -a $R/table.txt
grep -E "passed|failed|skipped|Error" $R/pytest.log | tail -6 | tee -a $R/table.txt
