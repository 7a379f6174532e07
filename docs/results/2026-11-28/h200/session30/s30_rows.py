"""Session 30: two rows files of the same clip compared: rows, frames, boxes and the largest differences.
    python3 s30_rows.py A.csv B.csv
(As run on the GPU, only laid out for the linter afterwards.)"""
import csv
import sys


def rows(path: str) -> list[dict[str, str]]:
    with open(path) as rows_file:
        return list(csv.DictReader(rows_file))


a, b = (rows(path) for path in sys.argv[1:3])
keys = [(r["frame"], r["track_id"]) for r in a]
out = {"rows": (len(a), len(b)), "same_frames": keys == [(r["frame"], r["track_id"]) for r in b]}
if out["same_frames"]:
    numeric = [k for k in a[0] if k.startswith("p_") or k in ("valence", "arousal", "x1", "y1", "x2", "y2", "score")]
    out.update({k: round(max(abs(float(r[k]) - float(s[k])) for r, s in zip(a, b)), 5) for k in numeric
                if k in ("valence", "arousal", "x1", "score")})
    out["p_max"] = round(max(abs(float(r[k]) - float(s[k])) for r, s in zip(a, b) for k in numeric
                             if k.startswith("p_")), 5)
print(out)
