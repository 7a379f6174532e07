#!/bin/bash
# 2026-11-25 session 7, call F (a fresh machine): the GPU test files with the accuracy guard's new criterion
# (every clear decision kept, ≥ 99 % overall), then the camera fleet benchmark (16 and 24 cameras).
set -u
cd "$(dirname "$0")/.."
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl 2>&1 | tail -2
export PYTHONPATH=$PWD:/tmp/site
A=/tmp/assets; mkdir -p $A/models $A/data/faces; cp -r .rw4/blazeface $A/models/; cp .rw4/faces/*.png $A/data/faces/
R=$OUT/r36; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
t0=$(date +%s)
EMOPIPE_TEST_ASSETS=$A timeout 300 python3 -m pytest -q -p no:cacheprovider -rs tests/test_gpu.py tests/test_cudnn_epilogue.py > $R/pytest.txt 2>&1
echo "pytest rc=$? in $(( $(date +%s) - t0 )) s: $(tail -1 $R/pytest.txt)"
EMOPIPE_TEST_ASSETS=$A timeout 200 python3 -m pytest -q -p no:cacheprovider -s tests/test_gpu.py -k fast_path > $R/accuracy.txt 2>&1
python3 - <<'PY' >> $R/accuracy.txt 2>&1
import cv2, torch
from pathlib import Path
from emopipe.engines.accuracy import compare_precisions, face_photos, jittered_crops
from emopipe.model.emonet import build_emonet
from tests.support.checkpoints import calibrated_state
extra = [(cv2.cvtColor(cv2.imread(str(p)), cv2.COLOR_BGR2RGB), None) for p in sorted(Path("/tmp/assets/data/faces").glob("*.png"))]
photos = face_photos([(im, (0, 0, im.shape[1], im.shape[0])) for im, _ in extra])
net = build_emonet(calibrated_state(8, jittered_crops(photos, 64, seed=1)))
for r in compare_precisions(net, jittered_crops(photos, 512, seed=2), ["fp16", "bf16"], device="cuda", batch_size=64):
    print(r.describe())
PY
grep -a "agreement" $R/accuracy.txt
timeout 200 python3 benchmarks/fleet.py --models-dir $A/models/blazeface --counts 16 24 --seconds 15 --out /tmp/fleet > $R/fleet.txt 2>&1
echo "fleet rc=$?"; tail -6 $R/fleet.txt
cp -r /tmp/fleet $R/fleet 2>/dev/null
cd $OUT && tar czf r36.tgz r36 && rm -rf r36
