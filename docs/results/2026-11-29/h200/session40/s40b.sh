#!/bin/bash
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/pynvvideocodec*.whl .rw4/nvidia_cudnn*.whl .rw4/face_alignment*.whl 2>&1 | grep -v "already exists" | tail -2
R=$OUT/s40b; mkdir -p $R
cp .rwT/clip10s.ts /tmp/whole.ts; cp .rwT/cut.ts /tmp/cut.ts; cp .rw4/clip10s_720p_h264.mp4 /tmp/clip.mp4
PYTHONPATH=$ROOT:/tmp/site python3 .gpu/s40b_probe.py /tmp/whole.ts /tmp/clip.mp4 2>&1 | tee $R/table.txt
PYTHONPATH=$ROOT:/tmp/site python3 -c "import PyNvVideoCodec as nvc, inspect; print(nvc.SimpleDecoder.__init__.__doc__)" 2>&1 | head -30 | tee -a $R/table.txt
