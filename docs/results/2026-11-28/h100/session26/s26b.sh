#!/bin/bash
# session 26 (s26b): H100. Trees: base (main 351bf5e), a (the detector's plans found in EmoNet's warm-up window where
# the frame size is known), ab (a + ruptures imported after the warm-ups instead of beside EmoNet's). The loan's first
# command (tree a), a fresh machine emulated (CUDA's compute cache, Triton's and the plan folder emptied) base/a
# interleaved, warm commands base/a/ab interleaved, the rows compared, the plan GPU tests.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
C=/root/rc; mkdir -p $C/assets/models $C/assets/data/faces
cp -r .rw4/blazeface $C/; cp -r .rw4/blazeface $C/assets/models/; cp .rw4/faces/*.png $C/assets/data/faces/
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl 2>&1 | grep -v "already exists" | tail -2
R=$OUT/s26b; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/table.txt
PYTHONPATH=/tmp/site python3 -c "
import sys; sys.path.insert(0, 'benchmarks'); import synthetic; from pathlib import Path
synthetic.random_checkpoint(Path('$C/w.pth'))"
mkdir -p /tmp/here; cd /tmp/here
O="--weights $C/w.pth --detector blazeface_back --models-dir $C/blazeface --no-progress"
one() {  # label tree
  local label=$1 t=$ROOT/.gpu/trees/$2
  rm -rf /tmp/o1; mkdir -p /tmp/o1; local t0=$(date +%s.%N)
  (PYTHONPATH=$t:/tmp/site timeout 150 python3 -m emopipe $ROOT/.rw4/clip10s_720p_h264.mp4 \
    -o /tmp/o1/rows.csv $O > $R/$label.log 2>&1)
  local rc=$?
  local wall=$(python3 -c "print(round($(date +%s.%N)-$t0,2))")
  cp /tmp/o1/rows.csv $R/$label.csv 2>/dev/null
  echo "$label: rc=$rc wall=$wall s $(python3 -c "
import json; s=json.load(open('/tmp/o1/rows.summary.json')); st=s['startup']
print({k: (round(v, 2) if isinstance(v, float) else v) for k, v in st.items() if k.endswith('_s')}, 'fps', round(s.get('fps') or 0))" 2>&1 | tail -1)" | tee -a $R/table.txt
  grep -a "cuDNN plans:" $R/$label.log | sed 's/^/    /' | tee -a $R/table.txt
}
cold() { rm -rf /root/.nv /root/.triton $C/blazeface/cache; }
ls -d /root/.nv /root/.triton $C/blazeface/cache 2>&1 | tee -a $R/table.txt
one first-a a
for i in 1 2; do cold; one cold-base-$i base; cold; one cold-a-$i a; done
for i in 1 2 3; do one warm-base-$i base; one warm-a-$i a; one warm-ab-$i ab; done
python3 - "$R" <<'PY' | tee -a $R/table.txt
import csv, sys
R = sys.argv[1]
def rows(name):
    with open(f"{R}/{name}.csv") as f:
        return list(csv.DictReader(f))
base = rows("warm-base-1")
for other in ("warm-a-1", "warm-ab-1", "cold-a-1"):
    got = rows(other)
    same = [r["frame"] for r in base] == [r["frame"] for r in got]
    diff = max((abs(float(a[k]) - float(b[k])) for a, b in zip(base, got) for k in ("valence", "arousal")), default=0)
    print(f"rows warm-base-1 {len(base)} {other} {len(got)}; same frames {same}; largest V/A difference {diff:.3g}")
PY
(cd $ROOT && PYTHONPATH=$ROOT:/tmp/site EMOPIPE_TEST_ASSETS=$C/assets timeout 200 python3 -m pytest -q -p no:cacheprovider -rs \
  tests/test_cudnn_epilogue.py tests/test_pipeline.py -k "ahead or read_back or depthwise or window or look" > $R/pytest.txt 2>&1)
echo "pytest rc=$?: $(tail -1 $R/pytest.txt)" | tee -a $R/table.txt
cp $R/table.txt $OUT/table-b.txt
(cd $R && tar czf $OUT/s26b-logs.tar.gz *.log pytest.txt)
rm -rf $R
