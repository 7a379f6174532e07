"""One long video over several workers: cut into overlapping parts, each run as a source of its own, joined again.

One process reads one 720p video at ~1 250 frames/s while the GPU takes ~3 400 from four processes (H200, session 35:
docs/benchmarks.md), so a ``--processes`` or ``--ray`` run with fewer videos than workers gives the workers parts of
its videos (:func:`plan_parts`); its driver joins them (:class:`PartResults`). Every frame's detections and EmoNet's
outputs are the frame's own; what one process carries from frame to frame is the tracker. So each part after the first
begins an overlap (:data:`OVERLAP_S`, and at least twice the tracker's memory) before the stretch its rows are kept
for: by the stretch's first frame its tracker holds the tracks one process's would. :func:`join_parts` keeps each
part's rows of its own stretch, gives each part's tracks the ids of the previous part's tracks they share boxes with in
the overlap, and numbers the ids again in order of first appearance, as :class:`~emopipe.vision.track.IouTracker`
numbers them: the rows are one process's rows, and the tracks and segments files are made from them as one process
makes them (docs/outputs.md).

With ``--detect-every N`` the parts begin on one process's key frames and read on to the next key frame after their
stretch (:func:`cut`). Not split: a run with ``--smooth`` (each track's average runs over its whole length),
``--annotate`` (one video file per source) or ``--max-frames``; images and videos shorter than two parts of
:data:`MIN_PART_S`.

Loads no PyTorch: the driver of a ``--processes`` or ``--ray`` run plans and joins.
"""

from __future__ import annotations

import contextlib
import csv
import glob
import json
import logging
import math
import os
import re
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from emopipe.config import RunConfig
from emopipe.errors import EmopipeError, OutputError
from emopipe.io.records import partial_path, remove_earlier
from emopipe.io.sources import open_source, source_kind
from emopipe.pipeline.archive import PlannedSource, SourceResult
from emopipe.pipeline.summary import RunSummary
from emopipe.report.tracks import TrackCollector, TrackSeries
from emopipe.vision.track import pair_iou

logger = logging.getLogger(__name__)

# A part's least length: each costs a seek, a fresh tracker's overlap and a source's switch in its worker (~0.2 s on
# an H200), a 40-s part of 720p30 ~1 s of work. Four parts of a 3-minute video over four workers: 6.5–6.8 s for the
# whole command against 8.7 s in one process; eight parts of 22 s over eight: 7.4 s (session 35).
MIN_PART_S = 40.0
OVERLAP_S = 2.0  # where a part's tracker learns the tracks before its rows count
OVERLAP_FRAMES = 60  # and at least this many frames: twice IouTracker's memory (max_age 30 frames)
SAME_FACE_IOU = 0.5  # two parts' boxes of one face in one frame (they are the same boxes: the detector's on that frame)


def not_splittable(config: RunConfig) -> str | None:
    """Why the options keep each video whole (the rows of parts would not be one process's), or None."""
    if not config.split:
        return "--no-split"
    if config.smooth:
        return "--smooth"
    if config.annotate:
        return "--annotate"
    if config.max_frames is not None:
        return "--max-frames"
    return None


def video_span(uri: str) -> tuple[float, float] | None:
    """A video file's (duration in seconds, frames a second) as its container declares them (opened on the CPU, not
    read through); None for other sources and videos that do not say."""
    if source_kind(uri) != "video":
        return None
    try:
        with open_source(uri) as source:
            info = source.info
    except Exception:  # (a source that does not open: its run says why)
        return None
    if not info.fps or not info.frame_count or info.fps <= 0 or info.frame_count <= 0:
        return None
    return info.frame_count / info.fps, info.fps


