#!/bin/bash
# session 40 (s40c): NVDEC on every container the archive may hold (the clip remuxed: mkv, mov, avi, flv, ts; VP9 webm;
# HEVC mp4), alone and after an MP4 of the same format (a kept decoder pointed at it), with b1a0821 (transport streams
# to OpenCV).
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/pynvvideocodec*.whl .rw4/nvidia_cudnn*.whl .rw4/face_alignment*.whl 2>&1 | grep -v "already exists" | tail -2
R=$OUT/s40c; mkdir -p $R
mkdir -p /tmp/f && cp .rwT/clip.* .rwT/clip_hevc.mp4 .rwT/clip10s.ts /tmp/f/ && cp .rw4/clip10s_720p_h264.mp4 /tmp/f/ref.mp4
PYTHONPATH=$ROOT:/tmp/site python3 .gpu/s40c_probe.py /tmp/f/ref.mp4 /tmp/f/clip.mkv /tmp/f/clip.mov /tmp/f/clip.avi /tmp/f/clip.flv /tmp/f/clip.webm /tmp/f/clip_hevc.mp4 /tmp/f/clip10s.ts 2>&1 | tee $R/table.txt
