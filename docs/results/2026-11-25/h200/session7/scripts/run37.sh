#!/bin/bash
# 2026-11-25 session 7, call G (a fresh machine): the detectors' warm-up against layout, precision and cuDNN tuning
# (benchmarks/detector_warmup.py, each variant its own process), then whole commands of three trees interleaved:
# head, BlazeFace in NCHW (nchw), the detector's first calls on cuDNN's heuristics (heurdet).
set -u
cd "$(dirname "$0")/.."
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl 2>&1 | tail -2
export PYTHONPATH=$PWD:/tmp/site
C=/tmp/rc M=$PWD/.rw4/blazeface R=$OUT/r37; mkdir -p $R $C
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
python3 -c "
import sys, shutil; sys.path.insert(0, 'benchmarks'); import synthetic; from pathlib import Path
synthetic.random_checkpoint(Path('$C/w.pth'))
d = Path('$C/clips'); d.mkdir(exist_ok=True)
for i in range(64): shutil.copy('.rw4/clip10s_720p_h264.mp4', d / f'clip{i:02d}.mp4')
d = Path('$C/long'); d.mkdir(exist_ok=True)
for i in range(4): shutil.copy('.rw4/video_720p_h264.mp4', d / f'long{i}.mp4')
d = Path('$C/one'); d.mkdir(exist_ok=True); shutil.copy('.rw4/clip10s_720p_h264.mp4', d / 'clip.mp4')"
run() {  # $1 name, $2 tree, $3 input
  local name=$1 tree=$2 input=$3
  local t0=$(date +%s.%N)
  (cd $tree && PYTHONPATH=$tree:/tmp/site timeout 120 python3 -m emopipe $input -o /tmp/o-$name --weights $C/w.pth --detector blazeface_back --no-progress --models-dir $M > $R/$name.txt 2>&1)
  local rc=$? t1=$(date +%s.%N)
  cp /tmp/o-$name/summary.json $R/$name-summary.json 2>/dev/null
  echo "$name rc=$rc wall=$(python3 -c "print(round($t1-$t0,2))") $(python3 -c "
import json; s=json.load(open('$R/$name-summary.json')); p=s['pipeline']; st=p['startup']
print('pipeline', round(p['fps']), 'frames/s; first row', round(st['first_row_s'], 2), 'engine/detector warm-up', round(st['engine_warmup_s'], 2), round(st['detector_warmup_s'], 2))" 2>&1 | tail -1)"
}
run warm-up $PWD $C/one  # a fresh machine compiles and caches GPU code in its first run: not compared
timeout 300 python3 benchmarks/detector_warmup.py --models-dir $M --faces .rw4/faces/4faces.png --rounds 2 --out $R/detector_warmup.json > $R/detector_warmup.txt 2>&1
echo "probe rc=$?"; tail -18 $R/detector_warmup.txt
for p in 1 2; do for t in head nchw heurdet; do tree=$PWD; [ $t = head ] || tree=$PWD/.rw5/$t; run one-$t-$p $tree $C/one; done; done
for t in head nchw heurdet; do tree=$PWD; [ $t = head ] || tree=$PWD/.rw5/$t; run long-$t $tree $C/long; done
for t in head nchw heurdet; do tree=$PWD; [ $t = head ] || tree=$PWD/.rw5/$t; run arch-$t $tree $C/clips; done
cd $OUT && tar czf r37.tgz r37 && rm -rf r37
