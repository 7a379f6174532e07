"""Many sources in one run: expansion, output names, the manifest, failure isolation, --resume."""

from __future__ import annotations

import contextlib
import csv
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import cv2
import numpy as np
import pytest

from emopipe.api import Analyzer
from emopipe.cli.run import build_parser, config_from_args
from emopipe.config import RunConfig
from emopipe.errors import InputNotFoundError, InputUnreadableError, OutputError, UsageError
from emopipe.io.inputs import expand_inputs, read_list
from emopipe.io.records import FOLDER_LOCK, hold_folder, hold_outputs, lock_path
from emopipe.pipeline import archive
from emopipe.pipeline.archive import MANIFEST, Manifest, PerSourceSink, PlannedSource, SourceChain, plan_outputs
from emopipe.types import Detections, FrameResult, HostFrame, SourceInfo
from tests.support.folders import held, held_output
from tests.support.synth import moving_face_video

REPO = Path(__file__).resolve().parents[1]


# -- what the inputs name -------------------------------------------------------------------------


def touch(path: Path, data: bytes = b"x") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def test_a_folder_of_videos_gives_its_videos_and_a_folder_of_images_stays_one_sequence(tmp_path, caplog):
    videos = tmp_path / "videos"
    for name in ("b.mp4", "a.MKV", "notes.txt", "deep/c.mp4", "still.png"):
        touch(videos / name)
    images = tmp_path / "images"
    for name in ("1.png", "2.jpg"):
        touch(images / name)
    found = expand_inputs([str(videos), str(images)])
    assert found.collection
    assert found.sources == (str(videos / "a.MKV"), str(videos / "b.mp4"), str(images))
    assert "1 image(s) are not" in caplog.text  # the png beside the videos is said to be skipped
    deep = expand_inputs([str(videos)], recursive=True)
    assert deep.sources == (str(videos / "a.MKV"), str(videos / "b.mp4"), str(videos / "deep" / "c.mp4"))


def test_one_plain_file_is_not_a_collection_but_a_glob_or_a_list_is(tmp_path, caplog):
    clip = touch(tmp_path / "clips" / "x.mp4")
    touch(tmp_path / "clips" / "y.mp4")
    assert expand_inputs([str(clip)]).collection is False
    globbed = expand_inputs([str(tmp_path / "clips" / "*.mp4")])
    assert globbed.collection and [Path(s).name for s in globbed.sources] == ["x.mp4", "y.mp4"]
    listing = tmp_path / "list.txt"
    listing.write_text(f"# cameras and clips\n{clip}\n\nrtsp://user:pw@cam/1\n{clip}\n")
    assert read_list(str(listing)) == [str(clip), "rtsp://user:pw@cam/1", str(clip)]
    with caplog.at_level("WARNING", logger="emopipe"):
        listed = expand_inputs([], [str(listing)], recursive=False)
        glob_over_named = expand_inputs([str(clip), str(tmp_path / "clips" / "*.mp4"), str(tmp_path / "clips")])
    assert listed.collection and listed.sources == (str(clip), "rtsp://user:pw@cam/1")  # duplicates once …
    assert f"{clip} is named more than once: it runs once" in caplog.text  # … said: one camera listed twice
    assert len(glob_over_named.sources) == 2 and caplog.text.count("more than once") == 1  # (a glob overlaps)
    caplog.clear()

    # (was: "x.mp4 x.mp4 -o out" ran as one file, its rows written to a file named "out") several named are several
    # — outputs per source in the -o folder — the same one once, with a warning
    with caplog.at_level("WARNING", logger="emopipe"):
        twice = expand_inputs([str(clip), f"{tmp_path}/clips/./x.mp4", str(clip)])
    assert twice.collection and twice.sources == (str(clip),)
    assert f"{clip} is named more than once (also as {tmp_path}/clips/./x.mp4): it runs once" in caplog.text
    assert f"{clip} is named more than once: it runs once" in caplog.text


@pytest.mark.parametrize(("items", "error"), [
    (["nothing/*.mp4"], InputNotFoundError),
])
def test_bad_inputs_are_one_line_errors(tmp_path, items, error):
    with pytest.raises(error):
        expand_inputs([str(tmp_path / i) for i in items])
    with pytest.raises(InputNotFoundError, match="list file not found"):
        expand_inputs([], [str(tmp_path / "no-list.txt")])
    bad = touch(tmp_path / "bad.txt", b"\xff\xfe\xfa")
    with pytest.raises(InputUnreadableError, match="cannot read the list file"):
        read_list(str(bad))


def test_output_names_follow_the_paths_so_same_named_clips_never_collide(tmp_path):
    uris = [str(tmp_path / "a" / "clip.mp4"), str(tmp_path / "b" / "clip.mp4"), str(tmp_path / "a" / "clip.mkv"),
            "rtsp://user:secret@cam.local:554/live", str(tmp_path / "b" / ("x" * 300 + ".mp4"))]
    planned = plan_outputs(uris, tmp_path / "out", "csv")
    rows = [p.rows.relative_to(tmp_path / "out").as_posix() for p in planned]
    assert rows[:3] == ["a/clip.emotions.csv", "b/clip.emotions.csv", "a/clip-2.emotions.csv"]
    assert "secret" not in rows[3] and rows[3].endswith(".emotions.csv")
    assert len(set(rows)) == len(rows)
    assert all(len(p.summary.name.encode()) + len(".partial") <= 255 for p in planned)
    assert plan_outputs(uris[:1], tmp_path, "jsonl")[0].rows.name == "clip.emotions.jsonl"
    # two long stream URLs alike up to the cut: the second's -2 still leaves room for every file of its name
    long = "http://h/" + "x" * 300
    planned = plan_outputs([long + "?a=1", long + "?a=2"], tmp_path / "out", "csv")
    assert planned[1].rows.name.endswith("-2.emotions.csv") and planned[0].rows != planned[1].rows
    assert all(len(f.name.encode()) + len(".partial") <= 255 for p in planned
               for f in (p.rows, p.summary, p.tracks, p.segments))


def test_the_manifest_keeps_the_latest_line_per_source_and_survives_a_cut_line(tmp_path):
    manifest = Manifest(tmp_path)
    rows = touch(tmp_path / "a.emotions.csv")
    manifest.append({"source": "a.mp4", "status": "failed", "outputs": {}})
    manifest.append({"source": "a.mp4", "status": "ok", "outputs": {"rows": str(rows)}})
    manifest.append({"source": "b.mp4", "status": "ok", "outputs": {"rows": str(tmp_path / "gone.csv")}})
    with open(manifest.path, "a") as file:
        file.write('{"source": "c.mp4", "sta')  # killed while writing
    latest = manifest.previous()
    assert set(latest) == {"a.mp4", "b.mp4"}
    # the next run's first line starts on a line of its own, not glued to the cut one (and so lost)
    manifest.append({"source": "c.mp4", "status": "skipped", "outputs": {}})
    assert set(manifest.previous()) == {"a.mp4", "b.mp4", "c.mp4"}
    assert manifest.done(latest["a.mp4"]) and not manifest.done(latest["b.mp4"])  # b's rows are gone: redo
    assert not manifest.done({"source": "x", "status": "interrupted", "outputs": {}})


