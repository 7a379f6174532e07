#!/bin/bash
# session 21, fourth call (s21c's machine held: Ray installed): camera fleets over Ray workers sharing the GPU under
# NVIDIA MPS, with and without --record mp4 (each camera's annotated stream through FFmpeg: imageio-ffmpeg's static
# build, carried as a wheel in two parts), against one process recording. Paced 720p30 cameras (benchmarks/fleet.py).
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
mkdir -p /root/ffcache; cp .rwD/ff.part01 /root/ffcache/
cat /root/ffcache/ff.part00 /root/ffcache/ff.part01 > /root/ffcache/imageio_ffmpeg-0.8.1-py3-none-manylinux_2_28_x86_64.whl
python3 -m pip install -q --no-index --no-deps --target /tmp/site /root/ffcache/imageio_ffmpeg-*.whl 2>&1 | grep -v "already exists" | tail -2
R=$OUT/s21d; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/table.txt
[ -d /tmp/raysite/ray ] || echo "NO RAY (a fresh machine)" | tee -a $R/table.txt
FF=$(PYTHONPATH=/tmp/site python3 -c "import imageio_ffmpeg; print(imageio_ffmpeg.get_ffmpeg_exe())")
echo "ffmpeg: $FF" | tee -a $R/table.txt
fleet() {  # label, timeout, fleet.py arguments
  local label=$1 limit=$2; shift 2
  local t0=$(date +%s)
  (PYTHONPATH=$ROOT:/tmp/site:/tmp/raysite timeout $limit python3 benchmarks/fleet.py --models-dir $ROOT/.rwE/blazeface \
    --out $R/$label "$@" > $R/$label.txt 2>&1)
  echo "== $label (rc=$?, $(( $(date +%s) - t0 )) s): $*" | tee -a $R/table.txt
  grep -A8 "^cameras" $R/$label.txt | tee -a $R/table.txt
  local videos=$(find $R/$label -name "*.annotated*.mp4" | wc -l)
  if [ $videos -gt 0 ]; then
    local one=$(find $R/$label -name "*.annotated*.mp4" | head -1)
    echo "recordings: $videos, $(du -ch $(find $R/$label -name "*.annotated*.mp4") | tail -1 | cut -f1); one of them: $($FF -v error -i $one -map 0:v -f null - 2>&1 | tail -1; $FF -i $one 2>&1 | grep -m1 "Stream.*Video" | cut -c1-90)" | tee -a $R/table.txt
  fi
  find $R/$label \( -name "*.csv" -o -name "*.mp4" \) -delete
}
fleet one-process-rec8 120 --counts 8 --seconds 15 -- --record mp4
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
/usr/local/nvidia/bin/nvidia-cuda-mps-control -d && echo "MPS daemon started" | tee -a $R/table.txt
export PATH=$PATH:/usr/local/nvidia/bin
W="--ray local --ray-workers 8 --ray-gpus-per-worker 0.125"
fleet ray-w8-16 150 --counts 16 --seconds 15 -- $W
fleet ray-w8-16-rec 150 --counts 16 --seconds 15 -- $W --record mp4
fleet ray-w8-8-rec 150 --counts 8 --seconds 15 -- $W --record mp4
echo quit | /usr/local/nvidia/bin/nvidia-cuda-mps-control; sleep 1
cp $R/table.txt $OUT/table-d.txt
tar czf $OUT/s21d.tgz -C $OUT s21d && rm -rf $R
