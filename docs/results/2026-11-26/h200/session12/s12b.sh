#!/bin/bash
# session 12, call 2 (one GPU): EmoNet and detector warm-ups serial against overlapped on two threads, 4 pairs, one
# variant per process; the steady-state time of each engine after (did autotuning beside other work pick worse?).
set -u
cd "$(dirname "$0")/.."
C=/root/rc; mkdir -p $C
cp -r .rw4/* $C/
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl 2>&1 | grep -v "already exists" | tail -2
export PYTHONPATH=$PWD:/tmp/site
R=$OUT/s12b; mkdir -p $R
python3 -c "
import sys; sys.path.insert(0, 'benchmarks'); import synthetic; from pathlib import Path
synthetic.random_checkpoint(Path('$C/w.pth'))"
python3 docs/results/2026-11-26/h200/session12/s12b.py serial $C/w.pth $C/blazeface > /dev/null 2>&1  # warm the machine (files, driver caches)
for i in 1 2 3 4; do for v in serial overlap; do
  timeout 120 python3 docs/results/2026-11-26/h200/session12/s12b.py $v $C/w.pth $C/blazeface 2> $R/$v-$i.err | tee -a $R/table.txt
  [ -s $R/table.txt ] || tail -5 $R/$v-$i.err
done; done
