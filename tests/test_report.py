"""Per-track summaries, segments and the HTML report (emopipe.report): known answers on synthesized rows,
rows files read back, and a real run's report opened in headless Chromium with the network off."""

from __future__ import annotations

import csv
import dataclasses
import itertools
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import emopipe
from emopipe.config import RunConfig
from emopipe.errors import EmopipeError, InputNotFoundError, InputUnreadableError, OutputError, UsageError
from emopipe.io.records import open_writer
from emopipe.pipeline.archive import SourceResult
from emopipe.pipeline.many import report_many
from emopipe.report.html import AROUSAL_COLOUR, EXPRESSION_COLOURS, VALENCE_COLOUR, render, track_chart_svg
from emopipe.report.outputs import analyse, save_thumbnails, write_report
from emopipe.report.rows import read_records
from emopipe.report.segments import change_points
from emopipe.report.tracks import TrackCollector, TrackSeries
from emopipe.types import LABELS, FaceRecord
from tests.support.streams import chromium, free_port
from tests.support.synth import moving_face_video

REPO = Path(__file__).resolve().parents[1]
LABELS8 = LABELS[8]
FPS = 25.0
FRAME = 1 / FPS
SVG = "{http://www.w3.org/2000/svg}"


def synthesized_track(parts: list[tuple[str, float, float, float]], *, track_id: int = 1, source: str = "clip.mp4",
                      first_frame: int = 0, noise: float = 0.05, seed: int = 0) -> list[FaceRecord]:
    """A track holding ``(expression, seconds, valence, arousal)`` parts in turn, with Gaussian noise."""
    rng = np.random.default_rng(seed)
    records: list[FaceRecord] = []
    frame = first_frame
    for label, seconds, valence, arousal in parts:
        for _ in range(round(seconds * FPS)):
            p = np.full(len(LABELS8), 0.02) + rng.uniform(0, 0.01, len(LABELS8))
            p[LABELS8.index(label)] = 0.8
            records.append(FaceRecord.create(
                labels=LABELS8, probabilities=p / p.sum(), source=source, frame=frame, timestamp_s=frame / FPS,
                track_id=track_id, box=(40.0, 30.0, 140.0, 150.0), score=0.9,
                valence=valence + rng.normal(0, noise), arousal=arousal + rng.normal(0, noise)))
            frame += 1
    return records


def series_of(records: list[FaceRecord]) -> TrackSeries:
    collector = TrackCollector()
    collector.add(records)
    (series,) = collector.series()
    return series


# -- summaries and segments, known answers ------------------------------------------------------------------

def test_a_track_happy_for_2_s_then_sad_for_3_s():
    records = synthesized_track([("happy", 2.0, 0.6, 0.3), ("sad", 3.0, -0.5, -0.2)])
    (track,) = emopipe.summarize(records)
    assert (track.source, track.track_id, track.frames, track.gaps) == ("clip.mp4", 1, 125, 0)
    assert track.first_s == 0 and track.last_s == pytest.approx(4.96)
    assert track.duration_s == pytest.approx(5.0)
    assert track.shares["happy"] == pytest.approx(0.4) and track.shares["sad"] == pytest.approx(0.6)
    assert sum(track.shares.values()) == pytest.approx(1.0)
    assert track.dominant == "sad" and not track.short
    assert track.valence_median == pytest.approx(-0.5, abs=0.05)  # 60 % of the frames are sad
    assert track.valence_p90 == pytest.approx(0.6, abs=0.1) and track.valence_p10 == pytest.approx(-0.5, abs=0.1)
    assert track.valence_mean == pytest.approx(0.4 * 0.6 + 0.6 * -0.5, abs=0.02)

    from emopipe.report.outputs import analyse

    collector = TrackCollector()
    collector.add(records)
    (report,) = analyse(collector)
    expression = [s for s in report.segments if s.kind == "expression"]
    assert [s.label for s in expression] == ["happy", "sad"]
    assert expression[0].start_s == 0 and expression[1].end_s == pytest.approx(5.0)
    assert expression[0].end_s == expression[1].start_s == pytest.approx(2.0, abs=FRAME + 1e-9)
    affect = [s for s in report.segments if s.kind == "affect"]
    assert len(affect) == 2  # one change point
    assert affect[1].start_s == pytest.approx(2.0, abs=FRAME + 1e-9)  # the change point, ± one frame
    assert (affect[0].valence_mean, affect[1].valence_mean) == (pytest.approx(0.6, abs=0.05),
                                                                pytest.approx(-0.5, abs=0.05))


def test_brief_flickers_do_not_start_an_expression_segment():
    records = synthesized_track([("neutral", 2.0, 0.0, 0.0), ("surprise", 0.32, 0.0, 0.0), ("neutral", 2.0, 0.0, 0.0),
                                 ("anger", 1.5, 0.0, 0.0)])
    from emopipe.report.segments import expression_segments

    segments = expression_segments(series_of(records), FRAME)
    assert [s.label for s in segments] == ["neutral", "anger"]  # 8 frames of surprise joined their neighbours
    assert segments[1].start_s == pytest.approx(4.32, abs=FRAME + 1e-9)


def _absorbed_one_at_a_time(runs, times, ends, shortest_s):
    """The rule as docs/report.md states it, by a full scan after every merge (the oracle)."""
    runs = [list(r) for r in runs]

    def length(run):
        return float(ends[run[1] - 1] - times[run[0]])

    while len(runs) > 1:
        i = min(range(len(runs)), key=lambda k: length(runs[k]))
        if length(runs[i]) >= shortest_s:
            break
        left = runs[i - 1] if i > 0 else None
        right = runs[i + 1] if i + 1 < len(runs) else None
        if left is not None and (right is None or length(left) >= length(right)):
            left[1] = runs[i][1]
        else:
            right[0] = runs[i][0]
        del runs[i]
        merged = [runs[0]]
        for run in runs[1:]:
            if run[2] == merged[-1][2]:
                merged[-1][1] = run[1]
            else:
                merged.append(run)
        runs = merged
    return runs


@settings(max_examples=300, deadline=None)
@given(labels=st.lists(st.integers(0, 3), min_size=1, max_size=80),
       gaps=st.lists(st.sampled_from([0.04, 0.04, 0.04, 0.08, 0.5]), min_size=80, max_size=80))
def test_short_expression_runs_are_absorbed_as_the_rule_says(labels, gaps):
    from emopipe.report.segments import MIN_EXPRESSION_S, _absorb_short_runs, _ends, _runs

    times = np.concatenate([[0.0], np.cumsum(gaps[:len(labels) - 1])])  # uneven frame times, many equal lengths
    ends = _ends(times, 0.04)
    runs = _runs(np.array(labels))
    assert _absorb_short_runs(runs, times, ends) == _absorbed_one_at_a_time(runs, times, ends, MIN_EXPRESSION_S)


def test_an_hour_of_a_flickering_face_is_segmented_into_runs_of_half_a_second_or_more():
    # a face the network cannot decide about: the expression changes every few frames for an hour at 25 fps
    # (tens of thousands of runs, which a scan for the shortest after every merge took minutes on)
    from emopipe.report.segments import _absorb_short_runs, _ends, _runs

    rng = np.random.default_rng(11)
    labels = np.repeat(rng.integers(0, 8, 30_000), rng.integers(1, 6, 30_000))[:90_000]
    times = np.arange(len(labels)) * FRAME
    runs = _runs(labels)
    assert len(runs) > 20_000
    absorbed = _absorb_short_runs(runs, times, _ends(times, FRAME))
    assert absorbed[0][0] == 0 and absorbed[-1][1] == len(labels)
    assert all(a[1] == b[0] and a[2] != b[2] for a, b in itertools.pairwise(absorbed))  # they tile the track
    assert all(b - a >= round(0.5 / FRAME) for a, b, _ in absorbed)  # each lasts the shortest segment


def test_steady_noise_has_no_change_point_and_a_long_track_finds_its_change():
    steady = synthesized_track([("neutral", 60.0, 0.1, 0.0)], noise=0.15, seed=3)
    assert change_points(series_of(steady), FRAME) == []
    small = synthesized_track([("neutral", 20.0, 0.1, 0.0), ("neutral", 20.0, 0.15, 0.0)], noise=0.01, seed=4)
    assert change_points(series_of(small), FRAME) == []  # a shift under MIN_SHIFT is not a change
    # ten minutes, binned before the search: the change is found to within a bin (6 frames here)
    long = synthesized_track([("happy", 400.0, 0.5, 0.2), ("sad", 200.0, -0.4, 0.1)], noise=0.2, seed=5)
    (point,) = change_points(series_of(long), FRAME)
    assert abs(point - 400 * FPS) <= 15000 / 1000


def _penalised_cost(signal: np.ndarray, ends: list[int], penalty: float) -> float:
    """What the change-point search minimises: each segment's squared deviations from its mean, plus the penalty."""
    starts = [0, *ends[:-1]]
    return sum(float(((signal[a:b] - signal[a:b].mean(axis=0)) ** 2).sum()) + penalty for a, b in zip(starts, ends))


def _random_steps(rng: np.random.Generator, n: int) -> np.ndarray:
    """n points of (valence, arousal): a few steps of the mean, under noise (sometimes rounded: ties)."""
    cuts = np.sort(rng.choice(np.arange(1, n), size=min(int(rng.integers(0, 8)), n - 1), replace=False))
    lengths = np.diff(np.concatenate([[0], cuts, [n]]))
    signal = np.repeat(rng.normal(0, rng.choice([0.05, 0.3, 1.0]), (len(lengths), 2)), lengths, axis=0)
    signal += rng.normal(0, rng.choice([0.01, 0.1, 0.5]), signal.shape)
    return np.round(signal, 1) if rng.random() < 0.2 else signal


def test_the_change_point_search_finds_the_least_penalised_cut_of_every_small_signal():
    # against every admissible cut of signals short enough to list them all
    from emopipe.report.segments import _penalised_partition

    rng = np.random.default_rng(21)
    for _ in range(150):
        n, min_size = int(rng.integers(2, 15)), int(rng.integers(1, 4))
        if n < min_size:
            continue
        signal, penalty = _random_steps(rng, n), float(rng.choice([0.001, 0.05, 0.5, 3.0]))
        cuts = [[*inner, n] for k in range(n) for inner in itertools.combinations(range(min_size, n - min_size + 1), k)
                if all(b - a >= min_size for a, b in itertools.pairwise([0, *inner, n]))]
        best = min(_penalised_cost(signal, ends, penalty) for ends in cuts)
        found = _penalised_partition(signal, penalty, min_size)
        assert found in cuts and _penalised_cost(signal, found, penalty) == pytest.approx(best, rel=1e-12, abs=1e-12)


def test_the_change_point_search_cuts_where_ruptures_does_or_finds_a_cheaper_cut():
    # ruptures' KernelCPD (linear kernel, PELT) is the reference; its pruning with a minimum segment length sometimes
    # discards the best cut (15 of 385 random signals when written), and then this search's cut costs less
    ruptures = pytest.importorskip("ruptures")
    from emopipe.report.segments import _penalised_partition

    rng = np.random.default_rng(5)
    same = 0
    for _ in range(120):
        n, min_size = int(rng.integers(8, 700)), int(rng.integers(2, 30))
        if n < 2 * min_size:
            continue
        signal, penalty = _random_steps(rng, n), float(rng.choice([0.05, 1.0, 5.0])) * math.log(n)
        ours = _penalised_partition(signal, penalty, min_size)
        search = ruptures.KernelCPD(kernel="linear", min_size=min_size).fit(signal)
        theirs = [int(e) for e in search.predict(pen=penalty)]
        if ours == theirs:
            same += 1
        else:
            assert _penalised_cost(signal, ours, penalty) < _penalised_cost(signal, theirs, penalty)
    assert same >= 100


def test_gaps_are_counted_and_short_tracks_flagged_not_dropped():
    first = synthesized_track([("happy", 0.4, 0.5, 0.5)], track_id=1)
    later = synthesized_track([("happy", 2.0, 0.5, 0.5)], track_id=1, first_frame=20, seed=1)
    brief = synthesized_track([("fear", 0.4, -0.3, 0.7)], track_id=2, first_frame=5, seed=2)
    tracks = emopipe.summarize([*first, *brief, *later])
    assert [t.track_id for t in tracks] == [1, 2]
    long_one, short_one = tracks
    assert (long_one.frames, long_one.gaps) == (60, 1)
    assert long_one.gap_s == pytest.approx(10 * FRAME)  # frames 10–19 missing
    assert long_one.duration_s == pytest.approx(70 * FRAME) and not long_one.short
    assert short_one.short and short_one.frames == 10 and short_one.dominant == "fear"


