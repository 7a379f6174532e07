#!/bin/bash
# session 19: a fleet of paced 720p30 cameras in one process — main's head (.gpu/base19) against this session's tree
# without (.gpu/copy19: the batch's frames gathered in one PyTorch copy, shared out between copier threads) and with
# the live overlap (a batch's detection and EmoNet left in flight while frames wait); one camera's live latency too.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
PART=${1:-all}
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rwF/*.whl 2>&1 | grep -v "already exists" | tail -2
R=$OUT/s19c-$PART; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/table.txt
B=$ROOT/.gpu/base19; K=$ROOT/.gpu/copy19; N=$ROOT
fleet() {  # label, tree, counts...
  local label=$1 tree=$2; shift 2
  local t0=$(date +%s)
  (cd $tree && PYTHONPATH=$tree:/tmp/site timeout 200 python3 benchmarks/fleet.py --models-dir $ROOT/.rwF/blazeface --out $R/$label --counts "$@" --seconds 15 > $R/$label.txt 2>&1)
  echo "== $label (rc=$?, $(( $(date +%s) - t0 )) s)" | tee -a $R/table.txt
  find $R/$label -name "*.csv" -delete
  grep -A5 "^cameras" $R/$label.txt | grep -v "^---\|^target" | tee -a $R/table.txt
}
live() {  # label, tree
  (cd $2 && PYTHONPATH=$2:/tmp/site timeout 120 python3 benchmarks/live_latency.py --models-dir $ROOT/.rwF/blazeface --rates 30 --seconds 15 --out $R/$1 > $R/$1.txt 2>&1)
  echo "== $1 (rc=$?)" | tee -a $R/table.txt; tail -4 $R/$1.txt | tee -a $R/table.txt
}
if [ $PART = all ]; then
  fleet base-a $B 32; fleet new-a $N 32 36 40; fleet copy-a $K 32
  fleet copy-b $K 32; fleet new-b $N 32 36 40; fleet base-b $B 32
  [ $SECONDS -lt 450 ] && { live live-base $B; live live-new $N; }
fi
cp $R/table.txt $OUT/table-$PART.txt; tar czf $OUT/s19c-$PART.tgz -C $OUT s19c-$PART && rm -rf $R; ls -la $OUT
