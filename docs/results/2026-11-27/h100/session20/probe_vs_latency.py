"""Session 20: set each 0.1 s sample of sysprobe.py beside the fleet's frames done in it (tailwatch's trace, one
clock) and compare what the system did in the slow intervals (a frame over 50 ms) and the quick ones (all ≤ 30 ms).

    cd probes && python3 ../probe_vs_latency.py a24     # a24.trace.txt.gz + a24.probe.tsv.gz
"""
import gzip
import itertools
import statistics
import sys

KEYS = ("steal", "cpu_total", "minflt", "rq_wait_usec", "usage_usec", "iowait")


def main(name: str) -> None:
    frames = []
    with gzip.open(f"{name}.trace.txt.gz", "rt") as trace:
        for line in trace:
            parts = line.split()
            if parts[0] == "f":
                frames.append((float(parts[1]), float(parts[3])))
    with gzip.open(f"{name}.probe.tsv.gz", "rt") as probe:
        table = [line.rstrip("\n").split("\t") for line in probe if not line.startswith("#")]
    column = {h: i for i, h in enumerate(table[0])}
    samples = [[float(x) for x in row] for row in table[1:]]
    start, end = frames[0][0] + 2, frames[-1][0]  # (the first two seconds: the fleet's start)
    intervals = []
    for a, b in itertools.pairwise(samples):
        if a[0] < start or b[0] > end:
            continue
        latencies = [ms for t, ms in frames if a[0] <= t < b[0]]
        if latencies:
            rates = {k: (b[column[k]] - a[column[k]]) / (b[0] - a[0]) for k in KEYS}
            intervals.append((max(latencies), rates))
    slow = [rates for worst, rates in intervals if worst > 50]
    quick = [rates for worst, rates in intervals if worst <= 30]
    print(name, "intervals", len(intervals), "slow(>50ms)", len(slow), "fast", len(quick))
    for k in KEYS:
        mean = {label: statistics.mean(r[k] for r in group) if group else float("nan")
                for label, group in (("slow", slow), ("fast", quick))}
        print(f"  {k:14s} per s: slow {mean['slow']:12.1f}  fast {mean['fast']:12.1f}")


if __name__ == "__main__":
    main(sys.argv[1])
