"""Session 30: a py-spy speedscope profile (`record --idle [--native]`) as a timeline per thread: for each window,
the deepest emopipe frame and the innermost frame (the leaf: with --native, the C function), their share.
    python3 s30_timeline.py PROFILE.json [WINDOW] [THREAD_PATTERN]
(As run on the GPU, only laid out for the linter afterwards.)"""
import collections
import json
import sys


def short(frame):
    path = frame.get("file") or ""
    for mark in ("site-packages/", "dist-packages/", "/lib/python3.12/", "emopipe/"):
        if mark in path:
            path = ("emopipe/" if mark == "emopipe/" else "") + path.split(mark, 1)[1]
            break
    return f"{frame['name']} ({path.rsplit('/', 1)[-1]}:{frame.get('line')})"


with open(sys.argv[1]) as profile_file:
    data = json.load(profile_file)
window = float(sys.argv[2]) if len(sys.argv) > 2 else 0.1
pattern = sys.argv[3] if len(sys.argv) > 3 else ""
frames = data["shared"]["frames"]
for profile in data["profiles"]:
    if pattern not in profile["name"]:
        continue
    print(f"== {profile['name']}: {profile['endValue'] - profile['startValue']:.2f} s")
    t, buckets = 0.0, collections.defaultdict(collections.Counter)
    for stack, weight in zip(profile["samples"], profile["weights"]):
        names = [frames[i] for i in stack]
        own = [k for k, f in enumerate(names) if "emopipe/" in (f.get("file") or "")]
        head = short(names[own[-1]]) if own else "-"
        key = head + " > " + (short(names[-1]) if names else "?")
        buckets[int(t / window)][key] += weight
        t += weight
    for b in sorted(buckets):
        total = sum(buckets[b].values())
        print(f"{b * window:6.2f} " + "; ".join(f"{w / total:.0%} {k}" for k, w in buckets[b].most_common(2)))
