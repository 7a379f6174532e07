#!/bin/bash
# session 34 (s34a): PyNvVideoCodec's core decoder against its threaded decoder (core_probe.py), H200.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl 2>&1 | grep -v "already exists" | tail -2
R=$OUT/s34a; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/table.txt
mkdir -p /tmp/v && for i in 0 1 2 3 4 5 6 7; do cp .rw4/clip10s_720p_h264.mp4 /tmp/v/c$i.mp4; done
cp .rw5/*.mp4 /tmp/v/
python3 - <<'PY'
import cv2
# a 480p and a 4:2:0 clip of another size, for reuse across sizes
cap = cv2.VideoCapture('/tmp/v/c0.mp4'); w = cv2.VideoWriter('/tmp/v/small.mp4', cv2.VideoWriter_fourcc(*'avc1'), 30, (640, 360))
ok = w.isOpened(); print('avc1 writer', ok)
PY
P="env PYTHONPATH=/tmp/site timeout 120 python3 $ROOT/.gpu/core_probe.py"
cd /tmp
step() { echo "== $*" >> $R/log.txt; $P "$@" >> $R/table.txt 2>> $R/log.txt; echo "rc=$? $1" | tee -a $R/table.txt; }
step api /tmp/v/c0.mp4
step equal /tmp/v/c0.mp4
step equal /tmp/v/video60s_720p_1face_h264.mp4
step reuse /tmp/v/c0.mp4 /tmp/v/c1.mp4 /tmp/v/video60s_720p_4face_h264.mp4 /tmp/v/c2.mp4
step speed /tmp/v/video60s_720p_1face_h264.mp4
step gil /tmp/v/video60s_720p_1face_h264.mp4
step unsupported /tmp/v/h264_444_1s.mp4
step stress core 8 30 /tmp/v/c0.mp4 /tmp/v/c1.mp4 /tmp/v/c2.mp4 /tmp/v/c3.mp4
step stress corenew 8 30 /tmp/v/c4.mp4 /tmp/v/c5.mp4 /tmp/v/c6.mp4 /tmp/v/c7.mp4
step stress threaded 8 30 /tmp/v/c0.mp4 /tmp/v/c1.mp4 /tmp/v/c2.mp4 /tmp/v/c3.mp4
cp $R/table.txt $OUT/table-a.txt
tail -c 20000 $R/log.txt > $OUT/log-a.txt
