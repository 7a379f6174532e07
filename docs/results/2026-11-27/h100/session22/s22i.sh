#!/bin/bash
# session 22 (s22i): EmoNet's warm-up profiled (s22i.py) after a process that filled its caches
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl 2>&1 | grep -v "already exists" | tail -2
mkdir -p $OUT/s22i
PYTHONPATH=$ROOT:/tmp/site timeout 120 python3 .gpu/s22i.py plain 2>&1 | tail -2 | tee $OUT/s22i/profile.txt
PYTHONPATH=$ROOT:/tmp/site timeout 120 python3 .gpu/s22i.py plain 2>&1 | tail -2 | tee -a $OUT/s22i/profile.txt
PYTHONPATH=$ROOT:/tmp/site timeout 120 python3 .gpu/s22i.py profile >> $OUT/s22i/profile.txt 2>&1
cut -c1-230 $OUT/s22i/profile.txt | head -75
