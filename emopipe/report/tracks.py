"""Per-track summaries: what one person's face did over a source, from its per-frame records.

Records are gathered per (source, track) into columns (:class:`TrackSeries`), a few numbers per face
and frame, so a run can keep them while it writes its rows: about 80 bytes per face and frame (one
hour of one face at 25 fps: about 7 MB). :func:`summarize` turns them into :class:`TrackSummary` rows.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from emopipe.errors import InputUnreadableError
from emopipe.io.records import text_name
from emopipe.types import FaceRecord

SHORT_TRACK_S = 1.0  # tracks seen for less than this are flagged `short` (kept: a brief face may matter)
UNIX_TIME_S = 1e8  # timestamps beyond this are wall-clock (live sources; no file lasts three years)


class RepeatedFrameError(InputUnreadableError):
    """A track with two records of one frame. A face is in a frame once: such records are the rows of two runs of a
    source in one file (their track ids numbered alike), whose frames would all be counted twice."""

    def __init__(self, source: str, track_id: int, frame: int) -> None:
        super().__init__(f"{text_name(source)}: track {track_id} has two rows of frame {frame}, where a face is in a "
                         "frame once (the rows of two runs in one file?): report each run's rows on their own")
        self.source = source


class TrackSeries:
    """One track's records as columns, in the order they were added (frame order within a run; time order once
    :meth:`sort_by_time` ran)."""

    def __init__(self, source: str, track_id: int, labels: Sequence[str]) -> None:
        self.source = source
        self.track_id = track_id
        self.labels = tuple(labels)
        self._frames = array("q")
        self._times = array("d")
        # the model's raw outputs, kept exactly: some checkpoints' reach far beyond ±1 (float32 turned 1e39 to inf)
        self._valence = array("d")
        self._arousal = array("d")
        self._scores = array("f")
        self._boxes = array("f")  # 4 per record
        self._probabilities = array("f")  # len(labels) per record
        self.files: dict[int, str] = {}  # record index → its image file, for a folder of images (videos have none)

    def add(self, record: FaceRecord) -> None:
        if record.labels != self.labels:
            raise ValueError(f"track {self.track_id} of {self.source}: a record has labels {record.labels}, "
                             f"the track {self.labels}")
        if record.file is not None:
            self.files[len(self._frames)] = record.file
        self.append(record.frame, record.timestamp_s, record.valence, record.arousal, record.score, record.box,
                    record.probabilities)

    def append(self, frame: int, timestamp_s: float, valence: float, arousal: float, score: float,
               box: Sequence[float], probabilities: Sequence[float] | np.ndarray) -> None:
        """One record's values, as :meth:`add` takes them from a record (a video's parts joined from their rows files
        give them without making records: emopipe.pipeline.parts)."""
        self._frames.append(frame)
        self._times.append(timestamp_s)
        self._valence.append(valence)
        self._arousal.append(arousal)
        self._scores.append(score)
        self._boxes.extend(box)
        # one copy of the float32 bytes, not an element-by-element conversion (this runs on the writer
        # thread for every face of every frame)
        self._probabilities.frombytes(np.asarray(probabilities, dtype=np.float32).tobytes())

    def __len__(self) -> int:
        return len(self._frames)

    def sort_by_time(self) -> None:
        """Put the records in time order (added order at equal times): a rows file may list them in any order,
        and first and last times, gaps, segments and charts all read the columns in order."""
        order = np.argsort(self.times, kind="stable")
        if (order == np.arange(len(order))).all():
            return
        for name in ("_frames", "_times", "_valence", "_arousal", "_scores", "_boxes", "_probabilities"):
            column: array = getattr(self, name)
            values = np.frombuffer(column, dtype=column.typecode).reshape(len(order), -1)[order]
            setattr(self, name, array(column.typecode, values.tobytes()))
        position = {int(old): new for new, old in enumerate(order)}
        self.files = {position[old]: file for old, file in self.files.items()}

    @property
    def frames(self) -> np.ndarray:
        return np.frombuffer(self._frames, dtype=np.int64)

    @property
    def times(self) -> np.ndarray:
        return np.frombuffer(self._times, dtype=np.float64)

    @property
    def valence(self) -> np.ndarray:
        return np.frombuffer(self._valence, dtype=np.float64).copy()

    @property
    def arousal(self) -> np.ndarray:
        return np.frombuffer(self._arousal, dtype=np.float64).copy()

    @property
    def scores(self) -> np.ndarray:
        return np.frombuffer(self._scores, dtype=np.float32)

    @property
    def boxes(self) -> np.ndarray:
        return np.frombuffer(self._boxes, dtype=np.float32).reshape(-1, 4)

    @property
    def probabilities(self) -> np.ndarray:
        return np.frombuffer(self._probabilities, dtype=np.float32).reshape(-1, len(self.labels)).astype(np.float64)

    @property
    def label_indices(self) -> np.ndarray:
        """The per-frame expression (the most probable class), as indices into ``labels``."""
        return np.argmax(self.probabilities, axis=1)  # type: ignore[no-any-return]


class TrackCollector:
    """Gathers records into one :class:`TrackSeries` per (source, track), in order of first appearance."""

    def __init__(self) -> None:
        self.tracks: dict[tuple[str, int], TrackSeries] = {}

    def add(self, records: Iterable[FaceRecord]) -> None:
        for record in records:
            key = (record.source, record.track_id)
            series = self.tracks.get(key)
            if series is None:
                if not record.labels:
                    raise ValueError("track summaries need the records' class labels (FaceRecord.labels is empty)")
                series = self.tracks[key] = TrackSeries(record.source, record.track_id, record.labels)
            series.add(record)

    def series(self) -> list[TrackSeries]:
        """Every track, its records in time order; a :class:`RepeatedFrameError` where a track has two records of one
        frame."""
        for series in self.tracks.values():
            series.sort_by_time()
            frames = series.frames
            if (frames[1:] > frames[:-1]).all():  # (in time order, frames rise: none repeated, known in one pass)
                continue
            frames = np.sort(frames)
            repeated = np.flatnonzero(frames[1:] == frames[:-1])
            if len(repeated):
                raise RepeatedFrameError(series.source, series.track_id, int(frames[repeated[0]]))
        return list(self.tracks.values())


@dataclass(frozen=True)
class TrackSummary:
    """One track over its source: when it was seen, how its valence and arousal spread, which expression held.

    Times are the records' timestamps (seconds from the start of the source; live: Unix time).
    ``duration_s`` counts the last frame's own interval, so a track seen in every frame of a 5 s clip
    lasts 5 s. ``gaps`` counts the interruptions (frames of the source between its first and last in
    which the track was not seen) and ``gap_s`` their total length. ``shares`` is the fraction of the
    track's frames whose most probable expression is each label (frames are evenly spaced, so also the
    share of its time).
    """

    source: str
    track_id: int
    first_s: float
    last_s: float
    duration_s: float
    frames: int
    gaps: int
    gap_s: float
    valence_mean: float
    valence_median: float
    valence_p10: float
    valence_p90: float
    arousal_mean: float
    arousal_median: float
    arousal_p10: float
    arousal_p90: float
    shares: dict[str, float]
    dominant: str
    short: bool
    thumbnail: str | None = None  # the representative face's JPEG, when one was saved
    labels: tuple[str, ...] = field(default=(), repr=False)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready (the summary file's ``tracks`` entries)."""
        row = {name: getattr(self, name) for name in _SCALARS}
        row["shares"] = dict(self.shares)
        row["thumbnail"] = self.thumbnail
        return row

    def as_row(self) -> dict[str, Any]:
        """One row of ``tracks.csv``: the scalars, then ``share_<label>`` per expression."""
        row: dict[str, Any] = {name: _rounded(getattr(self, name)) for name in _SCALARS}
        row["source"] = text_name(self.source)  # (as the rows write it: a name's bytes that are not UTF-8 as \\xNN)
        row["short"] = int(self.short)
        row.update({f"share_{label}": round(share, 6) for label, share in self.shares.items()})
        row["thumbnail"] = self.thumbnail or ""
        return row


