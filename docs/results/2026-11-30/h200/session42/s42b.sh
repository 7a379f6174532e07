#!/bin/bash
# session 42 (s42b): why NVDEC read 30 of lateaudio.mkv's 90 frames (s42a): PyNvVideoCodec's threaded and simple
# decoders' frame counts over Matroska / WebM / MP4 / MOV files with and without audio, and emopipe --decoder nvdec.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
export PATH=$PATH:/usr/local/nvidia/bin
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/pynvvideocodec*.whl .rw4/nvidia_cudnn*.whl .rw4/face_alignment*.whl 2>&1 | grep -v "already exists" | tail -2
R=$OUT/s42b; mkdir -p $R
export PYTHONPATH=$ROOT:/tmp/site
cd .rwQ
timeout 120 python3 $ROOT/.gpu/nvdec_count.py base.mp4 mkv_noaudio.mkv mkv_sameaudio.mkv mkv_shortaudio.mkv lateaudio.mkv mkv_opus.mkv mp4_lateaudio.mp4 mov_lateaudio.mov videolate.mp4 webm_audio.webm vp9.webm 2>&1 | tee $R/table.txt
C=/root/rc
O="--weights $C/w.pth --detector blazeface_back --models-dir $C/blazeface --no-progress"
for f in mkv_sameaudio.mkv mkv_shortaudio.mkv mkv_opus.mkv webm_audio.webm mp4_lateaudio.mp4 mov_lateaudio.mov; do
  python3 -m emopipe $f -o /tmp/o/b$f.csv --decoder nvdec $O > $R/$f.log 2>&1; echo "emopipe $f nvdec rc=$? rows $(($(wc -l < /tmp/o/b$f.csv 2>/dev/null || echo 1) - 1))" | tee -a $R/table.txt
done
