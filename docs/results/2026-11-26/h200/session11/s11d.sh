#!/bin/bash
# session 11, call 4 (one GPU): start-up A/B — a2b2e87 (base) against the working tree (head: detector networks
# loaded without face-alignment's package, boxes paired without SciPy when no pairs compete, ruptures imported
# while EmoNet warms). One 10 s clip (whole command, startup phases), three interleaved pairs; then the 64-clip
# archive, two pairs. Each tree runs from its own folder (python3 -m puts the working folder first on sys.path).
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
C=/root/rc; mkdir -p $C
cp -r .rw4/* $C/
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl 2>&1 | grep -v "already exists" | tail -2
export PYTHONPATH=/tmp/site
R=$OUT/s11d; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/table.txt
(cd $ROOT && python3 -c "
import sys, shutil; sys.path.insert(0, 'benchmarks'); import synthetic; from pathlib import Path
synthetic.random_checkpoint(Path('$C/w.pth'))
d = Path('$C/clips'); d.mkdir(exist_ok=True)
for i in range(64): shutil.copy('$C/clip10s_720p_h264.mp4', d / f'clip{i:02d}.mp4')")
O="--weights $C/w.pth --detector blazeface_back --models-dir $C/blazeface --no-progress"
tree() { [ $1 = base ] && echo $ROOT/.gpu/base11 || echo $ROOT; }
(cd $ROOT && timeout 100 python3 -m emopipe $C/clip10s_720p_h264.mp4 -o /tmp/warm.csv $O > $R/log.txt 2>&1); (cd $ROOT/.gpu/base11 && timeout 100 python3 -m emopipe $C/clip10s_720p_h264.mp4 -o /tmp/warm2.csv $O > $R/log-base.txt 2>&1; echo "base warm-up rc=$?" | tee -a $R/table.txt; tail -2 $R/log-base.txt)
for round in 1 2 3; do for t in base head; do
  rm -f /tmp/one.*; t0=$(date +%s.%N)
  (cd $(tree $t) && timeout 100 python3 -m emopipe $C/clip10s_720p_h264.mp4 -o /tmp/one.csv $O > $R/log.txt 2>&1); rc=$?
  echo "clip $t round $round: rc=$rc wall=$(python3 -c "print(round($(date +%s.%N)-$t0,2))") s; $(python3 -c "
import json; s=json.load(open('/tmp/one.summary.json')); print(s['startup'])" 2>&1 | tail -1)" | tee -a $R/table.txt
done; done
for round in 1 2; do for t in base head; do
  rm -rf /tmp/arch; t0=$(date +%s.%N)
  (cd $(tree $t) && timeout 150 python3 -m emopipe $C/clips -o /tmp/arch $O > $R/log.txt 2>&1); rc=$?
  echo "archive $t round $round: rc=$rc wall=$(python3 -c "print(round($(date +%s.%N)-$t0,2))") s; $(python3 -c "
import json; s=json.load(open('/tmp/arch/summary.json')); p=s['pipeline']; print(s['ok'], 'ok;', round(p['fps']), 'frames/s; write', p['stage_seconds'].get('write'), '; startup', p.get('startup'))" 2>&1 | tail -1)" | tee -a $R/table.txt
done; done
