#!/bin/bash
# session 27 (s27h): BlazeFace fused in place (new, the working tree) against the tree before it (prev: HEAD~1, the
# bytecode kept by both), warm one-clip commands, each tree primed once, four interleaved pairs; then the GPU tests
# of the detectors and the engines.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
C=/root/rc; mkdir -p $C/assets/models $C/assets/data/faces
cp -r .rw4/blazeface $C/; cp -r .rw4/blazeface $C/assets/models/; cp .rw4/faces/*.png $C/assets/data/faces/
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl 2>&1 | grep -v "already exists" | tail -2
R=$OUT/s27h; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/table.txt
PYTHONPATH=/tmp/site python3 -c "
import sys; sys.path.insert(0, 'benchmarks'); import synthetic; from pathlib import Path
synthetic.random_checkpoint(Path('$C/w.pth'))"
mkdir -p /tmp/here; cd /tmp/here
O="--weights $C/w.pth --detector blazeface_back --models-dir $C/blazeface --no-progress"
treeof() { if [ $1 = new ]; then echo $ROOT; else echo $ROOT/.gpu/trees/prev; fi; }
one() {  # label tree
  local label=$1 t=$2
  rm -rf /tmp/o1; mkdir -p /tmp/o1; local t0=$(date +%s.%N)
  (PYTHONPATH=$(treeof $t):/tmp/site timeout 150 python3 -m emopipe $ROOT/.rw4/clip10s_720p_h264.mp4 \
    -o /tmp/o1/rows.csv $O > $R/$label.log 2>&1)
  local rc=$?
  local wall=$(python3 -c "print(round($(date +%s.%N)-$t0,2))")
  cp /tmp/o1/rows.csv $R/$label.csv 2>/dev/null
  echo "$label: rc=$rc wall=$wall s $(python3 -c "
import json; s=json.load(open('/tmp/o1/rows.summary.json')); st=s['startup']
print({k: (round(v, 2) if isinstance(v, float) else v) for k, v in st.items() if k.endswith('_s')}, 'fps', round(s.get('fps') or 0))" 2>&1 | tail -1)" | tee -a $R/table.txt
}
one prime-new new; one prime-prev prev
for i in 1 2 3 4; do one warm-prev-$i prev; one warm-new-$i new; done
python3 - $R/warm-prev-1.csv $R/warm-new-1.csv <<'PY' | tee -a $R/table.txt
import csv, sys
a, b = (list(csv.DictReader(open(p))) for p in sys.argv[1:3])
print('rows', len(a), len(b), 'same frames', [r['frame'] for r in a] == [r['frame'] for r in b],
      'max |dV|', max(abs(float(x['valence']) - float(y['valence'])) for x, y in zip(a, b)))
PY
(cd $ROOT && PYTHONPATH=$ROOT:/tmp/site EMOPIPE_TEST_ASSETS=$C/assets timeout 240 python3 -m pytest -q -p no:cacheprovider -rs \
  tests/test_gpu.py tests/test_detect.py > $R/pytest.txt 2>&1)
echo "pytest rc=$?: $(tail -1 $R/pytest.txt)" | tee -a $R/table.txt; grep -E "FAILED|SKIPPED" $R/pytest.txt | head -10 | tee -a $R/table.txt
cp $R/table.txt $OUT/table-h.txt
(cd $R && tar czf $OUT/s27h-logs.tar.gz *.log pytest.txt)
rm -rf $R
