"""`emopipe VIDEO` end to end: real video files from real face photos, real BlazeFace, EmoNet (random weights).

Every bad input has its one-line error and documented exit code, and nothing already written is lost.
"""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import cv2
import pytest

from tests.support.processes import interruptible
from tests.support.synth import SynthVideo, moving_face_video

REPO = Path(__file__).resolve().parents[1]


def emopipe(*args: object, env: dict[str, str] | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "emopipe", *map(str, args)], capture_output=True, text=True,
                          cwd=REPO, env=env or os.environ.copy(), timeout=timeout)


def rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def one_line_error(done: subprocess.CompletedProcess, code: int, *needles: str) -> None:
    assert done.returncode == code, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("emopipe: error:")]
    assert len(errors) == 1, done.stderr
    assert "Traceback" not in done.stderr
    for needle in needles:
        assert needle in errors[0], errors[0]


@pytest.fixture(scope="module")
def moving(tmp_path_factory) -> SynthVideo:
    """A face panning and zooming, with a faceless stretch (frames 24–31)."""
    return moving_face_video(tmp_path_factory.mktemp("moving") / "moving.mp4", frames=40, empty=(24, 32))


@pytest.fixture(scope="module")
def moving_run(moving, checkpoints, tmp_path_factory, shared_dir):
    home = tmp_path_factory.mktemp("home")
    for f in (shared_dir / "models" / "blazeface").glob("*.[pn][tp]*"):
        (home / f.name).write_bytes(f.read_bytes())
    out = tmp_path_factory.mktemp("out")
    env = {**os.environ, "EMOPIPE_HOME": str(home)}
    done = emopipe(moving.path, "--detector", "blazeface", "--weights", checkpoints[8], "--device", "cpu",
                   "--batch-size", "4", "-o", out / "rows.csv", "--annotate", out / "annotated.mp4", "--landmarks",
                   env=env)
    assert done.returncode == 0, done.stderr
    return out, done, env


def test_faces_found_tracked_and_timestamped(moving, moving_run):
    out, _, _ = moving_run
    table = rows(out / "rows.csv")
    frames_with_rows = {int(r["frame"]) for r in table}
    face_frames = set(moving.face_frames)
    assert len(frames_with_rows & face_frames) >= 0.9 * len(face_frames)
    assert not frames_with_rows & set(moving.empty_frames)  # nothing in the faceless stretch
    assert {r["track_id"] for r in table} == {"1"}  # one face, one stable id (across the gap too)
    stamps = [float(r["timestamp_s"]) for r in table]
    assert stamps == sorted(stamps) and len(set(stamps)) == len(stamps)
    for r in table:
        assert float(r["timestamp_s"]) == pytest.approx(int(r["frame"]) / moving.fps, abs=1e-3)
        true = moving.faces[int(r["frame"])][0]
        box = [float(r[k]) for k in ("x1", "y1", "x2", "y2")]
        cx, cy = (box[0] + box[2]) / 2, (box[1] + box[3]) / 2
        assert true[0] < cx < true[2] and true[1] < cy < true[3]  # the box is on the face
        probs = [float(r[f"p_{k}"]) for k in ("neutral", "happy", "sad", "surprise", "fear", "disgust", "anger",
                                                 "contempt")]
        assert sum(probs) == pytest.approx(1, abs=1e-4)
        assert max(probs) == float(r[f"p_{r['label']}"])  # the label is the most probable class
        lm_x = [float(r[f"lm{i}_x"]) for i in range(68)]
        assert min(lm_x) >= box[0] - 1 and max(lm_x) <= box[2] + 1  # landmarks mapped into the box


def test_summary_agrees_with_rows(moving, moving_run):
    out, done, _ = moving_run
    summary = json.loads((out / "rows.summary.json").read_text())
    assert summary["frames"] == moving.frame_count
    assert summary["faces"] == len(rows(out / "rows.csv"))
    assert summary["first_frame_latency_s"] > 0 and summary["steady_latency_p50_s"] > 0
    assert summary["warmup_s"] > 0 and summary["load_s"] > 0 and not summary["interrupted"]
    assert set(summary["stage_seconds"]) >= {"decode", "detect", "crop", "infer", "write"}
    assert f"{moving.frame_count} frames" in done.stderr  # the summary on stderr too
    # the start-up report: each phase, and the command's start to its first row, which they all precede
    startup = summary["startup"]
    phases = [startup[k] for k in ("before_load_s", "load_s", "engine_warmup_s", "detector_warmup_s")]
    assert all(p >= 0 for p in phases) and startup["before_load_s"] > 0 and startup["load_s"] > 0
    assert startup["first_row_s"] > sum(phases)
    assert startup["engine_warmup_s"] + startup["detector_warmup_s"] == pytest.approx(startup["warmup_s"], abs=2e-4)
    assert f"startup: first row {startup['first_row_s']:.2f} s after the start" in done.stderr


def test_start_up_steps_are_said_as_they_start(moving_run):
    # the seconds before the first frame were silent: each slow step is announced before it runs, in order
    _, done, _ = moving_run
    lines = done.stderr.splitlines()

    def first(text: str) -> int:
        return next(i for i, line in enumerate(lines) if text in line)

    steps = [first("starting: loading PyTorch"), first("loading EmoNet (torch backend) on cpu"),
             first("warming up EmoNet's static shapes"), first("warmed up"), first(" frames, ")]
    assert steps == sorted(steps) and steps[0] == 0, done.stderr


def test_annotated_video_keeps_frame_count_and_rate(moving, moving_run):
    out, _, _ = moving_run
    video = cv2.VideoCapture(str(out / "annotated.mp4"))
    assert int(video.get(cv2.CAP_PROP_FRAME_COUNT)) == moving.frame_count
    assert video.get(cv2.CAP_PROP_FPS) == pytest.approx(moving.fps)
    source = cv2.VideoCapture(str(moving.path))
    diffs = []
    for _ in range(moving.frame_count):
        diffs.append(float(cv2.absdiff(video.read()[1], source.read()[1]).mean()))
    assert min(diffs[i] for i in moving.face_frames) > 2 * max(diffs[i] for i in moving.empty_frames)


