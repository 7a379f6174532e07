"""The stalls in a trace of tailwatch.py: frames over a latency, grouped into events (frames written within 0.1 s of
each other), with the collections and the GPU thread's slow steps beside them.

    python3 trace_events.py s19h-trace.txt.gz [MS]
"""

from __future__ import annotations

import gzip
import sys


def main() -> None:
    path, limit = sys.argv[1], float(sys.argv[2]) if len(sys.argv) > 2 else 50.0
    frames, collections, steps = [], [], []
    with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as lines:
        for line in lines:
            kind, *rest = line.split()
            if kind == "f":
                frames.append((float(rest[0]), int(rest[1]), float(rest[2])))
            elif kind == "gc":
                collections.append((float(rest[0]), rest[1], float(rest[2])))
            elif kind == "s":
                steps.append((float(rest[0]), rest[1], float(rest[2])))
    start, end = frames[0][0], frames[-1][0]
    slow = sorted(f for f in frames if f[2] > limit)
    print(f"{len(frames)} frames over {end - start:.1f} s; {len(slow)} over {limit:g} ms")
    events: list[list[tuple[float, int, float]]] = []
    for frame in slow:
        if events and frame[0] - events[-1][-1][0] < 0.1:
            events[-1].append(frame)
        else:
            events.append([frame])
    for event in events:
        print(f"event at +{event[0][0] - start:.2f} s: {len(event)} frames, {len({f[1] for f in event})} cameras, "
              f"worst {max(f[2] for f in event):.0f} ms")
    for at, generation, ms in collections:
        if start - 1 < at < end + 1 and (ms > 2 or generation == "gen2"):
            print(f"  collection +{at - start:.2f} s {generation} {ms:.1f} ms")
    for at, name, ms in steps:
        if start - 2 < at < end:
            print(f"  step +{at - start:.2f} s {name} {ms:.1f} ms")


if __name__ == "__main__":
    main()
