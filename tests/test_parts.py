"""A long video cut into parts over --processes workers and joined again (emopipe.pipeline.parts).

The join is tested without a model at scale (minutes of video, faces coming and going, written by the real tracker and
rows writers as a worker writes them); one run with real worker processes checks the whole path on a short clip."""

from __future__ import annotations

import csv
import itertools
import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from emopipe.config import RunConfig
from emopipe.io.records import open_writer, partial_path
from emopipe.pipeline import parts
from emopipe.pipeline.archive import PlannedSource, SourceResult, plan_outputs
from emopipe.pipeline.parts import Split, cut, join_parts, not_splittable, parts_for, plan_parts
from emopipe.report.outputs import analyse, write_segments_csv, write_tracks_csv
from emopipe.report.rows import read_records
from emopipe.report.tracks import TrackCollector
from emopipe.types import FaceRecord
from emopipe.vision.track import IouTracker
from tests.support.rows import same_as_whole

LABELS = ("neutral", "happy", "sad", "surprise", "fear", "disgust", "anger", "contempt")


# -- how many parts, and where -------------------------------------------------------------------------------------


@pytest.mark.parametrize(("lengths", "workers", "counts"), [
    ([180.0], 4, [4]),  # one video: a part a worker
    ([180.0], 8, [4]),  # no part under 40 s
    ([130.0, 10.0], 4, [3, 1]),  # by length; a short one stays whole
    ([100.0, 10.0], 4, [2, 1]),  # no part under 40 s
    ([60.0, 60.0], 4, [1, 1]),  # 30-s parts would be too short
    ([200.0, 200.0], 4, [2, 2]),
    ([300.0, 100.0, 100.0], 4, [2, 1, 1]),
    ([500.0] * 4, 4, [1, 1, 1, 1]),  # as many videos as workers: each whole
    ([70.0], 4, [1]),
])
def test_each_video_gets_a_share_of_the_workers_by_its_length(lengths, workers, counts):
    assert parts_for(lengths, workers) == counts


def test_parts_cover_the_run_s_stretch_once_each_behind_an_overlap(tmp_path):
    source = plan_outputs([str(tmp_path / "talk.mp4")], tmp_path / "out", "csv")[0]
    config = RunConfig(start=10.0, end=130.0)
    pieces = cut(source, 3, 200.0, 30.0, config)
    assert [p.part for p in pieces] == [(1, 3), (2, 3), (3, 3)]
    assert pieces[0].start_s == 10.0 and pieces[-1].end_s == 130.0  # the run's own --start and --end
    assert pieces[0].keep_from_s is None
    for before, after in itertools.pairwise(pieces):
        assert before.end_s == after.keep_from_s  # each frame's rows from exactly one part
        assert after.keep_from_s - after.start_s >= max(parts.OVERLAP_S, parts.OVERLAP_FRAMES / 30.0)
        assert (after.keep_from_s * 30.0) % 1 == pytest.approx(0.5)  # between two frames' times, never on one
    assert [p.rows.name for p in pieces] == [f"talk.part{k}of3.emotions.csv" for k in (1, 2, 3)]
    assert pieces[1].summary.name == "talk.part2of3.emotions.summary.json" and pieces[1].key.endswith("#part2of3")
    names = {w.path for p in pieces for w in p.written()}
    assert not names & {w.path for w in source.written()}  # no part writes a name of the video's own


@pytest.mark.parametrize(("option", "why"), [({"smooth": 0.5}, "--smooth"), ({"annotate": "mp4"}, "--annotate"),
                                             ({"max_frames": 100}, "--max-frames"), ({"split": False}, "--no-split")])
def test_options_whose_rows_depend_on_where_a_part_begins_keep_videos_whole(tmp_path, option, why):
    config = RunConfig(**option)
    assert not_splittable(config) == why
    todo = plan_outputs([str(tmp_path / "a.mp4")], tmp_path, "csv")
    assert plan_parts(todo, 4, config, span_of=lambda uri: (600.0, 30.0)) == (todo, {})
    assert not_splittable(RunConfig()) is None and not_splittable(RunConfig(detect_every=3)) is None