_SCALARS = ("source", "track_id", "first_s", "last_s", "duration_s", "frames", "gaps", "gap_s",
            "valence_mean", "valence_median", "valence_p10", "valence_p90",
            "arousal_mean", "arousal_median", "arousal_p10", "arousal_p90", "dominant", "short")


def _rounded(value: Any) -> Any:
    return round(value, 6) if isinstance(value, float) else value


def scale_exponent(values: np.ndarray) -> int:
    """``e`` such that ``values · 2⁻ᵉ`` lie within ±1 (0 when they already do).

    A checkpoint's outputs may be any finite numbers: near ±1e308 their sums and squares overflow, where
    those of the scaled values cannot. Scaling by a power of two is exact, so results computed on the
    scaled values and scaled back are bit for bit those on the values themselves wherever these do not
    overflow (valence and arousal within ±1: e = 0, nothing changes)."""
    largest = float(np.abs(values).max()) if values.size else 0.0
    return math.frexp(largest)[1] if largest > 1 else 0


def mean_of(values: np.ndarray, axis: int | None = None) -> Any:
    """``values.mean(axis)``, without overflow for huge finite values (see :func:`scale_exponent`)."""
    e = scale_exponent(values)
    return np.ldexp(np.ldexp(values, -e).mean(axis=axis), e)


def percentiles_of(values: np.ndarray, q: Sequence[float]) -> np.ndarray:
    """``np.percentile(values, q)``, without overflow for huge finite values (see :func:`scale_exponent`)."""
    e = scale_exponent(values)
    return np.ldexp(np.percentile(np.ldexp(values, -e), q), e)  # type: ignore[no-any-return]


