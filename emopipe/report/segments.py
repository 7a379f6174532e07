"""Where a track's expression and affect change: expression segments and valence/arousal change points.

Expression segments
    The per-frame probabilities are smoothed with a centred moving average over ``SMOOTH_S`` seconds;
    each frame gets the most probable smoothed expression; runs of one expression are the segments,
    and a run shorter than ``MIN_EXPRESSION_S`` is absorbed by its longer neighbour (a blink or a
    misclassified frame does not start a new segment).

Change points of valence and arousal
    Penalised least-squares segmentation of the 2-D signal (valence, arousal): a change point is
    where its mean shifts, solved exactly by dynamic programming (:func:`_penalised_partition`, ~15 ms
    for a thousand points). The penalty is BIC-like, ``PENALTY_SCALE · σ² · ln n``,
    with σ² the noise variance estimated robustly from first differences (MAD), floored at
    ``NOISE_FLOOR`` so an almost constant signal does not turn its rounding into changes. Then two
    rules that keep only changes a person would call one: segments last ``MIN_AFFECT_S`` or more, and
    neighbouring segments' means differ by ``MIN_SHIFT`` or more in the valence–arousal plane (the
    closest pair is merged first, until all differ). Long tracks are first averaged into at most
    ``MAX_POINTS`` consecutive bins, which also evens out frame-to-frame jitter.

Why a penalised segmentation rather than a rolling-window rule: it finds each change where the means
on both sides differ most, to the frame, without a window length that trades delay against noise. It
is the segmentation of ruptures' ``KernelCPD(kernel="linear").predict(pen=...)`` (the maintained
reference implementation, which the tests check this one against, change point for change point), solved
here in NumPy because importing ruptures costs about a second (it imports SciPy's statistics and spatial
modules) at the end of every run, and more than the segmentation itself (docs/benchmarks.md).
"""

from __future__ import annotations

import heapq
import itertools
import math
import sys
from dataclasses import dataclass

import numpy as np

from emopipe.io.records import text_name
from emopipe.report.tracks import TrackSeries, mean_of, scale_exponent

SMOOTH_S = 0.5  # centred moving average of the expression probabilities
MIN_EXPRESSION_S = 0.5  # shorter expression runs join their neighbour
MIN_AFFECT_S = 1.0  # shortest valence/arousal segment
MIN_SHIFT = 0.1  # smallest change of mean (valence, arousal) that counts, Euclidean
NOISE_FLOOR = 0.02  # per-dimension noise standard deviation assumed at least
PENALTY_SCALE = 3.0
MAX_POINTS = 1000  # longer tracks are binned to this many points before change-point detection


@dataclass(frozen=True)
class Segment:
    """A stretch of one track: ``kind`` "expression" (``label`` held) or "affect" (between change points).

    Segments of a kind tile the track: each ends where the next starts (the last at the track's last
    frame plus one interval). The start of every affect segment but the first is a change point.
    """

    source: str
    track_id: int
    kind: str  # "expression" | "affect"
    index: int  # 0-based, per track and kind
    start_s: float
    end_s: float
    frames: int  # records in it
    label: str  # the expression held (expression) or the most frequent one (affect)
    valence_mean: float
    arousal_mean: float

    def as_row(self) -> dict[str, object]:
        return {"source": text_name(self.source), "track_id": self.track_id, "kind": self.kind, "segment": self.index,
                "start_s": round(self.start_s, 6), "end_s": round(self.end_s, 6), "frames": self.frames,
                "label": self.label, "valence_mean": round(self.valence_mean, 6),
                "arousal_mean": round(self.arousal_mean, 6)}


SEGMENT_COLUMNS = ("source", "track_id", "kind", "segment", "start_s", "end_s", "frames", "label", "valence_mean",
                   "arousal_mean")


def moving_average(values: np.ndarray, window: int) -> np.ndarray:
    """Centred moving average along axis 0 over ``window`` samples (odd); the window shrinks at the ends."""
    if window <= 1 or len(values) < 2:
        return values.astype(np.float64)
    half = window // 2
    padded = np.concatenate([np.zeros((1, *values.shape[1:])), np.cumsum(values, axis=0)])
    n = len(values)
    lo = np.clip(np.arange(n) - half, 0, n)
    hi = np.clip(np.arange(n) + half + 1, 0, n)
    counts = (hi - lo).reshape(-1, *([1] * (values.ndim - 1)))
    return (padded[hi] - padded[lo]) / counts  # type: ignore[no-any-return]