@pytest.mark.parametrize("start", [None, 10.0, 10.02])
def test_with_detect_every_parts_begin_on_one_process_s_key_frames_and_read_on_to_the_next(tmp_path, start):
    source = plan_outputs([str(tmp_path / "talk.mp4")], tmp_path / "out", "csv")[0]
    every, fps = 4, 30.0
    config = RunConfig(start=start, end=200.0, detect_every=every)
    pieces = cut(source, 3, 300.0, fps, config)
    at = lambda seconds: int(np.ceil(seconds * fps - 1e-6))  # noqa: E731 (the first frame at or after)
    first = at(start or 0.0)  # one process's first frame: a key frame, as every 4th after it
    assert pieces[0].start_s == start and pieces[-1].end_s == 200.0 and pieces[-1].keep_until_s is None
    for before, after in itertools.pairwise(pieces):
        assert (at(after.start_s) - first) % every == 0  # the part's first frame: one of one process's key frames
        assert at(after.keep_from_s) - at(after.start_s) >= parts.OVERLAP_FRAMES  # its overlap, as long at least
        own_last, read_last = at(after.keep_from_s) - 1, at(before.end_s) - 1
        assert before.keep_until_s == after.keep_from_s  # each frame's rows from exactly one part
        assert (read_last - first) % every == 0 and 0 <= read_last - own_last < every  # on to the next key frame
    plain = cut(source, 3, 300.0, fps, RunConfig(start=start, end=200.0))
    assert [p.keep_from_s for p in plain] == [p.keep_from_s for p in pieces]  # the same stretches
    assert all(p.keep_until_s is None for p in plain)


def test_only_runs_with_workers_to_spare_are_cut_largest_first(tmp_path):
    todo = plan_outputs([str(tmp_path / f"{n}.mp4") for n in ("short", "long")], tmp_path, "csv")
    spans = {str(tmp_path / "short.mp4"): (50.0, 25.0), str(tmp_path / "long.mp4"): (300.0, 25.0)}
    units, splits = plan_parts(todo, 4, RunConfig(), span_of=spans.get)
    assert [u.key.rsplit("/", 1)[-1] for u in units] == [
        "long.mp4#part1of3", "long.mp4#part2of3", "long.mp4#part3of3", "short.mp4"]
    assert list(splits) == [str(tmp_path / "long.mp4")] and len(splits[str(tmp_path / "long.mp4")].parts) == 3
    assert plan_parts(todo, 2, RunConfig(), span_of=spans.get) == (todo, {})  # a worker each already
    unknown = plan_parts(todo, 4, RunConfig(), span_of=lambda uri: None)  # lengths not declared: kept whole
    assert unknown[1] == {} and len(unknown[0]) == 2
    # a part whose files would take another file's name of the run (an input, another source's output): whole
    other = plan_outputs([str(tmp_path / "long.part2of3.emotions.csv.partial")], tmp_path / "in", "csv")
    assert plan_parts(todo, 4, RunConfig(), span_of=spans.get, run=[*todo, *other])[1] == {}
    assert len(plan_parts(todo, 4, RunConfig(), span_of=spans.get, run=todo)[1]) == 1  # its own names are not others'


def test_an_earlier_runs_parts_of_another_count_are_removed_once_the_video_is_joined(tmp_path):
    """A run cut off with the video in 4 parts, resumed with workers for 3: the 4 parts' files go with the 3's once
    joined; a file of another source's (``talk.part1of2.mp4``'s, an input of the run) stays."""
    (tmp_path / "in").mkdir()
    out = tmp_path / "out"
    out.mkdir()
    todo = plan_outputs([str(tmp_path / "in" / "talk.mp4"), str(tmp_path / "in" / "talk.part1of2.mp4")], out, "csv")
    stale = [out / f"talk.part{k}of4.emotions.{ending}.partial" for k in (1, 4) for ending in ("csv", "summary.json")]
    others = [out / "talk.part1of2.emotions.csv.partial", out / "talk.part1of4.emotions.csv",  # (not a partial)
              out / "talk.part1of4.emotions.csv.partial.bak", out / "talk.partial.emotions.csv.partial"]
    for path in [*stale, *others]:
        path.write_text("x")
    spans = {todo[0].uri: (200.0, 25.0), todo[1].uri: (20.0, 25.0)}
    _, splits = plan_parts(todo, 4, RunConfig(), span_of=spans.get, run=todo)
    split = splits[todo[0].uri]
    assert len(split.parts) == 3 and split.stale == sorted(stale)
    for part in split.parts:
        partial_path(part.rows).write_text("x")
    split.remove_parts()
    assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in others)