def test_faces_each_seen_in_one_frame_last_one_frame_as_beside_a_longer_track():
    # where every track of a source had one record (a face the tracker lost frame after frame), the frame interval was
    # taken as 0: each track lasted 0 s, its segments ended where they began, and the page's span was a frame short
    ones = [r for k in range(3)
            for r in synthesized_track([("happy", FRAME, 0.1, 0.1)], track_id=k + 1, first_frame=k, seed=k)]
    assert [t.duration_s for t in emopipe.summarize(ones)] == pytest.approx([FRAME] * 3)
    longer = synthesized_track([("sad", 0.4, 0.0, 0.0)], track_id=9, first_frame=10)
    assert [t.duration_s for t in emopipe.summarize([*ones, *longer])][:3] == pytest.approx([FRAME] * 3)
    report = analyse(_collected(ones))[0]
    assert [(s.start_s, s.end_s) for s in report.segments] == pytest.approx([(0, FRAME)] * 2)
    assert emopipe.summarize(ones[:1])[0].duration_s == 0  # (one frame: no interval to tell)


def test_a_live_sources_frames_dropped_while_it_was_busy_are_no_gaps():
    # a face in view throughout a live run analysed one frame in six (the newest frame taken when the pipeline is free,
    # the others dropped, their numbers skipped) had a gap at every step, 5/6 of its time "missing", and its segments
    # took the camera's frame interval for the analysed one: a 1 s affect segment needed 6 s, smoothing spanned 3 s
    start, analysed_s = 1_764_460_800.0, 6 / 30  # a 30 frames/s camera, every 6th frame analysed
    parts = [("happy", 2.0, 0.5, 0.3), ("sad", 0.4, -0.5, -0.4), ("happy", 2.0, 0.5, 0.3)]  # (× 5: analysed s)
    records = [dataclasses.replace(r, frame=6 * i, timestamp_s=start + i * analysed_s)
               for i, r in enumerate(synthesized_track(parts, noise=0.02))][:-15]
    records = records[:60] + records[75:]  # (away 3 s: one gap)
    (track,) = emopipe.summarize(records)
    assert (track.frames, track.gaps) == (len(records), 1)
    assert track.gap_s == pytest.approx(3.0) and track.duration_s == pytest.approx(19.0)
    report = analyse(_collected(records))[0]
    affect = [(s.start_s - start, s.label) for s in report.segments if s.kind == "affect"]
    assert [label for _, label in affect] == ["happy", "sad", "happy"], affect
    assert [t for t, _ in affect][1] == pytest.approx(10.0, abs=analysed_s)


def test_records_in_any_order_give_the_summary_of_records_in_time_order():
    # a rows file in reverse frame order gave first_s 0.3, last_s 0 and a negative duration
    records = [*synthesized_track([("happy", 0.4, 0.5, 0.5)]),
               *synthesized_track([("sad", 2.0, -0.5, 0.2)], first_frame=20, seed=1)]
    records = [dataclasses.replace(r, file=f"img{r.frame}.png") for r in records]
    in_order = emopipe.summarize(records)
    backwards = emopipe.summarize(records[::-1])
    assert backwards == in_order
    assert (in_order[0].first_s, in_order[0].gaps) == (0.0, 1) and in_order[0].duration_s == pytest.approx(70 * FRAME)
    collector = _collected(records[::-1])
    (series,) = collector.series()
    assert series.frames.tolist() == [r.frame for r in records]
    assert series.files[0] == "img0.png" and series.files[len(records) - 1] == f"img{records[-1].frame}.png"
    assert series.probabilities.tolist() == [np.float32(r.probabilities).tolist() for r in records]


# -- rows files --------------------------------------------------------------------------------------------

def _rounded_records(n: int = 12) -> list[FaceRecord]:
    """Records with values at the writers' precision, so reading back must give them exactly."""
    rng = np.random.default_rng(7)
    records = []
    for i in range(n):
        p = rng.dirichlet(np.ones(8)).round(6)
        p[0] += 1 - p.sum()
        landmarks = rng.uniform(0, 300, (68, 2)).round(2) if i % 3 else None
        records.append(FaceRecord.create(
            labels=LABELS8, probabilities=p.round(6), source="dir/a video.mp4", frame=i, timestamp_s=round(i / 30, 6),
            track_id=1 + i % 2, box=tuple(np.round([10 + i, 20, 110 + i, 130.25], 2)), score=round(0.5 + i / 100, 6),
            valence=round(float(rng.uniform(-1, 1)), 6), arousal=round(float(rng.uniform(-1, 1)), 6),
            landmarks=landmarks, detected=bool(i % 2)))
    return records


@pytest.mark.parametrize("files", [False, True])  # True: a folder of images' rows name each image
@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_rows_files_read_back_equal_the_records_written(tmp_path, suffix, files):
    records = _rounded_records()
    if files:
        records = [dataclasses.replace(r, file=f"img {r.frame:03d}.png") for r in records]
    path = tmp_path / f"rows{suffix}"
    with open_writer(path, labels=LABELS8, landmarks=True, detected=True, files=files) as writer:
        writer.write(records)
    back = list(read_records(path))
    assert len(back) == len(records)
    for a, b in zip(records, back):
        for name in ("source", "frame", "timestamp_s", "track_id", "box", "score", "label", "valence", "arousal",
                     "detected", "labels", "file"):
            assert getattr(a, name) == getattr(b, name), name
        assert np.array_equal(a.probabilities, b.probabilities)
        assert (a.landmarks is None and b.landmarks is None) or np.array_equal(a.landmarks, b.landmarks)
    assert emopipe.summarize(back) == emopipe.summarize(records)
    # an unfinished run's rows (NAME.partial: docs/outputs.md) read as the format before .partial
    partial = path.rename(path.with_name(path.name + ".partial"))
    assert [r.frame for r in read_records(partial)] == [r.frame for r in records]
    # saved again by a spreadsheet or an editor that begins it with a byte-order mark: the same rows (was: "no
    # column source", or line 1 not JSON)
    marked = tmp_path / f"marked{suffix}"
    marked.write_bytes(b"\xef\xbb\xbf" + partial.read_bytes())
    assert [(r.frame, r.source, r.track_id) for r in read_records(marked)] == [
        (r.frame, r.source, r.track_id) for r in records]


def test_a_tracks_or_segments_file_given_as_rows_is_refused_saying_what_it_is(tmp_path):
    # `emopipe report results/*.csv` takes the tracks and segments files beside the rows too: exit 4, saying which
    # file it is rather than only the columns it lacks
    reports = analyse(_collected(synthesized_track([("happy", 1.0, 0.5, 0.5)])))
    from emopipe.report.outputs import write_segments_csv, write_tracks_csv

    write_tracks_csv(tmp_path / "a.emotions.tracks.csv", reports)
    write_segments_csv(tmp_path / "a.emotions.segments.csv", reports)
    for kind in ("tracks", "segments"):
        with pytest.raises(InputUnreadableError, match=f"it is the {kind} file emopipe writes beside the rows"):
            list(read_records(tmp_path / f"a.emotions.{kind}.csv"))


def test_rows_that_are_not_emopipe_rows_are_refused_with_the_line(tmp_path):
    with pytest.raises(InputNotFoundError):
        list(read_records(tmp_path / "missing.csv"))
    other = tmp_path / "other.csv"
    other.write_text("a,b\n1,2\n")
    with pytest.raises(InputUnreadableError, match="no column"):
        list(read_records(other))
    good = tmp_path / "rows.jsonl"
    with open_writer(good, labels=LABELS8) as writer:
        writer.write(_rounded_records(2))
    good.write_text(good.read_text() + '{"frame": "x"}\n')
    with pytest.raises(InputUnreadableError, match=r"rows.jsonl:3"):
        list(read_records(good))
    with pytest.raises(InputUnreadableError, match="rows file"):
        list(read_records(tmp_path / "rows.txt"))


def test_the_report_command_refuses_bad_inputs_and_outputs_with_exit_codes(tmp_path):
    rows = tmp_path / "rows.csv"
    with open_writer(rows, labels=LABELS8) as writer:
        writer.write(_rounded_records(4))
    cases = [([str(tmp_path / "none.csv"), "-o", str(tmp_path / "r.html")], 3),
             ([str(tmp_path / "r.txt"), "-o", str(tmp_path / "r.html")], 4),
             ([str(rows), "-o", str(tmp_path / "r.pdf")], 2),
             ([str(rows), "-o", str(tmp_path / "r.html"), "--tracks", str(rows)], 2),
             ([str(rows), "-o", str(tmp_path / "no-such-dir" / "r.html")], 5),
             ([str(rows), "-o", str(tmp_path / "mine.html")], 2),  # a page of the user's is never replaced
             ([str(rows), "-o", str(tmp_path / "rows.html"), "--no-thumbnails"], 2)]  # the rows at .rows.html.0.part
    (tmp_path / "r.txt").write_text("hello\n")
    (tmp_path / "mine.html").write_text("<p>mine</p>\n")
    (tmp_path / ".rows.html.0.part").hardlink_to(rows)
    for arguments, code in cases:
        done = subprocess.run([sys.executable, "-m", "emopipe", "report", *arguments], capture_output=True, text=True,
                              cwd=REPO, timeout=120)
        assert done.returncode == code, (arguments, done.stderr)
        assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert rows.read_text().startswith("source,frame")  # the input is untouched
    assert (tmp_path / "mine.html").read_text() == "<p>mine</p>\n"


def report_command(*argv: object) -> EmopipeError | None:
    """``emopipe report ARGV`` in this process: the error it ends with (its exit code: ``.exit_code``), or None."""
    from emopipe.cli import report

    args = report.build_parser().parse_args([str(a) for a in argv])
    try:
        report.run(args)
    except EmopipeError as exc:
        assert "\n" not in str(exc)  # one line
        return exc
    return None


def rows_file(path: Path, *, labels: tuple[str, ...] = LABELS8, source: str = "clip.mp4", n: int = 6) -> Path:
    """A rows file of ``n`` frames of one face of ``source``, the model's classes ``labels``."""
    rng = np.random.default_rng(3)
    records = [FaceRecord.create(labels=labels, probabilities=rng.dirichlet(np.ones(len(labels))), source=source,
                                 frame=i, timestamp_s=i / FPS, track_id=1, box=(40.0, 30.0, 140.0, 150.0), score=0.9,
                                 valence=0.1, arousal=-0.2) for i in range(n)]
    with open_writer(path, labels=labels) as writer:
        writer.write(records)
    return path


def test_the_report_command_refuses_a_start_that_is_no_time_in_the_source(tmp_path):
    # --start nan linked every time to "#t=nan", and a negative one past the video's moments
    rows = rows_file(tmp_path / "rows.csv")
    for start in ("nan", "-1", "inf"):
        error = report_command(rows, "-o", tmp_path / "r.html", "--start", start)
        assert isinstance(error, UsageError) and "--start must be" in str(error), start
    assert not (tmp_path / "r.html").exists()


