#!/bin/bash
# session 23 (s23c): as s23b, on the tree that also begins Triton's import and key as soon as the run knows it is on
# CUDA (start_ahead) and hashes the weights once a process: GPU tests of it, interleaved pairs against main (ac13276,
# .rwE/base), one clip and the 64-clip archive in one process, then one py-spy timeline.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
C=/root/rc; mkdir -p $C/assets/models $C/assets/data/faces
cp -r .rw4/blazeface $C/; cp -r .rw4/blazeface $C/assets/models/; cp .rw4/faces/*.png $C/assets/data/faces/
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl .rwF/*.whl 2>&1 | grep -v "already exists" | tail -2
R=$OUT/s23c; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/table.txt
t0=$(date +%s)
(PYTHONPATH=$ROOT:/tmp/site EMOPIPE_TEST_ASSETS=$C/assets timeout 300 python3 -m pytest -q -p no:cacheprovider -rs \
  tests/test_gpu.py tests/test_cuda_context.py tests/test_weights.py -k "context or triton or hashed or digest" > $R/pytest.txt 2>&1)
echo "pytest rc=$? in $(( $(date +%s) - t0 )) s: $(tail -1 $R/pytest.txt)" | tee -a $R/table.txt
grep -a "FAILED\|Error" $R/pytest.txt | head -8 | tee -a $R/table.txt
PYTHONPATH=/tmp/site python3 -c "
import sys, shutil; sys.path.insert(0, 'benchmarks'); import synthetic; from pathlib import Path
synthetic.random_checkpoint(Path('$C/w.pth'))
d = Path('$C') / 'clips'; d.mkdir(exist_ok=True)
for i in range(64): shutil.copy('.rw4/clip10s_720p_h264.mp4', d / f'clip{i:02d}.mp4')"
mkdir -p /tmp/here; cd /tmp/here  # (python -m emopipe imports the emopipe of the working folder first)
O="--weights $C/w.pth --detector blazeface_back --models-dir $C/blazeface --no-progress"
tree() { [ "$1" = base ] && echo "$ROOT/.rwE/base" || echo "$ROOT"; }
one() {  # label tree [prefix...]
  local label=$1 t=$2; shift 2
  rm -rf /tmp/o1; mkdir -p /tmp/o1; local t0=$(date +%s.%N)
  (PYTHONPATH=$(tree $t):/tmp/site timeout 120 "${@:-python3}" -m emopipe $ROOT/.rw4/clip10s_720p_h264.mp4 \
    -o /tmp/o1/rows.csv $O > $R/$label.log 2>&1)
  local rc=$?
  local wall=$(python3 -c "print(round($(date +%s.%N)-$t0,2))")
  cp /tmp/o1/rows.csv $R/$label.csv 2>/dev/null
  echo "$label: rc=$rc wall=$wall s $(python3 -c "
import json; s=json.load(open('/tmp/o1/rows.summary.json')); st=s['startup']
print({k: (round(v, 2) if isinstance(v, float) else v) for k, v in st.items() if k.endswith('_s')}, 'fps', round(s.get('fps') or 0))" 2>&1 | tail -1)" | tee -a $R/table.txt
}
many() {  # label tree
  rm -rf /tmp/o; local t0=$(date +%s.%N)
  (PYTHONPATH=$(tree $2):/tmp/site timeout 150 python3 -m emopipe $C/clips -o /tmp/o $O > $R/$1.log 2>&1)
  local rc=$?
  local wall=$(python3 -c "print(round($(date +%s.%N)-$t0,2))")
  echo "$1: rc=$rc wall=$wall s $(python3 -c "
import json; s=json.load(open('/tmp/o/summary.json')); p=s.get('pipeline') or {}; st=p.get('startup') or {}
print(s['ok'], 'ok;', s.get('frames'), 'frames; pipeline fps', round(p.get('fps') or 0),
      {k: (round(v, 2) if isinstance(v, float) else v) for k, v in st.items() if k.endswith('_s')})" 2>&1 | tail -1)" | tee -a $R/table.txt
}
one warm-up-base base
one warm-up-new new
for i in 1 2 3 4 5 6; do one one-base-$i base; one one-new-$i new; done
python3 - <<PY | tee -a $R/table.txt
import csv
def rows(p): return list(csv.DictReader(open(p)))
a, b = rows('$R/one-base-1.csv'), rows('$R/one-new-1.csv')
keys = [k for k in a[0] if k.startswith(('p_', 'valence', 'arousal', 'x1', 'y1', 'x2', 'y2'))]
d = max(abs(float(r[k]) - float(s[k])) for r, s in zip(a, b) for k in keys)
print(f"rows base {len(a)} new {len(b)}; same frames {[r['frame'] for r in a] == [r['frame'] for r in b]}; "
      f"largest difference {d:.3g}")
PY
for i in 1 2; do many many-base-$i base; many many-new-$i new; done
one spy-new new /tmp/site/bin/py-spy record --idle --threads --nonblocking -r 200 -f speedscope -o $R/spy-new.json -- python3
python3 $ROOT/.gpu/s23_timeline.py $R/spy-new.json 0.25 '""' > $R/timeline-new.txt 2>&1
cp $R/table.txt $OUT/table-c.txt
(cd $R && rm -f *.csv && tar czf logs.tar.gz *.log && rm *.log)
