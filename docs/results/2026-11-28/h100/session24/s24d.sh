#!/bin/bash
# session 24 (s24d): H100. This tree (7b089c7: plans built in builder processes, Triton kernels compiled on threads)
# against main (6d4307e, .rwE/base): its plan and kernel GPU tests, a fresh machine's first command
# emulated (CUDA's compute cache, Triton's and the plan cache emptied before each) in interleaved pairs, one
# cold run of this tree under py-spy, warm pairs, the rows compared.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
C=/root/rc; mkdir -p $C/assets/models $C/assets/data/faces
cp -r .rw4/blazeface $C/; cp -r .rw4/blazeface $C/assets/models/; cp .rw4/faces/*.png $C/assets/data/faces/
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl .rwF/*.whl 2>&1 | grep -v "already exists" | tail -2
R=$OUT/s24d; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/table.txt
t0=$(date +%s)
(PYTHONPATH=$ROOT:/tmp/site EMOPIPE_TEST_ASSETS=$C/assets timeout 420 python3 -m pytest -q -p no:cacheprovider -rs \
  tests/test_cudnn_epilogue.py tests/test_kernels.py > $R/pytest.txt 2>&1)
echo "pytest rc=$? in $(( $(date +%s) - t0 )) s: $(tail -1 $R/pytest.txt)" | tee -a $R/table.txt
grep -a "FAILED\|Error" $R/pytest.txt | head -8 | tee -a $R/table.txt
PYTHONPATH=/tmp/site python3 -c "
import sys; sys.path.insert(0, 'benchmarks'); import synthetic; from pathlib import Path
synthetic.random_checkpoint(Path('$C/w.pth'))"
mkdir -p /tmp/here; cd /tmp/here
O="--weights $C/w.pth --detector blazeface_back --models-dir $C/blazeface --no-progress"
tree() { [ "$1" = base ] && echo "$ROOT/.rwE/base" || echo "$ROOT"; }
one() {  # label tree [prefix...]
  local label=$1 t=$2; shift 2
  rm -rf /tmp/o1; mkdir -p /tmp/o1; local t0=$(date +%s.%N)
  (PYTHONPATH=$(tree $t):/tmp/site timeout 150 "${@:-python3}" -m emopipe $ROOT/.rw4/clip10s_720p_h264.mp4 \
    -o /tmp/o1/rows.csv $O > $R/$label.log 2>&1)
  local rc=$?
  local wall=$(python3 -c "print(round($(date +%s.%N)-$t0,2))")
  cp /tmp/o1/rows.csv $R/$label.csv 2>/dev/null
  echo "$label: rc=$rc wall=$wall s $(python3 -c "
import json; s=json.load(open('/tmp/o1/rows.summary.json')); st=s['startup']
print({k: (round(v, 2) if isinstance(v, float) else v) for k, v in st.items() if k.endswith('_s')}, 'fps', round(s.get('fps') or 0))" 2>&1 | tail -1)" | tee -a $R/table.txt
  grep -a "cuDNN plans:\|plan builder\|Triton" $R/$label.log | sed 's/^/    /' | tee -a $R/table.txt
}
cold() { rm -rf /root/.nv /root/.triton $C/blazeface/cache; }
cold; one cold-base-1 base
cold; one cold-new-1 new
cold; one cold-base-2 base
cold; one cold-new-2 new
cold; one cold-new-spy new /tmp/site/bin/py-spy record --idle --threads --nonblocking -r 100 -f speedscope -o $R/spy-cold-new.json -- python3
python3 $ROOT/.gpu/s23_timeline.py $R/spy-cold-new.json 0.5 '""' > $R/timeline-cold-new.txt 2>&1
echo "  plans on disk: $(ls $C/blazeface/cache/cudnn | wc -l)" | tee -a $R/table.txt
for i in 1 2; do one warm-base-$i base; one warm-new-$i new; done
python3 - <<PY | tee -a $R/table.txt
import csv
def rows(p): return list(csv.DictReader(open(p)))
for a_name, b_name in (('warm-base-1', 'warm-new-1'), ('cold-base-1', 'cold-new-1')):
    a, b = rows(f'$R/{a_name}.csv'), rows(f'$R/{b_name}.csv')
    keys = [k for k in a[0] if k.startswith(('p_', 'valence', 'arousal', 'x1', 'y1', 'x2', 'y2'))]
    d = max(abs(float(r[k]) - float(s[k])) for r, s in zip(a, b) for k in keys)
    print(f"rows {a_name} {len(a)} {b_name} {len(b)}; same frames {[r['frame'] for r in a] == [r['frame'] for r in b]}; "
          f"largest difference {d:.3g}")
PY
cp $R/table.txt $OUT/table-d.txt; cp $R/timeline-cold-new.txt $R/pytest.txt $OUT/
(cd $R && tar czf $OUT/s24d-logs.tar.gz *.log spy-cold-new.json)
rm -rf $R