def _steps(frames: np.ndarray, times: np.ndarray, per_frame: bool) -> np.ndarray:
    """Seconds between neighbouring records of later frames (``per_frame``: a frame)."""
    d_frames = np.diff(frames)
    ok = d_frames > 0
    steps = np.diff(times)[ok]
    return steps / d_frames[ok] if per_frame else steps  # type: ignore[no-any-return]


def is_live(series: Sequence[TrackSeries]) -> bool:
    """Whether the tracks are of a live source (a camera, a stream): their times are wall-clock."""
    return bool(series) and min(float(s.times.min()) for s in series if len(s)) > UNIX_TIME_S


def frame_interval(series: Sequence[TrackSeries]) -> float:
    """Seconds between consecutive frames of a source: the median over its tracks' neighbouring records; where no
    track has two records (faces each seen in one frame), over the source's frames that have one (0 when it has one
    frame, e.g. a single image).

    A live source's frames are those analysed: the pipeline takes the newest frame when it is free, the others are
    dropped (their numbers skipped), so the median time between neighbouring records, not a frame number apart (one
    frame in six analysed is no gap at every step, five sixths of the time missing)."""
    per_frame = not is_live(series)
    steps = [found for s in series if len(found := _steps(s.frames, s.times, per_frame))]
    if not steps and len(series) > 1:
        # (not 0: each of such tracks lasted one frame interval, as a track of one frame beside a longer one does)
        frames, times = np.concatenate([s.frames for s in series]), np.concatenate([s.times for s in series])
        order = np.lexsort((times, frames))
        steps = [found] if len(found := _steps(frames[order], times[order], per_frame)) else []
    if not steps:
        return 0.0
    interval = float(np.median(np.concatenate(steps)))
    return interval if math.isfinite(interval) and interval > 0 else 0.0


LIVE_GAP_STEPS = 1.5  # a live track's step this many intervals long or longer is a gap (the pipeline's pace varies)


def summarize_series(series: TrackSeries, interval_s: float, *, short_track_s: float = SHORT_TRACK_S) -> TrackSummary:
    """The summary of one track; ``interval_s`` is its source's frame interval (:func:`frame_interval`)."""
    if not len(series):
        raise ValueError(f"track {series.track_id} of {series.source} has no records")
    frames, times = series.frames, series.times
    valence, arousal = series.valence, series.arousal
    if is_live([series]) and interval_s > 0:  # (by time: frames dropped while the pipeline was busy are no gap)
        gap_steps = np.diff(times) >= LIVE_GAP_STEPS * interval_s
    else:
        gap_steps = np.diff(frames) > 1
    # the time missing in each interruption: its step less the one frame interval a seen step takes
    gap_s = float(np.sum(np.diff(times)[gap_steps] - interval_s)) if gap_steps.any() else 0.0
    counts = np.bincount(series.label_indices, minlength=len(series.labels))
    shares = {label: float(c) / len(series) for label, c in zip(series.labels, counts)}
    first, last = float(times[0]), float(times[-1])
    duration = last - first + interval_s
    v10, v50, v90 = percentiles_of(valence, [10, 50, 90])
    a10, a50, a90 = percentiles_of(arousal, [10, 50, 90])
    return TrackSummary(
        source=series.source, track_id=series.track_id, first_s=first, last_s=last, duration_s=duration,
        frames=len(series), gaps=int(gap_steps.sum()), gap_s=max(0.0, gap_s),
        valence_mean=float(mean_of(valence)), valence_median=float(v50), valence_p10=float(v10),
        valence_p90=float(v90), arousal_mean=float(mean_of(arousal)), arousal_median=float(a50),
        arousal_p10=float(a10), arousal_p90=float(a90), shares=shares,
        dominant=series.labels[int(np.argmax(counts))], short=duration < short_track_s, labels=series.labels,
    )


def summarize_collected(collector: TrackCollector, *, short_track_s: float = SHORT_TRACK_S) -> list[TrackSummary]:
    """Every collected track's summary, by source (in order of first appearance) and track id."""
    by_source: dict[str, list[TrackSeries]] = {}
    for series in collector.series():
        by_source.setdefault(series.source, []).append(series)
    summaries = []
    for tracks in by_source.values():
        interval = frame_interval(tracks)
        summaries += [summarize_series(s, interval, short_track_s=short_track_s)
                      for s in sorted(tracks, key=lambda s: s.track_id)]
    return summaries


def summarize(records: Iterable[FaceRecord], *, short_track_s: float = SHORT_TRACK_S) -> list[TrackSummary]:
    """Per-track summaries of ``records`` (from :func:`emopipe.analyze` or a rows file), one per
    (source, track id): by source in order of first appearance, then by track id.

    >>> for track in emopipe.summarize(emopipe.analyze("interview.mp4")):
    ...     print(track.track_id, track.dominant, track.valence_median, track.shares["happy"])
    """
    collector = TrackCollector()
    collector.add(records)
    return summarize_collected(collector, short_track_s=short_track_s)
