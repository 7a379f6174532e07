#!/bin/bash
# The decoder pool in the real command over a mixed folder (H.264 480p-4K, 8- and 10-bit HEVC, VP9, MPEG-4, H.264
# 4:4:4 which NVDEC lacks, two clips with a face), each kind twice: NVDEC (auto) with 2 and 4 sources open at once,
# against --decoder opencv; manifests compared.
set -u
cd "$(dirname "$0")/.."
[ -d /tmp/site/PyNvVideoCodec ] || python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl 2>&1 | tail -2
export PYTHONPATH=$PWD:/tmp/site
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
R=$OUT/r24; mkdir -p $R
python3 -c "import sys; from pathlib import Path; sys.path.insert(0, 'benchmarks'); from synthetic import random_checkpoint; random_checkpoint(Path('/tmp/w.pth'))"
run() { local name=$1; shift
  timeout 200 python3 -m emopipe .rw7/mixed -o /tmp/o-$name --weights /tmp/w.pth --detector blazeface_back --models-dir .rw4/blazeface --no-progress "$@" > $R/$name.txt 2>&1
  local rc=$?; echo "$name rc=$rc $(tail -n1 $R/$name.txt)"
  if [ $rc -ne 0 ]; then timeout 200 python3 -m emopipe .rw7/mixed -o /tmp/o-$name-debug --weights /tmp/w.pth --detector blazeface_back --models-dir .rw4/blazeface --no-progress --debug "$@" > $R/$name-debug.txt 2>&1; grep -a -B2 -A25 "Traceback" $R/$name-debug.txt | head -60; fi
  cp /tmp/o-$name/manifest.jsonl $R/$name-manifest.jsonl; cp /tmp/o-$name/summary.json $R/$name-summary.json 2>/dev/null; }
run nvdec-p2; run nvdec-p4 --parallel 4; run opencv --decoder opencv
grep -a -i "decoding on the CPU\|warn\|error" $R/nvdec-p2.txt | head -5
python3 - $R <<'PY'
import json, sys, pathlib, csv
R = pathlib.Path(sys.argv[1])
def load(n):
    out = {}
    for line in (R / f"{n}-manifest.jsonl").read_text().splitlines():
        e = json.loads(line); out[pathlib.Path(e["source"]).name] = (e["status"], e.get("frames"), e.get("faces"))
    return out
ref = load("opencv")
for n in ("nvdec-p2", "nvdec-p4"):
    got = load(n)
    diff = {k: (got.get(k), v) for k, v in ref.items() if got.get(k) != v}
    print(n, "sources", len(got), "same as opencv:", len(ref) - len(diff), "different:", diff)
    s = json.loads((R / f"{n}-summary.json").read_text()); print("  decoder:", s["pipeline"].get("decoder"))
PY
cd $OUT && tar czf r24.tgz r24 && rm -rf r24
