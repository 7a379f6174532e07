"""Compare two rows files: identical bytes, or the largest difference per numeric column (same rows expected)."""
import csv
import sys
from pathlib import Path

import numpy as np


def load(path):
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    return rows[0], rows[1:]


a_path, b_path = sys.argv[1], sys.argv[2]
if Path(a_path).read_bytes() == Path(b_path).read_bytes():
    print("identical")
    sys.exit(0)
ha, ra = load(a_path)
hb, rb = load(b_path)
if ha != hb or len(ra) != len(rb):
    print(f"differ in shape: {len(ra)} against {len(rb)} rows")
    sys.exit(0)
worst = {}
for i, name in enumerate(ha):
    if name in ("source", "label", "file"):
        continue
    x = np.array([float(r[i]) for r in ra])
    y = np.array([float(r[i]) for r in rb])
    d = float(np.max(np.abs(x - y))) if len(x) else 0.0
    if d:
        worst[name] = d
labels = sum(1 for p, q in zip(ra, rb) if p[ha.index("label")] != q[ha.index("label")])
top = sorted(worst.items(), key=lambda kv: -kv[1])[:4]
print(f"differ: {len(worst)} columns, labels differ in {labels} rows; largest " +
      ", ".join(f"{k} {v:.3g}" for k, v in top))