def test_two_faces_get_two_stable_ids_and_jsonl(tmp_path, checkpoints, models_home):
    clip = moving_face_video(tmp_path / "two.mp4", frames=6, size=(400, 240), empty=None, two_faces=True)
    done = emopipe(clip.path, "--detector", "blazeface", "--weights", checkpoints[5], "--device", "cpu",
                   "--batch-size", "3", "-o", tmp_path / "rows.jsonl")
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in (tmp_path / "rows.jsonl").read_text().splitlines()]
    assert len(lines) == 12
    by_track: dict[int, list[float]] = {}
    for line in lines:
        by_track.setdefault(line["track_id"], []).append((line["x1"] + line["x2"]) / 2)
        assert set(line["probabilities"]) == {"neutral", "happy", "sad", "surprise", "anger"}  # 5-class labels
    assert len(by_track) == 2 and all(len(v) == 6 for v in by_track.values())
    left, right = sorted(by_track.values(), key=lambda xs: xs[0])
    assert max(left) < min(right)  # ids never swap between the two faces


def test_detect_every_kth_frame_marks_the_rows_it_did_not_detect(tmp_path, checkpoints, models_home):
    clip = moving_face_video(tmp_path / "clip.mp4", frames=7, empty=None)
    done = emopipe(clip.path, "--detector", "blazeface", "--weights", checkpoints[8], "--device", "cpu",
                   "--detect-every", "3", "-o", tmp_path / "rows.csv")
    assert done.returncode == 0, done.stderr
    header = (tmp_path / "rows.csv").read_text().splitlines()[0].split(",")
    assert header[header.index("score") + 1] == "detected"
    table = rows(tmp_path / "rows.csv")
    assert [(int(r["frame"]), r["detected"]) for r in table] == [(i, "1" if i % 3 == 0 else "0") for i in range(7)]
    for r in table:  # the boxes between key frames are on the face too
        true = clip.faces[int(r["frame"])][0]
        cx, cy = (float(r["x1"]) + float(r["x2"])) / 2, (float(r["y1"]) + float(r["y2"])) / 2
        assert true[0] < cx < true[2] and true[1] < cy < true[3]
    summary = json.loads((tmp_path / "rows.summary.json").read_text())
    assert (summary["detect_every"], summary["frames_detected"], summary["frames"]) == (3, 3, 7)
    assert "detector ran on 3 of 7 frames (--detect-every 3)" in done.stderr


def test_no_faces_gives_header_only_and_exit_0(tmp_path, checkpoints, models_home):
    clip = moving_face_video(tmp_path / "empty.mp4", frames=5, empty=(0, 5))
    done = emopipe(clip.path, "--detector", "blazeface", "--weights", checkpoints[8], "--device", "cpu",
                   "-o", tmp_path / "rows.csv")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "rows.csv").read_text().splitlines()[0].startswith("source,frame,timestamp_s,track_id")
    assert rows(tmp_path / "rows.csv") == []
    assert json.loads((tmp_path / "rows.summary.json").read_text())["frames"] == 5


def test_images_and_folders_are_sources(tmp_path, checkpoints, models_home, shared_dir):
    folder = tmp_path / "faces"
    folder.mkdir()
    for name in ("1face.png", "3faces.png", "4faces.png"):
        shutil.copy(shared_dir / "data" / "faces" / name, folder / name)
    (folder / "2broken.png").write_bytes(b"not a png" * 10)  # between them in name order
    done = emopipe(folder, "--detector", "blazeface", "--weights", checkpoints[8],
                   "--device", "cpu", "-o", tmp_path / "rows.csv")
    assert done.returncode == 0, done.stderr
    found = rows(tmp_path / "rows.csv")
    assert sorted({Path(r["source"]).name for r in found}) == ["faces"]
    # each row names its image; frames count the folder's files in name order (the broken one is frame 1)
    assert [sum(r["file"] == name for r in found) for name in ("1face.png", "3faces.png", "4faces.png")] == [1, 3, 1]
    assert {r["file"]: r["frame"] for r in found} == {"1face.png": "0", "3faces.png": "2", "4faces.png": "3"}
    summary = json.loads((tmp_path / "rows.summary.json").read_text())
    assert [Path(f).name for f in summary["skipped_files"]] == ["2broken.png"]
    assert "skipped 1 file(s) that did not decode: 2broken.png" in done.stderr


@pytest.mark.parametrize(
    ("args", "code", "needle"),
    [
        (["--batch-size", "0"], 2, "--batch-size"),
        (["--detector", "nope"], 2, "unknown detector 'nope'"),
        (["--start", "2", "--end", "1"], 2, "--end"),
        (["--device", "tpu"], 2, "device 'tpu'"),
        (["--threshold", "1.5"], 2, "--threshold"),
        (["--compile", "fastest"], 2, "unknown compile mode 'fastest'"),
        (["--decoder", "nvdec", "--device", "cpu"], 2, "--decoder nvdec: NVDEC decodes on an NVIDIA GPU"),
        (["--decoder", "vaapi"], 2, "--decoder"),
        (["--detect-every", "0"], 2, "--detect-every"),
    ],
)
def test_invalid_options(args, code, needle, moving, tmp_path, models_home):
    done = emopipe(moving.path, *args, "-o", tmp_path / "rows.csv")
    one_line_error(done, code, needle)


def test_missing_input(tmp_path):
    done = emopipe(tmp_path / "absent.mp4", "-o", tmp_path / "rows.csv")
    one_line_error(done, 3, "absent.mp4")


@pytest.mark.parametrize("content", [b"", b"this is not a video at all" * 100])
def test_not_a_video(tmp_path, content):
    fake = tmp_path / "fake.mp4"
    fake.write_bytes(content)
    one_line_error(emopipe(fake, "-o", tmp_path / "rows.csv"), 4, "fake.mp4")


def test_a_name_with_a_newline_or_an_escape_is_said_on_one_line(tmp_path, capsys, monkeypatch):
    fake = tmp_path / "take\n2\x1b[2J.mp4"  # (a newline made a message two lines; an escape worked the terminal)
    fake.write_bytes(b"")
    done = emopipe(fake, "-o", tmp_path / "rows.csv")
    one_line_error(done, 4, "take\\n2\\x1b[2J.mp4 is empty")
    assert done.stderr.count("\n") == len(done.stderr.splitlines()) and "\x1b" not in done.stderr
    # the log's lines too (a many-source run's "failed NAME — …")
    import logging

    from emopipe.cli import app

    logger = logging.getLogger("emopipe")
    monkeypatch.setattr(logger, "handlers", [])  # (given back after the test: the command's handler is set in place)
    monkeypatch.setattr(logger, "level", logger.level)
    app._configure_logging(debug=False, quiet=False)
    logging.getLogger("emopipe.test").warning("failed %s — 0 frames", "v/take\n2.mp4")
    assert capsys.readouterr().err == "emopipe: failed v/take\\n2.mp4 — 0 frames\n"


