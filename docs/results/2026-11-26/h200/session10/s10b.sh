#!/bin/bash
# session 10, call 2 (same warm machine as s10a): the A/B again with the base tree run from its own folder
# (python3 -m puts the working folder first on sys.path, so s10a's "base" runs were HEAD's code).
set -u
cd "$(dirname "$0")/.."
C=/root/rc; R=$OUT/s10b; mkdir -p $R
if [ ! -d $C/clips ]; then  # a fresh machine: s10a's set-up
  mkdir -p $C; cp -r .rw4/* $C/
  python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl 2>&1 | grep -v "already exists" | tail -2
  PYTHONPATH=$PWD:/tmp/site python3 -c "
import sys, shutil; sys.path.insert(0, 'benchmarks'); import synthetic; from pathlib import Path
synthetic.random_checkpoint(Path('$C/w.pth'))
d = Path('$C/clips'); d.mkdir(exist_ok=True)
for i in range(64): shutil.copy('$C/clip10s_720p_h264.mp4', d / f'clip{i:02d}.mp4')"
fi
nvidia-smi --query-gpu=name --format=csv,noheader
O="--weights $C/w.pth --detector blazeface_back --models-dir $C/blazeface --no-progress"
run() {  # $1 name, $2 code root
  local t0=$(date +%s.%N)
  (cd $2 && PYTHONPATH=$2:/tmp/site timeout 150 python3 -m emopipe $C/clips -o /tmp/$1 $O > $R/$1.txt 2>&1)
  local rc=$?
  python3 - "$1" "$rc" "$t0" "$2" <<'PY' | tee -a $R/table.txt
import json, sys, time, pathlib
name, rc, t0, root = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
s = json.load(open(f"/tmp/{name}/summary.json"))
p = s.get("pipeline", {})
n = len(list(pathlib.Path(f"/tmp/{name}").glob("*.tracks.csv")))
print(f"{name:8s} rc={rc} wall={time.time() - t0:5.1f} s summary wall_s={s.get('wall_s')} ok={s.get('ok')} "
      f"pipeline fps={p.get('fps'):.0f} tracks files={n} code={root}")
PY
}
rm -rf /tmp/base* /tmp/head*
run base1 $PWD/.gpu/base; run head1 $PWD; run base2 $PWD/.gpu/base; run head2 $PWD; run base3 $PWD/.gpu/base; run head3 $PWD
