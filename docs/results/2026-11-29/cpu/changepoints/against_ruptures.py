"""The tracks' change-point search (emopipe.report.segments._penalised_partition) against ruptures'
KernelCPD(kernel="linear").predict(pen=...) over 400 seeded random signals: how many cuts differ, and for those the
penalised cost of each (the search is exact; where they differ ruptures' cut costs more), and the time of each.

    python3 docs/results/2026-11-29/cpu/changepoints/against_ruptures.py   (ruptures from the dev extra)
"""
import math
import time

import numpy as np
import ruptures

from emopipe.report.segments import _penalised_partition


def cost(signal, ends, penalty):
    starts = [0, *ends[:-1]]
    return sum(float(((signal[a:b] - signal[a:b].mean(0)) ** 2).sum()) + penalty for a, b in zip(starts, ends))


rng = np.random.default_rng(0)
compared = differ = 0
ours_s = theirs_s = 0.0
for _ in range(400):
    n = int(rng.integers(4, 1001))
    k = int(rng.integers(0, 8))
    means = rng.normal(0, rng.choice([0.05, 0.3, 1.0]), (k + 1, 2))
    cuts = np.sort(rng.choice(np.arange(1, n), size=min(k, n - 1), replace=False))
    signal = np.repeat(means[: len(cuts) + 1], np.diff(np.concatenate([[0], cuts, [n]])).astype(int), axis=0)
    signal = signal + rng.normal(0, rng.choice([0.01, 0.1, 0.5]), signal.shape)
    if rng.random() < 0.1:
        signal = np.round(signal, 1)  # ties
    min_size = int(rng.integers(2, 40))
    if n < 2 * min_size:
        continue
    penalty = float(rng.choice([0.01, 0.1, 1.0, 5.0])) * math.log(n)
    t = time.perf_counter()
    ours = _penalised_partition(signal, penalty, min_size)
    ours_s += time.perf_counter() - t
    t = time.perf_counter()
    theirs = [int(e) for e in ruptures.KernelCPD(kernel="linear", min_size=min_size).fit(signal).predict(pen=penalty)]
    theirs_s += time.perf_counter() - t
    compared += 1
    if ours != theirs:
        differ += 1
        print(f"n {n} min_size {min_size}: cost {cost(signal, ours, penalty):.9f} (search) against "
              f"{cost(signal, theirs, penalty):.9f} (ruptures)")
print(f"{compared} signals, {differ} cut differently; search {ours_s:.2f} s, ruptures {theirs_s:.2f} s in all")
