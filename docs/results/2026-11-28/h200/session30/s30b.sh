#!/bin/bash
# session 30 (s30b): EmoNet's and BlazeFace's other convolutions through kept cuDNN plans ("new": the working tree)
# against 4512f84 ("head", .gpu/trees/head): (1) the recipes recorded again; (2) steady speed (EmoNet b64, the
# detector's 32 frames of 720p) and the warm-ups, fresh processes, alternated; (3) warm one-clip commands,
# interleaved pairs, rows compared; (4) the very first command emulated, interleaved pairs.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
C=/root/rc; mkdir -p $C
cp -r .rw4/blazeface $C/
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl 2>&1 | grep -v "already exists" | tail -2
R=$OUT/s30b; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/table.txt
PYTHONPATH=/tmp/site python3 -c "
import sys; sys.path.insert(0, 'benchmarks'); import synthetic; from pathlib import Path
synthetic.random_checkpoint(Path('$C/w.pth'))"
(PYTHONPATH=$ROOT:/tmp/site timeout 300 python3 benchmarks/record_plan_recipes.py --models-dir $C/blazeface > $R/record.log 2>&1; echo "record rc=$?") | tee -a $R/table.txt
tail -5 $R/record.log | tee -a $R/table.txt
cp emopipe/model/plan_recipes.json $OUT/plan_recipes.json
python3 -c "
import json; d=json.load(open('emopipe/model/plan_recipes.json'))['recipes']; print({k: len(v) for k, v in d.items()})" | tee -a $R/table.txt
tree() { [ $1 = new ] && echo $ROOT || echo $ROOT/.gpu/trees/head; }
empty() { rm -rf /root/.nv /root/.triton $C/blazeface/cache $ROOT/models/cache/python /root/.cache/emopipe/cache/python; }
mkdir -p /tmp/here; cd /tmp/here
O="--weights $C/w.pth --detector blazeface_back --models-dir $C/blazeface --no-progress"
one() {  # label tree
  local label=$1 t=$(tree $2)
  rm -rf /tmp/o1; mkdir -p /tmp/o1; local t0=$(date +%s.%N)
  (PYTHONPATH=$t:/tmp/site timeout 150 python3 -m emopipe $ROOT/.rw4/clip10s_720p_h264.mp4 \
    -o /tmp/o1/rows.csv $O > $R/$label.log 2>&1)
  local rc=$?
  local wall=$(python3 -c "print(round($(date +%s.%N)-$t0,2))")
  cp /tmp/o1/rows.csv $R/$label.csv 2>/dev/null
  echo "$label: rc=$rc wall=$wall s $(python3 -c "
import json; s=json.load(open('/tmp/o1/rows.summary.json')); st=s['startup']
print({k: (round(v, 2) if isinstance(v, float) else v) for k, v in st.items() if k.endswith('_s')}, 'fps', round(s.get('fps') or 0), 'faces', s.get('faces'))" 2>&1 | tail -1) | $(grep -h "built\|waited" $R/$label.log | tr '\n' ' ')" | tee -a $R/table.txt
}
echo "== primers (the plan folder as the recording left it)" | tee -a $R/table.txt
one primer-head head; one primer-new new
echo "== steady speed, fresh processes" | tee -a $R/table.txt
for i in 1 2; do for t in new head; do
  PYTHONPATH=$(tree $t):/tmp/site timeout 120 python3 $ROOT/.gpu/s26_speed.py $C/w.pth $C/blazeface $t 2>&1 | tail -1 | tee -a $R/table.txt
done; done
echo "== warm one-clip commands, interleaved" | tee -a $R/table.txt
for i in 1 2 3 4; do one warm-new-$i new; one warm-head-$i head; done
python3 $ROOT/.gpu/s30_rows.py $R/warm-new-1.csv $R/warm-head-1.csv | tee -a $R/table.txt
python3 $ROOT/.gpu/s30_rows.py $R/warm-new-1.csv $R/warm-new-2.csv | tee -a $R/table.txt
echo "== the very first command emulated, interleaved" | tee -a $R/table.txt
for i in 1 2; do empty; one veryfirst-new-$i new; empty; one veryfirst-head-$i head; done
empty; one veryfirst-new-3 new
for i in 1 2; do one warm-after-new-$i new; done
cp $R/table.txt $OUT/table-b.txt
(cd $R && tar czf $OUT/s30b-logs.tar.gz *.log *.csv)
rm -rf $R
