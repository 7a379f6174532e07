#!/bin/bash
# 2026-11-25 session 7, call J: benchmarks/accuracy.py on CUDA (a random checkpoint; its verdicts and exit codes).
set -u
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD
R=$OUT/r40; mkdir -p $R
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/gpu.txt
python3 -c "import sys; sys.path.insert(0, 'benchmarks'); import synthetic; from pathlib import Path; synthetic.random_checkpoint(Path('/tmp/w.pth'))"
timeout 200 python3 benchmarks/accuracy.py --weights /tmp/w.pth --faces-dir .rw4/faces --precisions fp16,bf16 --json $R/random.json > $R/random.txt 2>&1
echo "random rc=$?"; cat $R/random.txt
python3 -c "
import torch; s = torch.load('/tmp/w.pth', weights_only=True); s['module.conv1.weight'] = s['module.conv1.weight'] * 1e6; torch.save(s, '/tmp/overflows.pth')"
timeout 200 python3 benchmarks/accuracy.py --weights /tmp/overflows.pth --faces-dir .rw4/faces --faces 128 > $R/overflows.txt 2>&1
echo "overflows rc=$?"; cat $R/overflows.txt
cd $OUT && tar czf r40.tgz r40 && rm -rf r40
