#!/bin/bash
set -u
cd "$(dirname "$0")/.."
[ -d /tmp/site/PyNvVideoCodec ] || python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl 2>&1 | tail -2
export PYTHONPATH=$PWD:/tmp/site
R=$OUT/r25; mkdir -p $R
timeout 100 python3 .gpu/fmt.py .rw7/mixed 2>&1 | grep -v "^1[0-8]_" | tee $R/fmt.txt
[ -f /tmp/w.pth ] || python3 -c "import sys; from pathlib import Path; sys.path.insert(0, 'benchmarks'); from synthetic import random_checkpoint; random_checkpoint(Path('/tmp/w.pth'))"
mkdir -p /tmp/ten && ln -sf $PWD/.rw7/mixed/03_g_720p_hevc10.mp4 /tmp/ten/ && ln -sf $PWD/.rw7/mixed/20_face_hevc10.mp4 /tmp/ten/
timeout 150 python3 -m emopipe /tmp/ten -o /tmp/o-ten --weights /tmp/w.pth --detector blazeface_back --models-dir .rw4/blazeface --no-progress --debug > $R/ten.txt 2>&1
echo "ten rc=$?"; grep -a -v "DEBUG" $R/ten.txt | tail -30