# -- the join, without a model, at scale ---------------------------------------------------------------------------


FPS = 30.0


def _faces(frames: int, seed: int = 0) -> list[np.ndarray]:
    """Boxes of up to four faces drifting about a 1280×720 frame, each coming and going (gaps of a few frames to a few
    seconds, so some tracks outlive a gap and some do not), per frame."""
    rng = np.random.default_rng(seed)
    centres = rng.uniform([200, 150], [1080, 570], size=(4, 2))
    present = np.ones(4, dtype=bool)
    boxes = []
    for _ in range(frames):
        centres += rng.normal(0, 2.0, size=centres.shape)
        centres = np.clip(centres, [100, 100], [1180, 620])
        flip = rng.random(4) < np.where(present, 0.004, 0.03)
        present ^= flip
        frame = [np.r_[c - 40, c + 40] for c, here in zip(centres, present) if here]
        boxes.append(np.array(frame).reshape(-1, 4))
    return boxes


def _write_rows(path: Path, uri: str, boxes: list[np.ndarray], first: int, last: int, fmt: str) -> int:
    """What a worker writes for frames [first, last): its own tracker from ``first`` on; the frames' values are
    each frame's own. Returns the frames written."""
    tracker = IouTracker()
    rng = np.random.default_rng(1)
    values = [rng.dirichlet(np.ones(len(LABELS)), size=4) for _ in range(len(boxes))]
    with open_writer(path, fmt=fmt, labels=LABELS) as writer:
        for index in range(first, last):
            frame = boxes[index]
            ids = tracker.update(frame)
            k = len(frame)
            local = np.random.default_rng(index)  # (the frame's own numbers, whichever part writes it)
            writer.write(FaceRecord.for_frame(
                source=uri, frame=index, timestamp_s=index / FPS, labels=LABELS, track_ids=ids, boxes=frame,
                scores=local.uniform(0.5, 1, k), probabilities=values[index][:k], valence=local.normal(0, 3, k),
                arousal=local.normal(0, 3, k)))
    return last - first


def _first_frame_at(seconds: float | None) -> int:
    return 0 if seconds is None else int(np.ceil(seconds * FPS))


def _split_run(tmp_path: Path, fmt: str, count: int, seconds: float = 200.0, config: RunConfig | None = None):
    """The rows one process writes for a ``seconds``-long video, and those of ``count`` parts of it, as workers
    write them (each part its whole read: overlap, stretch and, with --detect-every, the frames after it): (the
    one-process file, the Split with its parts' results)."""
    uri = str(tmp_path / "long.mp4")
    frames = int(seconds * FPS)
    boxes = _faces(frames)
    whole = plan_outputs([uri], tmp_path / "out", fmt)[0]
    whole.rows.parent.mkdir(parents=True)
    alone = tmp_path / f"alone{whole.rows.suffix}"
    _write_rows(alone, uri, boxes, 0, frames, fmt)
    split = Split(whole, cut(whole, count, seconds, FPS, config or RunConfig()))
    for part in split.parts:
        first = _first_frame_at(part.start_s)
        last = frames if part.end_s is None else _first_frame_at(part.end_s)
        written = _write_rows(part.rows, uri, boxes, first, last, fmt)
        lead = _first_frame_at(part.keep_from_s) - first if part.keep_from_s is not None else 0
        tail = last - _first_frame_at(part.keep_until_s) if part.keep_until_s is not None else 0
        split.results[part.key] = SourceResult(source=uri, status="ok", frames=written, part=part.key,
                                               lead_frames=lead, tail_frames=tail, outputs={"rows": str(part.rows)})
    return alone, split, frames


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_joined_parts_are_the_rows_one_process_writes_byte_for_byte(tmp_path, fmt):
    alone, split, frames = _split_run(tmp_path, fmt, 4)
    result = join_parts(split, RunConfig())
    assert result.status == "ok" and result.part is None and result.frames == frames
    for partial, final in result.renames:  # (the driver names them once the line is written)
        partial.replace(final)
    assert [final.name for _, final in result.renames][-1] == split.whole.rows.name  # the rows named last
    joined = split.whole.rows.read_bytes()
    assert joined == alone.read_bytes()
    assert result.rows == result.faces == joined.count(b"\n") - (fmt == "csv") > 10_000
    ids = {json.loads(line)["track_id"] for line in joined.splitlines()} if fmt == "jsonl" else None
    assert ids is None or len(ids) > 8  # faces came back after long gaps: new tracks across the parts' seams
    summary = json.loads(split.whole.summary.read_text())
    assert summary["frames"] == frames and summary["parts"] == 4 and summary["faces"] == result.faces
    assert len(summary["tracks"]) == len(split.whole.tracks.read_text().splitlines()) - 1 > 8
    assert summary["join_s"] >= 0
    # the tracks and segments as `emopipe report` makes them from the one-process rows file, byte for byte
    collector = TrackCollector()
    collector.add(read_records(alone))
    reports = analyse(collector)
    write_tracks_csv(tmp_path / "alone.tracks.csv", reports)
    write_segments_csv(tmp_path / "alone.segments.csv", reports)
    assert split.whole.tracks.read_bytes() == (tmp_path / "alone.tracks.csv").read_bytes()
    assert split.whole.segments.read_bytes() == (tmp_path / "alone.segments.csv").read_bytes()


