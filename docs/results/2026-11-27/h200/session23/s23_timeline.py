"""The main thread of a py-spy speedscope profile (`record --idle -f speedscope`) as a timeline: for each window of
WINDOW seconds, the deepest emopipe frame and the library frame right under it, with their share of the window.

    python3 s23_timeline.py PROFILE.json [WINDOW] [THREAD_PATTERN]
"""
from __future__ import annotations

import collections
import json
import sys


def short(frame: dict) -> str:
    path = frame.get("file") or ""
    for mark in ("site-packages/", "dist-packages/", "/lib/python3.12/", "emopipe/"):
        if mark in path:
            path = ("emopipe/" if mark == "emopipe/" else "") + path.split(mark, 1)[1]
            break
    return f"{frame['name']} ({path}:{frame.get('line')})"


def main() -> None:
    with open(sys.argv[1]) as profile_file:
        data = json.load(profile_file)
    window = float(sys.argv[2]) if len(sys.argv) > 2 else 0.25
    pattern = sys.argv[3] if len(sys.argv) > 3 else "MainThread"
    frames = data["shared"]["frames"]
    for profile in data["profiles"]:
        if pattern not in profile["name"]:
            continue
        print(f"== {profile['name']}: {profile['endValue'] - profile['startValue']:.2f} s")
        t, buckets = 0.0, collections.defaultdict(collections.Counter)
        for stack, weight in zip(profile["samples"], profile["weights"]):
            names = [frames[i] for i in stack]  # outermost first
            own = [k for k, f in enumerate(names) if "emopipe/" in (f.get("file") or "")]
            if own:
                k = own[-1]
                below = [f for f in names[k + 1:] if "packages/" in (f.get("file") or "")]
                under = below[0] if below else (names[k + 1] if k + 1 < len(names) else None)
                key = short(names[k]) + (" > " + short(under) if under else "")
            else:
                lib = [f for f in names if "packages/" in (f.get("file") or "")]
                key = " > ".join(short(f) for f in (lib[:1] or names[-1:]))
            buckets[int(t / window)][key] += weight
            t += weight
        for b in sorted(buckets):
            total = sum(buckets[b].values())
            top = "; ".join(f"{w / total:.0%} {k}" for k, w in buckets[b].most_common(2))
            print(f"{b * window:6.2f} {top}")


if __name__ == "__main__":
    main()