def _runs(values: np.ndarray) -> list[list[int]]:
    """[start, stop, value] of each run of equal values."""
    if not len(values):
        return []
    edges = np.flatnonzero(np.diff(values)) + 1
    starts = np.concatenate([[0], edges])
    stops = np.concatenate([edges, [len(values)]])
    return [[int(a), int(b), int(values[a])] for a, b in zip(starts, stops)]


def _ends(times: np.ndarray, interval_s: float) -> np.ndarray:
    """Each sample's end time: the next sample's start, the last one's start plus the interval."""
    return np.concatenate([times[1:], [times[-1] + interval_s]])


def _absorb_short_runs(runs: list[list[int]], times: np.ndarray, ends: np.ndarray) -> list[list[int]]:
    """The shortest run (the first of equal ones) joins its longer neighbour (the left one on a tie) until every
    run lasts ``MIN_EXPRESSION_S``; neighbours that come to hold the same expression become one run.

    A heap of (duration, start) with stale entries skipped, and runs linked to their neighbours: an hour's
    track can have tens of thousands of runs, which a scan for the shortest after every merge takes minutes on."""
    count = len(runs)
    start = [run[0] for run in runs]
    stop = [run[1] for run in runs]
    value = [run[2] for run in runs]
    left = list(range(-1, count - 1))
    right = [*range(1, count), -1]
    alive = [True] * count

    def length(i: int) -> float:
        return float(ends[stop[i] - 1] - times[start[i]])

    heap = [(length(i), start[i], i) for i in range(count)]
    heapq.heapify(heap)
    remaining = count
    while remaining > 1:
        duration, first, i = heapq.heappop(heap)
        if not alive[i] or first != start[i] or duration != length(i):
            continue  # a run that has since grown or gone
        if duration >= MIN_EXPRESSION_S:
            break
        before, after = left[i], right[i]
        if before >= 0 and (after < 0 or length(before) >= length(after)):
            stop[before] = stop[i]
            grown = before
        else:
            start[after] = start[i]
            grown = after
        alive[i] = False
        remaining -= 1
        if before >= 0:
            right[before] = after
        if after >= 0:
            left[after] = before
        if before >= 0 and after >= 0 and value[before] == value[after]:  # the only pair that can now match
            stop[before] = stop[after]
            alive[after] = False
            remaining -= 1
            right[before] = right[after]
            if right[after] >= 0:
                left[right[after]] = before
            grown = before
        heapq.heappush(heap, (length(grown), start[grown], grown))
    return [[start[i], stop[i], value[i]] for i in range(count) if alive[i]]


def expression_segments(series: TrackSeries, interval_s: float) -> list[Segment]:
    times = series.times
    if not len(times):
        return []
    window = max(1, round(SMOOTH_S / interval_s)) if interval_s > 0 else 1
    window += 1 - window % 2  # odd: centred
    smoothed = moving_average(series.probabilities, window)
    runs = _runs(np.argmax(smoothed, axis=1))
    ends = _ends(times, interval_s)

    runs = _absorb_short_runs(runs, times, ends)
    return [_segment(series, "expression", i, a, b, ends, series.labels[value])
            for i, (a, b, value) in enumerate(runs)]


def _segment(series: TrackSeries, kind: str, index: int, a: int, b: int, ends: np.ndarray, label: str) -> Segment:
    return Segment(series.source, series.track_id, kind, index, float(series.times[a]), float(ends[b - 1]), b - a,
                   label, float(mean_of(series.valence[a:b])), float(mean_of(series.arousal[a:b])))


def _noise_variance(signal: np.ndarray, floor: float = NOISE_FLOOR) -> float:
    """σ² summed over the dimensions, from first differences (robust: median absolute deviation)."""
    if len(signal) < 3:
        return signal.shape[1] * floor ** 2
    diffs = np.diff(signal, axis=0)
    mad = np.median(np.abs(diffs - np.median(diffs, axis=0)), axis=0)
    sigma = np.maximum(1.4826 * mad / math.sqrt(2), floor)
    return float(np.sum(sigma ** 2))