def test_list_lines_are_expanded_once_and_one_file_spelled_two_ways_is_one_source(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    touch(tmp_path / "R" / "a.mp4")
    touch(tmp_path / "x" / "b.mp4")
    listing = touch(tmp_path / "list.txt", b"R\nx/*.mp4\n./R/a.mp4\n")
    config = config_from_args(build_parser().parse_args(["--list", str(listing), str(tmp_path / "x" / "b.mp4")]))
    assert config.sources == ("R/a.mp4", "x/b.mp4")  # the folder and the glob expanded; no literal line left
    plan = Analyzer(config).plan_many(None, tmp_path / "out")  # the list is not read (and expanded) again
    assert [p.uri for p in plan.todo] == ["R/a.mp4", "x/b.mp4"]


def test_the_command_plans_the_names_a_folder_gives_each_once_brackets_and_all(tmp_path, monkeypatch):
    # (was: planning expanded the command's expanded sources again: clip[2].mp4, a link to nothing that is to fail
    # as a source, was read as a pattern there, matched clip2.mp4, and vanished from the run unsaid)
    monkeypatch.chdir(tmp_path)
    for name in ("clip1.mp4", "clip[1].mp4", "clip2.mp4"):
        touch(tmp_path / "d" / name)
    (tmp_path / "d" / "clip[2].mp4").symlink_to(tmp_path / "gone.mp4")
    config = config_from_args(build_parser().parse_args(["d", "--device", "cpu"]))
    expected = ["d/clip1.mp4", "d/clip2.mp4", "d/clip[1].mp4", "d/clip[2].mp4"]
    assert list(config.sources) == expected
    plan = Analyzer(config).plan_many(None, tmp_path / "out")
    assert [p.uri for p in plan.todo] == expected


@pytest.mark.parametrize("where", ["one-process", "ray-driver"])
def test_the_command_expands_its_inputs_once_and_the_library_its_items_once(where, tmp_path, monkeypatch):
    import emopipe.cli.run
    import emopipe.pipeline.many

    monkeypatch.chdir(tmp_path)
    for name in ("v/a.mp4", "v/b.mp4", "photos/1.jpg"):
        touch(tmp_path / name)
    calls: list[list[str]] = []

    def counted(items, *args, **options):  # type: ignore[no-untyped-def]
        calls.append(list(items))
        return expand_inputs(items, *args, **options)

    for module in (emopipe.cli.run, emopipe.pipeline.many):
        monkeypatch.setattr(module, "expand_inputs", counted)
    config = config_from_args(build_parser().parse_args(["v", "photos", "--device", "cpu"]))
    if where == "ray-driver":
        pytest.importorskip("ray", reason="Ray is not installed (pip install 'emopipe[ray]')")
        import emopipe.cluster

        planned: list[str] = []

        def plan(*args, **kwargs):  # type: ignore[no-untyped-def]
            made = emopipe.pipeline.many.plan_sources(*args, **kwargs)
            planned.extend(p.uri for p in made.todo)
            return made

        def connect(address: str) -> bool:  # (the run is planned by then: stop it there)
            raise UsageError("test: planned")

        monkeypatch.setattr(emopipe.cluster, "plan_sources", plan)
        monkeypatch.setattr(emopipe.cluster, "connect_ray", connect)
        with pytest.raises(UsageError, match="test: planned"):
            emopipe.cluster.run_on_ray(config, emopipe.cluster.RayOptions(address=emopipe.cluster.LOCAL))
    else:
        planned = [p.uri for p in Analyzer(config).plan_many(None, tmp_path / "out").todo]
    assert calls == [["v", "photos"]] and planned == ["v/a.mp4", "v/b.mp4", "photos"]
    calls.clear()  # the library's sources are the caller's items: expanded there, once
    library = Analyzer(device="cpu").plan_many(["v", "photos"], tmp_path / "library")
    assert calls == [["v", "photos"]] and [p.uri for p in library.todo] == planned


def test_a_list_from_a_pipe_is_read_and_a_folder_given_as_one_is_said(tmp_path):
    # (--list <(find …) said "list file not found: /dev/fd/63")
    read, write = os.pipe()
    os.write(write, b"a.mp4\nb.mp4\n")
    os.close(write)
    try:
        assert read_list(f"/dev/fd/{read}") == ["a.mp4", "b.mp4"]
    finally:
        os.close(read)
    with pytest.raises(InputUnreadableError, match=r"is a folder, not a list file: name the folder itself"):
        read_list(str(tmp_path))


def test_a_list_line_may_end_with_a_comment_but_a_hash_inside_a_name_or_url_stays(tmp_path):
    from emopipe.io.inputs import read_list

    listing = touch(tmp_path / "cameras.txt", b"# the fleet\nrtsp://cam/1   # door\nhttp://h/feed#main\n"
                                              b"clip#2.mp4\n  rtsp://cam/2\t# yard\n#rtsp://cam/3\n")
    assert read_list(str(listing)) == ["rtsp://cam/1", "http://h/feed#main", "clip#2.mp4", "rtsp://cam/2"]


def test_a_glob_takes_what_a_folder_takes_and_says_what_it_skips(tmp_path, monkeypatch, caplog):
    monkeypatch.chdir(tmp_path)
    for name in ("data/top.mp4", "data/notes.txt", "data/cover.jpg", "data/vids/b.mp4", "data/vids/a.mp4",
                 "data/frames/1.png", "data/frames/2.png", "data/empty/readme.md",
                 # a first run's outputs inside the folder: never sources of the next
                 "data/top.emotions.csv", "data/manifest.jsonl", "data/report.html", "data/report.thumbnails/t1.jpg"):
        touch(tmp_path / name)
    found = expand_inputs(["data/*"])
    # its folders as if named: one of videos gives them, one of images is an image sequence; the jpg beside videos
    # is not taken, as a folder's images beside its videos are not
    assert found.sources == ("data/frames", "data/top.mp4", "data/vids/a.mp4", "data/vids/b.mp4")
    assert "data/*: 1 image(s) it matches sit beside videos" in caplog.text
    assert "skipped 6 match(es) that are no video or image" in caplog.text and "data/empty/" in caplog.text
    deep = expand_inputs(["./data/**/*"]).sources  # (./ kept on what it matches: still taken)
    assert [os.path.normpath(s) for s in deep] == ["data/frames", "data/top.mp4", "data/vids/a.mp4", "data/vids/b.mp4"]
    assert "./data/empty/" in caplog.text  # its readme.md matched too, yet the folder is still said to be skipped
    # a list line is expanded the same way; a pattern that gives nothing is a one-line error
    listing = touch(tmp_path / "list.txt", b"data/v*\n")
    assert expand_inputs([], [str(listing)]).sources == ("data/vids/a.mp4", "data/vids/b.mp4")
    with pytest.raises(InputNotFoundError, match=r"^data/\*\.txt matches no video or image.*data/notes\.txt"):
        expand_inputs(["data/*.txt"])


def test_hidden_files_are_no_sources_but_a_link_to_nothing_fails_as_one(tmp_path):
    for name in ("v/a.mp4", "v/._a.mp4", "v/.DS_Store", "v/.trash/old.mp4", "v/s/b.mp4"):
        touch(tmp_path / name)
    (tmp_path / "v" / "gone.mp4").symlink_to(tmp_path / "nowhere.mp4")  # not silently left out: it fails, recorded
    os.mkfifo(tmp_path / "v" / "pipe.mp4")  # (as a FIFO does: it was left out unsaid)
    expected = (str(tmp_path / "v" / "a.mp4"), str(tmp_path / "v" / "gone.mp4"), str(tmp_path / "v" / "pipe.mp4"))
    assert expand_inputs([str(tmp_path / "v")]).sources == expected
    assert expand_inputs([str(tmp_path / "v")], recursive=True).sources == (*expected, str(tmp_path / "v/s/b.mp4"))
    assert expand_inputs([str(tmp_path / "v" / "*")]).sources == (*expected, str(tmp_path / "v/s/b.mp4"))


def test_no_folder_or_glob_gives_emopipes_own_outputs_but_a_file_named_is_a_source(tmp_path, monkeypatch, caplog):
    # (a rerun with -o in the input tree analysed out/a.annotated.mp4, writing out/out/a.annotated.annotated.mp4…)
    monkeypatch.chdir(tmp_path)
    caplog.set_level("INFO")
    for name in ("a.mp4", "b.mkv", "out/sub/c.annotated.mp4", "out/a.annotated.partial.mp4",
                 "out/cam.annotated.2.MKV", "out/listed.mp4", "out/a.emotions.csv", "out/r.thumbnails/t.jpg",
                 "keep/x.annotated.mp4"):  # (keep/: no output folder, so another tool's video: a source)
        touch(tmp_path / name)
    touch(tmp_path / "out" / FOLDER_LOCK, b"")
    manifest = Manifest(Path("out"), files=True)  # (a video the manifest lists as an output, whatever its name)
    manifest.append({"source": "z.mp4", "status": "ok", "outputs": {"annotated_video": "out/listed.mp4"}})
    manifest.append({"source": "c.mp4", "status": "ok", "outputs": {"annotated_video": "out/sub/c.annotated.mp4"}})
    touch(tmp_path / "out" / "annotated.mp4")  # (in the output folder, but neither listed nor named so: a source)
    # a user's recordings named as emopipe names its videos, in the output folder, that no manifest line lists as an
    # output — one listed as a source: sources (taken for emopipe's, talk.annotated.mp4 was left out, then written
    # over by --resume --annotate mp4 as talk.mp4's annotated video; QA pass, session 39)
    touch(tmp_path / "out" / "talk.annotated.mp4")
    touch(tmp_path / "out" / "user.annotated.mp4")
    manifest.append({"source": "out/talk.annotated.mp4", "status": "ok",
                     "path": str(tmp_path / "out/talk.annotated.mp4"), "outputs": {}})
    users = ("out/talk.annotated.mp4", "out/user.annotated.mp4")
    everything = ("a.mp4", "b.mkv", "keep/x.annotated.mp4", "out/annotated.mp4", *users)
    assert expand_inputs(["."], recursive=True).sources == everything
    assert "left out 4 file(s) emopipe wrote" in caplog.text and "out/listed.mp4" in caplog.text
    assert expand_inputs(["out/**"], recursive=True).sources == ("out/annotated.mp4", *users)
    assert expand_inputs(["out/*.mp4"]).sources == ("out/annotated.mp4", *users)
    with pytest.raises(InputNotFoundError, match="matches no video or image"):
        expand_inputs(["out/sub/*"])
    # its manifest alone marks an output folder too (its lock file removed); -o the input folder itself
    (tmp_path / "out" / FOLDER_LOCK).unlink()
    assert expand_inputs(["out"]).sources == ("out/annotated.mp4", *users)
    caplog.clear()
    assert expand_inputs(["."]).sources == ("a.mp4", "b.mkv")
    assert "left out (--recursive" in caplog.text  # (out/ holds a video of its own; sub/ holds only emopipe's)
    assert expand_inputs(["out"], recursive=True).sources == ("out/annotated.mp4", *users)
    named = ["out/a.annotated.partial.mp4", "out/listed.mp4", "out/sub/c.annotated.mp4"]
    assert expand_inputs(named).sources == tuple(named)


def test_a_list_file_from_windows_or_with_a_home_folder_reads_as_meant(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    touch(tmp_path / "v" / "a.mp4")
    touch(tmp_path / "v" / "b.mp4")
    listing = touch(tmp_path / "list.txt", "\ufeff# clips\r\n~/v/a.mp4\r\n\r\n~/v/b.*\r\n".encode())
    assert read_list(str(listing)) == ["~/v/a.mp4", "~/v/b.*"]  # no byte-order mark in a name, no \r
    assert expand_inputs([], [str(listing)]).sources == (str(tmp_path / "v" / "a.mp4"), str(tmp_path / "v" / "b.mp4"))
    assert expand_inputs([], ["~/list.txt"]).sources == (str(tmp_path / "v" / "a.mp4"), str(tmp_path / "v" / "b.mp4"))


def test_a_link_is_a_source_of_its_own_named_after_the_link(tmp_path, monkeypatch, caplog):
    monkeypatch.chdir(tmp_path)
    touch(tmp_path / "raw" / "x123.mp4")
    Path("videos").mkdir()
    for name in ("interview.mp4", "intro.mp4"):
        (tmp_path / "videos" / name).symlink_to(tmp_path / "raw" / "x123.mp4")
    Path("linked").symlink_to(tmp_path / "raw")  # a linked folder: the same file as raw/x123.mp4
    found = expand_inputs(["videos/interview.mp4", "videos/intro.mp4", "./videos/interview.mp4",
                           str(tmp_path / "videos" / "interview.mp4")])
    assert found.sources == ("videos/interview.mp4", "videos/intro.mp4")  # one path named twice is one source
    assert expand_inputs(["videos"]).sources == ("videos/interview.mp4", "videos/intro.mp4")
    assert expand_inputs(["raw/x123.mp4", "linked/x123.mp4"]).sources == ("raw/x123.mp4",)
    planned = plan_outputs(["videos/interview.mp4", "videos/intro.mp4", "linked/x123.mp4"], Path("out"), "csv")
    assert [p.name for p in planned] == ["videos/interview", "videos/intro", "linked/x123"]
    # --resume matches each link to its own manifest line, from any folder and however spelled
    out = tmp_path / "out"
    write_done(Manifest(out, files=True), "videos/interview.mp4", out / "interview.emotions.csv")
    assert json.loads((out / "manifest.jsonl").read_text())["path"] == str(tmp_path / "videos" / "interview.mp4")
    monkeypatch.chdir(tmp_path / "videos")
    caplog.clear()
    plan = Analyzer(device="cpu").plan_many(["interview.mp4", "intro.mp4"], out, resume=True)
    assert caplog.text.count("interview.mp4, intro.mp4 are one file") == 1  # each analysed: said, once
    assert [r.source for r in plan.skipped] == ["interview.mp4"]
    assert [(p.uri, p.rows.name) for p in plan.todo] == [("intro.mp4", "intro.emotions.csv")]


def test_recursive_makes_each_folder_of_images_in_the_tree_one_sequence(tmp_path, monkeypatch, caplog):
    monkeypatch.chdir(tmp_path)
    for name in ("shoots/day1/1.jpg", "shoots/day1/2.jpg", "shoots/day2/1.jpg", "shoots/day2/raw/1.png",
                 "shoots/take.1/1.jpg", "shoots/take.2/1.jpg", "shoots/clips/a.mp4", "shoots/clips/cover.jpg",
                 "shoots/.cache/1.jpg", "shoots/report.thumbnails/t.jpg", "other/day1/1.jpg"):
        touch(tmp_path / name)
    found = expand_inputs(["shoots"], recursive=True)
    # each folder holding images (and no video of its own) is one sequence; a folder's videos are taken as before
    assert found.sources == ("shoots/clips/a.mp4", "shoots/day1", "shoots/day2", "shoots/day2/raw", "shoots/take.1",
                             "shoots/take.2")
    assert "shoots/clips: 1 video(s) analysed; its 1 image(s) are not" in caplog.text  # its own image only
    # named after each folder's path, dots kept (take.1 and take.2, not take and take-2), never one name twice
    planned = plan_outputs([*found.sources, "other/day1"], Path("out"), "csv")
    assert [p.name for p in planned] == ["shoots/clips/a", "shoots/day1", "shoots/day2", "shoots/day2/raw",
                                         "shoots/take.1", "shoots/take.2", "other/day1"]
    assert [p.name for p in plan_outputs(found.sources, Path("out"), "csv")][1:3] == ["day1", "day2"]
    # without --recursive the top folder holds none: the warning says where they are and how to take them
    caplog.clear()
    assert expand_inputs(["shoots"]).sources == ("shoots",)  # (fails as a source: no image of its own)
    assert "shoots: no video or image of its own; its 5 subfolder(s) holding videos or images are left out " \
           "(--recursive takes them)" in caplog.text
    # --resume knows each folder by its path, as a file is known
    out = tmp_path / "out"
    write_done(Manifest(out, files=True), "shoots/day1", out / "day1.emotions.csv")
    plan = Analyzer(device="cpu").plan_many(["shoots"], out, resume=True, recursive=True)
    assert [r.source for r in plan.skipped] == ["shoots/day1"]
    assert [p.rows.relative_to(out).as_posix() for p in plan.todo][:2] == ["clips/a.emotions.csv",
                                                                            "day2.emotions.csv"]


def test_a_glob_of_a_whole_tree_never_takes_one_image_twice(tmp_path, monkeypatch, caplog):
    monkeypatch.chdir(tmp_path)
    for name in ("shoots/day1/1.jpg", "shoots/day1/2.jpg", "shoots/day2/1.jpg", "shoots/day2/raw/1.png"):
        touch(tmp_path / name)
    # its folders are taken as if named, each one sequence; their images are not sources of their own too
    assert expand_inputs(["shoots/**"]).sources == ("shoots/day1", "shoots/day2", "shoots/day2/raw")
    assert expand_inputs(["shoots/**"], recursive=True).sources == ("shoots/day1", "shoots/day2", "shoots/day2/raw")
    assert "skipped" not in caplog.text  # (shoots/ itself holds only folders, which are taken)
    touch(tmp_path / "shoots" / "day1" / "b.mp4")
    caplog.clear()
    assert expand_inputs(["shoots/**"], recursive=True).sources == ("shoots/day1/b.mp4", "shoots/day2",
                                                                    "shoots/day2/raw")
    assert caplog.text.count("shoots/day1: 1 video(s) analysed; its 2 image(s) are not") == 1  # said once
    (tmp_path / "shoots" / "day1" / "b.mp4").unlink()
    caplog.clear()
    # with videos in the tree: the folders of images are still sequences, and no warning says they are not
    touch(tmp_path / "shoots" / "clips" / "a.mp4")
    assert expand_inputs(["shoots/**"]).sources == ("shoots/clips/a.mp4", "shoots/day1", "shoots/day2",
                                                    "shoots/day2/raw")
    assert "are not" not in caplog.text
    # a glob that matches only files takes the images it matches, each its own source, as before
    assert expand_inputs(["shoots/**/*.png"]).sources == ("shoots/day2/raw/1.png",)


def test_without_recursive_a_folder_says_how_many_subfolders_it_leaves_out(tmp_path, monkeypatch, caplog):
    monkeypatch.chdir(tmp_path)
    for name in ("photos/1.jpg", "photos/day2/1.jpg", "photos/day3/raw/1.png", "photos/notes/a.txt",
                 "photos/.cache/1.jpg", "photos/report.thumbnails/t.jpg", "videos/a.mp4", "videos/old/b.mp4"):
        touch(tmp_path / name)
    # a folder with images or videos of its own said nothing of the subfolders it leaves out
    assert expand_inputs(["photos", "videos"]).sources == ("photos", "videos/a.mp4")
    assert "photos: its 2 subfolder(s) holding videos or images are left out (--recursive takes them)" in caplog.text
    assert "videos: its 1 subfolder(s) holding videos or images are left out" in caplog.text
    # a folder a glob matches is taken as if named, and says so too; subfolders the glob matches are not left out
    caplog.clear()
    assert expand_inputs(["photo*"]).sources == ("photos",)
    assert "photos: its 2 subfolder(s) holding videos or images are left out" in caplog.text
    caplog.clear()
    assert expand_inputs(["photos/**"]).sources == ("photos", "photos/day2", "photos/day3/raw")
    assert expand_inputs(["photos"], recursive=True).sources == ("photos", "photos/day2", "photos/day3/raw")
    assert "left out" not in caplog.text


@pytest.mark.timeout(60)  # (glob's ** went round two loops for ever)
def test_recursive_and_a_tree_glob_follow_a_linked_folder_and_walk_each_folder_once(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in ("archive/day1/a.mp4", "store/day2/b.mp4"):
        touch(tmp_path / name)
    Path("archive/day2").symlink_to(tmp_path / "store" / "day2")  # (NAS layouts: a session folder linked in)
    Path("archive/day1/again").symlink_to("..")  # two loops back up the tree
    Path("archive/day1/self").symlink_to(".")
    # the subfolders left out without --recursive, linked one included, are taken with it, as its warning says
    expected = ("archive/day1/a.mp4", "archive/day2/b.mp4")
    assert expand_inputs(["archive"], recursive=True).sources == expected
    assert expand_inputs(["archive/**"]).sources == expected
    assert expand_inputs(["./archive/**/*.mp4"], recursive=True).sources == expected


def test_the_command_says_each_warning_of_its_inputs_once(tmp_path):
    """It expands its inputs to choose the kind of run, and again to plan the many-source run."""
    for name in ("photos/1.jpg", "photos/day2/1.jpg", "v/a.mp4", "v/cover.jpg"):
        touch(tmp_path / name)
    done = emopipe("photos", "v", "-o", "out", "--device", "cpu", "--weights", tmp_path / "no-such.pth",
                   cwd=tmp_path, check=6)  # (planned, then the missing weights end it)
    assert done.stderr.count("photos: its 1 subfolder(s) holding videos or images are left out") == 1, done.stderr
    assert done.stderr.count("v: 1 video(s) analysed; its 1 image(s) are not") == 1, done.stderr


def test_a_glob_leaves_out_the_images_beside_videos_as_naming_their_folder_does(tmp_path, monkeypatch, caplog):
    monkeypatch.chdir(tmp_path)
    for name in ("s/v/a.mp4", "s/v/cover.jpg", "s/d1/1.jpg", "s/d1/2.jpg", "s/top.jpg"):
        touch(tmp_path / name)
    assert expand_inputs(["s/v"]).sources == expand_inputs(["s/v/*"]).sources == ("s/v/a.mp4",)
    # the images a glob takes are those of the folders that, named, are image sequences: never s/v's cover
    named = expand_inputs(["s"], recursive=True).sources
    assert named == ("s", "s/d1", "s/v/a.mp4")
    caplog.clear()
    globbed = expand_inputs(["s/**/*.jpg"]).sources
    assert globbed == ("s/d1/1.jpg", "s/d1/2.jpg", "s/top.jpg")
    assert {str(Path(image).parent) for image in globbed} == {"s", "s/d1"}
    assert "s/**/*.jpg: 1 image(s) it matches sit beside videos" in caplog.text and "s/v/cover.jpg" in caplog.text
    # images in a folder of their own still give way to the videos a glob matches, as before
    caplog.clear()
    assert expand_inputs(["s/*/*"]).sources == ("s/v/a.mp4",)
    assert "s/*/*: 1 video(s) analysed; the 2 image(s) it matches are not" in caplog.text
    # a glob that matches only such images gives nothing: a one-line error, as a glob of notes does
    with pytest.raises(InputNotFoundError, match=r"^s/v/\*\.jpg matches no video .*beside videos.*\(s/v/cover\.jpg\)"):
        expand_inputs(["s/v/*.jpg"])


def test_what_a_folder_or_a_glob_gives_is_spelled_one_way(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in ("s/b.mp4", "s/d1/1.jpg", "s/v/a.mp4"):
        touch(tmp_path / name)
    expected = ("s/b.mp4", "s/d1", "s/v/a.mp4")
    # ./s/** gave ./s/d1 (a folder of images, as matched) beside s/v/a.mp4 (a video of a folder it matched)
    for spelled in ("./s/**", "s/**", ".//s/**", "./s/"):
        assert expand_inputs([spelled], recursive=spelled == "./s/").sources == expected, spelled
    assert expand_inputs(["./s/*.mp4", "./s/d1/"]).sources == ("s/b.mp4", "s/d1")
    assert expand_inputs(["./s/b.mp4"]).sources == ("./s/b.mp4",)  # a file named is a source as given
    plan = Analyzer(device="cpu").plan_many(["./s/**"], tmp_path / "out")  # (the manifest's source is the uri)
    assert [p.uri for p in plan.todo] == list(expected)


def test_a_missing_path_with_brackets_fails_as_a_source_like_any_missing_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    touch(tmp_path / "other.mp4")
    assert expand_inputs(["take[1].mp4", "other.mp4"]).sources == ("take[1].mp4", "other.mp4")
    touch(tmp_path / "take1.mp4")  # a pattern in brackets that matches is still a glob
    assert expand_inputs(["take[12].mp4"]).sources == ("take1.mp4",)
    with pytest.raises(InputNotFoundError, match=r"no file matches clips/\*\.mp4"):
        expand_inputs(["clips/*.mp4"])  # a wildcard that matches nothing: as before, an error before the run
    # alone, it is a missing input: exit 3 with a one-line error that says so (was: "no file matches take[1].mp4")
    (tmp_path / "alone").mkdir()  # (no take1.mp4 here)
    done = emopipe("take[1].mp4", "--weights", tmp_path / "no-such.pth", cwd=tmp_path / "alone", check=3)
    assert done.stderr.splitlines()[-1] == "emopipe: error: input not found: take[1].mp4"


def write_done(manifest: Manifest, source: str, rows: Path) -> None:
    """A line an earlier run wrote for a finished source, with its files."""
    summary = rows.with_name(rows.name.replace(".emotions.csv", ".emotions.summary.json"))
    touch(rows, b"rows of " + source.encode())
    touch(summary)
    manifest.append({"source": source, "status": "ok", "outputs": {"rows": str(rows), "summary": str(summary)}})


def test_resume_never_gives_a_source_added_later_the_files_of_a_finished_one(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    touch(tmp_path / "d" / "clip.mp4")
    out = Path("out")
    write_done(Manifest(out, files=True), "d/clip.mp4", out / "clip.emotions.csv")
    touch(tmp_path / "d" / "clip.avi")  # added since: its own name would be clip too
    plan = Analyzer(device="cpu").plan_many(["d"], out, resume=True)
    assert [(p.uri, p.rows.name) for p in plan.todo] == [("d/clip.avi", "clip-2.emotions.csv")]
    assert [r.source for r in plan.skipped] == ["d/clip.mp4"]
    # a line an earlier version wrote (no path, no files) for a source here is its own, not another's
    old = Path("old")
    write_done(Manifest(old), "d/clip.mp4", old / "clip.emotions.csv")
    Analyzer(device="cpu").plan_many(["d/clip.mp4"], old, resume=True)  # skipped: a line with its path added
    (old / "clip.emotions.csv").unlink()  # its rows gone: redone, under the name it had
    plan = Analyzer(device="cpu").plan_many(["d/clip.mp4"], old, resume=True)
    assert [p.rows.name for p in plan.todo] == ["clip.emotions.csv"]
    # the shared folder changes when a source from elsewhere joins: the finished ones keep their names
    for name in ("p/q/x.mp4", "p/r/x.mp4", "q/x.mp4"):
        touch(tmp_path / name)
    second = Path("second")
    manifest = Manifest(second, files=True)
    write_done(manifest, "p/q/x.mp4", second / "q" / "x.emotions.csv")
    manifest.append({"source": "p/r/x.mp4", "status": "interrupted", "outputs": {}})
    plan = Analyzer(device="cpu").plan_many(["p/q/x.mp4", "p/r/x.mp4", "q/x.mp4"], second, resume=True)
    names = {p.uri: p.rows.relative_to(second).as_posix() for p in plan.todo}
    assert names == {"p/r/x.mp4": "p/r/x.emotions.csv", "q/x.mp4": "q/x-2.emotions.csv"}
    assert (second / "q" / "x.emotions.csv").read_bytes() == b"rows of p/q/x.mp4"
    # another folder's file spelled as a finished source was (X/t/c.mp4 then Y/t/c.mp4, each run from its folder):
    # the line's path says it is another file, so that name stays reserved for it
    for name in ("X/t/c.mp4", "Y/t/c.mp4"):
        touch(tmp_path / name)
    third = tmp_path / "third"
    monkeypatch.chdir(tmp_path / "X")
    write_done(Manifest(third, files=True), "t/c.mp4", third / "c.emotions.csv")
    monkeypatch.chdir(tmp_path / "Y")
    plan = Analyzer(device="cpu").plan_many(["t/c.mp4"], third, resume=True)
    assert [p.rows.name for p in plan.todo] == ["c-2.emotions.csv"]  # not X's finished c.emotions.csv


def test_resume_knows_a_source_however_it_is_spelled_and_from_another_folder(tmp_path, monkeypatch):
    touch(tmp_path / "v" / "a.mp4")
    touch(tmp_path / "v" / "b.mp4")
    monkeypatch.chdir(tmp_path)
    out = Path("out")
    manifest = Manifest(out, files=True)
    write_done(manifest, "v/a.mp4", out / "a.emotions.csv")
    write_done(manifest, "v/b.mp4", out / "b.emotions.csv")
    with Analyzer(device="cpu").plan_many(["./v/a.mp4", str(tmp_path / "v" / "b.mp4")], out, resume=True) as plan:
        assert plan.todo == [] and len(plan.skipped) == 2
    # nothing left to do: the run loads no model (these weights do not even exist) and says so in its summary
    analyzer = Analyzer(device="cpu", weights=str(tmp_path / "no-such-weights.pth"))
    outcome = analyzer.run_many(["v/a.mp4", "v/b.mp4"], out, resume=True)
    assert [r.status for r in outcome.results] == ["skipped", "skipped"] and analyzer.models is None
    assert json.loads((out / "summary.json").read_text())["skipped"] == 2
    monkeypatch.chdir(tmp_path / "v")  # the same run from another folder: paths and -o spelled from there
    plan = Analyzer(device="cpu").plan_many(["a.mp4", "b.mp4"], "../out", resume=True)
    assert plan.todo == [] and {r.outputs["rows"] for r in plan.skipped} == {"../out/a.emotions.csv",
                                                                            "../out/b.emotions.csv"}
    # the folder copied whole: its lines point into the copy, so a file deleted from the copy is redone
    monkeypatch.chdir(tmp_path)
    shutil.copytree("out", "copy")
    Path("copy/b.emotions.csv").unlink()
    plan = Analyzer(device="cpu").plan_many(["v/a.mp4", "v/b.mp4"], "copy", resume=True)
    assert [p.uri for p in plan.todo] == ["v/b.mp4"] and plan.todo[0].rows == Path("copy/b.emotions.csv")


def test_resume_says_which_done_sources_were_replaced_since_and_keeps_their_results(tmp_path, monkeypatch, caplog):
    # a source replaced after its results were written was skipped without a word: stale results, kept unsaid
    touch(tmp_path / "v" / "a.mp4", b"recording a")
    touch(tmp_path / "v" / "b.mp4", b"recording b")
    monkeypatch.chdir(tmp_path)
    out = Path("out")
    manifest = Manifest(out, files=True)
    write_done(manifest, "v/a.mp4", out / "a.emotions.csv")
    write_done(manifest, "v/b.mp4", out / "b.emotions.csv")
    first = json.loads((out / MANIFEST).read_text().splitlines()[0])
    assert first["source_file"]["size"] == len(b"recording a") and first["source_file"]["mtime_ns"] > 0
    (tmp_path / "v" / "b.mp4").write_bytes(b"another recording of b")
    for _ in range(2):  # (a skipped line carries the facts of the file its results were made from: said again)
        caplog.clear()
        with caplog.at_level("WARNING", logger="emopipe"), \
                Analyzer(device="cpu").plan_many(["v"], out, resume=True) as plan:
            assert plan.todo == [] and len(plan.skipped) == 2  # kept: a good result of the earlier file
        assert "1 source(s) changed since their results were written (v/b.mp4)" in caplog.text
    assert (out / "b.emotions.csv").read_bytes() == b"rows of v/b.mp4"
    (out / "b.emotions.csv").unlink()  # as the warning says: done again
    with Analyzer(device="cpu").plan_many(["v"], out, resume=True) as plan:
        assert [p.uri for p in plan.todo] == ["v/b.mp4"]


def test_resume_with_options_that_change_the_results_is_refused_and_the_lines_say_them(tmp_path, monkeypatch):
    # (was: --resume with another detector, threshold or format skipped the done sources and wrote the rest
    # otherwise — a folder of mixed results, and an old .csv left beside a source's new .jsonl; QA pass, session 39)
    touch(tmp_path / "v" / "a.mp4")
    touch(tmp_path / "v" / "b.mp4")
    monkeypatch.chdir(tmp_path)
    out = Path("out")
    with Analyzer(device="cpu", detector="blazeface_back", threshold=0.7).plan_many(["v"], out) as plan:
        write_done(plan.manifest, "v/a.mp4", out / "a.emotions.csv")  # (a line as the run writes it)
    (line,) = map(json.loads, (out / "manifest.jsonl").read_text().splitlines())
    assert line["options"] == {"detector": "blazeface_back", "threshold": 0.7, "format": "csv"}
    for options, message in [
            ({"detector": "blazeface", "threshold": 0.7}, "made with --detector blazeface_back (its manifest says), "
                                                          "not --detector blazeface"),
            ({"detector": "blazeface_back"}, "made with --threshold 0.7 (its manifest says), not the default "
                                             "--threshold"),
            ({"detector": "blazeface_back", "threshold": 0.7, "format": "jsonl"}, "--format csv"),
            ({"detector": "blazeface_back", "threshold": 0.7, "landmarks": True}, "the default --landmarks (its "
                                                                                  "manifest says), not --landmarks")]:
        with pytest.raises(UsageError, match=re.escape(message)):
            Analyzer(device="cpu", **options).plan_many(["v"], out, resume=True)
    # the same options (the engine's own may differ: a run resumed on another machine): resumed
    with Analyzer(device="cpu", detector="blazeface_back", threshold=0.7, batch_size=4).plan_many(
            ["v"], out, resume=True) as plan:
        assert [p.uri for p in plan.todo] == ["v/b.mp4"] and [r.source for r in plan.skipped] == ["v/a.mp4"]
    # nothing left to run (a resume that writes the --report page, say): other options mix nothing, and the skipped
    # lines say the options their results were made with
    write_done(Manifest(out, files=True), "v/b.mp4", out / "b.emotions.csv")
    with Analyzer(device="cpu").plan_many(["v"], out, resume=True) as plan:
        assert plan.todo == [] and len(plan.skipped) == 2
    skipped = [json.loads(line) for line in (out / "manifest.jsonl").read_text().splitlines()][-2:]
    assert [(e["status"], e.get("options")) for e in skipped] == [
        ("skipped", {"detector": "blazeface_back", "threshold": 0.7, "format": "csv"}), ("skipped", None)]
    # a manifest an earlier version wrote (no options): resumed as before
    old = Path("old")
    write_done(Manifest(old, files=True), "v/a.mp4", old / "a.emotions.csv")
    assert [p.uri for p in Analyzer(device="cpu", threshold=0.9).plan_many(["v"], old, resume=True).todo] == ["v/b.mp4"]


def test_resume_naming_a_default_option_finishes_a_run_that_named_none(tmp_path, monkeypatch):
    # (was: --resume --detector sfd against a run given no --detector was refused as "other options", though every
    # source of both runs is detected by sfd — the options were compared as given, not as resolved)
    touch(tmp_path / "v" / "a.mp4")
    touch(tmp_path / "v" / "b.mp4")
    monkeypatch.chdir(tmp_path)
    for first, then in [({}, {"detector": "sfd", "format": "csv"}), ({"detector": "sfd"}, {})]:
        out = Path(f"out{len(first)}")
        with Analyzer(device="cpu", **first).plan_many(["v"], out) as plan:
            write_done(plan.manifest, "v/a.mp4", out / "a.emotions.csv")
        (line,) = map(json.loads, (out / "manifest.jsonl").read_text().splitlines())
        assert line["options"] == {"format": "csv"}  # a default named is recorded as none named
        with Analyzer(device="cpu", **then).plan_many(["v"], out, resume=True) as plan:
            assert [p.uri for p in plan.todo] == ["v/b.mp4"]
        with pytest.raises(UsageError, match=re.escape("made with the default --detector (its manifest says), not "
                                                       "--detector blazeface")):
            Analyzer(device="cpu", detector="blazeface").plan_many(["v"], out, resume=True)
    # a line an earlier version wrote with the default named: the same as none named
    lines = (out / "manifest.jsonl").read_text().splitlines()
    first_line = json.loads(lines[0])
    first_line["options"] = {"detector": "sfd", "format": "csv"}
    (out / "manifest.jsonl").write_text("\n".join([json.dumps(first_line), *lines[1:]]) + "\n")
    with Analyzer(device="cpu").plan_many(["v"], out, resume=True) as plan:
        assert [p.uri for p in plan.todo] == ["v/b.mp4"]


def test_resume_into_a_folder_without_a_manifest_refuses_a_rows_file_in_the_way(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    touch(tmp_path / "v" / "a.mp4")
    touch(tmp_path / "v" / "b.mp4")
    touch(tmp_path / "out" / "a.emotions.csv", b"somebody's rows")  # no manifest says whose
    with pytest.raises(UsageError, match=r"a\.emotions\.csv exists and is no file of this run's sources"):
        Analyzer(device="cpu").plan_many(["v/a.mp4"], "out", resume=True)
    # any file the run would write, not only the rows; and the run's summary.json
    for name in ("a.emotions.tracks.csv", "a.emotions.segments.csv", "a.emotions.summary.json", "summary.json"):
        touch(tmp_path / "other" / name, b"the user's")
        with pytest.raises(UsageError, match=f"{name} exists"):
            Analyzer(device="cpu").plan_many(["v/a.mp4"], "other")
        (tmp_path / "other" / name).unlink()
    # with a manifest (--resume), a file that no line gives to its source is still somebody else's
    manifest = Manifest(tmp_path / "done", files=True)
    write_done(manifest, "v/a.mp4", tmp_path / "done" / "a.emotions.csv")
    touch(tmp_path / "done" / "b.emotions.csv", b"the user's")
    with pytest.raises(UsageError, match=r"b\.emotions\.csv exists"):
        Analyzer(device="cpu").plan_many(["v/a.mp4", "v/b.mp4"], tmp_path / "done", resume=True)
    assert (tmp_path / "done" / "b.emotions.csv").read_bytes() == b"the user's"


@pytest.mark.parametrize(("name", "message"), [
    ("a.emotions.csv.partial", "the rows' temporary name"),
    ("a.emotions.tracks.csv.partial", "the tracks' temporary name"),
    ("a.emotions.segments.csv.partial", "the segments' temporary name"),
    ("a.emotions.summary.json.partial", "the summary's temporary name"),
    (".a.emotions.tracks.csv.partial.0.part", "the tracks' temporary name"),
    ("summary.json.partial", "the summary's temporary name"),  # (the run's)
    ("a.emotions.csv", "the rows output"),
])
def test_no_source_is_a_name_a_many_source_run_writes(tmp_path, monkeypatch, name, message):
    # (was: only the final names were refused, as files in the way: a source at another's partial name was written
    # over, then renamed)
    monkeypatch.chdir(tmp_path)
    touch(tmp_path / "a.mp4")
    touch(tmp_path / name, b"a source")
    with pytest.raises(UsageError, match=f"^{message} {name.replace('.', '[.]')} is an input of this run: choose "
                                         "another output folder, or move that input"):
        Analyzer(device="cpu").plan_many(["a.mp4", name], ".")
    assert (tmp_path / name).read_bytes() == b"a source"


def test_no_source_is_at_a_temporary_name_through_a_hard_link(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    touch(tmp_path / "a.mp4")
    source = touch(tmp_path / "b.mp4", b"a source")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / ".a.emotions.segments.csv.partial.7.part").hardlink_to(source)
    with pytest.raises(UsageError, match=r"^the segments' temporary name out/\.a\.emotions\.segments\.csv\.partial\.7"
                                         r"\.part is an input"):
        Analyzer(device="cpu").plan_many(["a.mp4", "b.mp4"], "out")
    Analyzer(device="cpu").plan_many(["a.mp4"], "out").close()  # (a hidden file of that name alone: not an input)


def test_the_command_refuses_a_source_at_another_sources_partial_name_before_any_model_loads(tmp_path):
    touch(tmp_path / "a.mp4", b"the first source")
    touch(tmp_path / "a.emotions.csv.partial", b"the second source")
    done = emopipe("a.mp4", "a.emotions.csv.partial", "-o", ".", "--weights", tmp_path / "no-such.pth", cwd=tmp_path,
                   check=2)
    assert done.stderr.splitlines()[-1] == ("emopipe: error: the rows' temporary name a.emotions.csv.partial is an "
                                            "input of this run: choose another output folder, or move that input "
                                            "(outputs never overwrite inputs)")
    assert "Traceback" not in done.stderr
    assert (tmp_path / "a.emotions.csv.partial").read_bytes() == b"the second source"
    assert not (tmp_path / "manifest.jsonl").exists()


def test_a_damaged_manifest_line_is_passed_over_not_a_crash(tmp_path):
    manifest = Manifest(tmp_path, files=True)
    rows = touch(tmp_path / "a.emotions.csv")
    manifest.append({"source": "ü.mp4", "status": "ok", "outputs": {"rows": str(rows)}})
    with open(manifest.path, "ab") as file:
        file.write(b'{"source": "b.mp4", "status": "ok", "outputs": ["b.csv"]}\n')  # edited by hand
        file.write(b'{"source": "' + "ü".encode()[:1])  # killed inside a two-byte character
    latest = manifest.previous()
    assert [entry["source"] for entry in latest.values()] == ["ü.mp4"]


@pytest.mark.parametrize("options", [{"annotate": "ann.mp4"}, {"summary": "s.json"}, {"output": "-"},
                                     {"output": "rows.csv"}])
def test_options_for_one_source_are_refused_with_several(tmp_path, monkeypatch, options):
    monkeypatch.chdir(tmp_path)  # (an output that were made would land here)
    for name in ("a.mp4", "b.mp4"):
        touch(tmp_path / name)
    with pytest.raises(UsageError, match=r"not for several sources|the output is a folder|give the videos' container"):
        Analyzer(device="cpu").plan_many([str(tmp_path / "a.mp4"), str(tmp_path / "b.mp4")], **options)


def test_annotate_with_several_sources_names_each_sources_video_beside_its_rows(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in ("d/a.mp4", "d/b.mp4", "d/sub/a.mp4"):
        touch(tmp_path / name)
    with pytest.raises(UsageError, match=r"--annotate ann\.mp4: with several sources, give the videos' container "
                                         r"\(mp4, mkv or avi\).*NAME\.annotated\.mp4"):
        Analyzer(device="cpu").plan_many(["d"], "out", recursive=True, annotate="ann.mp4")
    plan = Analyzer(device="cpu").plan_many(["d"], "out", recursive=True, annotate=".MKV")
    assert [p.video.relative_to("out").as_posix() for p in plan.todo] == [
        "a.annotated.mkv", "b.annotated.mkv", "sub/a.annotated.mkv"]
    written = {w.path for w in plan.todo[0].written()}
    assert {"out/a.annotated.mkv", "out/a.annotated.partial.mkv", "out/a.emotions.csv"} <= written
    plan.close()
    # --resume: a source finished without its video is done again with it; one finished with it is skipped
    out = Path("out")
    manifest = Manifest(out, files=True)
    write_done(manifest, "d/a.mp4", out / "a.emotions.csv")
    touch(out / "b.emotions.csv")
    touch(out / "b.emotions.summary.json")
    touch(out / "b.annotated.mp4")
    manifest.append({"source": "d/b.mp4", "status": "ok", "outputs": {
        "rows": "out/b.emotions.csv", "summary": "out/b.emotions.summary.json",
        "annotated_video": "out/b.annotated.mp4"}})
    with Analyzer(device="cpu").plan_many(["d/a.mp4", "d/b.mp4"], out, resume=True, annotate="mp4") as plan:
        assert [p.uri for p in plan.todo] == ["d/a.mp4"] and [r.source for r in plan.skipped] == ["d/b.mp4"]
    with Analyzer(device="cpu").plan_many(["d/a.mp4", "d/b.mp4"], out, resume=True) as plan:
        assert plan.todo == [] and len(plan.skipped) == 2



@pytest.mark.parametrize("fmt", [None, "jsonl", "csv"])
def test_a_rows_file_name_for_several_sources_is_refused_as_no_folder_whatever_the_format(tmp_path, monkeypatch, fmt):
    # (was, with a --format the name's extension contradicts: "--format jsonl does not fit 'res.csv'", as if a rows
    # file were wanted; with several sources -o is a folder, as the command says without --format)
    monkeypatch.chdir(tmp_path)
    for name in ("a.mp4", "b.mp4"):
        touch(tmp_path / name)
    args = build_parser().parse_args(["a.mp4", "b.mp4", "-o", "res.csv", "--device", "cpu",
                                      *(["--format", fmt] if fmt else [])])
    with pytest.raises(UsageError, match=r"^-o res.csv: with several sources \(or --ray\) the output is a folder") \
            as refused:
        Analyzer(config_from_args(args)).run_many()
    assert refused.value.exit_code == 2 and sorted(os.listdir(tmp_path)) == ["a.mp4", "b.mp4"]

def test_a_second_plan_into_a_folder_in_use_is_refused_and_writes_nothing_until_the_first_ends(tmp_path,
                                                                                                monkeypatch):
    # (was: both plans got the same sources to do, and their runs interleaved rows files and manifest lines)
    monkeypatch.chdir(tmp_path)
    for name in ("a.mp4", "b.mp4"):
        touch(tmp_path / name)
    out = tmp_path / "new"
    with Analyzer(device="cpu").plan_many(["a.mp4", "b.mp4"], out) as first:  # the first run holds the folder …
        assert held(out) and [p.uri for p in first.todo] == ["a.mp4", "b.mp4"]
        with pytest.raises(OutputError, match=r"new is in use by another emopipe run") as refused:
            Analyzer(device="cpu").plan_many(["a.mp4", "b.mp4"], out)  # … so a second one now is refused
        assert refused.value.exit_code == 5
        assert held(out)  # the refused plan neither took the folder nor released it
        assert sorted(p.name for p in out.iterdir()) == [FOLDER_LOCK]
    assert not held(out)  # the first run ended: free again
    # --resume: the lock comes before the manifest is read, so a second resume appends no "skipped" line of its own
    done = tmp_path / "done"
    write_done(Manifest(done, files=True), "a.mp4", done / "a.emotions.csv")
    with Analyzer(device="cpu").plan_many(["a.mp4", "b.mp4"], done, resume=True) as first:
        assert [r.source for r in first.skipped] == ["a.mp4"] and [p.uri for p in first.todo] == ["b.mp4"]
        lines = (done / "manifest.jsonl").read_text()
        with pytest.raises(OutputError, match="in use by another emopipe run"):
            Analyzer(device="cpu").plan_many(["a.mp4", "b.mp4"], done, resume=True)
        assert (done / "manifest.jsonl").read_text() == lines
    # a plan refused by its checks lets the folder go at once
    with pytest.raises(UsageError, match="holds an earlier run"):
        Analyzer(device="cpu").plan_many(["a.mp4", "b.mp4"], done)
    assert not held(done)


def test_run_many_holds_its_folder_from_planning_until_its_summary_is_written(tmp_path, monkeypatch):
    import emopipe.pipeline.many

    monkeypatch.chdir(tmp_path)
    touch(tmp_path / "a.mp4")
    out = tmp_path / "out"
    write_done(Manifest(out, files=True), "a.mp4", out / "a.emotions.csv")  # (done: the run loads no model)
    holding, write = [], emopipe.pipeline.many.write_run_summary

    def written_while_held(directory: Path, run: dict) -> None:
        holding.append(held(out))
        write(directory, run)

    monkeypatch.setattr(emopipe.pipeline.many, "write_run_summary", written_while_held)
    analyzer = Analyzer(device="cpu", weights=str(tmp_path / "no-such-weights.pth"))
    outcome = analyzer.run_many(["a.mp4"], out, resume=True)
    assert [r.status for r in outcome.results] == ["skipped"]
    assert holding == [True] and not held(out)


def test_a_folder_the_hold_made_is_removed_with_its_lock_when_nothing_else_was_written(tmp_path):
    # (was: a run refused once its folder was held left a new -o folder holding only .emopipe.lock)
    made = tmp_path / "new" / "deeper"
    with pytest.raises(UsageError), hold_folder(made):
        assert held(made)
        raise UsageError("refused after the folder was taken")
    assert sorted(tmp_path.iterdir()) == []  # the folder and the parent it made: gone
    there = tmp_path / "there"  # a folder that existed is never removed, nor anything in it but the lock
    there.mkdir()
    with hold_folder(there):
        pass
    assert there.is_dir()
    with hold_folder(made):  # one the run wrote into is kept
        touch(made / "manifest.jsonl")
    assert sorted(p.name for p in made.iterdir()) == [FOLDER_LOCK, "manifest.jsonl"] and not held(made)


def test_a_run_that_locks_a_lock_file_its_holder_removed_takes_the_folder_anew(tmp_path, monkeypatch):
    """The holder removes the lock file it made while still holding it; a run that opened the file just before and
    locks it as it is let go must not take the folder by a file no longer in it (a third run would lock another)."""
    import emopipe.io.records

    out = tmp_path / "new"
    first = contextlib.ExitStack()
    first.enter_context(hold_folder(out))
    flock = emopipe.io.records.fcntl.flock

    def first_lets_go_as_the_second_locks(fd: int, operation: int) -> None:
        first.close()  # (the second has the old file open: the first removes it and the folder, then lets go)
        monkeypatch.setattr(emopipe.io.records.fcntl, "flock", flock)
        flock(fd, operation)

    monkeypatch.setattr(emopipe.io.records.fcntl, "flock", first_lets_go_as_the_second_locks)
    with hold_folder(out):
        assert held(out)  # the folder's own lock file, as another run finds it
        with pytest.raises(OutputError, match="in use by another emopipe run"), hold_folder(out):
            pass
    assert not out.exists()


@pytest.mark.parametrize("resume", [False, True])
def test_the_command_refuses_a_folder_another_run_is_writing_with_one_line_and_exit_code_5(tmp_path, resume):
    for name in ("a.mp4", "b.mp4"):
        touch(tmp_path / name)  # (the refusal comes before any source opens)
    out = tmp_path / "out"
    out.mkdir()
    with hold_folder(out):  # another run holds the folder, as a run does
        done = emopipe("a.mp4", "b.mp4", "-o", "out", "--weights", tmp_path / "no-such.pth",
                       *(["--resume"] if resume else []), cwd=tmp_path, check=5)
    errors = [line for line in done.stderr.splitlines() if line.startswith("emopipe: error")]
    assert len(errors) == 1 and "out is in use by another emopipe run" in errors[0], done.stderr
    assert "Traceback" not in done.stderr
    assert sorted(p.name for p in out.iterdir()) == [FOLDER_LOCK]  # nothing of the refused run's



def test_a_many_source_run_is_refused_where_a_one_source_run_writes_one_of_its_names(tmp_path, monkeypatch):
    # (a one-source run that began before the folder had its lock file to share holds its own names: a many-source
    # run taking the folder meanwhile finds them held, and is refused as the one-source run would refuse it)
    monkeypatch.chdir(tmp_path)
    for name in ("a.mp4", "b.mp4"):
        touch(tmp_path / name)
    out = tmp_path / "out"
    out.mkdir()
    with hold_outputs([out / "a.emotions.csv", out / "a.emotions.summary.json"]):  # the one-source run
        with pytest.raises(OutputError, match=r"out/a\.emotions\.csv is in use by another emopipe run \(it holds "
                                              r"\.a\.emotions\.csv\.lock\)"):
            Analyzer(device="cpu").plan_many(["a.mp4", "b.mp4"], "out")
        assert not held(out) and not (out / "manifest.jsonl").exists()
    with Analyzer(device="cpu").plan_many(["a.mp4", "b.mp4"], "out") as plan:  # it has ended
        assert len(plan.todo) == 2 and held(out)
        # the run's own --report page in its folder is held by it alone, not refused by its own hold of the folder
        with hold_outputs([out / "r.html"]):
            assert held_output(out / "r.html")


def test_the_command_refused_after_taking_a_new_folder_leaves_no_folder(tmp_path):
    for name in ("a.mp4", "b.mp4"):
        touch(tmp_path / name)  # (the refusal comes before any source opens)
    done = emopipe("a.mp4", "b.mp4", "-o", "new/out", "--report", "missing/report.html", cwd=tmp_path, check=5)
    assert "cannot write report" in done.stderr and "Traceback" not in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.mp4", "b.mp4"]  # (was: new/out/.emopipe.lock)


def test_a_second_plan_writing_the_same_report_page_is_refused_whatever_its_folder(tmp_path, monkeypatch):
    # (was: two runs into different folders with the same --report each wrote the page whole; the last won, silently)
    monkeypatch.chdir(tmp_path)
    for name in ("a.mp4", "b.mp4"):
        touch(tmp_path / name)
    page = tmp_path / "page.html"
    with Analyzer(device="cpu").plan_many(["a.mp4", "b.mp4"], "one", report=str(page)) as first:
        assert held_output(page) and held(tmp_path / "one") and first.report == str(page)
        with pytest.raises(OutputError, match=r"^page\.html is in use by another emopipe run \(it holds "
                                              r"\.page\.html\.lock\); wait for that run to end") as refused:
            Analyzer(device="cpu").plan_many(["a.mp4", "b.mp4"], "two", report="page.html")  # (spelled otherwise)
        assert refused.value.exit_code == 5
        assert held_output(page) and held(tmp_path / "one")  # the first's, as they were
        assert not (tmp_path / "two").exists()  # the refused plan's folder: let go and removed
    assert not held_output(page) and not lock_path(page).exists()  # the first run ended: free, no lock file left
    # a killed run's lock file (the kernel dropped its lock) refuses nobody, and goes when the next run ends
    lock_path(page).touch()
    with Analyzer(device="cpu").plan_many(["a.mp4", "b.mp4"], "two", report="page.html"):
        assert held_output(page)
    assert not lock_path(page).exists()
    # the page's lock file, made and removed by the run, is never an input's name (as a one-source run's)
    touch(lock_path(page), b"the weights")
    with pytest.raises(UsageError, match=r"^the report's lock file \.page\.html\.lock is an input of this run: "
                                         "name the report otherwise") as refused:
        Analyzer(device="cpu", weights=lock_path(page)).plan_many(["a.mp4", "b.mp4"], "two", report="page.html")
    assert refused.value.exit_code == 2 and lock_path(page).read_bytes() == b"the weights"


@pytest.mark.parametrize("resume", [False, True])
def test_the_command_refuses_a_report_page_another_run_is_writing_with_one_line_and_exit_code_5(tmp_path, resume):
    for name in ("a.mp4", "b.mp4"):
        touch(tmp_path / name)  # (no videos: the refusal comes before any source opens)
    page = tmp_path / "page.html"
    page.write_text("an earlier run's page\n")
    if resume:  # a resumed run would add a "skipped" line for a.mp4 to its manifest
        write_done(Manifest(tmp_path / "out", files=True), "a.mp4", tmp_path / "out" / "a.emotions.csv")
        with hold_folder(tmp_path / "out"):  # (and its empty lock file, as the earlier run left it)
            pass

    def files() -> dict[str, bytes]:
        return {str(f.relative_to(tmp_path)): f.read_bytes() for f in sorted(tmp_path.rglob("*")) if f.is_file()}

    with hold_outputs([page]):  # the first run, into another folder, holds the page it will write at its end
        before = files()
        done = emopipe("a.mp4", "b.mp4", "-o", "out", "--report", "page.html", "--weights", tmp_path / "no-such.pth",
                       *(["--resume"] if resume else []), cwd=tmp_path, check=5)
        assert held_output(page) and files() == before  # nothing of the first's (or anybody's) touched
    errors = [line for line in done.stderr.splitlines() if line.startswith("emopipe: error")]
    assert errors == ["emopipe: error: page.html is in use by another emopipe run (it holds .page.html.lock); wait "
                      "for that run to end, or choose another name"], done.stderr
    assert "Traceback" not in done.stderr
    assert (tmp_path / "out").exists() == resume  # (a new folder: made and removed, refused)

# -- many sources read as one, without models ----------------------------------------------------------------


class FakeSource:
    def __init__(self, uri: str, frames: int, fail_after: int | None = None) -> None:
        self.info = SourceInfo(uri=uri, width=8, height=6, fps=25.0, frame_count=frames, kind="video")
        self.ended_early = None
        self.frames = frames
        self.fail_after = fail_after
        self.closed = False

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.closed = True

    def __iter__(self):
        for i in range(self.frames):
            if i == self.fail_after:
                raise InputUnreadableError(f"{self.info.uri}: damaged at frame {i}")
            yield HostFrame(i, i / 25.0, np.full((6, 8, 3), i, np.uint8), time.perf_counter())


def test_an_interrupted_source_counts_the_frames_written_not_those_read_ahead(tmp_path):
    planned = [PlannedSource(0, "a", tmp_path / "a.emotions.csv", tmp_path / "a.emotions.summary.json")]
    with SourceChain(planned, lambda uri: FakeSource(uri, 5), parallel=1, queue_frames=8) as chain:
        frames = list(chain)  # all five read (ahead of the writer)
        sink = PerSourceSink(chain, RunConfig(), ("neutral", "happy"), None)
        for frame in frames[:2]:  # … and the run stopped after two were written
            sink.write(FrameResult(frame, Detections.empty(), np.zeros((0, 4), np.int64)))
        sink.close()
    assert [(r.status, r.frames) for r in sink.results] == [("interrupted", 2)]
    assert not planned[0].rows.exists()  # its rows stay under the partial name


def test_a_sink_closed_again_after_an_interruption_marks_no_second_source(tmp_path):
    # (the run closes the sink at a Ctrl-C also when the pipeline ran and closed it: a second close took the source
    # read ahead for the one the run was in)
    planned = [PlannedSource(i, u, tmp_path / f"{u}.emotions.csv", tmp_path / f"{u}.emotions.summary.json")
               for i, u in enumerate("ab")]
    manifest = Manifest(tmp_path)
    with SourceChain(planned, lambda uri: FakeSource(uri, 3), parallel=2, queue_frames=8) as chain:
        chain.start()  # both begun (b read ahead), none of their frames written
        sink = PerSourceSink(chain, RunConfig(), ("neutral", "happy"), manifest)
        sink.close()
        sink.close()
    assert [(e["source"], e["status"], e["frames"]) for e in manifest_lines(tmp_path)] == [("a", "interrupted", 0)]
    assert not list(tmp_path.glob("*.csv*"))



def test_the_first_sources_frame_size_is_told_once_it_has_opened_and_never_waited_for(tmp_path):
    # (EmoNet's warm-up asks it to find the detector's plans at the same time: it must not wait for a slow source)
    planned = [PlannedSource(0, "a", tmp_path / "a.emotions.csv", tmp_path / "a.emotions.summary.json")]
    may_open = threading.Event()

    def open_one(uri):
        assert may_open.wait(timeout=60)
        return FakeSource(uri, 2)

    with SourceChain(planned, open_one, parallel=1) as chain:
        chain.start()
        assert chain.opened_frame_size() is None  # still opening: told at once, not waited for
        may_open.set()
        assert chain.first_info() is not None
        assert chain.opened_frame_size() == (6, 8)
    with SourceChain([], open_one, parallel=1, feeding=True, held=True) as fed:  # (a worker's, before its first share)
        assert fed.opened_frame_size() is None


def test_the_source_chain_and_the_fleet_source_have_the_source_protocols_members(tmp_path):
    # (was: the chain's expected_frames a method, so reading it as the protocol says gave a bound method, not a
    # count; the fleet source had no ended_early. `mypy emopipe/api.py` found both where the pipeline takes them)
    from emopipe.pipeline.fleet import FleetSource

    planned = [PlannedSource(0, "a", tmp_path / "a.emotions.csv", tmp_path / "a.emotions.summary.json")]
    with SourceChain(planned, lambda uri: FakeSource(uri, 1), parallel=1) as chain:
        assert chain.expected_frames is None and chain.ended_early is None
    assert isinstance(FleetSource.expected_frames, property) and FleetSource.ended_early is None

def test_an_on_result_callback_that_raises_leaves_each_source_finished_once_with_its_files(tmp_path):
    # (was: the callback ran before the source's state was reset, so close() finished it again: a second "ok" line,
    # and its published rows removed as an earlier attempt's)
    planned = [PlannedSource(i, u, tmp_path / f"{u}.emotions.csv", tmp_path / f"{u}.emotions.summary.json")
               for i, u in enumerate("ab")]
    manifest = Manifest(tmp_path)
    seen: list[str] = []

    def caller_bug(result) -> None:
        seen.append(result.source)
        raise ZeroDivisionError("the caller's bug")

    with SourceChain(planned, lambda uri: FakeSource(uri, 2), parallel=1, queue_frames=8) as chain:
        frames = list(chain)
        sink = PerSourceSink(chain, RunConfig(), ("neutral", "happy"), manifest, on_result=caller_bug)
        with pytest.raises(ZeroDivisionError):  # the callback's error reaches the caller…
            for frame in frames:
                sink.write(FrameResult(frame, Detections.empty(), np.zeros((0, 4), np.int64)))
        with pytest.raises(ZeroDivisionError):
            sink.close()  # (as the pipeline closes its sinks after a failure)
    # … after the source it was called for was finished: one line each, a's files under their names
    assert seen == ["a", "b"]
    assert [(e["source"], e["status"]) for e in manifest_lines(tmp_path)] == [("a", "ok"), ("b", "interrupted")]
    assert planned[0].rows.read_text().startswith("source,") and planned[0].summary.exists()
    assert not planned[1].rows.exists()


@pytest.mark.parametrize("at", ["open", "write"])
def test_a_source_whose_rows_cannot_be_written_fails_with_the_error_and_the_one_before_is_kept(at, tmp_path,
                                                                                               monkeypatch):
    # (a disk that filled mid-run ended the run, exit 5, and recorded the source it was in "interrupted", exit 130)
    planned = [PlannedSource(i, u, tmp_path / f"{u}.emotions.csv", tmp_path / f"{u}.emotions.summary.json")
               for i, u in enumerate("abc")]
    full = OutputError(f"cannot write output {planned[1].rows}: no space left on the device")
    write, open_writer = archive.RecordSink.write, archive.open_writer

    def filling(self, result) -> None:
        if at == "write" and result.frame.stream == 1 and result.frame.index == 1:  # (b's first row went out)
            raise full
        write(self, result)

    def opening(path, **kwargs):  # (its file could not even be made)
        if at == "open" and path == planned[1].rows:
            raise full
        return open_writer(path, **kwargs)

    monkeypatch.setattr(archive.RecordSink, "write", filling)
    monkeypatch.setattr(archive, "open_writer", opening)
    with SourceChain(planned, lambda uri: FakeSource(uri, 2), parallel=1, queue_frames=8) as chain:
        frames = list(chain)
        sink = PerSourceSink(chain, RunConfig(), ("neutral", "happy"), Manifest(tmp_path))
        with pytest.raises(OutputError):  # the run ends on it (the next source would find the disk full too) …
            for frame in frames:
                sink.write(FrameResult(frame, Detections.empty(), np.zeros((0, 4), np.int64)))
        sink.close()  # (as the pipeline closes its sinks after a failure)
    # … b failed with the error, as one run of it would have exited, its rows kept under their partial name
    lines = manifest_lines(tmp_path)
    assert [(e["source"], e["status"], e.get("exit_code"), e.get("error")) for e in lines] == [
        ("a", "ok", None, None), ("b", "failed", 5, str(full))]
    assert lines[1]["frames"] == (at == "write") and not planned[1].rows.exists() and not planned[1].summary.exists()
    assert planned[0].rows.exists() and planned[0].summary.exists()


def test_a_held_chain_opens_nothing_fed_to_it_until_released(tmp_path):
    # (a cluster worker's chain: its detector's CUDA graph is captured before any source decodes, since NVDEC's
    # decoding thread failed beside a capture and ended the worker; session 22)
    opened: list[str] = []

    def open_one(uri: str) -> FakeSource:
        opened.append(uri)
        return FakeSource(uri, 2)

    with SourceChain([], open_one, parallel=2, queue_frames=2, feeding=True, held=True) as chain:
        chain.start()
        positions = chain.extend([PlannedSource(0, u, tmp_path / f"{u}.csv", tmp_path / f"{u}.json") for u in "ab"])
        assert list(positions) == [0, 1]
        first = chain.first_planned()
        assert first is not None and first.uri == "a"
        assert opened == [] and chain.started == 0 and chain.held  # fed, none opened
        chain.release_reading()
        chain.end_feed()
        frames = [(f.stream, f.index) for f in chain]
    assert frames == [(0, 0), (0, 1), (1, 0), (1, 1)] and opened == ["a", "b"] and not chain.held
    with SourceChain([], open_one, feeding=True, held=True) as empty:
        empty.end_feed()
        assert empty.first_planned() is None  # (ended without a source: nothing to wait for)


@pytest.mark.slow
def test_a_fed_chain_warms_the_detector_for_its_first_source_before_opening_it(tmp_path, models_home, checkpoints,
                                                                              monkeypatch):
    import threading

    import emopipe.api

    clip = moving_face_video(tmp_path / "clip.mp4", frames=2, empty=None)
    height, width = clip.size[1], clip.size[0]
    events: list[str] = []
    probed: list[str] = []

    def container_size(uri, *, decoder, device):  # (NVDEC's container probe; the CPU machine has no NVDEC)
        probed.append(str(uri))
        return height, width

    monkeypatch.setattr(emopipe.api, "decoded_frame_size", container_size)
    analyzer = Analyzer(weights=str(checkpoints[8]), detector="blazeface", device="cpu")
    config = analyzer.source_config("many sources", output=None, summary=None)
    with analyzer:
        models = analyzer.models
        assert models is not None
        warm = models.warm_detector

        def warm_detector(h: int, w: int) -> float:
            events.append(f"warm {h}x{w}")
            return warm(h, w)

        monkeypatch.setattr(models, "warm_detector", warm_detector)
        chain = analyzer.source_chain([], config, feeding=True)
        assert chain.held
        opener = chain._open_one

        def open_one(uri: str):
            events.append(f"open {Path(uri).name}")
            return opener(uri)

        chain._open_one = open_one
        outcome: list = []
        worker = threading.Thread(target=lambda: outcome.append(analyzer.process(chain, config)))
        worker.start()
        chain.extend([PlannedSource(0, str(clip.path), tmp_path / "clip.csv", tmp_path / "clip.json")])
        chain.end_feed()
        worker.join(timeout=600)
        assert not worker.is_alive()
    assert probed == [str(clip.path)]
    assert events[:2] == [f"warm {height}x{width}", "open clip.mp4"]  # warmed first, then opened
    results, summary, interrupted = outcome[0]
    assert [(r.status, r.frames) for r in results] == [("ok", 2)] and not interrupted
    assert summary is not None and summary.startup["detector_warmups"] == 1  # (the first source's size: warm)


@pytest.mark.timeout(600)
def test_with_detect_every_a_fed_chain_finishes_each_source_without_waiting_for_the_next(tmp_path, shared_dir,
                                                                                        checkpoints):
    """A worker's pipeline (--processes, --ray) waits for its next share with its last source read to the end: that
    source's frames after its last key frame are located as at a run's end, and the source finishes. They waited for
    the next source's frames or the feed's end, which a driver sends once every source is finished: a hang."""
    from tests.support.synth import many_clips_run

    folder, config = many_clips_run(tmp_path, shared_dir, checkpoints[8], 0)
    clip = moving_face_video(folder / "talk.mp4", frames=6, fps=8.0, empty=None)  # key frames 0, 2, 4: 5 after
    config = RunConfig.from_options(config, detect_every=2)
    planned = plan_outputs([str(clip.path)], tmp_path / "fed", "csv")[0]
    finished: list = []
    with Analyzer(config) as analyzer:
        alone = analyzer.run_many(output_dir=tmp_path / "alone")
        fed_config = analyzer.source_config("many sources", output=None, summary=None)
        chain = analyzer.source_chain([], fed_config, feeding=True)
        done = threading.Event()
        worker = threading.Thread(target=lambda: analyzer.process(
            chain, fed_config, on_result=lambda result: (finished.append(result), done.set())))
        worker.start()
        try:
            chain.extend([planned])
            assert done.wait(timeout=300), "the source did not finish while its chain waited for more"
        finally:
            chain.end_feed()
            worker.join(timeout=300)
    assert [(r.status, r.frames) for r in finished] == [("ok", 6)] and alone.results[0].frames == 6
    rows = next(Path(at) for at, final in finished[0].renames if Path(final) == planned.rows)
    assert rows.read_bytes() == (tmp_path / "alone" / "talk.emotions.csv").read_bytes()


@pytest.mark.parametrize("parallel", [1, 3])
def test_the_chain_tags_each_frame_with_its_source_keeps_their_order_and_records_failures(tmp_path, parallel):
    sizes = {"a": 5, "b": 0, "c": 4, "d": 3}
    opened: list[FakeSource] = []

    def open_one(uri: str) -> FakeSource:
        if uri == "missing":
            raise InputNotFoundError("input not found: missing")
        opened.append(FakeSource(uri, sizes.get(uri, 6), fail_after=2 if uri == "c" else None))
        return opened[-1]

    uris = ["a", "missing", "b", "c", "d"]
    planned = [PlannedSource(i, u, tmp_path / f"{u}.csv", tmp_path / f"{u}.json") for i, u in enumerate(uris)]
    with SourceChain(planned, open_one, parallel=parallel, queue_frames=2) as chain:
        frames = [(f.stream, f.index) for f in chain]
    assert frames == [(0, i) for i in range(5)] + [(3, 0), (3, 1)] + [(4, i) for i in range(3)]
    readings = chain.readings
    assert [r.frames for r in readings] == [5, 0, 0, 2, 3] and all(r.finished for r in readings)
    assert isinstance(readings[1].error, InputNotFoundError) and "damaged at frame 2" in str(readings[3].error)
    assert readings[2].error is None and readings[2].info is not None  # empty but readable
    assert all(s.closed for s in opened)


def test_the_chain_names_the_decoders_its_sources_were_read_with(tmp_path):
    # (a many-source run's summary said "opencv" whatever decoded its sources)
    decoders = {"a": "nvdec", "b": "opencv", "c": "nvdec"}

    def open_one(uri: str) -> FakeSource:
        if uri == "missing":
            raise InputNotFoundError("input not found: missing")
        source = FakeSource(uri, 2)
        source.decoder = decoders[uri]  # type: ignore[attr-defined]
        return source

    def read(uris: list[str]) -> str:
        planned = [PlannedSource(i, u, tmp_path / f"{u}.csv", tmp_path / f"{u}.json") for i, u in enumerate(uris)]
        with SourceChain(planned, open_one, parallel=2, queue_frames=2) as chain:
            assert chain.decoder == "none"  # nothing opened yet
            list(chain)
        return chain.decoder

    assert read(["a", "missing", "c"]) == "nvdec"
    assert read(["a", "b", "c"]) == "nvdec+opencv"
    assert read(["b"]) == "opencv"


# -- the command, end to end (real BlazeFace, random EmoNet) ------------------------------------------------


def emopipe(*args: object, cwd: Path, check: int | None = 0) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "emopipe", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=600)
    if check is not None:
        assert done.returncode == check, done.stderr[-3000:]
    return done


def rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as file:
        return list(csv.DictReader(file))


def manifest_lines(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / "manifest.jsonl").read_text().splitlines()]


MODEL = ("--detector", "blazeface", "--device", "cpu", "--no-progress")


@pytest.fixture
def clips(tmp_path, models_home, checkpoints):
    """Three short clips, two of them named the same in different folders."""
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
    made = {
        "a/clip.mp4": moving_face_video(tmp_path / "a" / "clip.mp4", frames=3, empty=None),
        "b/clip.mp4": moving_face_video(tmp_path / "b" / "clip.mp4", frames=4, size=(352, 240), empty=(1, 2)),
        "b/two.mp4": moving_face_video(tmp_path / "b" / "two.mp4", frames=2, two_faces=True, empty=None),
    }
    return made, ("--weights", str(checkpoints[8]), *MODEL)


@pytest.mark.parametrize(("pattern", "message"), [
    ("nothing/*.mp4", "no file matches nothing/*.mp4"),
    ("data/*", "data/* matches no video or image, nor a folder holding them (data/notes.txt, data/sub/); name a "
               "file directly or in a --list file to analyse it anyway"),
])
def test_a_glob_that_gives_nothing_is_a_one_line_error_before_any_model_loads(tmp_path, pattern, message):
    touch(tmp_path / "data" / "notes.txt")
    touch(tmp_path / "data" / "sub" / "notes.txt")
    done = emopipe(pattern, "-o", "out", "--weights", tmp_path / "no-such.pth", cwd=tmp_path, check=3)
    assert done.stderr.splitlines() == [f"emopipe: error: {message}"]  # (missing weights would be exit 6)
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_several_sources_give_per_source_exactly_the_rows_each_gives_alone(tmp_path, clips):
    made, options = clips
    alone = {}
    for name in made:
        out = tmp_path / "alone" / name.replace("/", "_").replace(".mp4", ".csv")
        out.parent.mkdir(exist_ok=True)
        emopipe(name, "-o", out, *options, cwd=tmp_path)
        alone[name] = rows(out), rows(out.with_suffix(".tracks.csv")), rows(out.with_suffix(".segments.csv"))
    emopipe("a/clip.mp4", "b", "-o", "out", "--report", "report.html", "--annotate", "mp4", *options, cwd=tmp_path)
    out = tmp_path / "out"
    for name, clip in made.items():  # each source's annotated video beside its rows, every frame at its size
        capture = cv2.VideoCapture(str(out / name.replace(".mp4", ".annotated.mp4")))
        sizes = []
        while (got := capture.read())[0]:
            sizes.append(got[1].shape[1::-1])
        capture.release()
        assert sizes == [clip.size] * len(clip.faces), name
    page = (tmp_path / "report.html").read_text()  # one page, an index and a section per source
    assert page.count("<section class='source'") == 3 and "id='index'" in page
    assert all(f">{name}</h2>" in page for name in made)
    videos = re.findall(r"<video [^>]*src='([^']*)'", page)  # each section plays its source's video (page-relative)
    assert videos == [f"out/{name.replace('.mp4', '.annotated.mp4')}" for name in made]
    together = {name: rows(out / name.replace(".mp4", ".emotions.csv")) for name in made}
    for name in made:
        assert together[name] == alone[name][0], name
        # and each source's per-person files (docs/report.md), as a run of it alone writes them
        assert rows(out / name.replace(".mp4", ".emotions.tracks.csv")) == alone[name][1], name
        assert rows(out / name.replace(".mp4", ".emotions.segments.csv")) == alone[name][2], name
    assert all(len(alone[name][1]) == len({r["track_id"] for r in alone[name][0]}) > 0 for name in made)
    assert sum(len(r) for r in together.values()) == 3 + 3 + 4  # faces: 3, one faceless frame of 4, 2×2
    lines = manifest_lines(out)
    assert [(m["source"], m["status"], m["frames"], m["rows"]) for m in lines] == [
        ("a/clip.mp4", "ok", 3, 3), ("b/clip.mp4", "ok", 4, 3), ("b/two.mp4", "ok", 2, 4)]
    run = json.loads((out / "summary.json").read_text())
    assert run["ok"] == 3 and run["failed"] == 0 and run["frames"] == 9
    assert run["pipeline"]["startup"]["engine_warmups"] == 1  # one warmup for all three
    assert not list(out.rglob("*.partial"))
    each = [json.loads((out / name.replace(".mp4", ".emotions.summary.json")).read_text()) for name in made]
    assert [(s["frames"], s["frames_detected"]) for s in each] == [(3, 3), (4, 4), (2, 2)]
    assert [len(s["tracks"]) for s in each] == [len(alone[name][1]) for name in made]
    assert lines[2]["files"] == {"rows": "b/two.emotions.csv", "tracks": "b/two.emotions.tracks.csv",
                                 "segments": "b/two.emotions.segments.csv", "summary": "b/two.emotions.summary.json",
                                 "annotated_video": "b/two.annotated.mp4"}
    assert not list(out.rglob("*.partial.mp4"))
    # each source's time runs from the one before it finished (the first's from the end of the warm-ups): together
    # less than the run, which also loaded and warmed the models
    assert all(s["seconds"] >= 0 for s in each)
    assert 0 < sum(s["seconds"] for s in each) < run["wall_s"] - run["pipeline"]["startup"]["warmup_s"]


@pytest.mark.slow
def test_a_video_ffmpeg_cannot_write_fails_its_source_keeps_its_rows_and_the_others_go_on(tmp_path, clips,
                                                                                       monkeypatch):
    _, options = clips
    fake = tmp_path / "ffmpeg"  # an FFmpeg that runs, then fails every file as a full disk would
    fake.write_text("#!/bin/sh\n[ \"$2\" = -encoders ] && echo ' V....D mpeg4  MPEG-4 part 2' && exit 0\n"
                    "echo 'Conversion failed: No space left on device' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("EMOPIPE_FFMPEG", str(fake))
    emopipe("a/clip.mp4", "b/two.mp4", "-o", "out", "--annotate", "mp4", *options, cwd=tmp_path, check=9)
    lines = manifest_lines(tmp_path / "out")
    assert [(m["source"], m["status"], m["exit_code"], m["kind"]) for m in lines] == [
        ("a/clip.mp4", "failed", 5, "OutputError"), ("b/two.mp4", "failed", 5, "OutputError")]
    assert all("No space left on device" in m["error"] for m in lines)
    for m, name in zip(lines, ("a/clip", "b/two"), strict=True):  # the rows complete, under their names
        assert m["rows"] > 0 and len(rows(tmp_path / "out" / f"{name}.emotions.csv")) == m["rows"]
        assert "annotated_video" not in m["outputs"]
    assert not list((tmp_path / "out").rglob("*.annotated.mp4"))


@pytest.mark.slow
def test_a_signal_while_the_report_is_written_leaves_no_page_and_resume_writes_it(tmp_path, clips):
    """Every source done, the page half made: exit 130 (what was asked is not all done), said in one line, no page
    and no temporary file; --resume writes it without running a source again. (tests/support/signal_at.py sends
    the signal as the page begins.)"""
    _, options = clips
    args = ("a/clip.mp4", "b", "-o", "out", "--report", "report.html", *options)
    done = subprocess.run([sys.executable, "-m", "tests.support.signal_at", "INT", "report", *args],
                          capture_output=True, text=True, cwd=tmp_path, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 130 and "signal_at: sent" in done.stderr, done.stderr[-3000:]
    assert "interrupted while writing the report report.html: it is not written" in done.stderr
    assert "--resume writes it" in done.stderr and "Traceback" not in done.stderr
    assert [m["status"] for m in manifest_lines(tmp_path / "out")] == ["ok"] * 3
    assert not list(tmp_path.glob("*report*"))  # no page, nothing half made
    emopipe(*args, "--resume", cwd=tmp_path)
    assert (tmp_path / "report.html").read_text().count("<section class='source'") == 3
    assert [m["status"] for m in manifest_lines(tmp_path / "out")][3:] == ["skipped"] * 3


@pytest.mark.slow
def test_a_signal_while_the_detector_warms_marks_the_source_begun_interrupted_and_resume_redoes_it(tmp_path,
                                                                                                   clips):
    """Cut off once the models are loaded, while the detector warms for the first source's frame size (that source
    opened, its reading begun, none of its frames analysed): the source is in flight, `interrupted` with nothing
    kept, as Ray's driver records the source its worker was in — the run ended with no line and no summary.json.
    The source read ahead after it was not entered: no line. Exit 130; --resume redoes both, each row once.
    (tests/support/signal_at.py sends the signal as the warm-up begins.)"""
    _, options = clips
    args = ("a/clip.mp4", "b/two.mp4", "-o", "out", *options)
    done = subprocess.run([sys.executable, "-m", "tests.support.signal_at", "INT", "detector-warmup", *args],
                          capture_output=True, text=True, cwd=tmp_path, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 130 and "signal_at: sent" in done.stderr, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    out = tmp_path / "out"
    lines = manifest_lines(out)
    assert [(e["source"], e["status"], e["frames"], e["faces"], e["rows"], e["exit_code"], e["outputs"])
            for e in lines] == [("a/clip.mp4", "interrupted", 0, 0, 0, 130, {})]
    assert "files" not in lines[0]
    run = json.loads((out / "summary.json").read_text())
    assert (run["sources"], run["interrupted"], run["ok"], run["run_interrupted"]) == (2, 1, 0, True)
    assert sorted(p.name for p in out.rglob("*") if p.is_file()) == [".emopipe.lock", "manifest.jsonl",
                                                                     "summary.json"]
    emopipe(*args, "--resume", cwd=tmp_path)
    latest = {m["source"]: m for m in Manifest(out).previous().values()}
    assert {source: m["status"] for source, m in latest.items()} == {"a/clip.mp4": "ok", "b/two.mp4": "ok"}
    got = rows(out / "a" / "clip.emotions.csv")
    assert [r["frame"] for r in got] == ["0", "1", "2"] and latest["a/clip.mp4"]["rows"] == 3  # each row once
    assert [r["frame"] for r in rows(out / "b" / "two.emotions.csv")] == ["0", "0", "1", "1"]
    assert not list(out.rglob("*.partial"))


@pytest.mark.slow
def test_with_detect_every_each_source_still_gives_the_rows_it_gives_alone(tmp_path, models_home, checkpoints):
    """--detect-every 3 over two clips of one size: the second clip starts on its own key frame (one schedule for
    the run used to give its first frame the first clip's boxes), the first clip's last frame keeps its own."""
    (tmp_path / "clips").mkdir()
    for name, frames, two in (("a.mp4", 5, False), ("b.mp4", 4, True)):
        moving_face_video(tmp_path / "clips" / name, frames=frames, two_faces=two, empty=None)
    options = ("--weights", checkpoints[8], *MODEL, "--detect-every", "3")
    emopipe("clips", "-o", "out", *options, cwd=tmp_path)
    for name in ("a", "b"):
        emopipe(f"clips/{name}.mp4", "-o", f"{name}.csv", *options, cwd=tmp_path)
        together, alone = rows(tmp_path / "out" / f"{name}.emotions.csv"), rows(tmp_path / f"{name}.csv")
        assert len(together) == len(alone) > 0 and together == alone, name
        assert together[0]["detected"] == "1"  # its first frame is a key frame
        summary = json.loads((tmp_path / "out" / f"{name}.emotions.summary.json").read_text())
        assert summary["frames_detected"] == len({r["frame"] for r in together if r["detected"] == "1"})


@pytest.mark.slow
def test_a_corrupt_and_a_missing_source_fail_alone_and_the_exit_code_says_so(tmp_path, clips):
    made, options = clips
    (tmp_path / "b" / "corrupt.mp4").write_bytes(b"not a video" * 50)
    done = emopipe("b", "missing.mp4", "a/clip.mp4", "-o", "out", *options, cwd=tmp_path, check=9)
    assert "Traceback" not in done.stderr
    status = {m["source"]: m for m in manifest_lines(tmp_path / "out")}
    ok = sum(m["status"] == "ok" for m in status.values())
    assert f"{len(status)} sources: {ok} ok, 2 failed, 0 interrupted" in done.stderr  # the closing line counts them
    assert status["b/corrupt.mp4"]["status"] == "failed" and status["b/corrupt.mp4"]["exit_code"] == 4
    assert status["missing.mp4"]["status"] == "failed" and status["missing.mp4"]["exit_code"] == 3
    assert "not found" in status["missing.mp4"]["error"]
    assert all(status[name]["status"] == "ok" for name in made)
    assert len(rows(tmp_path / "out" / "a" / "clip.emotions.csv")) == 3
    # the same folder again without --resume would mix runs: refused before any work
    again = emopipe("a/clip.mp4", "b", "-o", "out", *options, cwd=tmp_path, check=2)
    assert "--resume" in again.stderr


@pytest.mark.slow
def test_resume_after_a_killed_run_completes_with_no_duplicated_or_missing_rows(tmp_path, models_home, checkpoints):
    names = [f"c{i}.mp4" for i in range(4)]
    (tmp_path / "in").mkdir()
    for name in names:
        moving_face_video(tmp_path / "in" / name, frames=5, empty=None)
    options = ("--weights", str(checkpoints[8]), *MODEL)
    expected = {}
    for name in names[:1]:  # every clip is the same synthesized motion: one reference suffices
        emopipe(f"in/{name}", "-o", "ref.csv", *options, cwd=tmp_path)
        expected = rows(tmp_path / "ref.csv")
    options = (*options, "--annotate", "mkv")  # each source's video too, under its partial name until it is done
    process = subprocess.Popen([sys.executable, "-m", "emopipe", "in", "-o", "out", *options], cwd=tmp_path,
                               env={**os.environ, "PYTHONPATH": str(REPO)}, stderr=subprocess.DEVNULL)
    manifest = tmp_path / "out" / "manifest.jsonl"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and (not manifest.exists() or not manifest.read_text().strip()):
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)  # no chance to clean up
    process.wait(timeout=60)
    finished = {m["source"] for m in manifest_lines(tmp_path / "out")}
    assert 1 <= len(finished) < 4
    emopipe("in", "-o", "out", "--resume", *options, cwd=tmp_path)
    latest = Manifest(tmp_path / "out").previous()
    assert {m["status"] for m in latest.values()} <= {"ok", "skipped"} and len(latest) == 4
    for name in names:
        got = rows(tmp_path / "out" / name.replace(".mp4", ".emotions.csv"))
        assert [{**r, "source": ""} for r in got] == [{**r, "source": ""} for r in expected], name
        capture = cv2.VideoCapture(str(tmp_path / "out" / name.replace(".mp4", ".annotated.mkv")))
        assert sum(1 for _ in iter(capture.grab, False)) == 5, name  # (the one the kill cut off: redone)
        capture.release()
    assert not list((tmp_path / "out").rglob("*.partial")) and not list((tmp_path / "out").rglob("*.partial.*"))


@pytest.mark.slow
def test_the_summary_after_resume_describes_every_source_with_those_done_before(tmp_path, models_home, checkpoints):
    """A source finished by an earlier run counts in summary.json with its manifest line's figures (the summary
    described only the sources the resumed run processed); the rates and ``this_run`` are the run's own."""
    (tmp_path / "in").mkdir()
    moving_face_video(tmp_path / "in" / "a.mp4", frames=3, empty=None)
    options = ("--weights", checkpoints[8], *MODEL)
    emopipe("in/a.mp4", "in/b.mp4", "-o", "out", *options, cwd=tmp_path, check=9)  # b is missing: failed
    moving_face_video(tmp_path / "in" / "b.mp4", frames=2, two_faces=True, empty=None)
    done = emopipe("in/a.mp4", "in/b.mp4", "-o", "out", "--resume", *options, cwd=tmp_path)
    out = tmp_path / "out"
    latest = {Path(m["source"]).stem: m for m in Manifest(out).previous().values()}
    assert {name: m["status"] for name, m in latest.items()} == {"a": "skipped", "b": "ok"}
    a, b = latest["a"], latest["b"]
    assert (a["frames"], a["rows"], b["frames"], b["rows"]) == (3, 3, 2, 4)
    run = json.loads((out / "summary.json").read_text())
    assert (run["sources"], run["ok"], run["skipped"], run["failed"]) == (2, 1, 1, 0)
    assert (run["processed"], run["carried_over"]) == (1, 1)
    assert (run["frames"], run["faces"], run["rows"]) == (5, a["faces"] + b["faces"], 7)
    assert run["this_run"] == {"frames": 2, "faces": b["faces"], "rows": 4}
    assert run["fps"] == round(2 / run["wall_s"], 2)
    assert f"with those done before, 5 frames, {a['faces'] + b['faces']} faces" in done.stderr
    assert not list(out.glob("*.partial"))


def test_a_source_keeps_its_files_names_through_a_line_that_has_none(tmp_path):
    # run 1 failed partway (its files named a.*); run 2 could not open it (a line with no files); run 3 resumes:
    # a.* are still its own, not another's files to refuse as a clash (was: exit 2, "is no file of this run's")
    videos = tmp_path / "videos"
    videos.mkdir()
    (videos / "a.mp4").write_bytes(b"not yet a video")
    (videos / "b.mp4").write_bytes(b"not yet a video")
    out = tmp_path / "out"
    out.mkdir()
    manifest = Manifest(out, files=True)
    rows = out / "a.emotions.csv"
    rows.write_text("source,frame\n")
    source = str(videos / "a.mp4")
    manifest.append({"source": source, "status": "failed", "outputs": {"rows": str(rows)}})
    manifest.append({"source": source, "status": "failed", "error": "input not found"})
    config = RunConfig(weights="unused.pth", device="cpu", resume=True)
    with Analyzer(config).plan_many([str(videos)], out) as plan:
        assert {p.uri: p.rows for p in plan.todo} == {source: rows, str(videos / "b.mp4"): out / "b.emotions.csv"}
    # another source's files stay out of reach all the same
    (out / "b.emotions.csv").write_text("source,frame\n")
    with pytest.raises(UsageError, match="is no file of this run's sources"):
        Analyzer(config).plan_many([str(videos)], out)


def test_a_file_where_a_sources_output_folder_must_be_is_refused_before_any_model_loads(tmp_path):
    # (was: the run went on until that source's first rows, then ended as an internal error, exit 1)
    for folder in ("a", "b"):
        touch(tmp_path / folder / "clip.mp4")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "b").write_text("in the way\n")
    done = emopipe("a/clip.mp4", "b/clip.mp4", "-o", "out", "--weights", tmp_path / "no-such.pth", cwd=tmp_path,
                   check=5)
    assert done.stderr.splitlines()[-1] == ("emopipe: error: out/b is a file where b/clip.mp4's outputs need a "
                                            "folder; move it, or choose another output folder")
    assert "Traceback" not in done.stderr
    assert (tmp_path / "out" / "b").read_text() == "in the way\n" and not (tmp_path / "out" / "manifest.jsonl").exists()


@pytest.mark.slow
def test_a_many_source_run_is_running_for_its_metrics_while_its_sources_finish(tmp_path, models_home, checkpoints):
    # (was: "starting" until the end, so the alerts on a running run's rates and sources never watched archives)
    from prometheus_client import CollectorRegistry

    from emopipe.observe.metrics import PipelineMetrics

    (tmp_path / "v").mkdir()
    moving_face_video(tmp_path / "v" / "a.mp4", frames=1, empty=None)
    metrics = PipelineMetrics(CollectorRegistry())
    states: list[str | None] = []
    analyzer = Analyzer(weights=str(checkpoints[8]), detector="blazeface", device="cpu")
    outcome = analyzer.run_many([str(tmp_path / "v")], tmp_path / "out", metrics=metrics,
                                on_result=lambda result: states.append(metrics.state))
    assert [r.status for r in outcome.results] == ["ok"] and states == ["running"]


@pytest.mark.slow
def test_sources_whose_names_are_not_utf8_are_analysed_or_fail_alone_and_named_as_valid_utf8(tmp_path, models_home,
                                                                                             checkpoints):
    # (OpenCV handed such a name crashed the process: a segmentation fault, no manifest line even for the others)
    folder = tmp_path / "v"
    folder.mkdir()
    moving_face_video(folder / "a.mp4", frames=1, empty=None)
    raw = os.fsencode(str(folder))
    with open(os.path.join(raw, b"zz\xe9.mp4"), "wb") as file:
        file.write((folder / "a.mp4").read_bytes())
    with open(os.path.join(raw, b"bad\xff.mp4"), "wb") as file:
        file.write(b"not a video" * 50)
    options = ("--weights", checkpoints[8], *MODEL)
    done = emopipe("v", "-o", "out", *options, cwd=tmp_path, check=9)
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr
    lines = [json.loads(line) for line in (tmp_path / "out" / "manifest.jsonl").read_bytes().decode().splitlines()]
    status = {m["source"]: m for m in lines}  # (read as strict UTF-8: the odd bytes written as \xNN)
    assert set(status) == {"v/a.mp4", "v/zz\\xe9.mp4", "v/bad\\xff.mp4"}
    assert status["v/a.mp4"]["status"] == status["v/zz\\xe9.mp4"]["status"] == "ok"
    bad = status["v/bad\\xff.mp4"]
    assert (bad["status"], bad["exit_code"]) == ("failed", 4) and "v/bad\\xff.mp4: not a video" in bad["error"]
    ours = rows(tmp_path / "out" / status["v/zz\\xe9.mp4"]["files"]["rows"])
    assert [r["source"] for r in ours] == ["v/zz\\xe9.mp4"]
    assert [r["x1"] for r in ours] == [r["x1"] for r in rows(tmp_path / "out" / "a.emotions.csv")]
    # --resume knows the file by its name's very bytes: done, skipped; the one that failed is tried again, alone
    again = emopipe("v", "-o", "out", "--resume", *options, cwd=tmp_path, check=9)
    assert "Traceback" not in again.stderr
    latest = [json.loads(line) for line in (tmp_path / "out" / "manifest.jsonl").read_text().splitlines()][3:]
    assert {m["source"]: m["status"] for m in latest} == {"v/a.mp4": "skipped", "v/zz\\xe9.mp4": "skipped",
                                                          "v/bad\\xff.mp4": "failed"}


@pytest.mark.slow
def test_resume_with_the_output_folder_in_the_input_tree_analyses_none_of_its_outputs(tmp_path, models_home,
                                                                                      checkpoints):
    # (each --resume analysed emopipe-out/a.annotated.mp4 as a new source, one folder deeper every time)
    moving_face_video(tmp_path / "a.mp4", frames=1, empty=None)
    options = (".", "--recursive", "--annotate", "mp4", "--weights", checkpoints[8], *MODEL)
    emopipe(*options, cwd=tmp_path)
    out = tmp_path / "emopipe-out"
    assert (out / "a.annotated.mp4").is_file()
    shutil.copy(out / "a.annotated.mp4", out / "b.annotated.partial.mp4")  # (as a run cut off leaves one)
    again = emopipe(*options, "--resume", cwd=tmp_path)
    assert "left out 2 file(s) emopipe wrote" in again.stderr
    assert [(m["source"], m["status"]) for m in manifest_lines(out)] == [("a.mp4", "ok"), ("a.mp4", "skipped")]
    assert not (out / "emopipe-out").exists() and not list(out.glob("*.annotated.annotated*"))


def test_a_report_page_emopipe_did_not_write_is_refused_before_any_source_runs(tmp_path, monkeypatch):
    # (was: refused only once every source had run, by the report's writer at the end)
    monkeypatch.chdir(tmp_path)
    for name in ("a.mp4", "b.mp4"):
        (tmp_path / name).write_bytes(b"not read")
    mine = tmp_path / "mine.html"
    mine.write_text("<html><body>my notes</body></html>")
    with pytest.raises(UsageError, match=r"mine\.html"):
        Analyzer(device="cpu").plan_many(["a.mp4", "b.mp4"], tmp_path / "out", report=str(mine))
    assert mine.read_text() == "<html><body>my notes</body></html>"
    photos = tmp_path / "page.thumbnails"
    photos.mkdir()
    (photos / "holiday.png").write_bytes(b"a photo")
    with pytest.raises(UsageError, match=r"page\.thumbnails"):
        Analyzer(device="cpu").plan_many(["a.mp4", "b.mp4"], tmp_path / "out2", report=str(tmp_path / "page.html"))
    assert (photos / "holiday.png").read_bytes() == b"a photo"
    with Analyzer(device="cpu").plan_many(["a.mp4", "b.mp4"], tmp_path / "out3", report=str(tmp_path / "new.html")):
        pass  # (a new page: planned)
