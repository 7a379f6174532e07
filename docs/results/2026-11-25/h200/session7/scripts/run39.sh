#!/bin/bash
# 2026-11-25 session 7, call I: start-up with imports ahead on a thread — old (HEAD before it), new (the working tree:
# SciPy's optimizer imported at first use; Triton, face-alignment and SciPy imported ahead), scipyonly (only SciPy
# ahead); one clip three times each, rotating the order, then the archive once each.
set -u
cd "$(dirname "$0")/.."
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl 2>&1 | tail -2
C=/tmp/rc M=$PWD/.rw4/blazeface R=$OUT/r39; mkdir -p $R $C
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
PYTHONPATH=$PWD python3 -c "
import sys, shutil; sys.path.insert(0, 'benchmarks'); import synthetic; from pathlib import Path
synthetic.random_checkpoint(Path('$C/w.pth'))
d = Path('$C/clips'); d.mkdir(exist_ok=True)
for i in range(64): shutil.copy('.rw4/clip10s_720p_h264.mp4', d / f'clip{i:02d}.mp4')
d = Path('$C/one'); d.mkdir(exist_ok=True); shutil.copy('.rw4/clip10s_720p_h264.mp4', d / 'clip.mp4')"
run() {  # $1 name, $2 tree, $3 input
  local name=$1 tree=$2 input=$3
  local t0=$(date +%s.%N)
  (cd $tree && PYTHONPATH=$tree:/tmp/site timeout 120 python3 -m emopipe $input -o /tmp/o-$name --weights $C/w.pth --detector blazeface_back --no-progress --models-dir $M > $R/$name.txt 2>&1)
  local rc=$? t1=$(date +%s.%N)
  cp /tmp/o-$name/summary.json $R/$name-summary.json 2>/dev/null
  echo "$name rc=$rc wall=$(python3 -c "print(round($t1-$t0,2))") $(python3 -c "
import json; s=json.load(open('$R/$name-summary.json')); p=s['pipeline']; st=p['startup']
print('pipeline', round(p['fps']), 'frames/s; startup', {k: round(v, 2) for k, v in st.items() if k.endswith('_s')})" 2>&1 | tail -1)"
}
tree() { [ $1 = new ] && echo $PWD || echo $PWD/.rw5/$1; }
run warm-up $PWD $C/one  # a fresh machine's first run compiles GPU code: not compared
run one-old-1 $(tree old) $C/one; run one-new-1 $(tree new) $C/one; run one-scipyonly-1 $(tree scipyonly) $C/one
run one-new-2 $(tree new) $C/one; run one-scipyonly-2 $(tree scipyonly) $C/one; run one-old-2 $(tree old) $C/one
run one-scipyonly-3 $(tree scipyonly) $C/one; run one-old-3 $(tree old) $C/one; run one-new-3 $(tree new) $C/one
run arch-new $(tree new) $C/clips; run arch-old $(tree old) $C/clips; run arch-scipyonly $(tree scipyonly) $C/clips
cd $OUT && tar czf r39.tgz r39 && rm -rf r39
