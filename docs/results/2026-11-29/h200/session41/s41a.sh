#!/bin/bash
# session 41 (s41a): the session's changes on the GPU — `emopipe long.mp4` in one process ends with the tip of
# --processes auto --mps; the GPU out of memory (another process holding all but 2 GiB / 0.3 GiB) exits 10;
# `emopipe report` of 200 synthesized tracks with its charts over the 16 CPUs against a script's (one process);
# then tests/test_gpu.py + tests/test_nvdec.py. The 9-minute video (.rw6) came in a call of its own, to /root/vid;
# imageio-ffmpeg's wheel (.rwF) to /root/iof.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
export PATH=$PATH:/usr/local/nvidia/bin
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/pynvvideocodec*.whl .rw4/nvidia_cudnn*.whl .rw4/face_alignment*.whl 2>&1 | grep -v "already exists" | tail -2
python3 -m pip install -q --no-index --no-deps --target /tmp/iofsite /root/iof/*.whl 2>&1 | tail -2
R=$OUT/s41a; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,compute_mode --format=csv,noheader | tee $R/table.txt
C=/root/rc; mkdir -p $C; cp -r .rw4/blazeface $C/
PYTHONPATH=/tmp/site python3 -c "
import sys; sys.path.insert(0, 'benchmarks'); import synthetic; from pathlib import Path
synthetic.random_checkpoint(Path('$C/w.pth'))"
O="--weights $C/w.pth --detector blazeface_back --models-dir $C/blazeface --no-progress"
V=/root/vid/video540s_720p_1face_h264.mp4
export PYTHONPATH=$ROOT:/tmp/site
mkdir -p /tmp/o; cd /tmp/o
secs() { python3 -c "print(round($(date +%s.%N)-$1,2))"; }

echo "== A. one long video in one process: its tip" | tee -a $R/table.txt
python3 -m emopipe $ROOT/.rw4/clip10s_720p_h264.mp4 -o /tmp/o/prime.csv $O > $R/prime.log 2>&1; echo "prime: rc=$?" | tee -a $R/table.txt
t0=$(date +%s.%N); python3 -m emopipe $V -o /tmp/o/single.csv $O > $R/single.log 2>&1; rc=$?
echo "single 9-minute video: rc=$rc wall=$(secs $t0) s" | tee -a $R/table.txt
grep -h "tip:\|frames/s" $R/single.log | head -3 | sed 's/^/   log: /' | tee -a $R/table.txt

echo "== B. the GPU out of memory: another process holds all but N GiB" | tee -a $R/table.txt
for left in 2 0.3; do
  rm -f /tmp/held; python3 -c "
import time, torch
free, total = torch.cuda.mem_get_info()
x = torch.empty(int(free - $left * 2**30), dtype=torch.uint8, device='cuda')
open('/tmp/held', 'w').write(str(round(x.numel() / 2**30, 1)))
time.sleep(100)" > $R/hog$left.log 2>&1 &
  hog=$!
  for i in $(seq 200); do [ -f /tmp/held ] && break; sleep 0.2; done
  python3 -m emopipe $ROOT/.rw4/clip10s_720p_h264.mp4 -o /tmp/o/oom$left.csv $O > $R/oom$left.log 2>&1; rc=$?
  echo "left $left GiB (held $(cat /tmp/held 2>/dev/null) GiB): rc=$rc" | tee -a $R/table.txt
  grep -h "error" $R/oom$left.log | head -2 | cut -c1-400 | sed 's/^/   log: /' | tee -a $R/table.txt
  kill $hog; wait $hog 2>/dev/null
done

echo "== C. emopipe report of 200 tracks (327 041 rows): charts over the CPUs vs one process" | tee -a $R/table.txt
python3 - <<'PY'
import numpy as np, csv
rng = np.random.default_rng(0)
labels = ["neutral", "happy", "sad", "surprise", "fear", "disgust", "anger", "contempt"]
rows = []
for t in range(1, 201):
    start = rng.integers(0, 20000); n = rng.integers(60, 3000)
    for fr in range(start, start + n):
        p = rng.dirichlet(np.ones(8)); v, a = rng.uniform(-1, 1, 2)
        rows.append((fr, t, p, v, a))
rows.sort(key=lambda r: (r[0], r[1]))
with open("/tmp/o/many.emotions.csv", "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["source", "frame", "timestamp_s", "track_id", "x1", "y1", "x2", "y2", "score", "label"]
               + [f"p_{l}" for l in labels] + ["valence", "arousal"])
    for fr, t, p, v, a in rows:
        w.writerow(["talk.mp4", fr, f"{fr / 30:.6f}", t, 1, 2, 50, 60, 0.9, labels[int(p.argmax())]]
                   + [f"{x:.6f}" for x in p] + [f"{v:.6f}", f"{a:.6f}"])
PY
cat > /tmp/o/serial.py <<'PY'
from emopipe.report.outputs import write_report
from emopipe.report.rows import read_records
write_report(read_records("/tmp/o/many.emotions.csv"), "/tmp/o/serial.html", thumbnails=False)
PY
t0=$(date +%s.%N); python3 -m emopipe report many.emotions.csv -o /tmp/o/parallel.html --no-thumbnails > $R/report.log 2>&1; rc=$?
echo "emopipe report (charts over $(nproc) CPUs): rc=$rc wall=$(secs $t0) s; $(tail -1 $R/report.log)" | tee -a $R/table.txt
t0=$(date +%s.%N); python3 /tmp/o/serial.py > $R/serial.log 2>&1; rc=$?
echo "a script's write_report (one process): rc=$rc wall=$(secs $t0) s" | tee -a $R/table.txt
python3 -c "
import re
a, b = (re.sub(r' on \d{4}-\d\d-\d\d \d\d:\d\d UTC', '', open(f'/tmp/o/{n}.html').read()) for n in ('parallel', 'serial'))
print('pages the same:', a == b, a.count('<svg'), 'charts')" | tee -a $R/table.txt

echo "== D. GPU tests" | tee -a $R/table.txt
cd $ROOT
(PYTHONPATH=$ROOT:/tmp/site:/tmp/iofsite EMOPIPE_TEST_ASSETS=$ROOT/.rwH/shared timeout 420 python3 -m pytest -q -p no:cacheprovider tests/test_gpu.py tests/test_nvdec.py > $R/pytest.log 2>&1; echo "pytest rc=$?") | tee -a $R/table.txt
grep -E "passed|failed|skipped|Error" $R/pytest.log | tail -6 | tee -a $R/table.txt
