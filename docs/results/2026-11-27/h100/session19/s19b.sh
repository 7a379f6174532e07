#!/bin/bash
# session 19: main's head (.gpu/base19) against this session's tree — (1) start-up of a one-clip command: the GIL
# switch interval kept short while the models load and warm (quick_handoff), and the same without the two helper
# threads (.gpu/nothr19: no Triton key hashed ahead, no ruptures imported ahead); (2) a fleet of paced cameras in one
# process: the batch's host frames gathered in one PyTorch copy (stack_frames) instead of np.stack.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
PART=${1:-all}
C=/root/rc; mkdir -p $C
cp -n .rw4/clip10s_720p_h264.mp4 $C/ 2>/dev/null
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rwF/*.whl .rw4/pynvvideocodec*.whl 2>&1 | grep -v "already exists" | tail -2
SPY=/tmp/site/bin/py-spy
R=$OUT/s19b-$PART; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/table.txt
PYTHONPATH=$ROOT:/tmp/site python3 -c "
import sys, shutil; sys.path.insert(0, 'benchmarks'); import synthetic; from pathlib import Path
synthetic.random_checkpoint(Path('$C/w.pth'))
d = Path('$C/one'); d.mkdir(exist_ok=True); shutil.copy('$C/clip10s_720p_h264.mp4', d / 'clip.mp4')"
O="--weights $C/w.pth --detector blazeface_back --models-dir $ROOT/.rwF/blazeface --no-progress"
B=$ROOT/.gpu/base19; N=$ROOT; T0=$ROOT/.gpu/nothr19
startup() {  # label, tree
  rm -rf /tmp/o; local t0=$(date +%s.%N)
  (cd $2 && PYTHONPATH=$2:/tmp/site timeout 150 python3 -m emopipe $C/one -o /tmp/o $O > $R/$1.log 2>&1); local rc=$?
  echo "$1: rc=$rc wall=$(python3 -c "print(round($(date +%s.%N)-$t0,2))") s; $(python3 -c "
import json; s=json.load(open('/tmp/o/summary.json')); st = (s.get('pipeline') or {}).get('startup') or {}
print(' '.join(f'{k[:-2]}={st[k]:.2f}' for k in ('before_load_s', 'load_s', 'engine_warmup_s', 'detector_warmup_s', 'first_row_s')))" 2>&1 | tail -1)" | tee -a $R/table.txt
}
fleet() {  # label, tree, counts...
  local label=$1 tree=$2; shift 2
  local t0=$(date +%s)
  (cd $tree && PYTHONPATH=$tree:/tmp/site timeout 200 python3 benchmarks/fleet.py --models-dir $ROOT/.rwF/blazeface --out $R/$label --counts "$@" --seconds 15 > $R/$label.txt 2>&1)
  echo "== $label (rc=$?, $(( $(date +%s) - t0 )) s)" | tee -a $R/table.txt
  find $R/$label -name "*.csv" -delete
  grep -A5 "^cameras" $R/$label.txt | grep -v "^---\|^target" | tee -a $R/table.txt
}
if [ $PART = all ] || [ $PART = startup ]; then
  startup first-new $N; startup first-base $B
  for i in 1 2 3; do startup base-$i $B; startup new-$i $N; startup nothreads-$i $T0; done
fi
if [ $PART = all ] || [ $PART = fleet ]; then
  fleet fleet-base-1 $B 32; fleet fleet-new-1 $N 32 36 40; fleet fleet-base-2 $B 32; fleet fleet-new-2 $N 32 36 40
  [ $SECONDS -lt 380 ] && (cd $N && PYTHONPATH=$N:/tmp/site timeout 90 $SPY record --idle --threads --nonblocking -r 100 -f raw \
    -o $R/spy-fleet-new.txt -- python3 benchmarks/fleet.py --models-dir $ROOT/.rwF/blazeface --out $R/fleet-spy --counts 32 --seconds 15 > $R/fleet-spy.txt 2>&1)
fi
cp $R/table.txt $OUT/table-$PART.txt; tar czf $OUT/s19b-$PART.tgz -C $OUT s19b-$PART && rm -rf $R; ls -la $OUT
