#!/bin/bash
# session 10, call 3 (one GPU): the session's fixes on the GPU — the GPU tests, the 64-clip archive twice, a fleet of
# 16 and 28 in-process 720p30 cameras (the fleet's finishing and capture changes), one clip's start-up.
set -u
cd "$(dirname "$0")/.."
C=/root/rc; mkdir -p $C/assets/models $C/assets/data/faces
cp -r .rw4/* $C/; cp -r .rw4/blazeface $C/assets/models/; cp .rw4/faces/*.png $C/assets/data/faces/
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl 2>&1 | grep -v "already exists" | tail -2
export PYTHONPATH=$PWD:/tmp/site
R=$OUT/s10c; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
t0=$(date +%s)
EMOPIPE_TEST_ASSETS=$C/assets timeout 300 python3 -m pytest -q -p no:cacheprovider -rs tests/test_gpu.py tests/test_cudnn_epilogue.py tests/test_nvdec.py > $R/pytest.txt 2>&1
echo "pytest rc=$? in $(( $(date +%s) - t0 )) s: $(tail -1 $R/pytest.txt)"
grep -a "FAILED" $R/pytest.txt | head
python3 -c "
import sys, shutil; sys.path.insert(0, 'benchmarks'); import synthetic; from pathlib import Path
synthetic.random_checkpoint(Path('$C/w.pth'))
d = Path('$C/clips'); d.mkdir(exist_ok=True)
for i in range(64): shutil.copy('$C/clip10s_720p_h264.mp4', d / f'clip{i:02d}.mp4')"
O="--weights $C/w.pth --detector blazeface_back --models-dir $C/blazeface --no-progress"
for i in 1 2; do
  t0=$(date +%s.%N)
  timeout 150 python3 -m emopipe $C/clips -o /tmp/arch$i $O > $R/arch$i.txt 2>&1; rc=$?
  python3 - "$i" "$rc" "$t0" <<'PY' | tee -a $R/table.txt
import json, sys, time, pathlib
i, rc, t0 = sys.argv[1:4]
s = json.load(open(f"/tmp/arch{i}/summary.json")); p = s["pipeline"]
n = len(list(pathlib.Path(f"/tmp/arch{i}").glob("*.tracks.csv")))
print(f"archive {i}: rc={rc} wall={time.time() - float(t0):.1f} s ok={s['ok']} pipeline {p['fps']:.0f} frames/s, "
      f"{n} tracks files, first row {p['startup'].get('first_row_s')}")
PY
done
t0=$(date +%s.%N); timeout 60 python3 -m emopipe $C/clip10s_720p_h264.mp4 -o /tmp/one.csv $O > $R/one.txt 2>&1
echo "one clip: rc=$? wall=$(python3 -c "print(round($(date +%s.%N)-$t0,1))") s" | tee -a $R/table.txt
timeout 200 python3 benchmarks/fleet.py --models-dir $C/blazeface --counts 16 28 --seconds 15 --out $R/fleet > $R/fleet.txt 2>&1
echo "fleet rc=$?"; tail -6 $R/fleet.txt
cat $R/table.txt