def _penalised_partition(signal: np.ndarray, penalty: float, min_size: int) -> list[int]:
    """The ends of the segments of ``signal`` (n × d) that minimise the sum of their squared deviations from their own
    means plus ``penalty`` a segment, each at least ``min_size`` long (ascending, the last is n). Exact: every
    admissible start is tried for every end (n ≤ MAX_POINTS: ~15 ms for a thousand points); ties go to the earliest
    start."""
    n = len(signal)
    centred = signal - signal.mean(axis=0)  # (the same costs, with less cancellation in the running sums)
    sums = np.vstack([np.zeros((1, signal.shape[1])), np.cumsum(centred, axis=0)])
    squares = np.concatenate([[0.0], np.cumsum(np.einsum("ij,ij->i", centred, centred))])
    # where a segment may start: at 0, or after another that lasted min_size (ascending, so that the starts usable
    # for a segment ending at `end` are a prefix of them)
    starts = np.concatenate([[0], np.arange(min_size, n - min_size + 1)])
    sums_at, squares_at = np.ascontiguousarray(sums[starts].T), squares[starts]
    best_at = np.full(len(starts), np.inf)  # the least penalised cost of the signal up to each start
    best_at[0] = 0.0
    chosen = np.zeros(n + 1, dtype=np.int64)  # for each end, where its best cut's last segment starts
    for end in range(min_size, n + 1):
        usable = 1 + max(0, end - 2 * min_size + 1)
        between = sums_at[:, :usable] - sums[end][:, None]
        totals = (best_at[:usable] + (squares[end] - squares_at[:usable])
                  - (between * between).sum(axis=0) / (end - starts[:usable]))
        pick = int(totals.argmin())
        chosen[end] = starts[pick]
        if end <= n - min_size:  # (a start too: ends from min_size on are, in order)
            best_at[end - min_size + 1] = totals[pick] + penalty
    cut = [n]
    while chosen[cut[-1]] > 0:
        cut.append(int(chosen[cut[-1]]))
    return cut[::-1]


def change_points(series: TrackSeries, interval_s: float) -> list[int]:
    """Indices into the track's records where the mean of (valence, arousal) changes (ascending)."""
    n = len(series)
    signal = np.stack([series.valence, series.arousal], axis=1)
    # in units that keep huge outputs' sums and squares finite (exact: a power of two; within ±1, none)
    e = scale_exponent(signal)
    signal = np.ldexp(signal, -e)
    noise_floor, min_shift = math.ldexp(NOISE_FLOOR, -e), math.ldexp(MIN_SHIFT, -e)
    size = max(1, math.ceil(n / MAX_POINTS))  # records per bin
    bins = math.ceil(n / size)
    starts = np.arange(bins) * size
    binned = np.add.reduceat(signal, starts, axis=0) / np.diff(np.append(starts, n))[:, None]
    bin_s = size * interval_s if interval_s > 0 else float("inf")
    min_size = max(2, math.ceil(MIN_AFFECT_S / bin_s)) if math.isfinite(bin_s) else 2
    if bins < 2 * min_size:
        return []
    # (in the units of outputs near ±1e308 the floor's square underflows to 0; the penalty must stay positive)
    penalty = max(PENALTY_SCALE * _noise_variance(binned, noise_floor) * math.log(bins), sys.float_info.min)
    edges = [0, *_penalised_partition(binned, penalty, min_size)]
    # merge the neighbours whose means differ least until every shift is at least MIN_SHIFT
    while len(edges) > 2:
        means = [binned[a:b].mean(axis=0) for a, b in itertools.pairwise(edges)]
        shifts = [float(np.linalg.norm(means[i + 1] - means[i])) for i in range(len(means) - 1)]
        smallest = int(np.argmin(shifts))
        if shifts[smallest] >= min_shift:
            break
        del edges[smallest + 1]
    return [min(n, e * size) for e in edges[1:-1]]


def affect_segments(series: TrackSeries, interval_s: float) -> list[Segment]:
    if not len(series):
        return []
    ends = _ends(series.times, interval_s)
    bounds = [0, *change_points(series, interval_s), len(series)]
    labels = series.label_indices
    segments = []
    for i, (a, b) in enumerate(itertools.pairwise(bounds)):
        common = int(np.argmax(np.bincount(labels[a:b], minlength=len(series.labels))))
        segments.append(_segment(series, "affect", i, a, b, ends, series.labels[common]))
    return segments


def segments_of(series: TrackSeries, interval_s: float) -> list[Segment]:
    """The track's expression segments, then its affect segments."""
    return expression_segments(series, interval_s) + affect_segments(series, interval_s)