def test_a_file_whose_name_begins_with_a_dash_is_said_how_to_name_it(tmp_path, monkeypatch, capsys):
    from emopipe.cli.run import build_parser

    monkeypatch.chdir(tmp_path)
    (tmp_path / "-x.mp4").write_bytes(b"")
    with pytest.raises(SystemExit) as ended:
        build_parser().parse_args(["-x.mp4", "-o", "out"])
    assert ended.value.code == 2
    assert capsys.readouterr().err == ("emopipe: error: unrecognized arguments: -x.mp4 (-x.mp4 is a file: give it as "
                                       "./-x.mp4, or after --) (see 'emopipe --help')\n")


def test_unwritable_outputs(moving, tmp_path, models_home):
    one_line_error(emopipe(moving.path, "-o", tmp_path / "no" / "such" / "dir.csv"), 5, "dir.csv")
    one_line_error(emopipe(moving.path, "-o", tmp_path / "rows.csv", "--annotate", tmp_path / "nodir" / "a.mp4"), 5,
                   "a.mp4")
    assert not (tmp_path / "rows.csv").exists()  # failed before any work started


def test_an_input_named_as_an_outputs_temporary_name_is_refused_and_kept(moving, tmp_path, checkpoints, models_home):
    # (was: exit 0, the annotated video written over clip.partial.mp4, its input, then renamed clip.mp4)
    work = tmp_path / "work"
    work.mkdir()
    source = work / "clip.partial.mp4"
    shutil.copy(moving.path, source)
    done = emopipe(source, "--detector", "blazeface", "--weights", checkpoints[8], "--device", "cpu",
                   "--max-frames", "2", "-o", work / "rows.csv", "--annotate", work / "clip.mp4")
    one_line_error(done, 2, f"the annotated video's temporary name {source} is an input of this run: choose another "
                   "name (outputs never overwrite inputs)")
    assert source.read_bytes() == moving.path.read_bytes() and os.listdir(work) == ["clip.partial.mp4"]



def test_a_second_run_of_the_same_names_is_refused_while_the_first_writes_them(tmp_path, checkpoints, models_home):
    # (was: both runs past the check at once, then writing the same rows.csv.partial and renaming over each other)
    from emopipe.config import RunConfig
    from emopipe.io.records import hold_outputs

    clip = moving_face_video(tmp_path / "empty.mp4", frames=5, empty=(0, 5))
    out = tmp_path / "out"
    out.mkdir()
    rows = out / "rows.csv"
    command = (clip.path, "--detector", "blazeface", "--weights", checkpoints[8], "--device", "cpu", "-o", rows)
    first = RunConfig(source=str(clip.path), output=str(rows)).resolved("cpu")
    with hold_outputs(first.locked_outputs()):  # the first run, as it holds its names while it writes them
        (out / "rows.csv.partial").write_text("the first run's rows so far\n")
        before = {p.name: p.read_bytes() for p in out.iterdir()}
        one_line_error(emopipe(*command), 5, f"{rows} is in use by another emopipe run (it holds .rows.csv.lock); "
                                             "wait for that run to end, or choose another name")
        assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # the first run's files as they were
        os.replace(out / "rows.csv.partial", rows)  # (its rows complete)
    done = emopipe(*command)  # the first run has ended: the same command runs, and leaves no lock file behind
    assert done.returncode == 0, done.stderr
    assert sorted(os.listdir(out)) == ["rows.csv", "rows.segments.csv", "rows.summary.json", "rows.tracks.csv"]
    assert rows.read_text().startswith("source,frame,timestamp_s,track_id")

def test_a_one_source_run_into_a_folder_a_many_source_run_holds_is_refused(tmp_path, checkpoints, models_home):
    # (was: the many-source run held only out/.emopipe.lock, this run only out/.clip.emotions.csv.lock; both exit 0,
    # out/clip.emotions.csv left with whichever run finished last)
    from emopipe.io.records import FOLDER_LOCK, hold_folder

    clip = moving_face_video(tmp_path / "clip.mp4", frames=1, empty=None)
    out = tmp_path / "out"
    out.mkdir()
    command = (clip.path, "--detector", "blazeface", "--weights", checkpoints[8], "--device", "cpu",
               "-o", out / "clip.emotions.csv")
    with hold_folder(out):  # a many-source run writing out/ (clip.emotions.csv among its names)
        before = sorted(os.listdir(out))
        one_line_error(emopipe(*command), 5, f"{out} is in use by another emopipe run writing several sources there "
                                             f"(it holds {FOLDER_LOCK}); wait for that run to end")
        assert sorted(os.listdir(out)) == before  # nothing of the refused run's
    done = emopipe(*command)  # that run has ended: this one runs (beside the folder's lock file, left as it is)
    assert done.returncode == 0, done.stderr
    assert len(rows(out / "clip.emotions.csv")) == 1 and (out / FOLDER_LOCK).exists()


@pytest.mark.parametrize("made", [False, True])
def test_one_source_with_a_folder_for_output_writes_its_files_in_it(tmp_path, checkpoints, models_home, made):
    # -o results/ (or a folder that exists) for one video: its files in the folder as a many-source run writes them.
    # It was a rows file named "results" beside results.summary.json…, and an existing folder was refused.
    clip = moving_face_video(tmp_path / "clip.mp4", frames=2, empty=(0, 2))
    out = tmp_path / "results"
    if made:
        out.mkdir()
    done = emopipe(clip.path, "--detector", "blazeface", "--weights", checkpoints[8], "--device", "cpu",
                   "-o", str(out) if made else f"{out}{os.sep}")
    assert done.returncode == 0, done.stderr
    assert out.is_dir() and sorted(os.listdir(out)) == [
        ".emopipe.lock", "clip.emotions.csv", "clip.emotions.segments.csv", "clip.emotions.summary.json",
        "clip.emotions.tracks.csv", "manifest.jsonl", "summary.json"]
    assert not list(tmp_path.glob("results.*"))  # (no results.summary.json, results.tracks.csv… beside it)