def parts_for(lengths: Sequence[float], workers: int, min_part_s: float | None = None) -> list[int]:
    """How many parts each video of ``lengths`` (seconds) is cut into so that ``workers`` each have one: a share of the
    workers in proportion to its length, at least one, no part shorter than ``min_part_s``; then, while workers are
    left over, one more part to the video whose parts are longest."""
    min_part_s = MIN_PART_S if min_part_s is None else min_part_s
    total = sum(lengths)
    if total <= 0 or len(lengths) >= workers:
        return [1] * len(lengths)
    most = [max(1, min(workers, int(length // min_part_s))) for length in lengths]
    counts = [max(1, min(cap, int(workers * length / total))) for length, cap in zip(lengths, most)]
    while sum(counts) < workers:
        candidates = [i for i in range(len(lengths)) if counts[i] < most[i]]
        if not candidates:
            break
        longest = max(candidates, key=lambda i: lengths[i] / counts[i])
        counts[longest] += 1
    return counts


def _boundary(seconds: float, fps: float) -> float:
    """``seconds`` moved to half a frame before the nearest frame's time: no frame's timestamp is at a boundary."""
    return (round(seconds * fps) - 0.5) / fps


def cut(source: PlannedSource, parts: int, length_s: float, fps: float, config: RunConfig) -> list[PlannedSource]:
    """``source`` as ``parts`` parts over the run's stretch of it (``--start`` to ``--end``, or its ``length_s``).

    With ``--detect-every N`` the key frames are one process's: a part begins on one (N frames apart from the run's
    first frame: its overlap is longer by up to N - 1 frames) and reads on past its stretch up to the next one
    (``keep_until_s``), so the boxes of its stretch's last frames are interpolated towards it, as one process's are."""
    first = config.start or 0.0
    last = min(config.end, length_s) if config.end is not None else length_s
    overlap = max(OVERLAP_S, OVERLAP_FRAMES / fps)
    bounds = [_boundary(first + (last - first) * k / parts, fps) for k in range(parts + 1)]
    every = config.detect_every
    first_frame = math.ceil(first * fps - 1e-6)  # the run's first frame: the first at or after --start, a key frame
    stem = _stem(source)
    ending = source.rows.name.removeprefix(stem)  # .emotions.csv or .emotions.jsonl
    cuts = []
    for k in range(parts):
        name = f"{stem}.part{k + 1}of{parts}"
        start_s, end_s, until_s = bounds[k] - overlap, bounds[k + 1], None
        if every > 1:
            begin = round(bounds[k] * fps + 0.5) - math.ceil(overlap * fps - 1e-6)  # (a frame's index)
            start_s = (first_frame + every * max(0, (begin - first_frame) // every) - 0.5) / fps
            own_last = round(bounds[k + 1] * fps + 0.5) - 1
            key_after = first_frame + every * -(-(own_last - first_frame) // every)
            end_s, until_s = (key_after + 0.5) / fps, bounds[k + 1]
        cuts.append(replace(source, rows=source.rows.with_name(name + ending),
                            summary=source.summary.with_name(f"{name}.emotions.summary.json"), video=None,
                            part=(k + 1, parts), start_s=config.start if k == 0 else max(0.0, start_s),
                            end_s=config.end if k == parts - 1 else end_s,
                            keep_from_s=None if k == 0 else bounds[k],
                            keep_until_s=None if k == parts - 1 else until_s))
    return cuts


@dataclass
class Split:
    """A video run as parts: its parts, their results as they come, when its first part went out."""

    whole: PlannedSource
    parts: list[PlannedSource]
    results: dict[str, SourceResult] = field(default_factory=dict)  # by part key
    began: float | None = None  # (perf_counter) its first part handed out
    ended: bool = False  # its line is written (joined, failed or interrupted)
    stale: list[Path] = field(default_factory=list)  # an earlier run's parts of it, cut otherwise (removed when joined)

    @property
    def complete(self) -> bool:
        return len(self.results) == len(self.parts)

    def remove_parts(self) -> None:
        """Every file its parts' runs may have left (they stay under partial names: only the joined files are named),
        and those an earlier run cut off left of other parts of it."""
        for path in [*(Path(w.path) for part in self.parts for w in part.written()), *self.stale]:
            with contextlib.suppress(OSError):
                path.unlink(missing_ok=True)


def _stem(source: PlannedSource) -> str:
    return source.summary.name.removesuffix(".emotions.summary.json")


def stale_parts(source: PlannedSource, parts: Sequence[PlannedSource], taken: set[str]) -> list[Path]:
    """The partial files of ``source``'s parts that an earlier run cut off left under another count of parts (a
    ``--resume`` with other workers), none of them a name of this run's (``taken``, absolute) or of ``parts``."""
    stem = _stem(source)
    ours = {os.path.abspath(w.path) for part in parts for w in part.written()} | taken
    named = re.compile(re.escape(stem) + r"\.part\d+of\d+\.emotions\..+\.partial")
    return sorted(path for path in source.rows.parent.glob(glob.escape(stem) + ".part*of*.emotions.*.partial")
                  if named.fullmatch(path.name) and os.path.abspath(path) not in ours)


def plan_parts(todo: Sequence[PlannedSource], workers: int, config: RunConfig, *,
               run: Sequence[PlannedSource] = (),
               span_of: Callable[[str], tuple[float, float] | None] = video_span,
               ) -> tuple[list[PlannedSource], dict[str, Split]]:
    """The sources to hand out, with the videos cut where the run has fewer sources than ``workers`` (largest first),
    and each cut video's :class:`Split` by its source. ``run``: every source the run planned (done ones too): a part
    whose files would take a name of theirs (an input, an output) stays whole."""
    why = not_splittable(config)
    if workers < 2 or len(todo) >= workers or why is not None:
        if why is not None and why != "--no-split" and workers > len(todo) > 0:
            logger.info("each video runs whole in one worker (%s: its rows would depend on where a part begins)", why)
        return list(todo), {}
    taken = {os.path.abspath(w.path) for p in run for w in p.written()} | {os.path.abspath(p.uri) for p in run}
    spans = [span_of(p.uri) for p in todo]
    lengths = [(min(config.end, s[0]) if config.end is not None else s[0]) - (config.start or 0.0) if s else 0.0
               for s in spans]
    counts = parts_for(lengths, workers)
    units: list[tuple[float, PlannedSource]] = []
    splits: dict[str, Split] = {}
    for source, span, length, count in zip(todo, spans, lengths, counts):
        parts = cut(source, count, span[0], span[1], config) if span and count > 1 else []
        if parts and any(os.path.abspath(w.path) in taken for p in parts for w in p.written()):
            parts = []
        if not parts:
            units.append((length, source))
            continue
        splits[source.uri] = Split(source, parts, stale=stale_parts(source, parts, taken))
        units += [(length / count, part) for part in parts]
        logger.info("%s: %d parts of %.0f s over the workers", source.uri, count, length / count)
    units.sort(key=lambda unit: -unit[0])  # (stable: a video's parts in order)
    return [unit for _, unit in units], splits


class PartResults:
    """A driver's videos run as parts (:class:`Split` by source): each part's result held until its video's parts
    are all in, then the video's result joined from them and recorded, as one process records a source."""

    def __init__(self, splits: dict[str, Split], config: RunConfig) -> None:
        self.splits = splits
        self.config = config

    def handed_out(self, source: PlannedSource) -> None:
        """``source`` went to a worker: a part of a video is its video's beginning (from then on, a run cut off
        records the video interrupted)."""
        split = self.splits.get(source.uri) if source.part is not None else None
        if split is not None and split.began is None:
            split.began = time.perf_counter()

    def take(self, result: SourceResult, record: Callable[[SourceResult], None]) -> None:
        """A part's result: once its video's parts are all in, the video's, joined, goes to ``record`` (its manifest
        line and files' names); then the parts' files are removed. A Ctrl-C while they are joined leaves the video
        unrecorded (:meth:`left` records it interrupted)."""
        assert result.part is not None
        split = self.splits[result.source]
        split.results[result.part] = result
        if split.ended or not split.complete:
            return
        joined = join_parts(split, self.config)
        split.ended = True
        record(joined)
        split.remove_parts()

    def unjoined(self) -> list[SourceResult]:
        """The results in of videos not yet joined (a progress bar counts their frames)."""
        return [r for split in self.splits.values() if not split.ended for r in split.results.values()]

    def left(self) -> list[SourceResult]:
        """Cut off: each video begun and not joined, interrupted (``--resume`` runs it again, every part)."""
        left = []
        for split in self.splits.values():
            if not split.ended and split.began is not None:
                split.ended = True
                left.append(SourceResult(source=split.whole.uri, status="interrupted", exit_code=130))
        return left


# -- joining a video's parts -------------------------------------------------------------------------------------


@dataclass
class _Row:
    frame: int
    time_s: float
    track: int
    box: tuple[float, float, float, float]
    fields: Any  # the row as read (a CSV row's strings, a JSON line's object), written back with its id changed


class _PartRows:
    """A part's rows file read as a stream (a part may be an hour of four faces a frame: its rows are never all held):
    each row's frame, time, track and box, and what the track summaries take from it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.jsonl = path.name.removesuffix(".partial").endswith(".jsonl")
        self.header: list[str] | None = None
        self.labels: tuple[str, ...] = ()

    def rows(self) -> Iterator[_Row]:
        try:
            with open(self.path, newline="", encoding="utf-8") as file:
                yield from self._jsonl(file) if self.jsonl else self._csv(file)
        except (OSError, ValueError, KeyError, IndexError, csv.Error) as exc:
            raise OutputError(f"cannot read the part {self.path}: {exc}") from None

    def _csv(self, file: Any) -> Iterator[_Row]:
        reader = csv.reader(file)
        self.header = next(reader, None)
        if self.header is None:
            return
        at = {name: i for i, name in enumerate(self.header)}
        self.labels = tuple(name[2:] for name in self.header if name.startswith("p_"))
        self._columns = {name: at[name] for name in ("valence", "arousal", "score")}
        self._p = [at[f"p_{label}"] for label in self.labels]
        frame, time_s, self._track, self._source = at["frame"], at["timestamp_s"], at["track_id"], at["source"]
        x1, y1, x2, y2 = (at[name] for name in ("x1", "y1", "x2", "y2"))
        for fields in reader:
            if fields:
                yield _Row(int(fields[frame]), float(fields[time_s]), int(fields[self._track]),
                           (float(fields[x1]), float(fields[y1]), float(fields[x2]), float(fields[y2])), fields)

    def _jsonl(self, file: Any) -> Iterator[_Row]:
        for line in file:
            if line.strip():
                entry = json.loads(line)
                if not self.labels:
                    self.labels = tuple(entry["probabilities"])
                yield _Row(entry["frame"], entry["timestamp_s"], entry["track_id"],
                           (entry["x1"], entry["y1"], entry["x2"], entry["y2"]), entry)

    def values(self, row: _Row) -> tuple[float, float, float, list[float]]:
        """(valence, arousal, score, probabilities in the labels' order) of a row, for its track's summary."""
        if self.jsonl:
            entry = row.fields
            return entry["valence"], entry["arousal"], entry["score"], [entry["probabilities"][k] for k in self.labels]
        fields, at = row.fields, self._columns
        return (float(fields[at["valence"]]), float(fields[at["arousal"]]), float(fields[at["score"]]),
                [float(fields[i]) for i in self._p])

    def source(self, row: _Row) -> str:
        return row.fields["source"] if self.jsonl else row.fields[self._source]  # type: ignore[no-any-return]

    def write(self, out: Any, writer: Any, row: _Row, track: int) -> None:
        """The row as it was read, its track id ``track``."""
        if self.jsonl:
            out.write(json.dumps({**row.fields, "track_id": track}, ensure_ascii=False) + "\n")
        else:
            row.fields[self._track] = str(track)
            writer.writerow(row.fields)


def match_tracks(before: Sequence[_Row], overlap: Sequence[_Row]) -> dict[int, int]:
    """Which track of the part before (its id) each track of a part's overlap rows is: the one whose box it shares
    (IoU ≥ SAME_FACE_IOU) in most of the frames where it is seen, at least half of them; one each way."""
    boxes: dict[int, list[_Row]] = {}
    for row in before:
        boxes.setdefault(row.frame, []).append(row)
    votes: Counter[tuple[int, int]] = Counter()
    seen: Counter[int] = Counter()
    for row in overlap:
        seen[row.track] += 1
        for shared in boxes.get(row.frame, ()):
            if pair_iou(row.box, shared.box) >= SAME_FACE_IOU:
                votes[(row.track, shared.track)] += 1
    matched: dict[int, int] = {}
    used: set[int] = set()
    for (track, other), count in votes.most_common():
        if track not in matched and other not in used and 2 * count >= seen[track]:
            matched[track] = other
            used.add(other)
    return matched


class _Joiner:
    """The joined rows, written as the parts are read in order, and each joined track's columns for its summary."""

    def __init__(self, out: Any, parts: Sequence[PlannedSource]) -> None:
        self.out, self.parts = out, parts
        self.writer = csv.writer(out, lineterminator="\n")
        self.ids: dict[tuple[int, int], int] = {}  # (part, its track) → the joined id, in order of first appearance
        self.tracks = TrackCollector()
        self.faces = 0
        self.header: list[str] | None = None

    def part(self, k: int, rows: _PartRows, tail: list[_Row], tail_keys: dict[int, tuple[int, int]],
             last: bool) -> tuple[list[_Row], dict[int, tuple[int, int]]]:
        """Part ``k``'s rows of its own stretch written, its tracks that the part before's ``tail`` (its rows in this
        part's overlap, their tracks' keys in ``tail_keys``) shares taking their ids; returns this part's tail for the
        next part (``last``: none) and its tracks' keys."""
        part = self.parts[k]
        keep_from = part.keep_from_s
        until = None if last else self.parts[k + 1].keep_from_s
        next_start = None if last else (self.parts[k + 1].start_s or 0.0)
        overlap: list[_Row] = []
        keys: dict[int, tuple[int, int]] = {}
        same: dict[int, tuple[int, int]] | None = None
        own_tail: list[_Row] = []
        for row in rows.rows():
            if keep_from is not None and row.time_s < keep_from:
                overlap.append(row)  # (the overlap: seconds of rows, held to match this part's tracks)
                continue
            if until is not None and row.time_s >= until:
                break
            if same is None:
                same = self._same(tail, tail_keys, overlap)
                if self.header is None and rows.header is not None:
                    self.header = rows.header
                    self.writer.writerow(rows.header)
            key = keys.get(row.track)
            if key is None:
                key = keys[row.track] = same.get(row.track, (k, row.track))
            joined = self.ids.get(key)
            if joined is None:
                joined = self.ids[key] = len(self.ids) + 1
            if next_start is not None and row.time_s >= next_start:
                own_tail.append(row)  # (matched by the next part by its own track, row.track)
            self._add(rows, row, joined)
            rows.write(self.out, self.writer, row, joined)
            self.faces += 1
        if self.header is None and rows.header is not None:  # (no row kept: the header still leads the file)
            self.header = rows.header
            self.writer.writerow(rows.header)
        return own_tail, keys

    def _same(self, tail: list[_Row], tail_keys: dict[int, tuple[int, int]],
              overlap: list[_Row]) -> dict[int, tuple[int, int]]:
        if not tail or not overlap:
            return {}
        return {track: tail_keys[other] for track, other in match_tracks(tail, overlap).items() if other in tail_keys}

    def _add(self, rows: _PartRows, row: _Row, joined: int) -> None:
        source = rows.source(row)
        series = self.tracks.tracks.get((source, joined))
        if series is None:
            series = self.tracks.tracks[(source, joined)] = TrackSeries(source, joined, rows.labels)
        valence, arousal, score, probabilities = rows.values(row)
        series.append(row.frame, row.time_s, valence, arousal, score, row.box, probabilities)


def join_parts(split: Split, config: RunConfig) -> SourceResult:
    """The source's result from its parts' (all in, in order): its rows, tracks, segments and summary written under
    partial names, their renames staged (the driver writes the line, then names them, the rows last), as one
    process finishes a source. The joined parts are those up to the first that did not end ``ok`` (one process
    stops a source there); that part's failure is the source's. The rows are read as a stream: a part's overlap
    and the stretch the next part overlaps are all that is held."""
    from emopipe.report.outputs import analyse, write_segments_csv, write_tracks_csv

    began = time.perf_counter()
    whole = split.whole
    results = [split.results[part.key] for part in split.parts]
    # (a part that failed past its stretch, reading on to a key frame, has its rows: the next part meets the same)
    failed = next((r for r in results if r.status != "ok" and not r.tail_frames), None)
    joined = results[:results.index(failed) + 1] if failed is not None else results
    joined = [r for r in joined if "rows" in r.outputs]
    seconds = time.perf_counter() - split.began if split.began is not None else sum(r.seconds for r in results)
    if not joined:  # (its first part failed before it wrote a row file: nothing to join)
        assert failed is not None
        return replace(failed, source=whole.uri, part=None, lead_frames=None, tail_frames=None, outputs={},
                       renames=[], rows=0, faces=0, seconds=round(seconds, 4))
    rows_partial = partial_path(whole.rows)
    try:
        rows_partial.parent.mkdir(parents=True, exist_ok=True)
        with open(rows_partial, "w", newline="", encoding="utf-8") as out:
            joiner = _Joiner(out, split.parts)
            tail: list[_Row] = []
            keys: dict[int, tuple[int, int]] = {}
            for k, result in enumerate(joined):
                tail, keys = joiner.part(k, _PartRows(_rows_at(split.parts[k], result)), tail, keys,
                                         last=k == len(joined) - 1)
    except OSError as exc:
        raise OutputError(f"cannot write {whole.rows}: {exc.strerror or exc}") from None
    frames = sum(r.frames - (r.lead_frames or 0) - (r.tail_frames or 0) for r in joined)
    read = [_summary_of(part, result) for part, result in zip(split.parts, joined)]
    # (each part counts its own stretch's key frames; where its summary is not there to read, its own frames)
    detected = sum(f.get("frames_detected", r.frames - (r.lead_frames or 0) - (r.tail_frames or 0))
                   for f, r in zip(read, joined))
    faces = joiner.faces
    outputs = {"rows": str(whole.rows)}
    staged: list[tuple[Path, Path]] = []
    tracks = None
    try:  # (from the rows, as one process's from its records: a failure is a warning, the rows are complete)
        reports = analyse(joiner.tracks)
        write_tracks_csv(partial_path(whole.tracks), reports)
        write_segments_csv(partial_path(whole.segments), reports)
        staged += [(partial_path(whole.tracks), whole.tracks), (partial_path(whole.segments), whole.segments)]
        outputs.update(tracks=str(whole.tracks), segments=str(whole.segments))
        tracks = [r.summary.as_dict() for r in reports]
    except (EmopipeError, ImportError, OSError, ValueError) as exc:
        logger.warning("%s: track summaries not written (the rows are complete): %s", whole.uri, exc)
    decoders = sorted({d for f in read if isinstance(d := f.get("decoder"), str)})
    error = failed.error if failed is not None else None
    summary = RunSummary(source=whole.uri, decoder="+".join(decoders) or "opencv", frames=frames, faces=faces,
                         seconds=round(seconds, 4), fps=frames / seconds if seconds else 0.0,
                         faces_per_s=faces / seconds if seconds else 0.0, detect_every=config.detect_every,
                         frames_detected=detected, ended_early=failed.ended_early if failed is not None else None,
                         outputs=dict(outputs), tracks=tracks, start_s=config.start)
    facts = {**summary.as_dict(), "parts": len(split.parts), "join_s": round(time.perf_counter() - began, 3)}
    summary_partial = partial_path(whole.summary)
    try:
        summary_partial.write_text(json.dumps(facts, indent=2) + "\n")
    except OSError as exc:
        raise OutputError(f"cannot write {whole.summary}: {exc.strerror or exc}") from None
    staged += [(summary_partial, whole.summary), (rows_partial, whole.rows)]  # (the rows last)
    outputs["summary"] = str(whole.summary)
    remove_earlier(whole.files)  # (an earlier attempt's: beside the new ones they would look done too soon)
    return SourceResult(source=whole.uri, status="ok" if failed is None else failed.status, frames=frames, faces=faces,
                        rows=faces, seconds=round(seconds, 4), error=error,
                        exit_code=failed.exit_code if failed is not None else None,
                        kind=failed.kind if failed is not None else None, outputs=outputs,
                        ended_early=failed.ended_early if failed is not None else None, renames=staged)


def _rows_at(part: PlannedSource, result: SourceResult) -> Path:
    """Where a part's rows are: under the partial name its worker left them at (its result's renames say)."""
    return next((Path(at) for at, final in result.renames if Path(final) == part.rows), part.rows)


def _summary_of(part: PlannedSource, result: SourceResult) -> dict[str, Any]:
    """A part's summary as its worker wrote it (under its partial name); empty where there is none to read."""
    at = next((Path(at) for at, final in result.renames if Path(final) == part.summary), part.summary)
    with contextlib.suppress(OSError, ValueError):
        facts = json.loads(at.read_text())
        return facts if isinstance(facts, dict) else {}
    return {}


__all__ = ["PartResults", "Split", "join_parts", "match_tracks", "not_splittable", "parts_for", "plan_parts",
           "video_span"]