def test_parts_read_on_past_their_stretch_join_into_the_rows_one_process_writes(tmp_path):
    """--detect-every: each part reads on to a key frame past its stretch; those frames' rows are the next part's."""
    config = RunConfig(detect_every=7)
    alone, split, frames = _split_run(tmp_path, "csv", 4, config=config)
    assert sum(split.results[p.key].tail_frames for p in split.parts) > 0
    result = join_parts(split, config)
    assert result.status == "ok" and result.frames == frames
    for partial, final in result.renames:
        partial.replace(final)
    assert split.whole.rows.read_bytes() == alone.read_bytes()
    summary = json.loads(split.whole.summary.read_text())
    assert summary["frames"] == summary["frames_detected"] == frames  # (no part summary here: its own frames)


def test_tracks_that_cross_a_seam_keep_one_id_and_new_ones_are_numbered_in_order(tmp_path):
    alone, split, _ = _split_run(tmp_path, "csv", 5, seconds=250.0)
    result = join_parts(split, RunConfig())
    for partial, final in result.renames:
        partial.replace(final)
    joined = split.whole.rows.read_text().splitlines()[1:]
    ids = [int(line.split(",")[3]) for line in joined]
    first_seen = list(dict.fromkeys(ids))
    assert first_seen == list(range(1, len(first_seen) + 1))  # 1, 2, 3… in order of first appearance
    seams = [_first_frame_at(p.keep_from_s) for p in split.parts[1:]]
    frames = [int(line.split(",")[1]) for line in joined]
    crossing = {i for i, f in zip(ids, frames) if f == seams[0] - 1} & {i for i, f in zip(ids, frames) if f == seams[0]}
    assert crossing  # a face on both sides of the first seam is one track
    assert split.whole.rows.read_bytes() == alone.read_bytes()


def test_a_part_that_failed_ends_the_video_there_as_one_process_would(tmp_path):
    _, split, _ = _split_run(tmp_path, "csv", 3)
    second = split.parts[1]
    split.results[second.key] = replace(split.results[second.key], status="failed", error="decoding failed",
                                        exit_code=8, kind="InputTruncatedError")
    result = join_parts(split, RunConfig())
    assert (result.status, result.error, result.exit_code) == ("failed", "decoding failed", 8)
    last_kept = _first_frame_at(split.parts[2].keep_from_s)
    for partial, final in result.renames:
        partial.replace(final)
    frames = [int(line.split(",")[1]) for line in split.whole.rows.read_text().splitlines()[1:]]
    assert frames and max(frames) < last_kept  # the third part's rows are not joined
    # a part that failed past its stretch (reading on to a key frame) has its rows: the video goes on to the next
    split.results[split.parts[0].key] = replace(split.results[split.parts[0].key], status="failed", tail_frames=2,
                                                error="decoding failed at 2", exit_code=8)
    assert join_parts(split, RunConfig()).error == "decoding failed"  # (the second part's, as before)
    split.results[split.parts[0].key] = replace(split.results[split.parts[0].key], tail_frames=0)
    assert join_parts(split, RunConfig()).error == "decoding failed at 2"
    # the first part failing before it wrote rows: the video failed, nothing joined
    first = split.parts[0]
    split.results[first.key] = SourceResult(source=first.uri, status="failed", error="cannot open", exit_code=2,
                                            part=first.key)
    nothing = join_parts(split, RunConfig())
    assert (nothing.status, nothing.outputs, nothing.renames, nothing.part) == ("failed", {}, [], None)