def test_weights_missing_offline(moving, tmp_path, models_home):
    manifest = json.loads((REPO / "models" / "manifest.json").read_text())
    manifest["emonet_8"]["url"] = "http://127.0.0.1:9/emonet_8.pth"  # nothing listens there
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    env = {**os.environ, "EMOPIPE_MANIFEST": str(tmp_path / "manifest.json")}
    done = emopipe(moving.path, "--detector", "blazeface", "--device", "cpu", "-o", tmp_path / "rows.csv", env=env)
    one_line_error(done, 6, "http://127.0.0.1:9/emonet_8.pth", str(models_home / "emonet_8.pth"))


def test_truncated_video_keeps_what_decodes(tmp_path, checkpoints, models_home):
    clip = moving_face_video(tmp_path / "whole.avi", frames=20, empty=None)
    data = clip.path.read_bytes()
    cut = tmp_path / "cut.avi"
    cut.write_bytes(data[: len(data) // 2])
    done = emopipe(cut, "--detector", "blazeface", "--weights", checkpoints[8], "--device", "cpu",
                   "--batch-size", "2", "-o", tmp_path / "rows.csv")
    one_line_error(done, 8, "stopped at frame")
    written = rows(tmp_path / "rows.csv")
    assert 3 <= len(written) < 20  # what decoded was processed and written
    summary = json.loads((tmp_path / "rows.summary.json").read_text())
    assert summary["ended_early"] and summary["faces"] == len(written)


def test_a_run_cut_short_keeps_an_earlier_runs_files_and_puts_its_own_beside_them(tmp_path, checkpoints,
                                                                                   models_home):
    clip = moving_face_video(tmp_path / "whole.avi", frames=20, empty=None)
    cut = tmp_path / "cut.avi"
    cut.write_bytes(clip.path.read_bytes()[: len(clip.path.read_bytes()) // 2])
    options = ("--detector", "blazeface", "--weights", checkpoints[8], "--device", "cpu", "--batch-size", "2",
               "-o", tmp_path / "rows.csv", "--annotate", tmp_path / "a.mp4")
    assert emopipe(clip.path, *options, "--max-frames", "4").returncode == 0  # an earlier, complete run
    names = ("rows.csv", "rows.tracks.csv", "rows.segments.csv", "rows.summary.json", "a.mp4")
    earlier = {name: (tmp_path / name).read_bytes() for name in names}
    done = emopipe(cut, *options)
    one_line_error(done, 8, "stopped at frame")
    assert done.stderr.count("rows are in") == 1, done.stderr  # said once (the rows were committed once)
    assert {name: (tmp_path / name).read_bytes() for name in names} == earlier  # every earlier file untouched
    assert len(rows(tmp_path / "rows.csv.partial")) >= 3  # this run's rows, video and summary beside them
    summary = json.loads((tmp_path / "rows.summary.json.partial").read_text())
    assert summary["ended_early"] and summary["outputs"]["rows"] == str(tmp_path / "rows.csv.partial")
    assert summary["outputs"]["annotated_video"] == str(tmp_path / "a.partial.mp4")
    video = cv2.VideoCapture(str(tmp_path / "a.partial.mp4"))
    assert int(video.get(cv2.CAP_PROP_FRAME_COUNT)) == summary["frames"]


def test_a_run_cut_short_never_replaces_an_earlier_report_or_summary_even_with_rows_of_a_new_name(
        tmp_path, checkpoints, models_home):
    clip = moving_face_video(tmp_path / "whole.avi", frames=20, empty=None)
    cut = tmp_path / "cut.avi"
    cut.write_bytes(clip.path.read_bytes()[: len(clip.path.read_bytes()) // 2])
    options = ("--detector", "blazeface", "--weights", checkpoints[8], "--device", "cpu", "--batch-size", "2",
               "--report", tmp_path / "r.html", "--summary", tmp_path / "s.json")
    assert emopipe(clip.path, *options, "-o", tmp_path / "good.csv", "--max-frames", "4").returncode == 0
    earlier = {p.name: p.read_bytes() for p in [tmp_path / "r.html", tmp_path / "s.json",
                                                *(tmp_path / "r.thumbnails").iterdir()]}
    one_line_error(emopipe(cut, *options, "-o", tmp_path / "new.csv"), 8, "stopped at frame")
    assert {p.name: p.read_bytes() for p in [tmp_path / "r.html", tmp_path / "s.json",
                                             *(tmp_path / "r.thumbnails").iterdir()]} == earlier  # untouched
    summary = json.loads((tmp_path / "s.json.partial").read_text())  # this run's beside them, all of them
    assert summary["ended_early"] and summary["outputs"]["rows"] == str(tmp_path / "new.csv.partial")
    assert not (tmp_path / "new.csv").exists()  # (beside the earlier page, they would not be of one run)
    assert summary["outputs"]["report"] == str(tmp_path / "r.partial.html")
    assert summary["outputs"]["summary"] == str(tmp_path / "s.json.partial")
    assert "cut.avi" in (tmp_path / "r.partial.html").read_text() and (tmp_path / "r.partial.thumbnails").is_dir()


ONE_RUN = ("rows.csv", "rows.tracks.csv", "rows.segments.csv", "rows.summary.json", "a.mp4")  # -o rows.csv, --annotate


@pytest.fixture(scope="module")
def complete_and_cut(checkpoints, shared_dir, tmp_path_factory) -> tuple[Path, Path, dict[str, str]]:
    """A complete run's files (ONE_RUN) in a folder; a clip cut in the middle (exit 8); the environment."""
    base = tmp_path_factory.mktemp("complete-and-cut")
    for f in (shared_dir / "models" / "blazeface").glob("*.[pn][tp]*"):
        (base / f.name).write_bytes(f.read_bytes())
    env = {**os.environ, "EMOPIPE_HOME": str(base)}
    clip = moving_face_video(base / "whole.avi", frames=20, empty=None)
    cut = base / "cut.avi"
    cut.write_bytes(clip.path.read_bytes()[: len(clip.path.read_bytes()) // 2])
    (base / "out").mkdir()
    done = emopipe(clip.path, *one_source_options(checkpoints, base / "out"), "--max-frames", "4", env=env)
    assert done.returncode == 0, done.stderr
    return base / "out", cut, env


def one_source_options(checkpoints: dict[int, Path], folder: Path) -> tuple[object, ...]:
    return ("--detector", "blazeface", "--weights", checkpoints[8], "--device", "cpu", "--batch-size", "2",
            "-o", folder / "rows.csv", "--annotate", folder / "a.mp4")


@pytest.mark.parametrize("left", [("a.mp4",), ("rows.tracks.csv", "rows.segments.csv"), ("rows.summary.json",)],
                         ids=["annotated-video", "tracks-and-segments", "summary"])
def test_a_run_cut_short_with_rows_of_a_new_name_keeps_every_earlier_file_and_puts_all_of_its_own_beside_them(
        left, complete_and_cut, tmp_path, checkpoints):
    # what an earlier complete run left, its rows gone: a run cut short took the rows' name, replaced the earlier
    # tracks and segments with its own, and left the earlier video and summary under their names beside them
    earlier_run, cut, env = complete_and_cut
    for name in left:
        shutil.copy(earlier_run / name, tmp_path)
    earlier = {name: (tmp_path / name).read_bytes() for name in left}
    one_line_error(emopipe(cut, *one_source_options(checkpoints, tmp_path), env=env), 8, "stopped at frame")
    assert {name: (tmp_path / name).read_bytes() for name in left} == earlier  # untouched
    assert {p.name for p in tmp_path.iterdir()} & set(ONE_RUN) == set(left)  # no file of this run under a final name
    summary = json.loads((tmp_path / "rows.summary.json.partial").read_text())  # all of them beside, named here
    assert summary["outputs"] == {"rows": str(tmp_path / "rows.csv.partial"),
                                  "summary": str(tmp_path / "rows.summary.json.partial"),
                                  "annotated_video": str(tmp_path / "a.partial.mp4")}
    assert len(rows(tmp_path / "rows.csv.partial")) == summary["faces"] >= 3
    assert summary["tracks"]  # (its track summaries are in the summary, not in a tracks file beside the rows)


def test_a_checkpoint_whose_outputs_are_not_numbers_is_a_weights_error(tmp_path, checkpoints, models_home):
    import torch

    state = torch.load(checkpoints[8], map_location="cpu")
    state["module.emo_fc_2.3.bias"][8] = float("nan")  # the valence output (official keys: DataParallel's)
    broken = tmp_path / "nan.pth"
    torch.save(state, broken)
    clip = moving_face_video(tmp_path / "two.mp4", frames=2, empty=None)
    done = emopipe(clip.path, "--detector", "blazeface", "--weights", broken, "--device", "cpu",
                   "-o", tmp_path / "rows.csv")
    one_line_error(done, 6, "not a number", "frame 0")


@pytest.mark.parametrize("earlier", [False, True], ids=["fresh", "beside-an-earlier-tracks-file"])
def test_a_run_that_fails_keeps_its_rows_and_video_together(earlier, tmp_path, checkpoints, models_home):
    import torch

    state = torch.load(checkpoints[8], map_location="cpu")
    state["module.emo_fc_2.3.bias"][8] = float("nan")  # the run fails at its first face (exit 6)
    broken = tmp_path / "nan.pth"
    torch.save(state, broken)
    clip = moving_face_video(tmp_path / "two.mp4", frames=2, empty=None)
    if earlier:
        (tmp_path / "rows.tracks.csv").write_text("an earlier run's")
    done = emopipe(clip.path, "--detector", "blazeface", "--weights", broken, "--device", "cpu",
                   "-o", tmp_path / "rows.csv", "--annotate", tmp_path / "a.mp4")
    one_line_error(done, 6, "not a number")
    written = {p.name for p in tmp_path.iterdir()} - {"nan.pth", "two.mp4", "models"}
    # fresh: both take their names (once the video was removed right after its rename, as if an earlier run's);
    # beside an earlier file: both stay beside it, and it is untouched (it was removed, and nothing written instead)
    assert written == ({"rows.csv.partial", "a.partial.mp4", "rows.tracks.csv"} if earlier else {"rows.csv", "a.mp4"})
    assert not earlier or (tmp_path / "rows.tracks.csv").read_text() == "an earlier run's"


def test_zero_frame_video(tmp_path):
    empty = tmp_path / "zero.avi"
    writer = cv2.VideoWriter(str(empty), cv2.VideoWriter_fourcc(*"MJPG"), 25.0, (64, 64))
    writer.release()
    one_line_error(emopipe(empty, "-o", tmp_path / "rows.csv"), 4, "zero.avi")


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_ctrl_c_finishes_the_files(stop, tmp_path, checkpoints, models_home):
    clip = moving_face_video(tmp_path / "long.mp4", frames=60, empty=None)
    out = tmp_path / "rows.csv"
    # with a long metrics linger: a signal mid-run ends the run and skips the linger (docker stop must not
    # have to SIGKILL it); if it lingered, communicate() below would time out long before the 600 s
    process = subprocess.Popen([sys.executable, "-m", "emopipe", str(clip.path), "--detector", "blazeface",
                                "--weights", str(checkpoints[8]), "--device", "cpu", "-o", str(out),
                                "--annotate", str(tmp_path / "a.mp4"), "--metrics-port", "0",
                                "--metrics-linger", "600"], cwd=REPO, stderr=subprocess.PIPE, text=True,
                               preexec_fn=interruptible)
    deadline = time.monotonic() + 300
    partial = out.with_name(out.name + ".partial")  # rows reach the disk under this name until the run ends
    while time.monotonic() < deadline and (not partial.exists() or len(partial.read_text().splitlines()) < 3):
        time.sleep(0.2)
    process.send_signal(stop)
    stderr = process.communicate(timeout=120)[1]
    assert process.returncode == 130, stderr
    assert "Traceback" not in stderr and "interrupted" in stderr
    written = rows(out)
    assert 2 <= len(written) < 60 and all(len(r) == len(written[0]) for r in written)  # whole rows only
    summary = json.loads((tmp_path / "rows.summary.json").read_text())
    assert summary["interrupted"] and summary["faces"] == len(written)
    video = cv2.VideoCapture(str(tmp_path / "a.mp4"))  # closed properly: readable, as many frames as processed
    assert int(video.get(cv2.CAP_PROP_FRAME_COUNT)) == summary["frames"]


@pytest.mark.parametrize("signals", [[signal.SIGTERM], [signal.SIGINT, signal.SIGINT],
                                     [signal.SIGTERM, signal.SIGTERM]],
                         ids=["sigterm-while-starting", "ctrl-c-twice", "sigterm-twice"])
def test_signals_at_any_moment_exit_130_never_by_the_signal(signals, moving, tmp_path, checkpoints, models_home):
    # SIGTERM during start-up (before the run's own handler) killed the process by the signal, and so could a
    # second Ctrl-C landing in the interpreter's shutdown: `docker stop` and impatient users get 130 instead
    process = subprocess.Popen([sys.executable, "-m", "emopipe", str(moving.path), "--detector", "blazeface",
                                "--weights", str(checkpoints[8]), "--device", "cpu", "-o", str(tmp_path / "rows.csv")],
                               cwd=REPO, stderr=subprocess.PIPE, text=True, preexec_fn=interruptible)
    first = process.stderr.readline()
    assert "starting" in first, first  # the command line handles signals from here on
    for stop in signals:
        process.send_signal(stop)
    stderr = first + process.communicate(timeout=120)[1]
    assert process.returncode == 130, stderr
    assert "Traceback" not in stderr
    assert not (tmp_path / "rows.csv").exists() or len(rows(tmp_path / "rows.csv")) < moving.frame_count


ENDING = """
import atexit, sys, threading, time
from concurrent.futures import ThreadPoolExecutor
from emopipe.cli import app

class Loud:
    def __del__(self):
        print("module unloaded", flush=True)

kept = Loud()  # a module global: only Python's own shutdown deletes it
atexit.register(print, "exit handler ran", flush=True)
threading.Thread(target=lambda: (time.sleep(0.5), print("thread finished", flush=True))).start()
pool = ThreadPoolExecutor(2)  # used and left open, as the frame copiers' pool is: its idle workers are not daemons
pool.submit(print, "pool used", flush=True).result()
app._run_command = lambda argv=None: 7  # what the command returned (main and run_and_exit run it)
app.run_and_exit() if sys.argv[1] == "command" else sys.exit(app.main())
"""


@pytest.mark.parametrize("ending", ["command", "python"])
def test_the_command_ends_after_its_threads_and_exit_handlers_without_unloading_every_module(ending):
    done = subprocess.run([sys.executable, "-c", ENDING, ending], capture_output=True, text=True, timeout=120)
    assert done.returncode == 7, done.stderr
    said = done.stdout.splitlines()
    # (a thread pool left open held the command's exit for ever: a GPU folder run decoding on the CPU, s39a)
    assert said[:3] == ["pool used", "thread finished", "exit handler ran"], said
    # Python's own exit (the control) goes on to unload the modules; the command skips that (over a second)
    assert ("module unloaded" in said) == (ending == "python"), said


LETTING_GO = """
import sys, types
from emopipe.cli import app, run

analyzer = types.SimpleNamespace(close=lambda: print("engines let go", flush=True))
app._run_command = lambda argv=None: run._let_go(analyzer) or 0  # how each kind of run ends
app.run_and_exit() if sys.argv[1] == "command" else sys.exit(app.main())
"""


@pytest.mark.parametrize("ending", ["command", "python"])
def test_the_command_leaves_its_engines_to_the_process_end_and_main_lets_them_go(ending):
    # (letting them go is a full collection of the heap: for nothing when the process ends next; main() called in a
    # process of yours gives their memory back)
    done = subprocess.run([sys.executable, "-c", LETTING_GO, ending], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert ("engines let go" in done.stdout) == (ending == "python"), done.stdout


CRASHING = """
import os, signal, sys
from emopipe.cli import app
app._run_command = lambda argv=None: os.kill(os.getpid(), signal.SIGSEGV)  # a library's crash mid-run, as it were
app.run_and_exit() if sys.argv[1] == "command" else sys.exit(app.main())
"""


@pytest.mark.parametrize("ending", ["command", "python"])
def test_the_command_prints_every_threads_stack_when_it_crashes(ending):
    # (for a bug report: a native crash otherwise leaves only the shell's "Segmentation fault"); main() called in a
    # process of yours leaves that process's crash handling as it is
    env = {k: v for k, v in os.environ.items() if k != "PYTHONFAULTHANDLER"}  # (Python's own switch for it: off)
    done = subprocess.run([sys.executable, "-c", CRASHING, ending], capture_output=True, text=True, timeout=120,
                          env=env)
    assert done.returncode == -signal.SIGSEGV
    printed = "Fatal Python error: Segmentation fault" in done.stderr
    assert printed == (ending == "command"), done.stderr
    if printed:
        assert "in run_and_exit" in done.stderr  # where it was


HANGING = """
import atexit, threading
from emopipe.cli import app
app.EXIT_GRACE_S = 1.0
hung = threading.Event()
atexit.register(hung.wait)  # an exit handler that never returns (a native decoder's end, as it were)
app._run_command = lambda argv=None: 0
app.run_and_exit()
"""


def test_a_command_whose_exit_hangs_prints_every_threads_stack_and_ends():
    # (was: the process waited for ever once its outputs were committed; session 38 saw a GPU run do so)
    done = subprocess.run([sys.executable, "-c", HANGING], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert "Timeout (0:00:01)!" in done.stderr and "in run_and_exit" in done.stderr, done.stderr


def test_the_installed_command_and_python_m_emopipe_end_that_way():
    from importlib.metadata import entry_points

    assert entry_points(group="console_scripts")["emopipe"].value == "emopipe.cli:run_and_exit"
    assert "run_and_exit()" in (REPO / "emopipe" / "__main__.py").read_text()


def _with_stdout_closed(*args: object, env: dict[str, str]) -> subprocess.CompletedProcess:
    """The command with a standard output whose reader has gone before its first write (as `| head -1` once
    head has its line): the outcome does not depend on timing."""
    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.run([sys.executable, "-m", "emopipe", *map(str, args)], stdout=write,
                              stderr=subprocess.PIPE, text=True, cwd=REPO, env=env, timeout=600)
    finally:
        os.close(write)


@pytest.mark.parametrize("buffered", [True, False])
# (a command's --help, and a subcommand's, is argparse's printing and then SystemExit(0): argparse swallowed the
# failed write, so it exited 0 unbuffered, and buffered once the help outgrew the buffer: `run --help`)
@pytest.mark.parametrize("args", [["models", "list"], ["--help"], ["--version"], ["run", "--help"],
                                  ["models", "list", "--help"]])
def test_a_closed_standard_output_ends_the_command_quietly_with_141(args, buffered, tmp_path):
    env = {**os.environ, "EMOPIPE_HOME": str(tmp_path)}
    env.pop("PYTHONUNBUFFERED", None)
    if not buffered:
        env["PYTHONUNBUFFERED"] = "1"
    done = _with_stdout_closed(*args, env=env)
    assert (done.returncode, done.stderr) == (141, "")  # no traceback, no "internal error"


def test_rows_to_a_closed_standard_output_end_the_run_quietly_with_141(tmp_path, checkpoints, models_home):
    clip = moving_face_video(tmp_path / "empty.mp4", frames=2, empty=(0, 2))
    done = _with_stdout_closed(clip.path, "--detector", "blazeface", "--weights", checkpoints[8], "--device", "cpu",
                               "-o", "-", env=os.environ.copy())
    assert done.returncode == 141, done.stderr
    assert "Traceback" not in done.stderr and "error" not in done.stderr, done.stderr


def test_a_broken_pipe_elsewhere_is_still_an_internal_error(monkeypatch, capsys):
    """Only standard output's reader going away ends quietly: another pipe breaking is a bug, said as one."""
    from emopipe.cli import app, models

    def run(args):  # type: ignore[no-untyped-def]
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(app, "_command", lambda name: (models.build_parser, run))
    monkeypatch.setattr(app, "_handle_signals", lambda: None)
    assert app.main(["models", "list"]) == 1
    assert "internal error: BrokenPipeError" in capsys.readouterr().err


def _a_handler_of_the_callers(signum, frame):  # type: ignore[no-untyped-def]
    pass


@pytest.mark.parametrize("handlers", [(signal.default_int_handler, signal.SIG_DFL),
                                      (_a_handler_of_the_callers, _a_handler_of_the_callers)],
                         ids=["pythons-own", "the-callers"])
def test_main_in_process_gives_back_the_signal_handlers_it_found(handlers, tmp_path, monkeypatch,
                                                                 python_signal_handlers):
    """The command line's handler exits the process at a second signal: a program (or test) that calls main is
    not left with it. (A usage error found after the handlers are set: no model, no network.)"""
    from emopipe.cli import app

    monkeypatch.setenv("EMOPIPE_HOME", str(tmp_path))
    monkeypatch.setattr(app, "_configure_logging", lambda debug, quiet: None)  # (the test's logging left as it is)
    for signum, handler in zip((signal.SIGINT, signal.SIGTERM), handlers):
        signal.signal(signum, handler)
    assert app.main(["models", "fetch", "no-such-model"]) == 2
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == handlers


def test_main_in_process_gives_back_the_emopipe_logger_as_it_found_it(tmp_path, monkeypatch, capsys,
                                                                     python_signal_handlers):
    """The command points the "emopipe" logger at standard error at its level; a program that calls main keeps its
    own logging set-up after (here: a handler of its own, DEBUG, propagating)."""
    import logging

    from emopipe.cli import app

    monkeypatch.setenv("EMOPIPE_HOME", str(tmp_path))
    logger = logging.getLogger("emopipe")
    mine = logging.NullHandler()
    monkeypatch.setattr(logger, "handlers", [mine])
    monkeypatch.setattr(logger, "level", logging.DEBUG)
    monkeypatch.setattr(logger, "propagate", True)
    during: list[list[logging.Handler]] = []
    real = app._configure_logging

    def configure(debug: bool, quiet: bool) -> None:
        real(debug, quiet)
        during.append(list(logger.handlers))

    monkeypatch.setattr(app, "_configure_logging", configure)
    assert app.main(["models", "fetch", "no-such-model"]) == 2
    assert during and during[0] != [mine]  # the command's own handler while it ran
    assert "emopipe: error" in capsys.readouterr().err
    assert (logger.handlers, logger.level, logger.propagate) == ([mine], logging.DEBUG, True)


class _Failed(Exception):
    pass


def _interrupted_and_finished(args):  # type: ignore[no-untyped-def]
    return 130


def _interrupted(args):  # type: ignore[no-untyped-def]
    raise KeyboardInterrupt


def _usage_error(args):  # type: ignore[no-untyped-def]
    from emopipe.errors import UsageError

    raise UsageError("no")


def _a_bug(args):  # type: ignore[no-untyped-def]
    raise _Failed


@pytest.mark.parametrize("run, code", [(_interrupted_and_finished, 130), (_interrupted, 130), (_usage_error, 2),
                                       (_a_bug, None)], ids=["interrupted-and-finished", "interrupted",
                                                             "usage-error", "a-bug-raised-with-debug"])
def test_main_in_process_gives_back_the_handlers_and_disarms_however_the_run_ends(run, code, monkeypatch, capsys,
                                                                                  python_signal_handlers):
    """An interrupted run arms the command line's handler (its next signal exits the process at once): the
    handlers main gives back, and a later main's run, start unarmed."""
    from emopipe.cli import app, models

    during = []

    def recording(args):  # type: ignore[no-untyped-def]
        during.append(signal.getsignal(signal.SIGINT))
        return run(args)

    monkeypatch.setattr(app, "_command", lambda name: (models.build_parser, recording))
    monkeypatch.setattr(app, "_configure_logging", lambda debug, quiet: None)
    if code is None:
        with pytest.raises(_Failed):
            app.main(["models", "--debug", "list"])
    else:
        assert app.main(["models", "list"]) == code
    assert during == [app._on_signal]  # (what is given back below was replaced for the run)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert signal.getsignal(signal.SIGTERM) is signal.default_int_handler
    assert not app._INTERRUPTED.is_set()


def test_camera_timeouts_given_to_a_run_of_files_are_said_to_be_unused(tmp_path, caplog):
    # --open-timeout 3 on a video was taken without a word, and nothing used it
    from emopipe.cli.run import _say_live_options_unused
    from emopipe.config import RunConfig

    def said(**options) -> str:
        caplog.clear()
        with caplog.at_level("WARNING", logger="emopipe"):
            _say_live_options_unused(RunConfig(**options))
        return caplog.text

    assert "--open-timeout, --reconnect-timeout: for cameras and streams; this run reads files" in said(
        source="a.mp4", open_timeout=3.0, reconnect_timeout=9.0)
    assert "--read-timeout: for cameras" in said(sources=("a.mp4", "b.mkv"), read_timeout=2.0)
    assert said(source="a.mp4") == ""  # (the defaults: nothing given)
    assert said(source="rtsp://cam/live", open_timeout=3.0) == ""
    assert said(sources=("a.mp4", "http://cam/feed.mjpg"), read_timeout=2.0) == ""
    assert said(webcam=0, open_timeout=3.0) == ""


def test_the_help_names_every_exit_code_of_the_table():
    # the help's list had drifted from the codes' table (errors.py, the README's): 1, 10 and 141 were missing
    import emopipe.errors
    from emopipe.cli.run import build_parser

    table = re.findall(r"^(\d+) {2,}", emopipe.errors.__doc__ or "", flags=re.MULTILINE)
    assert {"0", "1", "9", "10", "130", "141"} <= set(table)
    described = build_parser().description or ""
    assert [code for code in table if not re.search(rf"\b{code} [a-z]", described)] == []


@pytest.mark.parametrize("argv", [["models"], ["models", "list"], ["models", "fetch"], ["bench"], ["export-onnx"],
                                  ["report"]])
def test_every_commands_help_lists_its_exit_codes(argv, capsys):
    # (was: `emopipe bench --help`, `emopipe models list --help` and `... fetch --help` listed none)
    from emopipe.cli import app

    with pytest.raises(SystemExit) as exited:
        app.main([*argv, "--help"])
    assert exited.value.code == 0
    helped = " ".join(capsys.readouterr().out.split())
    assert re.search(r"Exit codes: 0 [a-z]", helped), helped
    assert re.search(r"\b2 (bad options|an unknown model)", helped) or argv == ["models", "list"], helped


def test_a_long_many_source_run_in_one_process_on_a_gpu_suggests_worker_processes(caplog):
    from emopipe.cli.run import SUGGEST_WORKERS_AFTER_S, _suggest_workers

    def said(device: str, wall_s: float, **run) -> bool:
        caplog.clear()
        with caplog.at_level("INFO", logger="emopipe"):
            _suggest_workers({"processed": 2, "wall_s": wall_s, "run_interrupted": False,
                              "pipeline": {"engine": {"device": device}}, **run})
        return "--processes auto --mps" in caplog.text

    assert said("cuda:0", SUGGEST_WORKERS_AFTER_S)
    assert not said("cuda:0", SUGGEST_WORKERS_AFTER_S - 1)  # a short run: workers would each start up first
    assert not said("cpu", 1000.0)  # (MPS shares a GPU)
    assert not said("cuda:0", 1000.0, run_interrupted=True)
    assert not said("cuda:0", 1000.0, processed=0)  # every source done before: nothing ran
    _suggest_workers({"processed": 1, "wall_s": 1.0})  # (no pipeline: the run loaded nothing)


def test_a_long_video_that_one_process_ran_on_a_gpu_suggests_its_parts_over_worker_processes(tmp_path, caplog):
    # the tip was said after many sources only: `emopipe long.mp4` on one GPU said nothing of --processes, which cuts
    # such a video into parts (a 9-minute video in 10.7 s against 16.9 s on an H200)
    from emopipe.cli.run import SUGGEST_WORKERS_AFTER_S, _suggest_parts
    from emopipe.config import RunConfig
    from emopipe.pipeline.summary import RunSummary

    video = tmp_path / "long.mp4"
    video.write_bytes(b"(a video)")

    def said(seconds: float, device: str = "cuda:0", source: Path = video, interrupted: bool = False,
             **options) -> bool:
        caplog.clear()
        summary = RunSummary(source=str(source), frames=1000, seconds=seconds, interrupted=interrupted,
                             engine={"device": device})
        with caplog.at_level("INFO", logger="emopipe"):
            _suggest_parts(RunConfig(source=str(source), **options), summary)
        return "--processes auto --mps" in caplog.text

    assert said(SUGGEST_WORKERS_AFTER_S)
    assert not said(SUGGEST_WORKERS_AFTER_S - 1)  # a short video: workers would each start up first
    assert not said(1000.0, device="cpu")
    assert not said(1000.0, interrupted=True)
    assert not said(1000.0, source=tmp_path)  # a folder of images is not cut into parts
    for kept_whole in ({"annotate": str(tmp_path / "a.mp4")}, {"smooth": 0.5}, {"max_frames": 10_000},
                       {"split": False}):
        assert not said(1000.0, **kept_whole), kept_whole  # options that keep a video whole


def test_the_gpu_out_of_memory_is_said_as_such_with_what_to_change(monkeypatch, capsys):
    # (was: "emopipe: internal error: OutOfMemoryError: CUDA out of memory. … (rerun with --debug …)", as for a bug)
    import torch

    from emopipe.cli import app, run
    from emopipe.errors import GPU_OUT_OF_MEMORY_EXIT_CODE

    def out_of_memory(args):  # type: ignore[no-untyped-def]
        # (as the H200 said it, on one line; session 40)
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 292.97 GiB. GPU 0 has a total capacity of "
                                     "139.80 GiB of which 138.90 GiB is free. Including non-PyTorch memory, this "
                                     "process has 910.15 MiB memory in use. Of the allocated memory 69.23 MiB is "
                                     "allocated by PyTorch, and 2.77 MiB is reserved by PyTorch but unallocated.")

    monkeypatch.setattr(app, "_command", lambda name: (run.build_parser, out_of_memory))
    monkeypatch.setattr(app, "_handle_signals", lambda: None)
    assert app.main(["clip.mp4", "--batch-size", "100000"]) == GPU_OUT_OF_MEMORY_EXIT_CODE == 10  # (was 1, a bug's)
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line == ("emopipe: error: the GPU ran out of memory (CUDA out of memory. Tried to allocate 292.97 GiB. GPU "
                    "0 has a total capacity of 139.80 GiB of which 138.90 GiB is free.); give a smaller --batch-size "
                    "or --detect-batch, run fewer --processes on it, or free what other programs hold")
    def no_memory_left(args):  # type: ignore[no-untyped-def]
        # (a kernel or the context on a GPU other programs filled: PyTorch's allocator not asked; H200, session 41)
        raise torch.AcceleratorError("CUDA error: out of memory\nSearch for `cudaErrorMemoryAllocation' in "
                                     "https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html")

    monkeypatch.setattr(app, "_command", lambda name: (run.build_parser, no_memory_left))
    assert app.main(["clip.mp4"]) == GPU_OUT_OF_MEMORY_EXIT_CODE
    assert capsys.readouterr().err.startswith("emopipe: error: the GPU ran out of memory (CUDA error: out of memory)")
    monkeypatch.setattr(app, "_command", lambda name: (run.build_parser, lambda args: 1 / 0))  # a bug is still one
    assert app.main(["clip.mp4"]) == 1
    assert "internal error: ZeroDivisionError" in capsys.readouterr().err
