#!/bin/bash
# session 27 (s27g): where a warm one-process start goes with PyTorch's bytecode kept (the tree as it is): a priming
# command (fills <cache>/python), three warm commands (summary's startup phases), one under py-spy (speedscope, 200
# samples/s, idle included) folded into a timeline of the main thread, `-X importtime` of the command's imports.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
C=/root/rc; mkdir -p $C
cp -r .rw4/blazeface $C/
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl .rwF/*.whl 2>&1 | grep -v "already exists" | tail -2
R=$OUT/s27g; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/table.txt
PYTHONPATH=/tmp/site python3 -c "
import sys; sys.path.insert(0, 'benchmarks'); import synthetic; from pathlib import Path
synthetic.random_checkpoint(Path('$C/w.pth'))"
mkdir -p /tmp/here; cd /tmp/here
O="--weights $C/w.pth --detector blazeface_back --models-dir $C/blazeface --no-progress"
one() {  # label [prefix...]
  local label=$1; shift
  rm -rf /tmp/o1; mkdir -p /tmp/o1; local t0=$(date +%s.%N)
  (PYTHONPATH=$ROOT:/tmp/site timeout 150 "$@" -m emopipe $ROOT/.rw4/clip10s_720p_h264.mp4 \
    -o /tmp/o1/rows.csv $O > $R/$label.log 2>&1)
  local rc=$?
  local wall=$(python3 -c "print(round($(date +%s.%N)-$t0,2))")
  echo "$label: rc=$rc wall=$wall s $(python3 -c "
import json; s=json.load(open('/tmp/o1/rows.summary.json')); st=s['startup']
print({k: (round(v, 2) if isinstance(v, float) else v) for k, v in st.items() if k.endswith('_s')}, 'fps', round(s.get('fps') or 0))" 2>&1 | tail -1)" | tee -a $R/table.txt
}
one first python3
for i in 1 2 3; do one warm-$i python3; done
one spy /tmp/site/bin/py-spy record --idle --threads --nonblocking -r 200 -f speedscope -o $R/spy.json -- python3
python3 $ROOT/.gpu/s23_timeline.py $R/spy.json 0.1 '""' > $R/timeline.txt 2>&1; head -90 $R/timeline.txt >> $R/table.txt
(env -u PYTHONDONTWRITEBYTECODE PYTHONPYCACHEPREFIX=$ROOT/models/cache/python PYTHONPATH=$ROOT:/tmp/site \
  python3 -X importtime -c "import emopipe.cli.run, torch, cv2, ruptures, face_alignment" 2> $R/importtime.txt)
echo "== -X importtime, bytecode kept: largest cumulative" >> $R/table.txt
sort -t'|' -k2 -n $R/importtime.txt | tail -25 | cut -c1-120 >> $R/table.txt
cp $R/table.txt $OUT/table-g.txt
(cd $R && tar czf $OUT/s27g-logs.tar.gz *.log spy.json timeline.txt importtime.txt)
rm -rf $R
