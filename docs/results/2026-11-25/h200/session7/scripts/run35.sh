#!/bin/bash
# 2026-11-25 session 7, call E (a fresh machine): start-up — cuDNN autotuning on (default) against off
# (--no-cudnn-benchmark: both networks on cuDNN's heuristics) for one short clip, 4 long videos and the archive,
# interleaved; a py-spy profile (every thread, idle included) of one short clip's whole command.
set -u
cd "$(dirname "$0")/.."
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl .rw6/*.whl 2>&1 | tail -2
export PYTHONPATH=$PWD:/tmp/site PATH=/tmp/site/bin:$PATH
C=/tmp/rc M=$PWD/.rw4/blazeface R=$OUT/r35; mkdir -p $R $C
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
python3 -c "
import sys, shutil; sys.path.insert(0, 'benchmarks'); import synthetic; from pathlib import Path
synthetic.random_checkpoint(Path('$C/w.pth'))
d = Path('$C/clips'); d.mkdir(exist_ok=True)
for i in range(64): shutil.copy('.rw4/clip10s_720p_h264.mp4', d / f'clip{i:02d}.mp4')
d = Path('$C/long'); d.mkdir(exist_ok=True)
for i in range(4): shutil.copy('.rw4/video_720p_h264.mp4', d / f'long{i}.mp4')
d = Path('$C/one'); d.mkdir(exist_ok=True); shutil.copy('.rw4/clip10s_720p_h264.mp4', d / 'clip.mp4')"
run() {  # $1 name, $2 input, rest: options
  local name=$1 input=$2; shift 2
  local t0=$(date +%s.%N)
  timeout 120 python3 -m emopipe $input -o /tmp/o-$name --weights $C/w.pth --detector blazeface_back --no-progress --models-dir $M "$@" > $R/$name.txt 2>&1
  local rc=$? t1=$(date +%s.%N)
  cp /tmp/o-$name/summary.json $R/$name-summary.json 2>/dev/null
  echo "$name rc=$rc wall=$(python3 -c "print(round($t1-$t0,2))") $(python3 -c "
import json; s=json.load(open('$R/$name-summary.json')); p=s['pipeline']
print('pipeline', round(p['fps']), 'frames/s', s['frames'], 'frames; startup', {k: round(v, 2) for k, v in (p.get('startup') or {}).items() if isinstance(v, (int, float))})" 2>&1 | tail -1)"
}
run warm-up $C/one   # the first run of a fresh machine compiles and caches GPU code; not compared
for p in 1 2; do run one-tuned-$p $C/one; run one-heur-$p $C/one --no-cudnn-benchmark; done
for p in 1 2; do run long-tuned-$p $C/long; run long-heur-$p $C/long --no-cudnn-benchmark; done
run arch-tuned $C/clips; run arch-heur $C/clips --no-cudnn-benchmark
t0=$(date +%s.%N)
timeout 120 py-spy record --idle --threads --format raw -r 250 -o $R/spy-one.raw -- python3 -m emopipe $C/one -o /tmp/o-spy --weights $C/w.pth --detector blazeface_back --no-progress --models-dir $M > $R/spy-one.txt 2>&1
echo "spy rc=$? wall=$(python3 -c "print(round($(date +%s.%N)-$t0,2))")"
cp /tmp/o-spy/summary.json $R/spy-one-summary.json 2>/dev/null
gzip $R/spy-one.raw
cd $OUT && tar czf r35.tgz r35 && rm -rf r35
