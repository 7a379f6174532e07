#!/bin/bash
# Where the GPU thread's wall time goes (py-spy --idle, every thread); old vs new rows of the 4-face videos, column by column.
set -u
cd "$(dirname "$0")/.."
sed -n '/^NEW=/,/^}/p' .gpu/run29.sh | sed 's#r29#r30#g' > /tmp/head30.sh
source /tmp/head30.sh
spy() { run spy-$1 $NEW /tmp/long-$2 "py-spy record --idle --threads --nonblocking --rate 250 --format raw --output $R/spy-$1.raw --"; }
spy idle-1face 1face
run faces-new-1 $NEW /tmp/long-4faces; run faces-old-1 $OLD /tmp/long-4faces
python3 - <<'PY'
import csv, pathlib, math
a, b = pathlib.Path("/tmp/o-faces-new-1"), pathlib.Path("/tmp/o-faces-old-1")
worst = {}; rows = 0; differ = 0
for p in sorted(a.rglob("*.csv")):
    ra = list(csv.DictReader(open(p))); rb = list(csv.DictReader(open(b / p.relative_to(a))))
    assert len(ra) == len(rb), (p, len(ra), len(rb))
    for x, y in zip(ra, rb):
        rows += 1; differ += x != y
        for k in x:
            if x[k] == y[k]: continue
            try: d = abs(float(x[k]) - float(y[k]))
            except ValueError: d = math.inf
            worst[k] = max(worst.get(k, 0), d)
print(f"rows {rows}, differing {differ}; largest difference by column: {worst}")
PY
cd $OUT && tar czf r30.tgz r30 && rm -rf r30