def test_part_files_are_removed_once_joined(tmp_path):
    _, split, _ = _split_run(tmp_path, "csv", 2)
    assert all(p.rows.exists() for p in split.parts)
    split.remove_parts()
    assert not any(p.rows.exists() for p in split.parts)


# -- with real worker processes --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def talk(tmp_path_factory, shared_dir, checkpoints):
    """A 2.5-s clip of two faces (one frame without) that stands for a long video, and what two workers write for it
    whole (``--no-split``): (its run's options, the folder of the whole run)."""
    from emopipe.processes import run_on_processes
    from tests.support.synth import many_clips_run, moving_face_video

    tmp_path = tmp_path_factory.mktemp("talk")
    folder, config = many_clips_run(tmp_path, shared_dir, checkpoints[8], 0)
    moving_face_video(folder / "talk.mp4", frames=20, fps=8.0, empty=(9, 11), two_faces=True)
    whole = run_on_processes(replace(config, split=False), 2, output_dir=tmp_path / "whole")
    assert [(r.status, r.frames) for r in whole.results] == [("ok", 20)]
    return config, tmp_path / "whole"


@pytest.mark.slow
def test_a_video_over_two_workers_gives_the_rows_and_files_it_gives_whole(tmp_path, talk, short_parts):
    from emopipe.processes import run_on_processes

    config, whole = talk
    cut_up = run_on_processes(config, 2, output_dir=tmp_path / "parts")
    assert [(r.status, r.frames) for r in cut_up.results] == [("ok", 20)]
    same_as_whole(tmp_path / "parts", whole)
    facts = cut_up.run["processes"]["per_worker"]
    assert all(w["frames"] > 0 for w in facts.values())  # both workers had a part
    lines = (tmp_path / "parts" / "manifest.jsonl").read_text().splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["status"] == "ok"
    summary = json.loads((tmp_path / "parts" / "talk.emotions.summary.json").read_text())
    assert summary["parts"] == 2 and summary["frames"] == 20 and summary["faces"] == cut_up.results[0].rows > 20


@pytest.mark.slow
def test_with_detect_every_a_video_over_two_workers_gives_the_rows_it_gives_whole(tmp_path, talk, short_parts):
    """The parts begin on one process's key frames and read on to the next after their stretch: the boxes between
    key frames are interpolated as one process interpolates them (frames 8 and 12 of 20 are key frames about the
    seam at frame 10)."""
    from emopipe.processes import run_on_processes

    config = replace(talk[0], detect_every=4)
    outcomes = {split: run_on_processes(replace(config, split=split), 2, output_dir=tmp_path / str(split))
                for split in (True, False)}
    assert [(r.status, r.frames) for r in outcomes[True].results] == [("ok", 20)]
    same_as_whole(tmp_path / "True", tmp_path / "False")
    cut_up, whole = (json.loads((tmp_path / str(split) / "talk.emotions.summary.json").read_text())
                     for split in (True, False))
    assert cut_up["parts"] == 2 and "parts" not in whole
    assert cut_up["frames_detected"] == whole["frames_detected"] == 5  # frames 0, 4, 8, 12, 16
    with open(tmp_path / "True" / "talk.emotions.csv", newline="") as file:
        detected = {(int(row["frame"]), row["detected"]) for row in csv.DictReader(file)}
    assert {frame for frame, was in detected if was == "1"} <= {0, 4, 8, 12, 16}
    assert {10, 11} <= {frame for frame, was in detected if was == "0"}  # the seam's frames: interpolated


