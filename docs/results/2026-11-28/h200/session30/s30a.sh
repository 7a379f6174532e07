#!/bin/bash
# session 30 (s30a): where a warm command's time goes on the head (4512f84): the loan's very first command, warm
# commands, py-spy over warm commands (every thread; once with native frames), the imports' own times
# (-X importtime), and s30_read.py: reading the plans back before PyTorch's import, what it costs and whether it
# lets other threads run, and PyTorch's first convolutions with and without cuDNN loaded ahead.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
C=/root/rc; mkdir -p $C
cp -r .rw4/blazeface $C/
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl .rwF/*.whl 2>&1 | grep -v "already exists" | tail -2
R=$OUT/s30a; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/table.txt
PYTHONPATH=/tmp/site python3 -c "
import sys; sys.path.insert(0, 'benchmarks'); import synthetic; from pathlib import Path
synthetic.random_checkpoint(Path('$C/w.pth'))"
mkdir -p /tmp/here; cd /tmp/here
O="--weights $C/w.pth --detector blazeface_back --models-dir $C/blazeface --no-progress"
one() {  # label [launcher...]
  local label=$1; shift
  rm -rf /tmp/o1; mkdir -p /tmp/o1; local t0=$(date +%s.%N)
  (PYTHONPATH=$ROOT:/tmp/site timeout 150 "$@" python3 $PYX -m emopipe $ROOT/.rw4/clip10s_720p_h264.mp4 \
    -o /tmp/o1/rows.csv $O > $R/$label.log 2>&1)
  local rc=$?
  local wall=$(python3 -c "print(round($(date +%s.%N)-$t0,2))")
  echo "$label: rc=$rc wall=$wall s $(python3 -c "
import json; s=json.load(open('/tmp/o1/rows.summary.json')); st=s['startup']
print({k: (round(v, 2) if isinstance(v, float) else v) for k, v in st.items() if k.endswith('_s')}, 'fps', round(s.get('fps') or 0), 'faces', s.get('faces'))" 2>&1 | tail -1) | $(grep -h "built\|waited" $R/$label.log | tr '\n' ' ')" | tee -a $R/table.txt
}
PYX=""
one loan-first; one warm-1; one warm-2
echo "== s30_read.py: frontend first / PyTorch first (fresh processes)" | tee -a $R/table.txt
for i in 1 2; do
  PYTHONPATH=$ROOT:/tmp/site timeout 100 python3 $ROOT/.gpu/s30_read.py $C/blazeface/cache/cudnn 2>&1 | tail -3 | tee -a $R/table.txt
  PYTHONPATH=$ROOT:/tmp/site timeout 100 python3 $ROOT/.gpu/s30_read.py $C/blazeface/cache/cudnn torchfirst 2>&1 | tail -3 | tee -a $R/table.txt
done
SPY="/tmp/site/bin/py-spy record --idle --threads --nonblocking -r 200 -f speedscope -o"
one spy-warm $SPY $R/spy-warm.json --
python3 $ROOT/.gpu/s30_timeline.py $R/spy-warm.json 0.1 '' > $R/timeline-warm.txt 2>&1
echo "== every thread, warm" >> $R/table.txt
awk '/^== Thread/{n=0} {n++; if (n<=70) print}' $R/timeline-warm.txt | cut -c1-260 >> $R/table.txt
SPYN="/tmp/site/bin/py-spy record --idle --threads --native -r 200 -f speedscope -o"
one spy-native $SPYN $R/spy-native.json --
python3 $ROOT/.gpu/s30_timeline.py $R/spy-native.json 0.1 MainThread > $R/timeline-native.txt 2>&1
python3 $ROOT/.gpu/s30_timeline.py $R/spy-native.json 0.1 '' > $R/timeline-native-all.txt 2>&1
echo "== main thread, warm, native frames" >> $R/table.txt
head -80 $R/timeline-native.txt | cut -c1-260 >> $R/table.txt
PYX="-X importtime"; one importtime; PYX=""
echo "== -X importtime: the 40 largest cumulative imports (us)" >> $R/table.txt
grep "import time:" $R/importtime.log | awk -F'|' '{gsub(/ /,"",$2); print $2, $3}' | sort -n -r | head -40 >> $R/table.txt
for i in 3 4 5; do one warm-$i; done
cp $R/table.txt $OUT/table-a.txt
(cd $R && tar czf $OUT/s30a-logs.tar.gz *.log *.json timeline*.txt)
rm -rf $R
