#!/bin/bash
# session 29 (s29b): where a very first command's time goes with the plans built from its start: py-spy (all threads,
# idle included) over the very first command emulated, early build on and off; then interleaved triples: on (12
# builders), on with 6 (EMOPIPE_PLAN_BUILDERS=6), off.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
C=/root/rc; mkdir -p $C
cp -r .rw4/blazeface $C/
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl .rwF/*.whl 2>&1 | grep -v "already exists" | tail -2
R=$OUT/s29b; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/table.txt
PYTHONPATH=/tmp/site python3 -c "
import sys; sys.path.insert(0, 'benchmarks'); import synthetic; from pathlib import Path
synthetic.random_checkpoint(Path('$C/w.pth'))"
empty() { rm -rf /root/.nv /root/.triton $C/blazeface/cache $ROOT/models/cache/python /root/.cache/emopipe/cache/python; }
mkdir -p /tmp/here; cd /tmp/here
O="--weights $C/w.pth --detector blazeface_back --models-dir $C/blazeface --no-progress"
one() {  # label mode [launcher...]
  local label=$1 mode=$2; shift 2
  local flag="EMOPIPE_EARLY_PLANS=1"
  [ $mode = off ] && flag="EMOPIPE_EARLY_PLANS=0"
  [ $mode = on6 ] && flag="EMOPIPE_PLAN_BUILDERS=6"
  rm -rf /tmp/o1; mkdir -p /tmp/o1; local t0=$(date +%s.%N)
  (env $flag PYTHONPATH=$ROOT:/tmp/site timeout 150 "$@" python3 -m emopipe $ROOT/.rw4/clip10s_720p_h264.mp4 \
    -o /tmp/o1/rows.csv $O > $R/$label.log 2>&1)
  local rc=$?
  local wall=$(python3 -c "print(round($(date +%s.%N)-$t0,2))")
  echo "$label: rc=$rc wall=$wall s $(python3 -c "
import json; s=json.load(open('/tmp/o1/rows.summary.json')); st=s['startup']
print({k: (round(v, 2) if isinstance(v, float) else v) for k, v in st.items() if k.endswith('_s')}, 'fps', round(s.get('fps') or 0))" 2>&1 | tail -1) | $(grep -h "built\|waited" $R/$label.log | tr '\n' ' ')" | tee -a $R/table.txt
}
SPY="/tmp/site/bin/py-spy record --idle --threads --nonblocking -r 100 -f speedscope -o"
for mode in on off; do
  empty; one spy-$mode $mode $SPY $R/spy-$mode.json --
  python3 $ROOT/.gpu/s23_timeline.py $R/spy-$mode.json 0.2 '' > $R/timeline-$mode.txt 2>&1
  echo "== every thread, very first emulated, early build $mode" >> $R/table.txt
  awk '/^== Thread/{n=0} {n++; if (n<=75) print}' $R/timeline-$mode.txt | cut -c1-240 >> $R/table.txt
done
echo "== the very first command emulated: on / on6 / off" | tee -a $R/table.txt
for i in 1 2 3; do empty; one veryfirst-on-$i on; empty; one veryfirst-on6-$i on6; empty; one veryfirst-off-$i off; done
cp $R/table.txt $OUT/table-b.txt
(cd $R && tar czf $OUT/s29b-logs.tar.gz *.log *.json timeline*.txt)
rm -rf $R