@pytest.mark.slow
def test_a_part_whose_worker_died_is_run_again_and_ctrl_c_then_resume_completes(tmp_path, talk, short_parts,
                                                                                 monkeypatch):
    import os
    import signal

    from emopipe import processes
    from emopipe.processes import run_on_processes

    config, whole = talk
    record_part, hand_out = processes._Run._record_part, processes._Run._hand_out
    killed: list[int] = []

    def kill_the_second_part_s_worker(self):  # as soon as the second part is handed out (so, surely, before it ends)
        hand_out(self)
        for worker in self.crew.alive():
            if not killed and any(key.endswith("#part2of2") for key in worker.taken):
                os.kill(worker.process.pid, signal.SIGKILL)
                killed.append(worker.process.pid)

    monkeypatch.setattr(processes._Run, "_hand_out", kill_the_second_part_s_worker)
    redone = run_on_processes(config, 2, output_dir=tmp_path / "redone")
    monkeypatch.setattr(processes._Run, "_hand_out", hand_out)
    facts = redone.run["processes"]
    assert killed and facts["worker_failures"] == 1 and facts["started"] == 3  # its part went to a new worker
    assert [(r.status, r.frames) for r in redone.results] == [("ok", 20)]
    same_as_whole(tmp_path / "redone", whole)

    def cut_off(self, result, worker):  # Ctrl-C once the first part is in, the other not
        monkeypatch.setattr(processes._Run, "_record_part", record_part)
        record_part(self, result, worker)
        raise KeyboardInterrupt

    monkeypatch.setattr(processes._Run, "_record_part", cut_off)
    out = tmp_path / "out"
    stopped = run_on_processes(config, 2, output_dir=out)
    assert stopped.interrupted and [r.status for r in stopped.results] == ["interrupted"]
    assert not (out / "talk.emotions.csv").exists()  # no file under a final name for a video not joined
    resumed = run_on_processes(replace(config, resume=True), 2, output_dir=out)
    assert [(r.status, r.frames) for r in resumed.results] == [("ok", 20)]
    for name in ("talk.emotions.csv", "talk.emotions.segments.csv"):
        assert (out / name).read_bytes() == (whole / name).read_bytes()
    assert not list(out.glob("*.part*"))  # the parts' files, the interrupted run's too, are gone


@pytest.mark.slow
def test_a_truncated_video_cut_up_fails_where_and_as_it_fails_whole(tmp_path, talk, short_parts):
    import cv2

    from emopipe.processes import run_on_processes
    from tests.support.synth import moving_face_video, truncate, write_video

    config, _ = talk
    clip = moving_face_video(tmp_path / "full.mp4", frames=24, fps=8.0, empty=None)
    capture = cv2.VideoCapture(str(clip.path))
    frames = [capture.read()[1] for _ in range(24)]
    write_video(tmp_path / "full.avi", frames, 8.0, fourcc="MJPG")  # (its frame count in the header: read on a cut)
    (tmp_path / "in").mkdir()
    truncate(tmp_path / "full.avi", tmp_path / "in" / "cut.avi", 0.6)  # the second part's stretch is cut short
    config = replace(config, sources=(str(tmp_path / "in"),))
    outcomes = {split: run_on_processes(replace(config, split=split), 2, output_dir=tmp_path / str(split))
                for split in (True, False)}
    cut_up, whole = (outcomes[split].results[0] for split in (True, False))
    assert (cut_up.status, cut_up.exit_code, cut_up.kind) == ("failed", 8, "InputTruncatedError")
    assert (cut_up.frames, cut_up.rows, cut_up.error) == (whole.frames, whole.rows, whole.error)
    assert 0 < cut_up.frames < 24
    for name in ("cut.emotions.csv", "cut.emotions.segments.csv"):  # the rows up to the cut, kept
        assert (tmp_path / "True" / name).read_bytes() == (tmp_path / "False" / name).read_bytes()
    assert json.loads((tmp_path / "True" / "cut.emotions.summary.json").read_text())["parts"] == 2


def test_planned_sources_without_a_part_are_known_by_their_source(tmp_path):
    planned = PlannedSource(0, "a.mp4", tmp_path / "a.emotions.csv", tmp_path / "a.emotions.summary.json")
    assert planned.key == "a.mp4" and replace(planned, part=(2, 3)).key == "a.mp4#part2of3"