def test_a_rows_file_given_twice_is_refused_in_any_spelling(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rows_file(tmp_path / "rows.csv")
    (tmp_path / "link.csv").symlink_to("rows.csv")
    for twice in (["rows.csv", "rows.csv"], ["./rows.csv", "rows.csv"], ["link.csv", str(tmp_path / "rows.csv")]):
        error = report_command(*twice, "-o", "r.html", "--no-thumbnails")
        assert isinstance(error, UsageError) and error.exit_code == 2, twice
        assert "give each rows file once" in str(error)
    assert not (tmp_path / "r.html").exists()
    assert report_command("rows.csv", "-o", "r.html", "--no-thumbnails") is None  # once is fine


def test_many_rows_files_are_told_apart_with_one_look_each(tmp_path, monkeypatch):
    # (was: every pair compared, each comparison two stats: an archive's 1500 rows files took 5 s, 5000 a minute,
    # before a row was read)
    from emopipe.report import rows as rows_module

    one = rows_file(tmp_path / "0.csv", n=1).read_bytes()
    paths = []
    for i in range(200):
        path = tmp_path / f"{i}.csv"
        path.write_bytes(one.replace(b"clip.mp4", f"v{i}.mp4".encode()))
        paths.append(path)
    looks = []
    real_stat, real_samefile = os.stat, os.path.samefile
    monkeypatch.setattr(os, "stat", lambda *a, **k: looks.append(a) or real_stat(*a, **k))
    monkeypatch.setattr(os.path, "samefile", lambda *a: looks.append(a) or real_samefile(*a))
    assert len(list(rows_module.read_rows_files(paths))) == 200
    assert len(looks) <= 3 * len(paths)
    (tmp_path / "link.csv").symlink_to(paths[7])
    with pytest.raises(UsageError, match=r"/link\.csv is .*/7\.csv again"):  # (and a file twice is still told)
        list(rows_module.read_rows_files([*paths[:10], tmp_path / "link.csv"]))


def test_one_source_in_two_rows_files_is_refused_not_merged(tmp_path):
    # the CSV and JSONL of one run: their tracks would merge, every frame counted twice
    csv_rows = rows_file(tmp_path / "run.csv")
    jsonl_rows = rows_file(tmp_path / "run.jsonl")
    error = report_command(csv_rows, jsonl_rows, "-o", tmp_path / "r.html", "--no-thumbnails")
    assert isinstance(error, UsageError) and f"{csv_rows} and {jsonl_rows} both hold rows of clip.mp4" in str(error)
    # a 5-class and an 8-class run of one source (was: "internal error: ValueError", exit 1)
    five = rows_file(tmp_path / "five.csv", labels=LABELS[5])
    error = report_command(five, csv_rows, "-o", tmp_path / "r.html", "--no-thumbnails")
    assert isinstance(error, UsageError) and "both hold rows of clip.mp4" in str(error)
    assert not (tmp_path / "r.html").exists()
    # runs of different sources may have different classes: one page, a section each
    other = rows_file(tmp_path / "other.csv", labels=LABELS[5], source="other.mp4")
    tracks = tmp_path / "tracks.csv"
    assert report_command(csv_rows, other, "-o", tmp_path / "r.html", "--tracks", tracks, "--no-thumbnails") is None
    with open(tracks, newline="") as f:
        assert [(t["source"], t["frames"]) for t in csv.DictReader(f)] == [("clip.mp4", "6"), ("other.mp4", "6")]


@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_a_track_in_one_frame_twice_is_refused_not_counted_twice(tmp_path, suffix):
    # the rows of two runs of a video pasted into one file: each track had twice its frames (490 in 10 s at 25 fps)
    rows = rows_file(tmp_path / f"rows{suffix}")
    lines = rows.read_text().splitlines(keepends=True)
    rows.write_text("".join(lines + lines[suffix == ".csv":]))
    error = report_command(rows, "-o", tmp_path / "r.html", "--tracks", tmp_path / "t.csv", "--no-thumbnails")
    assert isinstance(error, InputUnreadableError) and error.exit_code == 4
    assert str(error).startswith(f"{rows}: clip.mp4: track 1 has two rows of frame 0,"), error
    assert not (tmp_path / "r.html").exists() and not (tmp_path / "t.csv").exists()
    with pytest.raises(InputUnreadableError, match="track 1 has two rows of frame 0"):
        emopipe.summarize(read_records(rows))


def test_a_jsonl_file_whose_rows_change_classes_is_refused_with_the_line(tmp_path):
    rows = rows_file(tmp_path / "rows.jsonl", n=2)
    other = rows_file(tmp_path / "five.jsonl", labels=LABELS[5], n=1)
    rows.write_text(rows.read_text() + other.read_text())
    with pytest.raises(InputUnreadableError, match=r"rows.jsonl:3: .*labels neutral, happy, sad, surprise, anger"):
        list(read_records(rows))


def test_malformed_rows_files_are_unreadable_inputs_not_internal_errors(tmp_path):
    deep = tmp_path / "deep.jsonl"
    deep.write_text('{"a":' * 100_000 + "\n")
    huge_field = rows_file(tmp_path / "huge.csv")
    lines = huge_field.read_text().splitlines()
    huge_field.write_text("\n".join([lines[0], lines[1], '"' + "x" * 200_000 + '"' + lines[2][lines[2].index(","):]])
                          + "\n")
    huge_frame = rows_file(tmp_path / "frame.jsonl", n=1)
    huge_frame.write_text(re.sub(r'"frame": ?0', '"frame": 1e400', huge_frame.read_text()))
    assert "1e400" in huge_frame.read_text()
    not_a_number = rows_file(tmp_path / "nan.csv", n=2)
    not_a_number.write_text(not_a_number.read_text().replace(",0.1,-0.2\n", ",nan,inf\n", 1))
    for path, line in ((deep, 1), (huge_field, 3), (huge_frame, 1), (not_a_number, 2)):
        error = report_command(path, "-o", tmp_path / "r.html", "--no-thumbnails")
        assert isinstance(error, InputUnreadableError) and error.exit_code == 4, path
        assert str(error).startswith(f"{path}:{line}: not an emopipe row"), error


def test_a_jsonl_frame_or_track_id_that_is_not_whole_is_refused_not_cut(tmp_path):
    # a track_id of 1.5 in a file edited by hand was read as 1: the rows of that face joined track 1's
    for field, value in (("track_id", "1.5"), ("frame", "2.5"), ("track_id", "true")):
        rows = rows_file(tmp_path / "rows.jsonl", n=3)
        lines = rows.read_text().splitlines(keepends=True)
        lines[2] = re.sub(f'"{field}": [0-9]+', f'"{field}": {value}', lines[2])
        rows.write_text("".join(lines))
        error = report_command(rows, "-o", tmp_path / "r.html", "--no-thumbnails")
        assert isinstance(error, InputUnreadableError), (field, value)
        assert str(error) == f"{rows}:3: not an emopipe row ({field} is not a whole number: {value.title()})", error
    rows = rows_file(tmp_path / "whole.jsonl", n=2)
    rows.write_text(rows.read_text().replace('"frame": 1,', '"frame": 1.0,'))  # (a whole number written as a float)
    assert [r.frame for r in read_records(rows)] == [0, 1]


def test_a_csv_written_by_pandas_with_whole_numbers_as_floats_is_read_and_a_fraction_refused(tmp_path):
    # pandas writes an integer column that a missing value turned into floats as 1.0: read as JSON Lines' 1.0 is (it
    # was refused, exit 4); 1.5 is still never taken for 1
    rows = rows_file(tmp_path / "rows.csv", n=3)
    header, *lines = rows.read_text().splitlines()
    where = {name: i for i, name in enumerate(header.split(","))}

    def written(frame: str, track: str) -> list[str]:
        out = []
        for line in lines:
            values = line.split(",")
            values[where["frame"]] = values[where["frame"]] + frame
            values[where["track_id"]] = values[where["track_id"]] + track
            out.append(",".join(values))
        return out

    floats = tmp_path / "floats.csv"
    floats.write_text("\n".join([header, *written(".0", ".0")]) + "\n")
    assert [(r.frame, r.track_id) for r in read_records(floats)] == [(r.frame, r.track_id) for r in read_records(rows)]
    half = tmp_path / "half.csv"
    half.write_text("\n".join([header, *written("", ".5")]) + "\n")
    error = report_command(half, "-o", tmp_path / "r.html", "--no-thumbnails")
    assert isinstance(error, InputUnreadableError) and error.exit_code == 4
    assert str(error).startswith(f"{half}:2: not an emopipe row (track_id is not a whole number: 1.5)"), error


def test_the_report_command_never_writes_over_a_source_video(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    video = moving_face_video(tmp_path / "clip.mp4", frames=3, empty=None).path
    before = video.read_bytes()
    rows = rows_file(tmp_path / "rows.csv", source=str(video), n=3)
    (tmp_path / "video.csv").symlink_to("clip.mp4")
    for option, path in (("--tracks", "clip.mp4"), ("--segments", "./clip.mp4"), ("--tracks", "tracks.txt")):
        error = report_command(rows, "-o", "r.html", option, path)
        assert isinstance(error, UsageError) and f"{option} {path}: the {option[2:]} are CSV; name it .csv" in str(
            error)
    # a .csv name that is the video all the same (a link): refused once the rows say what their source is
    error = report_command(rows, "-o", "r.html", "--tracks", "video.csv")
    assert isinstance(error, UsageError) and f"is {video}, an input of this run" in str(error)
    assert video.read_bytes() == before and not (tmp_path / "r.html").exists()


def test_the_report_command_never_writes_an_input_under_a_temporary_name(tmp_path, monkeypatch):
    # (was: only the final names were checked; each file is written whole under .NAME.k.part first — the first such
    # name taken and emptied, the others removed as a killed write's — so an input there was written over, or gone)
    monkeypatch.chdir(tmp_path)
    rows = rows_file(tmp_path / "rows.csv", n=3)
    before = rows.read_bytes()
    (tmp_path / ".r.html.0.part").hardlink_to(rows)  # the rows at the page's first temporary name, too
    error = report_command(rows, "-o", "r.html", "--no-thumbnails")
    assert isinstance(error, UsageError) and error.exit_code == 2
    assert str(error) == (f"the report's temporary name .r.html.0.part is {rows}, an input of this run: choose "
                          "another name (outputs never overwrite inputs)")
    (tmp_path / ".r.html.0.part").rename(tmp_path / ".t.csv.5.part")
    error = report_command("rows.csv", "-o", "r.html", "--tracks", "t.csv", "--no-thumbnails")
    assert isinstance(error, UsageError) and "tracks' temporary name .t.csv.5.part is rows.csv, an input" in str(
        error)
    # a source the rows name, at the segments' temporary name: known once the rows are read, refused before a write
    source = tmp_path / ".s.csv.2.part"
    source.write_bytes(b"a video")
    named = rows_file(tmp_path / "named.csv", source=".s.csv.2.part", n=3)
    error = report_command(named, "-o", "r.html", "--segments", "s.csv", "--no-thumbnails")
    assert isinstance(error, UsageError) and "the segments' temporary name .s.csv.2.part is an input" in str(error)
    # a video in the folder the thumbnails are gathered in (what a killed write left there goes whole)
    staging = tmp_path / ".v.thumbnails.0.part"
    staging.mkdir()
    video = moving_face_video(staging / "clip.mp4", frames=3, empty=None).path
    pictures = rows_file(tmp_path / "v.csv", source=str(video), n=3)
    error = report_command(pictures, "-o", "v.html")
    assert isinstance(error, UsageError) and f"thumbnails folder .v.thumbnails.0.part is or holds {video}" in str(error)
    assert rows.read_bytes() == before and source.read_bytes() == b"a video" and video.is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == [".s.csv.2.part", ".t.csv.5.part", ".v.thumbnails.0.part",
                                                          "named.csv", "rows.csv", "v.csv"]  # nothing written


def test_the_report_command_replaces_only_its_own_earlier_files(tmp_path, monkeypatch):
    # (was: any file at an output's name was replaced without a word: a page of the user's, another run's rows given
    # as --tracks, a folder of photos named as the thumbnails')
    monkeypatch.chdir(tmp_path)
    video = moving_face_video(tmp_path / "clip.mp4", frames=3, empty=None).path
    rows = rows_file(tmp_path / "rows.csv", source=str(video), n=3)
    other_rows = rows_file(tmp_path / "other.csv", source="other.mp4", n=3)  # another run's, not an input here
    Path("notes.html").write_text("<html>my notes</html>")
    Path("photos.thumbnails").mkdir()
    Path("photos.thumbnails/me.jpg").write_bytes(b"a photo")
    kept = {p: p.read_bytes() for p in (Path("notes.html"), other_rows, Path("photos.thumbnails/me.jpg"))}
    cases = [(("-o", "notes.html"), "-o notes.html exists and is not a page emopipe wrote"),
             (("-o", "r.html", "--tracks", "other.csv"),
              "--tracks other.csv exists and does not begin with the header of the tracks file emopipe writes"),
             (("-o", "photos.html"), "the report's thumbnails folder photos.thumbnails (replaced whole) exists and "
                                     "holds me.jpg, which is not a thumbnail emopipe wrote")]
    for options, message in cases:
        error = report_command(rows, *options)
        assert isinstance(error, UsageError) and error.exit_code == 2, options
        assert str(error).startswith(message + ": "), error
    assert {p: p.read_bytes() for p in kept} == kept and not Path("r.html").exists()
    assert report_command(rows, "-o", "photos.html", "--no-thumbnails") is None  # (the folder is not written then)
    # its own earlier files are replaced (a run's too: the same writers); so is an empty file
    Path("r.html").touch()
    outputs = ("-o", "r.html", "--tracks", "t.csv", "--segments", "s.csv")
    assert report_command(rows, *outputs) is None
    assert Path("r.thumbnails/track-1.jpg").is_file()
    for name in ("r.html", "t.csv", "s.csv"):
        Path(name).write_bytes(Path(name).read_bytes() + b"an earlier one")
    assert report_command(rows, *outputs) is None
    assert not any(b"an earlier one" in Path(name).read_bytes() for name in ("r.html", "t.csv", "s.csv"))
    error = report_command(rows, "-o", "r.html", "--tracks", "s.csv", "--segments", "t.csv")  # (the other kind)
    assert isinstance(error, UsageError) and "--tracks s.csv exists and does not begin with" in str(error)


def test_the_library_refuses_what_the_report_command_refuses(tmp_path, monkeypatch):
    # (was: write_report, write_collected_report and save_thumbnails replaced any file and any folder without a word:
    # a page of the user's, the photos in NAME.thumbnails, the source video, the rows file just read)
    from emopipe.report.outputs import write_collected_report, write_html

    monkeypatch.chdir(tmp_path)
    video = moving_face_video(tmp_path / "clip.mp4", frames=3, empty=None).path
    rows = rows_file(tmp_path / "clip.emotions.csv", source=str(video), n=3)
    records = list(read_records(rows))
    Path("mine.html").write_text("<html>my own page</html>")
    Path("page.thumbnails").mkdir()
    Path("page.thumbnails/holiday.png").write_bytes(b"a photo")
    (tmp_path / ".hard.html.3.part").hardlink_to(rows)  # the rows at a temporary name the page is written under
    kept = {p: p.read_bytes() for p in (video, rows, Path("mine.html"), Path("page.thumbnails/holiday.png"))}
    cases = [(lambda: write_report(records, "mine.html"),
              "the report mine.html exists and is not a page emopipe wrote: the report replaces only its own earlier "
              "files; choose another name, or move or remove that file"),
             (lambda: write_report(records, "mine.html", thumbnails=False), "the report mine.html exists and is not"),
             (lambda: write_report(records, "page.html"),
              "the report's thumbnails folder page.thumbnails (replaced whole) exists and holds holiday.png, which is "
              "not a thumbnail emopipe wrote: name the report otherwise, write it with thumbnails=False, or move or "
              "remove that folder"),
             (lambda: write_report(records, video),  # a source of the records
              f"the report output {video} is an input of this run: choose another name (outputs never overwrite "
              "inputs)"),
             (lambda: write_report(records, "clip.mp4"), f"the report output clip.mp4 is {video}, an input"),
             (lambda: write_report(records, rows), f"the report {rows} exists and is not a page emopipe wrote"),
             (lambda: write_report(read_records(rows), "clip.emotions.csv", inputs=[rows]),  # the rows, named so
              f"the report output clip.emotions.csv is {rows}, an input of this run"),
             (lambda: write_report(records, "hard.html", inputs=[rows]),
              f"the report's temporary name .hard.html.3.part is {rows}, an input of this run"),
             (lambda: write_collected_report(_collected(records), "page.html"),
              "the report's thumbnails folder page.thumbnails (replaced whole) exists and holds holiday.png"),
             (lambda: save_thumbnails("page.thumbnails", analyse(_collected(records), {
                 (str(video), 1): np.zeros((112, 112, 3), np.uint8)})),
              "the report's thumbnails folder page.thumbnails (replaced whole) exists and holds holiday.png, which is "
              "not a thumbnail emopipe wrote: name the report otherwise, or move or remove that folder"),
             (lambda: write_html("mine.html", analyse(_collected(records))), "the report mine.html exists and is not"),
             (lambda: write_report(records, "notes.txt"), "notes.txt: the report is a web page; name it .html"),
             (lambda: write_report(records, "."), ".: the report is a web page; name it .html")]  # (was a ValueError)
    for write, message in cases:
        with pytest.raises(UsageError) as refused:
            write()
        assert str(refused.value).startswith(message) and "\n" not in str(refused.value), refused.value
        assert refused.value.exit_code == 2
    assert {p: p.read_bytes() for p in kept} == kept
    assert sorted(p.name for p in tmp_path.iterdir()) == [".hard.html.3.part", "clip.emotions.csv", "clip.mp4",
                                                          "mine.html", "page.thumbnails"]  # nothing written
    assert sorted(p.name for p in Path("page.thumbnails").iterdir()) == ["holiday.png"]
    # an earlier page of emopipe's and its thumbnails are replaced; so are an empty file and an empty folder
    Path("page.thumbnails/holiday.png").unlink()
    Path("page.html").touch()
    assert write_report(records, "page.html", inputs=[rows])[0].summary.thumbnail == "page.thumbnails/track-1.jpg"
    Path("page.html").write_bytes(Path("page.html").read_bytes() + b"an earlier one")
    Path("page.thumbnails/track-7.jpg").write_bytes(b"an earlier thumbnail")
    write_report(records, "page.html", inputs=[rows])
    assert b"an earlier one" not in Path("page.html").read_bytes()
    assert sorted(p.name for p in Path("page.thumbnails").iterdir()) == ["track-1.jpg"]
    assert {p: p.read_bytes() for p in (video, rows)} == {p: kept[p] for p in (video, rows)}


def test_a_run_never_replaces_a_page_or_thumbnails_folder_emopipe_did_not_write(tmp_path, monkeypatch):
    # (was: Analyzer().run(..., report="x/page.html") deleted a page of the user's and replaced x/page.thumbnails whole,
    # the photos in it gone); refused once the run holds its names, before the source opens or a model loads
    from emopipe.api import Analyzer
    from emopipe.pipeline.analysis import SourceRun

    def never_opened(self):
        raise AssertionError("the run went on")

    monkeypatch.setattr(SourceRun, "open", never_opened)
    monkeypatch.chdir(tmp_path)
    video = moving_face_video(tmp_path / "a.mp4", frames=3, empty=None).path
    Path("x").mkdir()
    Path("x/page.html").write_text("<html>my own page</html>")
    with pytest.raises(UsageError) as refused:
        Analyzer(device="cpu").run(str(video), output="x/rows.csv", report="x/page.html")
    assert str(refused.value).startswith("the report x/page.html exists and is not a page emopipe wrote: ")
    assert refused.value.exit_code == 2 and sorted(map(str, Path("x").rglob("*"))) == ["x/page.html"]
    assert Path("x/page.html").read_text() == "<html>my own page</html>"
    Path("x/page.html").unlink()
    Path("x/page.thumbnails").mkdir()
    Path("x/page.thumbnails/holiday.png").write_bytes(b"a photo")
    with pytest.raises(UsageError) as refused:
        Analyzer(device="cpu").run(str(video), output="x/rows.csv", report="x/page.html")
    assert str(refused.value) == ("the report's thumbnails folder x/page.thumbnails (replaced whole) exists and holds "
                                  "holiday.png, which is not a thumbnail emopipe wrote: name the report otherwise, or "
                                  "move or remove that folder")
    assert sorted(map(str, Path("x").rglob("*"))) == ["x/page.thumbnails", "x/page.thumbnails/holiday.png"]
    assert Path("x/page.thumbnails/holiday.png").read_bytes() == b"a photo"


def test_the_report_command_is_refused_a_page_a_run_is_writing_now(tmp_path, monkeypatch):
    # (was: no lock: the command and a run writing the same --report page at the same moment replaced each other's)
    from emopipe.io.records import hold_outputs, lock_path
    from tests.support.folders import held_output

    monkeypatch.chdir(tmp_path)
    video = moving_face_video(tmp_path / "clip.mp4", frames=3, empty=None).path
    rows = rows_file(tmp_path / "rows.csv", source=str(video), n=3)
    page = tmp_path / "r.html"
    assert report_command(rows, "-o", page) is None  # an earlier page, with its thumbnails
    before = {f: f.read_bytes() for f in sorted(tmp_path.rglob("*")) if f.is_file()}
    for held, options in ((page, ()), (tmp_path / "t.csv", ("--tracks", "t.csv"))):
        with hold_outputs([held]):  # a run writing it now, as it holds its names
            error = report_command(rows, "-o", page, *options)
            assert isinstance(error, OutputError) and error.exit_code == 5, options
            assert str(error) == (f"{held if held == page else 't.csv'} is in use by another emopipe run (it holds "
                                  f"{lock_path(held).name}); wait for that run to end, or choose another name")
            assert held_output(held)  # still the run's
        assert {f: f.read_bytes() for f in sorted(tmp_path.rglob("*")) if f.is_file()} == before  # nothing touched
    with hold_outputs([page]):  # and as a command: exit 5, one line
        done = subprocess.run([sys.executable, "-m", "emopipe", "report", str(rows), "-o", str(page)],
                              capture_output=True, text=True, cwd=REPO, timeout=120)
        assert done.returncode == 5 and done.stderr.count("\n") == 1, done.stderr
        assert "is in use by another emopipe run" in done.stderr
    assert {f: f.read_bytes() for f in sorted(tmp_path.rglob("*")) if f.is_file()} == before
    assert report_command(rows, "-o", page, "--tracks", "t.csv") is None  # free again
    assert not lock_path(page).exists() and not lock_path(tmp_path / "t.csv").exists()  # no lock file left


def test_the_tracks_csv_names_thumbnails_relative_to_its_own_folder(tmp_path, monkeypatch):
    # as the main command's tracks.csv does (the page embeds its pictures and names none)
    monkeypatch.chdir(tmp_path)
    video = moving_face_video(tmp_path / "clip.mp4", frames=3, empty=None).path
    rows = rows_file(tmp_path / "rows.csv", source=str(video), n=3)
    (tmp_path / "out").mkdir()
    for tracks in (tmp_path / "here.tracks.csv", tmp_path / "out" / "there.tracks.csv"):
        assert report_command(rows, "-o", "out/r.html", "--tracks", tracks) is None
        with open(tracks, newline="") as f:
            (track,) = csv.DictReader(f)
        picture = tracks.parent / track["thumbnail"]
        assert picture.resolve() == tmp_path / "out" / "r.thumbnails" / "track-1.jpg"
        assert picture.read_bytes()[:2] == b"\xff\xd8"


def _image_rows(path: Path, source: str, files: list[str | None]) -> Path:
    """A rows file of one face track over the images ``files`` (None: a source that is one image)."""
    records = [FaceRecord.create(labels=LABELS8, probabilities=np.full(8, 1 / 8), source=source, frame=i,
                                 timestamp_s=0.0, track_id=1, box=(40.0, 30.0, 140.0, 150.0), score=0.9, valence=0.1,
                                 arousal=-0.2, file=file) for i, file in enumerate(files)]
    with open_writer(path, labels=LABELS8, files=files[0] is not None) as writer:
        writer.write(records)
    return path


def _picture(flat: bool) -> np.ndarray:
    """200×200 grey; its face box a checkerboard (sharp: a thumbnail's best) unless ``flat``."""
    image = np.full((200, 200, 3), 128, np.uint8)
    if not flat:
        image[30:150, 40:140] = (np.indices((120, 100)).sum(axis=0) // 4 % 2 * 255)[..., None]
    return image


def test_the_report_command_cuts_thumbnails_from_a_folder_of_images_and_from_one_image(tmp_path, monkeypatch):
    import cv2

    monkeypatch.chdir(tmp_path)
    photos = tmp_path / "photos"
    photos.mkdir()
    for name, flat in (("a.png", True), ("b.png", False), ("c.png", True)):
        cv2.imwrite(str(photos / name), _picture(flat))
    cv2.imwrite(str(tmp_path / "one.png"), _picture(False))
    folder_rows = _image_rows(tmp_path / "photos.csv", str(photos), ["a.png", "b.png", "c.png"])
    image_rows = _image_rows(tmp_path / "one.csv", str(tmp_path / "one.png"), [None])
    for rows in (folder_rows, image_rows):
        tracks = tmp_path / f"{rows.stem}.tracks.csv"
        assert report_command(rows, "-o", f"{rows.stem}.html", "--tracks", tracks) is None
        with open(tracks, newline="") as f:
            (track,) = csv.DictReader(f)
        thumbnail = cv2.imread(str(tracks.parent / track["thumbnail"]))  # (was: none — "the source video is not there")
        assert thumbnail is not None and thumbnail.std() > 60, rows  # the sharp image's face, not a flat one
    (photos / "b.png").unlink()  # the best image gone: the best of those left
    assert report_command(folder_rows, "-o", "again.html", "--tracks", "again.csv") is None
    with open("again.csv", newline="") as f:
        (track,) = csv.DictReader(f)
    assert cv2.imread(track["thumbnail"]).std() < 5


def test_the_thumbnails_are_numbered_as_the_pages_sources(tmp_path):
    import cv2

    # a source without a face before those with one: the page's sections counted it (#source-2-track-1 for the
    # second source) while the pictures did not (source-1-track-1.jpg)
    for name in ("one.png", "two.png"):
        cv2.imwrite(str(tmp_path / name), _picture(False))
    records = [r for name in ("one.png", "two.png")
               for r in read_records(_image_rows(tmp_path / f"{name}.csv", str(tmp_path / name), [None]))]
    sources = [str(tmp_path / "none.mp4"), str(tmp_path / "one.png"), str(tmp_path / "two.png")]
    reports = write_report(records, tmp_path / "r.html", sources_run=sources)
    assert [r.summary.thumbnail for r in reports] == ["r.thumbnails/source-2-track-1.jpg",
                                                      "r.thumbnails/source-3-track-1.jpg"]
    page = (tmp_path / "r.html").read_text()
    assert "id='source-2-track-1'" in page and "id='source-3-track-1'" in page and "id='source-1'" in page


def test_the_report_command_finds_a_many_source_runs_sources_from_another_folder(tmp_path, monkeypatch):
    import cv2

    # a many-source run names its sources relative to the folder it ran in: emopipe report run from another folder
    # found none of them ("the source video is not there": no thumbnails), though the run's manifest says where each is
    (tmp_path / "shoot" / "v").mkdir(parents=True)
    cv2.imwrite(str(tmp_path / "shoot" / "v" / "a.png"), _picture(False))
    out = tmp_path / "shoot" / "out"
    (out / "v").mkdir(parents=True)
    rows = _image_rows(out / "v" / "a.emotions.csv", "v/a.png", [None])
    (out / "manifest.jsonl").write_text(
        "not json\n" + json.dumps({"source": "v/a.png", "status": "ok", "path": str(tmp_path / "shoot" / "v" / "a.png"),
                                   "files": {"rows": "v/a.emotions.csv"}}) + "\n")
    monkeypatch.chdir(tmp_path)
    assert report_command(rows, "-o", "r.html", "--tracks", "t.csv") is None
    with open("t.csv", newline="") as f:
        (track,) = csv.DictReader(f)
    assert track["source"] == "v/a.png" and track["thumbnail"] == "r.thumbnails/track-1.jpg"
    assert cv2.imread(track["thumbnail"]).std() > 60


_LATIN1_VIDEO = """
import os, sys, cv2, numpy as np
from emopipe.report.outputs import write_report, write_segments_csv, write_tracks_csv
from emopipe.report.rows import read_records
from tests.test_report import rows_file
from tests.support.synth import moving_face_video
folder = sys.argv[1]
made = moving_face_video(os.path.join(folder, "made.mp4"), frames=6)
video = os.fsdecode(os.path.join(os.fsencode(folder), b"zz\\xe9.mp4"))  # (Latin-1: as Python holds the byte)
os.rename(os.path.join(folder, "made.mp4"), video)
rows = rows_file(__import__("pathlib").Path(folder, "zz.emotions.csv"), source=video, n=6)  # (written as zz\\xe9)
annotated = os.fsdecode(os.path.join(os.fsencode(folder), b"zz\\xe9.annotated.mp4"))
os.link(video, annotated)
for records, page in ((read_records(rows), "a.html"), (read_records(rows), "b.html")):
    records = list(records)
    if page == "b.html":  # the library's records of the video itself: the name as Python holds it
        records = [__import__("dataclasses").replace(r, source=video) for r in records]
    reports = write_report(records, os.path.join(folder, page), videos={records[0].source: annotated})
    print(page, sum(1 for r in reports if r.thumbnail_jpeg))
write_tracks_csv(os.path.join(folder, "t.csv"), reports)
write_segments_csv(os.path.join(folder, "s.csv"), reports)
"""


def test_a_source_whose_name_is_not_utf8_gives_its_thumbnails_and_no_crash(tmp_path):
    # OpenCV crashes (a segmentation fault) on a name whose bytes are not UTF-8: write_report of such a video's records
    # ended the process; and the rows, which write those bytes as \\xNN, found no video to cut thumbnails from
    done = subprocess.run([sys.executable, "-c", _LATIN1_VIDEO, str(tmp_path)], capture_output=True, text=True,
                          cwd=REPO, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["a.html", "1", "b.html", "1"]
    for page in ("a.html", "b.html"):  # the name shown as the rows write it, the video linked by its bytes
        text = (tmp_path / page).read_text()
        assert "zz\\xe9.mp4</h2>" in text and "src='zz%E9.annotated.mp4'" in text
    for table in ("t.csv", "s.csv"):
        with open(tmp_path / table, newline="") as f:
            assert {row["source"] for row in csv.DictReader(f)} == {str(tmp_path / "zz\\xe9.mp4")}


def test_the_thumbnails_never_replace_a_file_of_their_folder_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    video = moving_face_video(tmp_path / "clip.mp4", frames=3, empty=None).path
    rows = rows_file(tmp_path / "v.csv", source=str(video), n=3)
    taken = tmp_path / "v.thumbnails"  # e.g. an earlier run's rows, named so
    taken.write_bytes(b"source,frame\n")
    error = report_command(rows, "-o", "v.html")
    assert isinstance(error, OutputError) and error.exit_code == 5 and "v.thumbnails: it is not a folder" in str(error)
    with pytest.raises(OutputError, match="not a folder"):  # the library call, too
        write_report(read_records(rows), tmp_path / "v.html")
    assert taken.read_bytes() == b"source,frame\n" and not (tmp_path / "v.html").exists()
    taken.unlink()
    taken.mkdir()  # an earlier report's folder is replaced
    (taken / "track-9.jpg").write_bytes(b"old")
    assert report_command(rows, "-o", "v.html") is None
    assert sorted(p.name for p in taken.iterdir()) == ["track-1.jpg"]


def test_the_main_command_knows_the_thumbnails_folder_among_its_outputs(tmp_path):
    from emopipe.config import RunConfig

    video = tmp_path / "v.mp4"
    video.write_bytes(b"not read")
    config = RunConfig(source=str(video), output=str(tmp_path / "v.csv"), report=str(tmp_path / "r.html"))
    assert config.resolved("cpu").outputs()["thumbnails"] == str(tmp_path / "r.thumbnails")
    clash = RunConfig(source=str(video), output=str(tmp_path / "r.thumbnails"), format="csv",
                      report=str(tmp_path / "r.html")).resolved("cpu")
    with pytest.raises(UsageError, match="the thumbnails and the rows outputs are the same file"):
        clash.check_outputs()
    (tmp_path / "r.thumbnails").write_text("a file")
    with pytest.raises(OutputError, match=r"r\.thumbnails: it is not a folder"):
        config.resolved("cpu").check_outputs()
    (tmp_path / "r.thumbnails").unlink()
    (tmp_path / "r.thumbnails").mkdir()  # a folder (an earlier report's) is fine
    config.resolved("cpu").check_outputs()


def test_the_thumbnails_never_replace_a_folder_that_is_or_holds_an_input(tmp_path, monkeypatch):
    import cv2

    from emopipe.api import Analyzer
    from emopipe.config import RunConfig

    monkeypatch.chdir(tmp_path)
    photos = tmp_path / "z.thumbnails"  # a folder of photos, named as z.html's thumbnails would be
    photos.mkdir()
    for name in ("a.png", "b.png"):
        cv2.imwrite(str(photos / name), _picture(False))
    pictures = {p.name: p.read_bytes() for p in photos.iterdir()}
    rows = _image_rows(tmp_path / "z.csv", "z.thumbnails", ["a.png", "b.png"])
    kept = photos / "rows.csv"  # a rows file of its own kept in it
    kept.write_bytes(rows.read_bytes())
    for read in (rows, kept):
        error = report_command(read, "-o", "z.html")
        assert isinstance(error, UsageError) and error.exit_code == 2, read
        assert "thumbnails folder z.thumbnails is or holds" in str(error)
    kept.unlink()
    assert report_command(rows, "-o", "z.html", "--no-thumbnails") is None  # (no folder written: nothing to lose)
    assert {p.name: p.read_bytes() for p in photos.iterdir()} == pictures
    # one source (a video in the folder), and a many-source run (the folder a source): refused before anything
    video = moving_face_video(photos / "v.mp4", frames=3, empty=None).path
    with pytest.raises(UsageError, match=r"is or holds z\.thumbnails/v\.mp4"):
        RunConfig(source="z.thumbnails/v.mp4", output="v.csv", report="z.html").resolved("cpu").check_outputs()
    with pytest.raises(UsageError, match=r"is or holds z\.thumbnails"):
        Analyzer(device="cpu").plan_many(["z.thumbnails", str(video)], tmp_path / "out", report="z.html")
    assert not (tmp_path / "out").exists() and sorted(p.name for p in photos.iterdir()) == ["a.png", "b.png", "v.mp4"]
    # nor the folder of the page a run that does not complete writes beside an earlier one (z.partial.html)
    photos.rename(tmp_path / "z.partial.thumbnails")
    with pytest.raises(UsageError, match=r"folder z\.partial\.thumbnails is or holds z\.partial\.thumbnails/v\.mp4"):
        RunConfig(source="z.partial.thumbnails/v.mp4", output="v.csv", report="z.html").resolved("cpu").check_outputs()


def test_what_a_killed_write_of_the_track_files_left_goes_with_the_next_write(tmp_path):
    """A run killed while it wrote tracks.csv (SIGKILL, out of memory) left its temporary file, which nothing
    removed; the next write of that file removes it (one a live process holds stays: tests/test_records.py)."""
    from emopipe.report.outputs import analyse, write_segments_csv, write_tracks_csv

    collector = TrackCollector()
    collector.add(synthesized_track([("happy", 1.0, 0.6, 0.3)]))
    reports = analyse(collector)
    left = [tmp_path / ".t.csv.0.part", tmp_path / ".s.csv.2.part"]  # (unlocked: their writers are gone)
    for path in left:
        path.write_text("half a file")
    write_tracks_csv(tmp_path / "t.csv", reports)
    write_segments_csv(tmp_path / "s.csv", reports)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.csv", "t.csv"]
    assert [r["track_id"] for r in csv.DictReader((tmp_path / "t.csv").read_text().splitlines())] == ["1"]


KILLED_THUMBNAILS = """
import os, signal, sys
from pathlib import Path
import numpy as np
from emopipe.report.outputs import analyse, save_thumbnails
from emopipe.report.tracks import TrackCollector
from emopipe.types import LABELS, FaceRecord

folder = Path(sys.argv[1])
collector = TrackCollector()
collector.add([FaceRecord.create(labels=LABELS[8], probabilities=np.full(8, 1 / 8), source="clip.mp4", frame=i,
                                 timestamp_s=i / 25, track_id=1, box=(40.0, 30.0, 140.0, 150.0), score=0.9,
                                 valence=0.1, arousal=0.2) for i in range(5)])
reports = analyse(collector, {("clip.mp4", 1): np.zeros((112, 112, 3), np.uint8)})
replace = os.replace

def killed_as_the_pictures_take_the_folders_name(src, dst, *rest, **options):
    if Path(dst) == folder:
        os.kill(os.getpid(), signal.SIGKILL)  # (no clean-up runs, as with kill -9)
    return replace(src, dst, *rest, **options)

os.replace = killed_as_the_pictures_take_the_folders_name
save_thumbnails(folder, reports)
"""


def test_what_killed_writes_of_the_thumbnails_left_goes_with_the_next_write(tmp_path):
    """Each write of the thumbnails killed (SIGKILL, out of memory) as the new pictures took the folder's name left
    its staging folders (the earlier pictures in one of them), which accumulated: the next write removes them."""
    folder = tmp_path / "r.thumbnails"
    folder.mkdir()
    (folder / "track-9.jpg").write_bytes(b"an earlier report's")
    for _ in range(2):
        killed = subprocess.run([sys.executable, "-c", KILLED_THUMBNAILS, str(folder)], capture_output=True,
                                text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)})
        assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert not folder.exists() and [p.name for p in tmp_path.iterdir()] == [".r.thumbnails.0.part"]
    collector = TrackCollector()
    collector.add(synthesized_track([("happy", 1.0, 0.6, 0.3)]))
    save_thumbnails(folder, analyse(collector, {("clip.mp4", 1): np.zeros((112, 112, 3), np.uint8)}))
    assert [p.name for p in tmp_path.iterdir()] == ["r.thumbnails"]
    assert [p.name for p in folder.iterdir()] == ["track-1.jpg"]


def test_the_report_files_get_the_permissions_the_umask_gives_new_files(tmp_path):
    import os
    import stat

    video = moving_face_video(tmp_path / "clip.mp4", frames=3, empty=None).path
    rows = rows_file(tmp_path / "rows.csv", source=str(video), n=3)
    previous = os.umask(0o027)
    try:
        neighbour = tmp_path / "made-normally.txt"
        neighbour.write_text("x")
        outputs = [tmp_path / "r.html", tmp_path / "t.csv", tmp_path / "s.csv"]
        assert report_command(rows, "-o", outputs[0], "--tracks", outputs[1], "--segments", outputs[2]) is None
    finally:
        os.umask(previous)
    assert stat.S_IMODE(neighbour.stat().st_mode) == 0o640
    assert {p.name: stat.S_IMODE(p.stat().st_mode) for p in outputs} == dict.fromkeys(("r.html", "t.csv", "s.csv"),
                                                                                      0o640)  # (mkstemp: 0o600)
    assert stat.S_IMODE((tmp_path / "r.thumbnails").stat().st_mode) == 0o750  # (mkdtemp: 0o700)


def test_huge_finite_valence_and_arousal_are_kept_exactly_and_charted(tmp_path):
    # some checkpoints' outputs reach far beyond ±1: float32 turned 1e39 into inf (the chart crashed) and
    # 1234567.891 into 1234567.875; near ±1e308 the writer's rounding and the sums overflowed
    huge = np.finfo(np.float64).max
    rng = np.random.default_rng(5)
    records = [FaceRecord.create(labels=LABELS8, probabilities=rng.dirichlet(np.ones(8)), source="clip.mp4", frame=i,
                                 timestamp_s=i / FPS, track_id=track, box=(40.0, 30.0, 140.0, 150.0), score=0.9,
                                 valence=valence, arousal=arousal)
               for i in range(100)
               for track, valence, arousal in ((1, 1234567.891, 1e39), (2, huge if i < 50 else -huge, -huge))]
    rows, tracks, segments = tmp_path / "rows.csv", tmp_path / "tracks.csv", tmp_path / "segments.csv"
    with open_writer(rows, labels=LABELS8) as writer:
        writer.write(records)
    assert [r.valence for r in read_records(rows)][:4] == [1234567.891, huge, 1234567.891, huge]
    page = tmp_path / "r.html"
    assert report_command(rows, "-o", page, "--tracks", tracks, "--segments", segments, "--no-thumbnails") is None
    with open(tracks, newline="") as f:
        exact, extreme = csv.DictReader(f)
    assert float(exact["valence_mean"]) == float(exact["valence_p10"]) == 1234567.891
    assert float(exact["arousal_median"]) == 1e39
    assert abs(float(extreme["valence_mean"])) < huge * 1e-15 and float(extreme["valence_p90"]) == huge
    assert float(extreme["arousal_mean"]) == -huge
    with open(segments, newline="") as f:
        affect = [s for s in csv.DictReader(f) if s["track_id"] == "2" and s["kind"] == "affect"]
    assert [(float(s["start_s"]), float(s["valence_mean"])) for s in affect] == [(0, huge), (2, -huge)]
    text = page.read_text()
    assert text.count("class='chart'") == 2 and "valence / arousal (× 1e+308)" in text
    assert "1.23e+06" not in text and "1.8e+308" in text  # the numbers table: huge ones short, the others as ever


def _drawn(svg: str, axes: str) -> list[ET.Element]:
    """The elements drawn in the chart's ``axes`` group (axes_1: valence and arousal, axes_2: expressions),
    its legend left out."""
    root = ET.fromstring(svg)
    (group,) = [g for g in root.iter(f"{SVG}g") if g.get("id") == axes]
    legend = {id(e) for g in group.iter(f"{SVG}g") if (g.get("id") or "").startswith("legend") for e in g.iter()}
    return [e for e in group.iter() if id(e) not in legend]


def _width(path: ET.Element) -> float:
    xs = [float(x) for x in re.findall(r"(-?[\d.]+) -?[\d.]+", path.get("d", ""))]
    return max(xs) - min(xs) if xs else 0.0


def test_the_charts_legends_cover_no_data():
    # it sat in the chart's upper right corner, over the valence line of a face whose valence kept near its top
    (report,) = analyse(_collected(synthesized_track([("happy", 2.0, 0.6, -0.2)], noise=0.01)))
    (axes,) = [g for g in ET.fromstring(track_chart_svg(report, 0.0)).iter(f"{SVG}g") if g.get("id") == "axes_1"]
    frame = next(axes.iter(f"{SVG}path"))  # the axes' own rectangle, drawn first
    right = max(float(x) for x in re.findall(r"(-?[\d.]+) -?[\d.]+", frame.get("d", "")))
    legend = [t for g in axes.iter(f"{SVG}g") if (g.get("id") or "").startswith("legend") for t in g.iter(f"{SVG}text")]
    assert [t.text for t in legend] == ["valence", "arousal"]
    assert all(float(t.get("x", 0)) > right for t in legend), (right, [t.get("x") for t in legend])
    # nor does the circumplex's legend cover its lower right (pleasant and calm): its title names the markers
    (circumplex,) = [g for g in ET.fromstring(track_chart_svg(report, 0.0)).iter(f"{SVG}g") if g.get("id") == "axes_3"]
    assert not [g for g in circumplex.iter(f"{SVG}g") if (g.get("id") or "").startswith("legend")]
    assert "\u25cb start \u2192 \u25a1 end (colour: time)" in [t.text for t in circumplex.iter(f"{SVG}text")]


def test_a_one_frame_track_is_charted_as_points_and_a_bar_not_as_empty_lines():
    # every track of a single image has one record: lines through one point, and an area over one instant,
    # drew nothing
    (record,) = synthesized_track([("happy", FRAME, 0.4, -0.3)])
    (report,) = analyse(_collected([record]))
    svg = track_chart_svg(report, 0.0)
    markers = [e.get("style", "") for e in _drawn(svg, "axes_1") if e.tag == f"{SVG}use"]
    assert any(f"fill: {VALENCE_COLOUR}" in m for m in markers) and any(f"fill: {AROUSAL_COLOUR}" in m for m in markers)
    happy = [e for e in _drawn(svg, "axes_2") if e.tag == f"{SVG}path"
             and f"fill: {EXPRESSION_COLOURS['happy']}" in e.get("style", "")]
    assert happy and max(_width(e) for e in happy) > 10  # a bar with some width, in SVG points
    # the time axis is marked at the frame's time only (no negative times)
    ticks = [t.text for t in _drawn(svg, "axes_2") if t.tag == f"{SVG}text"]
    assert "0" in ticks and not any(t and t.startswith(("-", "\u2212")) for t in ticks)


def test_the_valence_and_arousal_lines_break_where_the_face_was_not_seen():
    # a face away for 10 s was drawn as a straight line across its absence, as if it had been there
    def strokes(records: list[FaceRecord]) -> list[int]:  # each line's pieces (SVG moves)
        (report,) = analyse(_collected(records))
        return [e.get("d", "").count("M") for e in _drawn(track_chart_svg(report, 0.0), "axes_1")
                if e.tag == f"{SVG}path" and "stroke-linecap: square" in e.get("style", "")
                and any(f"stroke: {c}" in e.get("style", "") for c in (VALENCE_COLOUR, AROUSAL_COLOUR))]

    away = (synthesized_track([("happy", 2.0, 0.5, 0.2)])
            + synthesized_track([("sad", 2.0, -0.5, -0.2)], first_frame=round(12 * FPS)))
    blink = (synthesized_track([("happy", 2.0, 0.5, 0.2)])
             + synthesized_track([("sad", 2.0, -0.5, -0.2)], first_frame=round(2.5 * FPS)))
    assert strokes(away) == [2, 2]
    assert strokes(blink) == [1, 1]  # (half a second missing: one line)
    assert strokes(synthesized_track([("happy", 4.0, 0.5, 0.2)])) == [1, 1]

    def areas(records: list[FaceRecord]) -> int:  # the pieces of the happy area (its fills)
        (report,) = analyse(_collected(records))
        return sum(1 for e in _drawn(track_chart_svg(report, 0.0), "axes_2") if e.tag == f"{SVG}path"
                   and f"fill: {EXPRESSION_COLOURS['happy']}" in e.get("style", ""))

    assert areas(away) == 2 and areas(blink) == 1  # nor is an area drawn over the absence


def test_a_many_source_report_shows_the_sources_without_a_face_and_its_line_says_so(tmp_path, caplog):
    # the line counted them ("1 track(s) of 2 source(s)") while the page left them out
    paths = {"a.mp4": tmp_path / "a.emotions.csv", "b.mp4": tmp_path / "b.emotions.csv"}
    with open_writer(paths["a.mp4"], labels=LABELS8):
        pass  # no face in a.mp4: the header only
    with open_writer(paths["b.mp4"], labels=LABELS8) as writer:
        writer.write(synthesized_track([("happy", 0.4, 0.5, 0.5)], source="b.mp4"))
    results = [SourceResult(source=name, status="ok", outputs={"rows": str(path)}) for name, path in paths.items()]
    page = tmp_path / "r.html"
    with caplog.at_level("INFO", logger="emopipe"):
        report_many(SimpleNamespace(report=str(page), config=RunConfig()),  # type: ignore[arg-type]
                    SimpleNamespace(results=results))  # type: ignore[arg-type]
    text = page.read_text()
    assert text.count("<section class='source'") == 2 and ">a.mp4</h2><p class='meta'>no face found" in text
    assert "2 source(s), 1 track(s)" in text
    assert "1 track(s) of 2 source(s), 1 of them without a face" in caplog.text


def test_the_report_command_lists_a_source_where_no_face_was_found(tmp_path, monkeypatch, caplog):
    # a source with no face has a rows file of the header alone: the run's page said "no face found", while the page
    # of emopipe report of the same rows files left the source out (its name is in the run's summary beside them)
    monkeypatch.chdir(tmp_path)
    with open_writer(tmp_path / "a.emotions.csv", labels=LABELS8):
        pass
    (tmp_path / "a.emotions.summary.json").write_text(json.dumps(
        {"source": "videos/a&<b>.mp4", "faces": 0, "outputs": {"rows": "out/a.emotions.csv"}}))
    with open_writer(tmp_path / "b.emotions.csv", labels=LABELS8) as writer:
        writer.write(synthesized_track([("happy", 0.4, 0.5, 0.5)], source="b.mp4"))
    with open_writer(tmp_path / "c.emotions.csv", labels=LABELS8):
        pass  # (no summary beside it to name its source)
    with caplog.at_level("INFO", logger="emopipe"):
        assert report_command("a.emotions.csv", "b.emotions.csv", "c.emotions.csv", "-o", "r.html") is None
    text = (tmp_path / "r.html").read_text()
    assert text.count("<section class='source'") == 2
    assert "<h2>videos/a&amp;&lt;b&gt;.mp4</h2><p class='meta'>no face found" in text
    assert text.index("videos/a&amp;&lt;b&gt;.mp4") < text.index("b.mp4</a>")  # in the files' order
    assert "1 track(s) of 2 source(s) (1 of them without a face)" in caplog.text
    assert "c.emotions.csv holds no row" in caplog.text
    # its annotated video, written beside its rows, is played in its section
    (tmp_path / "a.annotated.mp4").write_bytes(b"(a video)")
    assert report_command("a.emotions.csv", "b.emotions.csv", "-o", "r.html") is None
    assert _video_srcs((tmp_path / "r.html").read_text()) == ["a.annotated.mp4"]


def test_the_index_spans_the_faces_as_their_durations_do():
    # the index said a source's faces spanned last − first (a track of two frames at 25 fps: "over 0.0 s") where
    # the track's own duration counts its last frame's interval (0.1 s)
    records = synthesized_track([("happy", 2 * FRAME, 0.4, -0.3)])
    text = render(analyse(_collected(records)))
    assert "1 track(s) over 0.1 s" in text and "<td>0.1 s</td>" in text


def test_class_labels_are_charted_as_written_and_coloured_as_in_the_charts():
    # a label with "$" was parsed as Matplotlib's mathematics (an internal error for "$\\frac$"), one beginning
    # with "_" was left out of the legend, and a label emopipe has no colour for had another colour in the tracks
    # table than in its charts
    labels = ("neutral", "$\\frac$", "_mine a$b", "odd")
    rng = np.random.default_rng(2)
    records = [FaceRecord.create(labels=labels, probabilities=(p := np.array([0.1, 0.1, 0.1, 0.7])
                                 + rng.uniform(0, 0.01, 4)) / p.sum(), source="s.mp4", frame=i, timestamp_s=i * FRAME,
                                 track_id=1, box=(40.0, 30.0, 140.0, 150.0), score=0.9, valence=0.1, arousal=0.2)
               for i in range(10)]
    (report,) = analyse(_collected(records))
    svg = track_chart_svg(report, 0.0)
    legend = [t.text for t in ET.fromstring(svg).iter(f"{SVG}text")]
    for label in labels:
        assert any(text is not None and text.lstrip("\u200b") == label for text in legend), (label, legend)
    text = render([report])
    swatch = re.search(r"<span class='swatch' style='background:(#[0-9a-f]{6})'></span>odd<", text)
    assert swatch is not None
    odd = [e for e in _drawn(svg, "axes_2") if e.tag == f"{SVG}path" and f"fill: {swatch[1]}" in e.get("style", "")]
    assert odd  # the chart's "odd" is the swatch's colour


def test_a_charts_numbers_fit_its_fixed_margins_with_a_power_of_ten_beside_large_ones():
    # the charts have fixed places (a layout engine took 0.4 s a chart): numbers of five digits and more are written
    # as a few digits and a power of ten at the axis's end, so that they stay within the margin left for them
    records = synthesized_track([("happy", 2.0, 12345.0, -9876.0), ("sad", 2.0, -23456.0, 5432.0)], noise=50.0)
    (report,) = analyse(_collected(records))
    svg = track_chart_svg(report, 0.0)
    values = [t.text for t in _drawn(svg, "axes_1") if t.tag == f"{SVG}text" and t.text]
    circumplex = [t.text for t in _drawn(svg, "axes_3") if t.tag == f"{SVG}text" and t.text]
    for texts in (values, circumplex):
        numbers = [t for t in texts if re.fullmatch(r"[\u2212-]?[\d.]+", t)]
        assert numbers and max(len(t.lstrip("\u2212-")) for t in numbers) <= 4, numbers
        assert "1e4" in texts, texts


def test_sources_that_are_gone_are_said_once_not_a_line_each(tmp_path, caplog):
    # a report of a moved archive's rows said "no thumbnails for X: the source video is not there" for every source
    records = [r for k in range(5) for r in synthesized_track([("happy", 0.2, 0.1, 0.1)], source=f"gone/{k}.mp4")]
    with caplog.at_level("INFO", logger="emopipe"):
        reports = write_report(records, tmp_path / "r.html")
    lines = [r.getMessage() for r in caplog.records if "no thumbnails" in r.getMessage()]
    assert lines == ["no thumbnails for 5 sources: they are not there (gone/0.mp4, gone/1.mp4, gone/2.mp4 and 2 more)"]
    assert len(reports) == 5 and not any(r.thumbnail_jpeg for r in reports)
    caplog.clear()
    with caplog.at_level("INFO", logger="emopipe"):  # one source: its own line, as before
        write_report(records[:1], tmp_path / "one.html")
    assert "no thumbnails for gone/0.mp4: the source video is not there" in caplog.text


def test_a_pages_charts_drawn_over_processes_are_the_charts_drawn_in_one():
    # a page of hundreds of tracks took minutes with every chart drawn in turn in one process
    from emopipe.report.html import CHARTS_A_WORKER

    records = [r for k in range(2 * CHARTS_A_WORKER)
               for r in synthesized_track([("happy", 0.3, 0.4, 0.1), ("sad", 0.3, -0.4, 0.2)], track_id=k + 1,
                                          source=f"s{k % 3}.mp4", seed=k)]
    reports = analyse(_collected(records))
    made = re.compile(r" on \d{4}-\d\d-\d\d \d\d:\d\d UTC")  # (the minute the page was made)
    one, two = (made.sub("", render(reports, processes=n)) for n in (1, 2))
    assert two == one and one.count("<svg") == 2 * CHARTS_A_WORKER


def test_charts_are_drawn_over_processes_only_where_starting_python_anew_runs_no_users_code(monkeypatch):
    # a worker process runs the program's main file again: a user's script without a __main__ guard would run twice
    import types

    from emopipe.report.html import chart_processes

    def main(**attributes: object) -> int:
        module = types.ModuleType("__main__")
        module.__dict__.update(attributes)
        monkeypatch.setitem(sys.modules, "__main__", module)
        return chart_processes()

    cpus = os.cpu_count() or 1
    assert main(__file__="/home/me/analyse_all.py", __spec__=None) == 1
    assert main(__file__="/usr/local/bin/emopipe", __spec__=None) == cpus  # (pip's script: guarded)
    assert main(__file__="/x/emopipe/__main__.py", __spec__=types.SimpleNamespace(name="emopipe.__main__")) == cpus
    assert main(__spec__=None) == cpus  # a notebook, python -c: no file to run again


def test_what_write_report_returns_shows_without_its_thumbnails_bytes():
    # a notebook cell ending in write_report(...) printed every thumbnail's JPEG bytes
    (report,) = analyse(_collected(synthesized_track([("happy", 0.4, 0.5, 0.2)])))
    report = dataclasses.replace(report, thumbnail_jpeg=b"\xff\xd8" + bytes(4000))
    shown = repr(report)
    assert "TrackReport(summary=" in shown and "\\x00" not in shown and len(shown) < 3000


def _collected(records: list[FaceRecord]) -> TrackCollector:
    collector = TrackCollector()
    collector.add(records)
    return collector


# -- size for a long video ---------------------------------------------------------------------------------

def test_the_report_of_a_one_hour_one_face_video_stays_small(tmp_path):
    rng = np.random.default_rng(11)
    hour = round(3600 * FPS)
    t = np.arange(hour) / FPS
    valence = 0.4 * np.sin(2 * np.pi * t / 900) + rng.normal(0, 0.15, hour)  # slow drift plus jitter
    arousal = 0.3 * np.cos(2 * np.pi * t / 600) + rng.normal(0, 0.15, hour)
    logits = rng.normal(0, 1, (hour, 8)) + np.where(valence[:, None] > 0, [0, 2, 0, 0, 0, 0, 0, 0],
                                                    [0, 0, 2, 0, 0, 0, 0, 0])
    probabilities = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    records = (FaceRecord.create(labels=LABELS8, probabilities=probabilities[i], source="hour.mp4", frame=i,
                                 timestamp_s=t[i], track_id=1, box=(100.0, 80.0, 220.0, 230.0), score=0.95,
                                 valence=valence[i], arousal=arousal[i]) for i in range(hour))
    page = tmp_path / "hour.html"
    (report,) = write_report(records, page, thumbnails=False)
    size = page.stat().st_size
    print(f"\nreport of one hour of one face at {FPS:g} fps ({hour} rows): {size / 1e6:.3f} MB")
    assert report.summary.frames == hour and report.summary.duration_s == pytest.approx(3600)
    assert size < 1_000_000  # decimated: the page does not grow with the video's length
    assert page.read_text().count("class='chart'") == 1


# -- a real run, and its report in a browser ----------------------------------------------------------------

_PROBE = """<script>
window.__seen = {errors: [], resources: []};
window.addEventListener('error', e => __seen.errors.push(
  String(e.message || (e.target && (e.target.src || e.target.href)))), true);
window.addEventListener('load', () => {
  __seen.resources = performance.getEntriesByType('resource').map(e => e.name);
  __seen.charts = document.querySelectorAll('.track .chart svg').length;
  __seen.tracks = document.querySelectorAll('article.track').length;
  __seen.thumbnails = Array.from(document.querySelectorAll('img.thumbnail')).filter(i => i.naturalWidth > 0).length;
  document.body.setAttribute('data-probe', JSON.stringify(__seen));
});
</script>"""


def _page_requests(net_log: Path) -> list[str]:
    """URLs the page asked for (Chromium's own calls home, e.g. its clock and updates, are browser-initiated
    and left out), other than file: and data: URLs."""
    log = json.loads(net_log.read_text())
    start = log["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
    jobs = [e.get("params", {}) for e in log["events"] if e["type"] == start]
    return sorted({job["url"] for job in jobs if "url" in job and job.get("initiator") != "not an origin"
                   and not job["url"].startswith(("file:", "data:"))})


def _browse(tmp_path: Path, page: Path) -> tuple[dict, str]:
    """The page in headless Chromium with every network path closed: what a probe saw, and the log."""
    probed = tmp_path / f"probed-{page.name}"
    probed.write_text(page.read_text().replace("<head>", "<head>" + _PROBE, 1))
    dead = free_port()  # nothing listens: a request would fail (and be logged), never leave the machine
    offline = ("--host-resolver-rules=MAP * ~NOTFOUND", f"--proxy-server=127.0.0.1:{dead}",
               "--enable-logging=stderr", "--v=0", "--virtual-time-budget=3000")
    net_log = tmp_path / f"net-{page.stem}.json"
    done = chromium(tmp_path, *offline, f"--log-net-log={net_log}", "--dump-dom", probed.as_uri())
    found = re.search(r'data-probe="([^"]*)"', done.stdout)
    assert found, done.stderr[-2000:]
    import html

    probe = json.loads(html.unescape(found.group(1)))
    probe["requested"] = _page_requests(net_log)
    return probe, done.stderr


@pytest.mark.slow
def test_a_run_writes_tracks_segments_and_a_report_that_opens_offline(tmp_path, checkpoints, models_home):
    clip = moving_face_video(tmp_path / "clip.mp4", frames=6, empty=None)
    rows, page = tmp_path / "rows.csv", tmp_path / "report.html"
    done = subprocess.run([sys.executable, "-m", "emopipe", str(clip.path), "--detector", "blazeface", "--weights",
                           str(checkpoints[8]), "--device", "cpu", "-o", str(rows), "--report", str(page)],
                          capture_output=True, text=True, cwd=REPO, timeout=600)
    assert done.returncode == 0, done.stderr
    records = list(read_records(rows))
    assert records and {r.frame for r in records} == set(range(6))

    with open(tmp_path / "rows.tracks.csv", newline="") as f:
        tracks = list(csv.DictReader(f))
    expected = emopipe.summarize(records)
    assert [int(t["track_id"]) for t in tracks] == [t.track_id for t in expected]
    assert [float(t["valence_mean"]) for t in tracks] == pytest.approx([t.valence_mean for t in expected], abs=1e-5)
    assert all(t["short"] == "1" for t in tracks)  # 6 frames = 0.24 s: flagged, kept
    pictures = [tmp_path / t["thumbnail"] for t in tracks]
    assert all(p.is_file() and p.read_bytes()[:2] == b"\xff\xd8" for p in pictures)  # JPEGs beside the report
    with open(tmp_path / "rows.segments.csv", newline="") as f:
        segments = list(csv.DictReader(f))
    assert {s["kind"] for s in segments} == {"expression", "affect"}
    summary = json.loads((tmp_path / "rows.summary.json").read_text())
    assert [t["track_id"] for t in summary["tracks"]] == [t.track_id for t in expected]
    assert summary["outputs"]["report"] == str(page)

    # the same report from the rows file alone (thumbnails cut from the video, which is still there)
    again = tmp_path / "again.html"
    done = subprocess.run([sys.executable, "-m", "emopipe", "report", str(rows), "-o", str(again)],
                          capture_output=True, text=True, cwd=REPO, timeout=300)
    assert done.returncode == 0, done.stderr

    # the checks see a page that reaches out (an image from elsewhere)
    control = tmp_path / "control.html"
    control.write_text("<!DOCTYPE html><html><head></head><body><img src='http://example.com/x.png'></body></html>")
    probe, _ = _browse(tmp_path, control)
    assert probe["requested"] == ["http://example.com/x.png"] and probe["errors"]

    for report in (page, again):
        text = report.read_text()
        assert not re.search(r"""(src|href)\s*=\s*['"]?(https?:|//)""", text)  # nothing fetched from elsewhere
        assert "<script" not in text
        probe, log = _browse(tmp_path, report)
        assert probe["tracks"] == probe["charts"] == len(expected)  # one chart block per track
        assert probe["thumbnails"] == len(expected)
        assert probe["errors"] == [] and probe["resources"] == [] and probe["requested"] == []
        assert not re.search(r"CONSOLE|Uncaught", log), log[-2000:]
    shot = tmp_path / "report.png"
    done = chromium(tmp_path, "--host-resolver-rules=MAP * ~NOTFOUND", "--window-size=1100,900",
                    f"--screenshot={shot}", page.as_uri())
    assert shot.is_file() and shot.stat().st_size > 10_000, done.stderr[-2000:]
    from PIL import Image

    with Image.open(shot) as image:  # the charts are drawn: many colours, not a blank page
        assert len(image.convert("RGB").getcolors(1 << 24) or ()) > 200


def test_track_files_that_cannot_be_written_do_not_fail_a_run_that_did_not_ask_for_a_report(monkeypatch, caplog):
    from emopipe.config import RunConfig
    from emopipe.pipeline import analysis
    from emopipe.pipeline.summary import RunSummary

    def missing_library(*args, **kwargs):
        raise ImportError("No module named 'ruptures'")

    monkeypatch.setattr(analysis, "write_track_outputs", missing_library)
    analysis._track_outputs_or_warn(RunConfig(source="x.mp4", output="x.csv"), None, RunSummary(source="x.mp4"))
    assert "track summaries not written (the rows are complete): No module named 'ruptures'" in caplog.text
    with pytest.raises(ImportError):  # --report asked for by name: its failure is the run's
        analysis._track_outputs_or_warn(RunConfig(source="x.mp4", output="x.csv", report="r.html"), None,
                                        RunSummary(source="x.mp4"))


# -- the annotated videos on the page ----------------------------------------------------------------------------

def _video_srcs(page: str) -> list[str]:
    return re.findall(r"<video [^>]*src='([^']*)'", page)


def test_each_sources_annotated_video_is_on_its_section_and_every_time_links_to_that_moment(tmp_path):
    """Two sources, one with its video (in a folder whose name needs quoting in a URL), one without: the video in
    its section, relative to the page; each track's start and each segment's start open it at that moment, counted
    from the video's first frame (``--start 2``)."""
    records = (synthesized_track([("happy", 2.0, 0.5, 0.2), ("sad", 3.0, -0.5, -0.2)], source="a.mp4",
                                 first_frame=100) +
               synthesized_track([("neutral", 1.0, 0.0, 0.0)], source="b.mp4"))
    video = tmp_path / "out dir" / "a.annotated.mp4"
    video.parent.mkdir()
    video.write_bytes(b"(a video)")
    page = tmp_path / "pages" / "report.html"
    page.parent.mkdir()
    reports = write_report(records, page, thumbnails=False, start_s=2.0,
                           videos={"a.mp4": video, "b.mp4": tmp_path / "no-such.mp4"})
    text = page.read_text()
    sections = dict(re.findall(r"<section class='source' id='source-\d+'><h2>([^<]*)</h2>(.*?)</section>", text, re.S))
    assert set(sections) == {"a.mp4", "b.mp4"}
    href = "../out%20dir/a.annotated.mp4"
    assert _video_srcs(sections["a.mp4"]) == [href] and _video_srcs(sections["b.mp4"]) == []
    assert (page.parent / "../out dir/a.annotated.mp4").resolve() == video.resolve()
    (a_track,) = [r for r in reports if r.summary.source == "a.mp4"]
    links = [float(t) for t in re.findall(re.escape(href) + r"#t=([0-9.]+)'", sections["a.mp4"])]
    starts = [a_track.summary.first_s] + [s.start_s for s in a_track.segments]
    assert a_track.summary.first_s == pytest.approx(4.0) and len(a_track.segments) >= 2
    assert links == pytest.approx([t - 2.0 for t in starts], abs=0.006)
    assert "#t=" not in sections["b.mp4"]
    # a source where no face was found plays its video too (where the faces were missed, if they were: it was left
    # out of its section)
    write_report(records, page, thumbnails=False, sources_run=["c.mp4", "a.mp4", "b.mp4"], videos={"c.mp4": video})
    sections = dict(re.findall(r"<section class='source' id='source-\d+'><h2>([^<]*)</h2>(.*?)</section>",
                               page.read_text(), re.S))
    assert "no face found" in sections["c.mp4"] and _video_srcs(sections["c.mp4"]) == [href]


def test_a_live_sources_times_are_not_linked_to_its_recording(tmp_path):
    """Wall-clock times (a camera's) are not seconds into its recording: no video, no links."""
    records = synthesized_track([("happy", 1.0, 0.5, 0.2)], source="rtsp://cam", first_frame=int(1.7e9 * FPS))
    video = tmp_path / "cam.annotated.mp4"
    video.write_bytes(b"(a video)")
    write_report(records, tmp_path / "report.html", thumbnails=False, videos={"rtsp://cam": video})
    text = (tmp_path / "report.html").read_text()
    assert _video_srcs(text) == [] and "#t=" not in text
    # its times are from its first face, and the page says so, and when that was (it said "from the start of the
    # source", and gave no clock time anywhere)
    assert "a live source's: from its first face" in text
    assert "its times are seconds from its first face, seen at 2023-11-14 22:13:20.00 UTC" in text
    assert "<td style='text-align:left'>0.00 – 0.96 s" in text


def test_the_report_command_shows_the_annotated_video_written_beside_a_rows_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rows_file(tmp_path / "a.emotions.csv", source="a.mp4")
    rows_file(tmp_path / "b.csv", source="b.mp4")
    rows_file(tmp_path / "c.csv", source="c.mp4")
    (tmp_path / "a.annotated.mkv").write_bytes(b"(a video)")  # (as a many-source run names it)
    (tmp_path / "b.annotated.mp4").write_bytes(b"(a video)")  # (as one run with -o b.csv --annotate mp4 names it)
    assert report_command("a.emotions.csv", "b.csv", "c.csv", "-o", "report.html", "--no-thumbnails") is None
    assert _video_srcs((tmp_path / "report.html").read_text()) == ["a.annotated.mkv", "b.annotated.mp4"]
    assert report_command("a.emotions.csv", "b.csv", "-o", "plain.html", "--no-thumbnails", "--no-videos") is None
    assert _video_srcs((tmp_path / "plain.html").read_text()) == []


def test_the_report_command_warns_when_the_times_would_link_past_the_annotated_videos_end(tmp_path, monkeypatch,
                                                                                         caplog):
    import cv2

    # a run made with --start 2 (its rows from 2 s, its annotated video from there): written without --start, every
    # link of the page landed 2 s late, past the video's end for the last faces, and nothing said so
    monkeypatch.chdir(tmp_path)
    records = synthesized_track([("happy", 3.0, 0.5, 0.5)], source="a.mp4", first_frame=round(2 * FPS))
    with open_writer(tmp_path / "a.emotions.csv", labels=LABELS8) as writer:
        writer.write(records)
    video = cv2.VideoWriter(str(tmp_path / "a.annotated.mp4"), cv2.VideoWriter_fourcc(*"mp4v"), FPS, (32, 32))
    for _ in range(round(3 * FPS)):
        video.write(np.zeros((32, 32, 3), np.uint8))
    video.release()
    with caplog.at_level("INFO", logger="emopipe"):
        assert report_command("a.emotions.csv", "-o", "late.html", "--no-thumbnails") is None
    assert "a.annotated.mp4 lasts 3.00 s, but the faces of a.mp4 are seen until 4.96 s into it" in caplog.text
    assert "give the same --start here" in caplog.text
    caplog.clear()
    with caplog.at_level("INFO", logger="emopipe"):
        assert report_command("a.emotions.csv", "-o", "right.html", "--no-thumbnails", "--start", "2") is None
    assert "--start" not in caplog.text and "a.annotated.mp4#t=0.00" in (tmp_path / "right.html").read_text()
    # the run's summary beside the rows says where it began (start_s): the page links right without --start; a
    # --start given is taken as given
    (tmp_path / "a.emotions.summary.json").write_text(json.dumps(
        {"source": "a.mp4", "start_s": 2.0, "outputs": {"rows": "a.emotions.csv"}}))
    caplog.clear()
    with caplog.at_level("INFO", logger="emopipe"):
        assert report_command("a.emotions.csv", "-o", "told.html", "--no-thumbnails") is None
        assert "--start" not in caplog.text and "a.annotated.mp4#t=0.00" in (tmp_path / "told.html").read_text()
        assert report_command("a.emotions.csv", "-o", "zero.html", "--no-thumbnails", "--start", "0") is None
    assert "give the same --start here" in caplog.text and "a.annotated.mp4#t=2.00" in (
        tmp_path / "zero.html").read_text()


def test_a_runs_summary_says_where_it_began(tmp_path, checkpoints, models_home):
    clip = moving_face_video(tmp_path / "clip.mp4", frames=4, fps=10.0, empty=(0, 4))  # (no face: quick)
    with emopipe.Analyzer(detector="blazeface", weights=str(checkpoints[8]), device="cpu") as analyzer:
        analyzer.run(clip.path, output=str(tmp_path / "from.csv"), start=0.2)
        analyzer.run(clip.path, output=str(tmp_path / "whole.csv"))
        analyzer.run_many([clip.path], tmp_path / "many", start=0.2)
    assert json.loads((tmp_path / "from.summary.json").read_text())["start_s"] == 0.2
    assert json.loads((tmp_path / "whole.summary.json").read_text())["start_s"] is None
    assert json.loads((tmp_path / "many" / "clip.emotions.summary.json").read_text())["start_s"] == 0.2


_VIDEO_PROBE = """<script>
window.addEventListener('load', () => {
  const videos = Array.from(document.querySelectorAll('video'));
  const told = () => document.body.setAttribute('data-videos', JSON.stringify(videos.map(
    v => ({width: v.videoWidth, height: v.videoHeight, duration: v.duration, error: v.error && v.error.code}))));
  videos.forEach(v => ['loadedmetadata', 'error'].forEach(e => v.addEventListener(e, told)));
  told();
});
</script>"""


@pytest.mark.slow
def test_a_runs_report_plays_its_annotated_video_in_a_browser(tmp_path, checkpoints, models_home):
    """One clip with ``--annotate mp4 --report``: FFmpeg's H.264 video is on the page, where headless Chromium
    reads its size and length; the track's start links to it."""
    from emopipe.io.encode import find_ffmpeg

    if find_ffmpeg() is None:
        pytest.skip("needs FFmpeg (Debian package; .ci/run installs it): OpenCV's mp4v does not play in a browser")
    clip = moving_face_video(tmp_path / "clip.mp4", frames=6, empty=None)
    rows, page = tmp_path / "out" / "rows.csv", tmp_path / "report.html"
    rows.parent.mkdir()
    done = subprocess.run([sys.executable, "-m", "emopipe", str(clip.path), "--detector", "blazeface", "--weights",
                           str(checkpoints[8]), "--device", "cpu", "-o", str(rows), "--annotate", "mp4",
                           "--report", str(page), "--models-dir", str(models_home), "--no-progress"],
                          capture_output=True, text=True, cwd=REPO, timeout=600)
    assert done.returncode == 0, done.stderr
    text = page.read_text()
    assert _video_srcs(text) == ["out/rows.annotated.mp4"] and "out/rows.annotated.mp4#t=0.00" in text
    probed = tmp_path / "probed.html"
    probed.write_text(text.replace("<head>", "<head>" + _VIDEO_PROBE, 1))
    shown = chromium(tmp_path, "--host-resolver-rules=MAP * ~NOTFOUND", "--virtual-time-budget=5000", "--dump-dom",
                     probed.as_uri())
    found = re.search(r'data-videos="([^"]*)"', shown.stdout)
    assert found, shown.stderr[-2000:]
    import html

    (video,) = json.loads(html.unescape(found.group(1)))
    assert (video["width"], video["height"], video["error"]) == (*clip.size, None), video
    assert video["duration"] == pytest.approx(6 / clip.fps, abs=0.1)


def test_a_one_source_runs_report_names_a_source_where_no_face_was_found(tmp_path, checkpoints, models_home):
    # (was: "0 source(s)", the video never named nor played, where emopipe report on the same rows said "no face found")
    clip = moving_face_video(tmp_path / "empty room.mp4", frames=3, empty=(0, 3))
    page = tmp_path / "page.html"
    with emopipe.Analyzer(detector="blazeface", weights=str(checkpoints[8]), device="cpu") as analyzer:
        analyzer.run(clip.path, output=str(tmp_path / "rows.csv"), report=str(page), annotate="mp4")
    text = page.read_text()
    assert text.count("<section class='source'") == 1 and "<h2>" in text
    section = text.split("<section class='source'")[1]
    assert "empty room.mp4</h2><p class='meta'>no face found" in section
    assert _video_srcs(section) == ["rows.annotated.mp4"]


@pytest.mark.skipif(shutil.which("ffmpeg") is None, reason="needs Debian's ffmpeg to write the streams")
@pytest.mark.parametrize("container", ["ts", "avi", "mp4"])
def test_thumbnails_are_cut_from_the_frames_the_rows_name_whatever_the_container(tmp_path, container):
    # (was: a seek by frame number landed elsewhere in an MPEG transport stream — the thumbnail of a face cut from
    # another moment, and FFmpeg's decoder notes on stderr; seen on the H200, session 40; an AVI of H.264 with
    # B-frames, its frame slots half empty, and an MP4 land right)
    from emopipe.io.video import VideoSource
    from emopipe.report.thumbnails import cut_face, thumbnails_from_video

    video = tmp_path / f"clip.{container}"
    subprocess.run(["ffmpeg", "-v", "error", "-f", "lavfi", "-i", "testsrc2=size=160x120:rate=30:duration=4",
                    "-c:v", "libx264", "-g", "30", "-bf", "2", "-pix_fmt", "yuv420p", str(video)], check=True,
                   timeout=120)
    with VideoSource(video) as source:  # the frames as a run reads them: index, time, pixels
        frames = {f.index: f for f in source}
    box = (20.0, 10.0, 140.0, 110.0)
    for wanted in ([75], [10, 11, 90]):  # a seek; reading on, then a seek
        records = [FaceRecord.create(labels=LABELS8, probabilities=np.full(8, 1 / 8), source=str(video), frame=i,
                                     timestamp_s=frames[i].timestamp_s, track_id=t, box=box, score=0.9,
                                     valence=0.0, arousal=0.0) for t, i in enumerate(wanted, 1)]
        collector = TrackCollector()
        collector.add(records)
        crops = thumbnails_from_video(collector.series(), str(video))
        for t, i in enumerate(wanted, 1):
            expected = cut_face(frames[i].bgr, box)
            assert np.abs(crops[(str(video), t)].astype(float) - expected).mean() < 1.0, (container, i)
