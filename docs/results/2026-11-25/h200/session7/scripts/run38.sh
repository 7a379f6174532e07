#!/bin/bash
# 2026-11-25 session 7, call H: the committed detector probe (launch-timed), and EmoNet's engine on the default path.
set -u
cd "$(dirname "$0")/.."
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl 2>&1 | tail -2
export PYTHONPATH=$PWD:/tmp/site
R=$OUT/r38; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
timeout 300 python3 benchmarks/detector_warmup.py --models-dir $PWD/.rw4/blazeface --faces .rw4/faces/4faces.png --rounds 2 --out $R/detector_warmup.json > $R/detector_warmup.txt 2>&1
echo "probe rc=$?"; tail -18 $R/detector_warmup.txt
timeout 200 python3 benchmarks/engine_levers.py --out $R/levers.json --variants fp16-cl-graph-fuse,fp16-cl-graph-fuse > $R/levers.txt 2>&1
echo "levers rc=$?"; tail -8 $R/levers.txt
cd $OUT && tar czf r38.tgz r38 && rm -rf r38
