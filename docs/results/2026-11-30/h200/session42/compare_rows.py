"""Rows of one video decoded by NVDEC against OpenCV's: frames, timestamps, boxes (session 42)."""
import csv
import sys


def rows(path):
    try:
        with open(path, newline="") as f:
            return list(csv.DictReader(f))
    except OSError:
        return None


a, b = rows(sys.argv[1]), rows(sys.argv[2])
if a is None or b is None:
    print(f"rows: nvdec {'-' if a is None else len(a)}, opencv {'-' if b is None else len(b)}")
    sys.exit()
frames_a, frames_b = [r["frame"] for r in a], [r["frame"] for r in b]
same_frames = frames_a == frames_b
dt = max((abs(float(x["timestamp_s"]) - float(y["timestamp_s"])) for x, y in zip(a, b)), default=0.0)
dbox = max((abs(float(x[k]) - float(y[k])) for x, y in zip(a, b) for k in ("x1", "y1", "x2", "y2")), default=0.0)
first = (a[0]["timestamp_s"], b[0]["timestamp_s"]) if a and b else None
last = (a[-1]["frame"], a[-1]["timestamp_s"], b[-1]["frame"], b[-1]["timestamp_s"]) if a and b else None
print(f"rows nvdec {len(a)} opencv {len(b)}; same frames {same_frames}; max |dt| {dt:.6f} s; max |dbox| {dbox:.2f} px;"
      f" first t {first}; last (frame, t) nvdec/opencv {last}")
