#!/bin/bash
# session 10, call 1 (one GPU): per-source tracks/segments in many-source runs (HEAD) against 25414de (.gpu/base),
# the 64-clip archive in one process, interleaved; then the GPU tests on HEAD.
set -u
cd "$(dirname "$0")/.."
C=/root/rc; mkdir -p $C/assets/models $C/assets/data/faces
cp -r .rw4/* $C/; cp -r .rw4/blazeface $C/assets/models/; cp .rw4/faces/*.png $C/assets/data/faces/
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl 2>&1 | grep -v "already exists" | tail -2
R=$OUT/s10a; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
python3 -c "import torch; print(torch.__version__, torch.backends.cudnn.version())" | tee -a $R/gpu.txt
PYTHONPATH=$PWD:/tmp/site python3 -c "
import sys, shutil; sys.path.insert(0, 'benchmarks'); import synthetic; from pathlib import Path
synthetic.random_checkpoint(Path('$C/w.pth'))
d = Path('$C/clips'); d.mkdir(exist_ok=True)
for i in range(64): shutil.copy('$C/clip10s_720p_h264.mp4', d / f'clip{i:02d}.mp4')"
O="--weights $C/w.pth --detector blazeface_back --models-dir $C/blazeface --no-progress"
run() {  # $1 name, $2 code root
  local t0=$(date +%s.%N)
  PYTHONPATH=$2:/tmp/site timeout 150 python3 -m emopipe $C/clips -o /tmp/$1 $O > $R/$1.txt 2>&1
  local rc=$?
  python3 - "$1" "$rc" "$t0" <<'PY' | tee -a $R/table.txt
import json, sys, time
name, rc, t0 = sys.argv[1], sys.argv[2], float(sys.argv[3])
s = json.load(open(f"/tmp/{name}/summary.json"))
p = s.get("pipeline", {})
n = len(list(__import__("pathlib").Path(f"/tmp/{name}").glob("*.tracks.csv")))
print(f"{name:8s} rc={rc} wall={time.time() - t0:5.1f} s summary wall_s={s.get('wall_s')} ok={s.get('ok')} "
      f"pipeline fps={p.get('fps')} tracks files={n}")
PY
}
run base1 $PWD/.gpu/base; run head1 $PWD; run base2 $PWD/.gpu/base; run head2 $PWD; run base3 $PWD/.gpu/base; run head3 $PWD
grep -a -i "warn" $R/head1.txt | head -3
head -3 /tmp/head1/clip00.emotions.tracks.csv | cut -c1-300 > $R/tracks-sample.txt; wc -l /tmp/head1/clip00.emotions.segments.csv >> $R/tracks-sample.txt
cmp /tmp/head1/clip05.emotions.csv /tmp/base1/clip05.emotions.csv && echo "clip05 rows identical base/head" | tee -a $R/table.txt
t0=$(date +%s)
PYTHONPATH=$PWD:/tmp/site EMOPIPE_TEST_ASSETS=$C/assets timeout 300 python3 -m pytest -q -p no:cacheprovider -rs tests/test_gpu.py tests/test_cudnn_epilogue.py tests/test_nvdec.py > $R/pytest.txt 2>&1
echo "pytest rc=$? in $(( $(date +%s) - t0 )) s: $(tail -1 $R/pytest.txt)"
grep -a "FAILED" $R/pytest.txt | head
cat $R/table.txt
