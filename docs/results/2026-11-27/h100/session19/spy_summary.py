"""Fold py-spy's raw output (``record -f raw --threads``) by thread, then by frame: seconds per key.

    python3 spy_summary.py PROFILE RATE [MODE [PATTERN [TOP]]]

MODE ``own``: the deepest frame whose text holds PATTERN (default ``emopipe/``); ``leaf``: that frame and the stack's
leaf; ``depthN``: the first N frames below the thread.
"""

from __future__ import annotations

import collections
import sys


def main() -> None:
    path, rate = sys.argv[1], float(sys.argv[2])
    mode = sys.argv[3] if len(sys.argv) > 3 else "leaf"
    pattern = sys.argv[4] if len(sys.argv) > 4 else "emopipe/"
    top = int(sys.argv[5]) if len(sys.argv) > 5 else 12
    threads: collections.Counter[str] = collections.Counter()
    by_thread: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    with open(path) as lines:
        for line in lines:
            stack, _, count = line.rstrip().rpartition(" ")
            samples, frames = int(count), stack.split(";")
            thread = frames[0]
            threads[thread] += samples
            own = [frame for frame in frames[1:] if pattern in frame]
            if mode == "leaf":
                key = (own[-1] if own else "-") + "  <<  " + frames[-1][:90]
            elif mode == "own":
                key = own[-1] if own else frames[-1][:100]
            else:  # depthN
                key = ";".join(frames[1:1 + int(mode[5:])])[-250:]
            by_thread[thread][key] += samples
    for thread, samples in threads.most_common(12):
        print(f"== {thread}: {samples / rate:.2f} s")
        for key, n in by_thread[thread].most_common(top):
            print(f"   {n / rate:6.2f}  {key}")


if __name__ == "__main__":
    main()
