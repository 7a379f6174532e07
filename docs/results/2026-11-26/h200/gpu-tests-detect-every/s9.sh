#!/bin/bash
# session 8, call 9 (one H200): the GPU tests on the head; --detect-every 3 over two clips of one size (NVDEC,
# one process) against each clip alone: boxes and detected flags (f0a6d78's fix) on the GPU path.
set -u
cd "$(dirname "$0")/.."
C=/root/rc; mkdir -p $C/assets/models $C/assets/data/faces
cp -r .rw4/* $C/; cp -r .rw4/blazeface $C/assets/models/; cp .rw4/faces/*.png $C/assets/data/faces/
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl 2>&1 | grep -v "already exists" | tail -2
export PYTHONPATH=$PWD:/tmp/site
R=$OUT/s9; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
t0=$(date +%s)
EMOPIPE_TEST_ASSETS=$C/assets timeout 330 python3 -m pytest -q -p no:cacheprovider -rs tests/test_gpu.py tests/test_cudnn_epilogue.py > $R/pytest.txt 2>&1
echo "pytest rc=$? in $(( $(date +%s) - t0 )) s: $(tail -1 $R/pytest.txt)"
grep -a "FAILED" $R/pytest.txt | head
python3 - <<'PY' > $R/detect-every.txt 2>&1
import csv, subprocess, sys
from pathlib import Path
sys.path.insert(0, "benchmarks"); import synthetic
C = Path("/root/rc"); d = Path("/tmp/de"); (d / "clips").mkdir(parents=True, exist_ok=True)
w = synthetic.random_checkpoint(d / "w.pth")
# two 720p clips of one size: the 10 s clip cut to 100 frames, then the 4-face video's first 50
subprocess.run([sys.executable, "-c", f"""
import cv2
for src, dst, n in (('{C}/clip10s_720p_h264.mp4', '{d}/clips/a.mp4', 100), ('{C}/video_720p_4faces_h264.mp4', '{d}/clips/b.mp4', 50)):
    r = cv2.VideoCapture(src); f = r.get(cv2.CAP_PROP_FPS); ok, img = r.read()
    out = cv2.VideoWriter(dst, cv2.VideoWriter_fourcc(*'mp4v'), f, (img.shape[1], img.shape[0]))
    for _ in range(n):
        out.write(img); ok, img = r.read()
        if not ok: break
    out.release()
"""], check=True)
opts = ["--weights", str(w), "--detector", "blazeface_back", "--models-dir", str(C / "blazeface"), "--no-progress",
        "--detect-every", "3"]
def run(*args):
    done = subprocess.run([sys.executable, "-m", "emopipe", *args, *opts], capture_output=True, text=True)
    print(" ".join(args[:3]), "rc", done.returncode, done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "")
run(str(d / "clips"), "-o", str(d / "many"))
for n in ("a", "b"):
    run(str(d / "clips" / f"{n}.mp4"), "-o", str(d / f"{n}.csv"))
def rows(p):
    with open(p) as f:
        return [(r["frame"], r["detected"], [float(r[k]) for k in ("x1", "y1", "x2", "y2")]) for r in csv.DictReader(f)]
for n in ("a", "b"):
    many, alone = rows(d / "many" / f"{n}.emotions.csv"), rows(d / f"{n}.csv")
    same_flags = [(f, k) for f, k, _ in many] == [(f, k) for f, k, _ in alone]
    worst = max((abs(x - y) for (_, _, a), (_, _, b) in zip(many, alone) for x, y in zip(a, b)), default=None)
    print(n, len(many), "rows (alone", len(alone), "); frames and detected flags", "the same" if same_flags else "DIFFERENT",
          "; largest box difference px", worst, "; first row detected:", many[0][1] if many else None)
PY
cat $R/detect-every.txt | tail -6
cd $OUT && tar czf s9.tgz s9 && rm -rf s9
