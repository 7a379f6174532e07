#!/bin/bash
# session 9, call 6 (one GPU): after the many-source fixes (50a7d68, 76fdc17): the GPU tests, and the 64-clip archive
# in one process twice (NVDEC), with --resume after a SIGTERM mid-way: the rows match the uninterrupted run's.
set -u
cd "$(dirname "$0")/.."
C=/root/rc; mkdir -p $C/assets/models $C/assets/data/faces
cp -r .rw4/* $C/; cp -r .rw4/blazeface $C/assets/models/; cp .rw4/faces/*.png $C/assets/data/faces/
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl 2>&1 | grep -v "already exists" | tail -2
export PYTHONPATH=$PWD:/tmp/site
R=$OUT/q6; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt; git log --oneline -1 | cut -c1-80 | tee -a $R/gpu.txt
t0=$(date +%s)
EMOPIPE_TEST_ASSETS=$C/assets timeout 330 python3 -m pytest -q -p no:cacheprovider -rs tests/test_gpu.py tests/test_cudnn_epilogue.py > $R/pytest.txt 2>&1
echo "pytest rc=$? in $(( $(date +%s) - t0 )) s: $(tail -1 $R/pytest.txt)"
grep -a "FAILED" $R/pytest.txt | head
python3 -c "
import sys, shutil; sys.path.insert(0, 'benchmarks'); import synthetic; from pathlib import Path
synthetic.random_checkpoint(Path('$C/w.pth'))
d = Path('$C/clips'); d.mkdir(exist_ok=True)
for i in range(64): shutil.copy('$C/clip10s_720p_h264.mp4', d / f'clip{i:02d}.mp4')"
O="--weights $C/w.pth --detector blazeface_back --models-dir $C/blazeface --no-progress"
one() {
  local t0=$(date +%s.%N)
  timeout 120 python3 -m emopipe $C/clips -o /tmp/one$1 $O > $R/one$1.txt 2>&1
  echo "one process $1: rc=$? wall=$(python3 -c "print(round($(date +%s.%N)-$t0,1))") s; $(tail -1 $R/one$1.txt | cut -c1-150)"
}
one 1; one 2
timeout 120 python3 -m emopipe $C/clips -o /tmp/cut $O > $R/cut.txt 2>&1 &
P=$!; for i in $(seq 1 200); do sleep 0.1; [ $(grep -c "^emopipe: ok" $R/cut.txt) -ge 20 ] && break; done
kill -TERM $P; wait $P; rc=$?; echo "SIGTERM after $(grep -c '^emopipe: ok' $R/cut.txt) ok: rc=$rc"
timeout 120 python3 -m emopipe $C/clips -o /tmp/cut --resume $O > $R/resume.txt 2>&1; echo "resume rc=$?; $(tail -1 $R/resume.txt | cut -c1-150)"
python3 - <<'PY' | tee $R/compare.txt
from pathlib import Path
a, b = Path("/tmp/one1"), Path("/tmp/cut")
files = sorted(p.name for p in a.glob("*.emotions.csv"))
same = sum((a / f).read_bytes() == (b / f).read_bytes() for f in files)
count = lambda d: sum(len((d / f).read_text().splitlines()) - 1 for f in files)
print(f"resumed run: {len(files)} rows files ({len(list(b.glob('*.emotions.csv')))} there), {same} byte-identical to "
      f"the uninterrupted run's; rows {count(b)} against {count(a)}; partial files left:", len(list(b.glob("*.partial"))))
PY
cp /tmp/one1/summary.json $R/one1-summary.json; cp /tmp/cut/manifest.jsonl $R/cut-manifest.jsonl
cd $OUT && tar czf q6.tgz q6 && rm -rf q6
