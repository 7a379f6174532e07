#!/bin/bash
# session 11, call 3 (one GPU): are reruns bit-identical? The same clip in two processes with cuDNN autotuning (the
# default) and with --no-cudnn-benchmark; then three videos as one archive (their frames share the detector's and
# EmoNet's batches) against each run alone, with --no-cudnn-benchmark.
set -u
cd "$(dirname "$0")/.."
C=/root/rc; mkdir -p $C
cp -r .rw4/* $C/
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl 2>&1 | grep -v "already exists" | tail -2
export PYTHONPATH=$PWD:/tmp/site
R=$OUT/s11c; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/table.txt
python3 -c "
import sys, shutil; sys.path.insert(0, 'benchmarks'); import synthetic; from pathlib import Path
synthetic.random_checkpoint(Path('$C/w.pth'))
d = Path('$C/three'); d.mkdir(exist_ok=True)
shutil.copy('$C/clip10s_720p_h264.mp4', d / 'a_clip.mp4'); shutil.copy('$C/video_720p_4faces_h264.mp4', d / 'b_four.mp4')
shutil.copy('$C/video_720p_h264.mp4', d / 'c_long.mp4')"
O="--weights $C/w.pth --detector blazeface_back --models-dir $C/blazeface --no-progress"
for mode in tuned heur; do
  extra=; [ $mode = heur ] && extra=--no-cudnn-benchmark
  for i in 1 2; do
    timeout 100 python3 -m emopipe $C/three/b_four.mp4 -o /tmp/one-$mode-$i.csv $O $extra > $R/log.txt 2>&1 || tail -3 $R/log.txt | tee -a $R/table.txt
  done
  echo "four-face video, two processes, $mode: $(python3 .gpu/s11cmp.py /tmp/one-$mode-1.csv /tmp/one-$mode-2.csv)" | tee -a $R/table.txt
done
for i in 1 2; do
  timeout 150 python3 -m emopipe $C/three -o /tmp/arch$i $O --no-cudnn-benchmark > $R/log.txt 2>&1 || tail -3 $R/log.txt | tee -a $R/table.txt
done
for v in a_clip b_four c_long; do
  echo "$v, archive twice (heur): $(python3 .gpu/s11cmp.py /tmp/arch1/$v.emotions.csv /tmp/arch2/$v.emotions.csv)" | tee -a $R/table.txt
  timeout 100 python3 -m emopipe $C/three/$v.mp4 -o /tmp/alone-$v.csv $O --no-cudnn-benchmark > $R/log.txt 2>&1 || tail -3 $R/log.txt | tee -a $R/table.txt
  # (the alone run's rows name the source as given; the archive's too: compare all but the source column)
  echo "$v, alone against in the archive (heur): $(python3 .gpu/s11cmp.py /tmp/alone-$v.csv /tmp/arch1/$v.emotions.csv)" | tee -a $R/table.txt
done
