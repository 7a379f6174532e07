#!/bin/bash
# a8a7815 (new: EmoNet collected later, host crop tables, events reused) against 64005df (head) and 4b0eb58 (old), interleaved;
# GPU tests; profile and py-spy of the new code.
set -u
cd "$(dirname "$0")/.."
sed -n '/^NEW=/,/^}/p' .gpu/run29.sh | sed 's#r29#r31#g' > /tmp/head31.sh
source /tmp/head31.sh
HEAD=$PWD/.rw5/head
timeout 240 python3 -m pytest -q -p no:cacheprovider tests/test_gpu.py -k "launched or crops_on or graph" 2>&1 | tail -4
run long-new-1 $NEW /tmp/long-1face; run long-head-1 $HEAD /tmp/long-1face
run long-head-2 $HEAD /tmp/long-1face; run long-new-2 $NEW /tmp/long-1face
run faces-new-1 $NEW /tmp/long-4faces; run faces-head-1 $HEAD /tmp/long-4faces
run arch-new-1 $NEW /tmp/a28/clips; run arch-head-1 $HEAD /tmp/a28/clips; run arch-old-1 $OLD /tmp/a28/clips
python3 - <<'PY'
import csv, pathlib, math
for t in ("long", "arch"):
    a, b = pathlib.Path(f"/tmp/o-{t}-new-1"), pathlib.Path(f"/tmp/o-{t}-head-1")
    worst = {}; rows = 0; differ = 0; files = 0
    for p in sorted(a.rglob("*.csv")):
        files += 1
        ra = list(csv.DictReader(open(p))); rb = list(csv.DictReader(open(b / p.relative_to(a))))
        assert len(ra) == len(rb), (p, len(ra), len(rb))
        for x, y in zip(ra, rb):
            rows += 1; differ += x != y
            for k in x:
                if x[k] == y[k]: continue
                try: d = abs(float(x[k]) - float(y[k]))
                except ValueError: d = math.inf
                worst[k] = max(worst.get(k, 0), d)
    print(f"{t} new vs head: files {files}, rows {rows}, differing {differ}; largest difference by column: {worst}")
PY
timeout 150 python3 benchmarks/profile_pipeline.py --video .rw4/video_720p_h264.mp4 --copies 4 --models-dir $M --out $R/profile-1face.json > $R/profile-1face.txt 2>&1; echo "profile rc=$?"; tail -4 $R/profile-1face.txt
run spy-new-1face $NEW /tmp/long-1face "py-spy record --idle --threads --nonblocking --rate 250 --format raw --output $R/spy-new-1face.raw --"
cd $OUT && tar czf r31.tgz r31 && rm -rf r31
