"""Summarise a py-spy raw profile (``--threads --format raw``, optionally gzipped): samples per thread, and each
thread's most sampled innermost two frames. With ``--idle`` every thread's wall time is sampled (a thread waiting
for the GIL shows at the line it waits on); with ``--gil`` only the thread holding the GIL."""

from __future__ import annotations

import collections
import gzip
import sys


def main(path: str, rate: float = 250.0, lines: int = 6) -> None:
    opener = gzip.open if path.endswith(".gz") else open
    total: collections.Counter[str] = collections.Counter()
    inner: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    with opener(path, "rt") as raw:
        for line in raw:
            stack, _, count = line.rstrip("\n").rpartition(" ")
            if not stack:
                continue
            frames = stack.split(";")
            thread = frames[0]
            total[thread] += int(count)
            inner[thread][" ← ".join(f.split(" (")[0] + ":" + f.rsplit(":", 1)[-1].rstrip(")")
                                     for f in reversed(frames[-2:]))] += int(count)
    for thread, samples in total.most_common(8):
        print(f"{thread}  {samples} samples = {samples / rate:.2f} s")
        for where, n in inner[thread].most_common(lines):
            print(f"    {n / rate:6.2f} s  {where}")


if __name__ == "__main__":
    main(sys.argv[1])
