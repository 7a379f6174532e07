#!/bin/bash
# session 28, the CPU machine (2 cores): (1) importing the command's modules with Python's cycle collector on and off,
# bytecode kept, then compiled afresh; (2) a one-frame command's start-up phases, main's head (BASE, a `git archive`
# of 1b29c6b's emopipe/ and models/) against the tree (the collector off while the command imports), five
# interleaved pairs. Needs VIDEO (a short clip with a face) and WEIGHTS (a random checkpoint, benchmarks/synthetic.py).
#   bash cpu-ab.sh BASE TREE VIDEO WEIGHTS MODELS_DIR
set -u
BASE=$1 TREE=$2 VIDEO=$3 WEIGHTS=$4 MODELS=$5
echo "== (1) import of emopipe.api and emopipe.pipeline.models, s"
for mode in kept compiled; do for i in 1 2 3; do for m in on off; do
  rm -rf /tmp/pyc-$m; prefix=""; [ $mode = compiled ] && prefix="PYTHONPYCACHEPREFIX=/tmp/pyc-$m"
  env $prefix PYTHONPATH=$TREE python3 -c "
import gc, time
t = time.perf_counter()
if '$m' == 'off': gc.disable()
import emopipe.api, emopipe.pipeline.models
print('$mode', '$m', round(time.perf_counter() - t, 3))"
done; done; done
echo "== (2) one frame: before_load_s load_s warmup_s first_row_s"
for i in 1 2 3 4 5; do for t in base new; do
  if [ $t = base ]; then PP=$BASE; else PP=$TREE; fi
  rm -f /tmp/ab-$t.csv /tmp/ab-$t.json
  PYTHONPATH=$PP python3 -m emopipe $VIDEO -o /tmp/ab-$t.csv --summary /tmp/ab-$t.json --weights $WEIGHTS \
    --detector blazeface_back --models-dir $MODELS --device cpu --no-progress --max-frames 1 -q 2>/dev/null
  python3 -c "import json; s=json.load(open('/tmp/ab-$t.json'))['startup']; print('$t', s['before_load_s'], s['load_s'], s['warmup_s'], s['first_row_s'])"
done; done
