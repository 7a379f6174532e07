#!/bin/bash
# session 26 (s26f): H100. ConvReLU's and ConvAddReLU's convolutions (EmoNet's and BlazeFace's) through cuDNN plans of
# the plan folder: the GPU tests, then base (7f36f51's engine code) against new, interleaved, in fresh processes:
# warm-up seconds and steady speed (s26_speed.py), and whole one-clip commands (caches warm).
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
C=/root/rc; mkdir -p $C/assets/models $C/assets/data/faces
cp -r .rw4/blazeface $C/; cp -r .rw4/blazeface $C/assets/models/; cp .rw4/faces/*.png $C/assets/data/faces/
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl 2>&1 | grep -v "already exists" | tail -2
R=$OUT/s26f; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/table.txt
PYTHONPATH=/tmp/site python3 -c "
import sys; sys.path.insert(0, 'benchmarks'); import synthetic; from pathlib import Path
synthetic.random_checkpoint(Path('$C/w.pth'))"
(PYTHONPATH=$ROOT:/tmp/site EMOPIPE_TEST_ASSETS=$C/assets timeout 150 python3 -m pytest -q -p no:cacheprovider -rs \
  tests/test_cudnn_epilogue.py tests/test_gpu.py -k "fused or fast_path or blazeface or graph or epilogue or plan" \
  > $R/pytest.txt 2>&1)
echo "pytest rc=$?: $(tail -1 $R/pytest.txt)" | tee -a $R/table.txt
grep -a "FAILED\|Error" $R/pytest.txt | head -5 | tee -a $R/table.txt
mkdir -p /tmp/here; cd /tmp/here
tree() { [ "$1" = base ] && echo "$ROOT/.gpu/trees/base" || echo "$ROOT"; }
speed() { PYTHONPATH=$(tree $1):/tmp/site timeout 120 python3 $ROOT/.gpu/s26_speed.py $C/w.pth $C/blazeface $1 2>$R/speed-$1-$2.err | tail -1 | tee -a $R/table.txt; }
speed base 0  # (plans and kernels built; not compared)
speed new 0
for i in 1 2 3; do speed base $i; speed new $i; done
O="--weights $C/w.pth --detector blazeface_back --models-dir $C/blazeface --no-progress"
one() {  # label tree
  rm -rf /tmp/o1; mkdir -p /tmp/o1; local t0=$(date +%s.%N)
  (PYTHONPATH=$(tree $2):/tmp/site timeout 150 python3 -m emopipe $ROOT/.rw4/clip10s_720p_h264.mp4 \
    -o /tmp/o1/rows.csv $O > $R/$1.log 2>&1)
  local rc=$? wall=$(python3 -c "print(round($(date +%s.%N)-$t0,2))")
  cp /tmp/o1/rows.csv $R/$1.csv 2>/dev/null
  echo "$1: rc=$rc wall=$wall s $(python3 -c "
import json; s=json.load(open('/tmp/o1/rows.summary.json')); st=s['startup']
print({k: (round(v, 2) if isinstance(v, float) else v) for k, v in st.items() if k.endswith('_s')}, 'fps', round(s.get('fps') or 0))" 2>&1 | tail -1)" | tee -a $R/table.txt
}
for i in 1 2 3; do one warm-base-$i base; one warm-new-$i new; done
python3 - "$R" <<'PY' | tee -a $R/table.txt
import csv, sys
R = sys.argv[1]
def rows(name):
    with open(f"{R}/{name}.csv") as f:
        return list(csv.DictReader(f))
base, new = rows("warm-base-1"), rows("warm-new-1")
same = [r["frame"] for r in base] == [r["frame"] for r in new]
diff = max(abs(float(a[k]) - float(b[k])) for a, b in zip(base, new) for k in ("valence", "arousal"))
box = max(abs(float(a[k]) - float(b[k])) for a, b in zip(base, new) for k in ("x1", "y1", "x2", "y2"))
print(f"rows base {len(base)} new {len(new)}; same frames {same}; largest box difference {box:.3g} px; "
      f"largest V/A difference {diff:.3g}")
PY
grep -a "cuDNN plan unavailable" $R/warm-new-1.log | head -3 | tee -a $R/table.txt
cp $R/table.txt $OUT/table-f.txt
(cd $R && tar czf $OUT/s26f-logs.tar.gz *.log *.err pytest.txt)
rm -rf $R
