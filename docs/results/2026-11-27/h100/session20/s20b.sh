#!/bin/bash
# session 20: FFmpeg's annotated-video writer on the GPU host — (1) the GPU tests on the tree; (2) the writers
# alone (benchmarks/video_writer.py, 600 frames of the 720p clip, 16 cores); (3) whole commands on a 60 s 720p
# video: no --annotate / --annotate out.mp4 with OpenCV / with FFmpeg, interleaved twice; the summary's frames/s,
# wall time, and the video's frames counted back. FFmpeg: imageio-ffmpeg 0.8.1's static build (9.0.2), carried xz'd.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
C=/root/rc; mkdir -p $C/assets/models $C/assets/data/faces /tmp/ffbin
cp -r .rw4/blazeface $C/assets/models/; cp .rw4/faces/*.png $C/assets/data/faces/
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl 2>&1 | grep -v "already exists" | tail -2
[ -x /tmp/ffbin/ffmpeg ] || xz -dc /root/ffcache/ffmpeg.xz > /tmp/ffbin/ffmpeg; chmod +x /tmp/ffbin/ffmpeg
export EMOPIPE_FFMPEG=/tmp/ffbin/ffmpeg PYTHONPATH=$ROOT:/tmp/site
R=$OUT/s20b; mkdir -p $R
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc; /tmp/ffbin/ffmpeg -version | head -1; } | tee $R/table.txt
t0=$(date +%s)
(EMOPIPE_TEST_ASSETS=$C/assets timeout 300 python3 -m pytest -q -p no:cacheprovider -rs \
  tests/test_gpu.py tests/test_cudnn_epilogue.py tests/test_nvdec.py > $R/pytest.txt 2>&1)
echo "pytest rc=$? in $(( $(date +%s) - t0 )) s: $(tail -1 $R/pytest.txt)" | tee -a $R/table.txt
grep -a "FAILED" $R/pytest.txt | head -5 | tee -a $R/table.txt
timeout 240 python3 benchmarks/video_writer.py .rw4/video_720p_h264.mp4 --frames 600 --rounds 2 > $R/writers.txt 2>&1
echo "writers rc=$?" | tee -a $R/table.txt; tail -6 $R/writers.txt | tee -a $R/table.txt
python3 -c "
import sys; sys.path.insert(0, 'benchmarks'); import synthetic; from pathlib import Path
synthetic.random_checkpoint(Path('$C/w.pth'))"
O="--weights $C/w.pth --detector blazeface_back --models-dir $C/assets/models/blazeface --no-progress"
whole() {  # label, extra options...
  local label=$1; shift
  rm -rf /tmp/o*; local t0=$(date +%s.%N)
  timeout 150 python3 -m emopipe .rw4/video_720p_h264.mp4 -o /tmp/o.csv $O "$@" > $R/$label.log 2>&1; local rc=$?
  echo "$label: rc=$rc wall=$(python3 -c "print(round($(date +%s.%N)-$t0,2))") s; $(python3 -c "
import json, cv2, os
s = json.load(open('/tmp/o.summary.json'))
line = f\"frames {s['frames']} pipeline {s['fps']:.0f} frames/s, stages {s['stage_seconds']}\"
if os.path.exists('/tmp/o.mp4'):
    cap = cv2.VideoCapture('/tmp/o.mp4'); n = 0
    while cap.grab(): n += 1
    line += f'; video {n} frames, {os.path.getsize(\"/tmp/o.mp4\") / 1e6:.1f} MB'
print(line)" 2>&1 | tail -1)" | tee -a $R/table.txt
}
whole plain; whole opencv --annotate /tmp/o.mp4 --video-writer opencv; whole ffmpeg --annotate /tmp/o.mp4 --video-writer ffmpeg
whole ffmpeg-2 --annotate /tmp/o.mp4 --video-writer ffmpeg; whole opencv-2 --annotate /tmp/o.mp4 --video-writer opencv; whole plain-2
cp $R/table.txt $OUT/table-b.txt; tar czf $OUT/s20b.tgz -C $OUT s20b && rm -rf $R
