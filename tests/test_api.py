"""The Python API: emopipe.analyze and emopipe.Analyzer give the command line's rows, and RunConfig resolves
every default in one place."""

from __future__ import annotations

import csv
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

import emopipe
from emopipe.config import RunConfig
from emopipe.errors import CheckpointError, OutputError, UsageError
from emopipe.observe.metrics import PipelineMetrics
from tests.support.rows import rows
from tests.support.synth import moving_face_video

REPO = Path(__file__).resolve().parents[1]


# -- RunConfig ----------------------------------------------------------------------------------------------

def test_defaults_are_resolved_for_the_device_and_the_kind_of_source():
    files_gpu = RunConfig(source="v.mp4").resolved("cuda")
    assert (files_gpu.detector, files_gpu.batch_size, files_gpu.precision, files_gpu.detect_batch) == \
        ("sfd", 64, "fp16", 8)
    assert files_gpu.output == "v.emotions.csv" and files_gpu.summary == "v.emotions.summary.json"
    files_cpu = RunConfig(source="v.mp4", detect_every=3).resolved("cpu")
    assert (files_cpu.batch_size, files_cpu.precision, files_cpu.detect_batch) == (1, "fp32", 1)
    assert RunConfig(source="v.mp4", detect_every=3).resolved("cuda").detect_batch == 3
    # BlazeFace's small fixed input: larger detector calls for files (fewer host steps a frame)
    assert RunConfig(source="v.mp4", detector="blazeface_back").resolved("cuda").detect_batch == 32
    assert RunConfig(source="v.mp4", detector="blazeface", detect_every=3).resolved("cuda").detect_batch == 11
    assert RunConfig(source="v.mp4", detector="blazeface", detect_batch=4).resolved("cuda").detect_batch == 4
    live = RunConfig(source="rtsp://admin:pw@cam/s", annotate="rec.mp4").resolved("cuda")
    assert (live.detector, live.batch_size, live.detect_batch, live.metrics_port) == ("blazeface", 1, 1, 9478)
    assert (live.record, live.annotate) == ("rec.mp4", None)  # live: --annotate records the annotated stream
    assert "pw" not in live.output
    assert RunConfig(webcam=2).resolved("cpu").output == "webcam2.emotions.csv"
    assert RunConfig(source="v.mp4", output="-").resolved("cpu").summary is None


@pytest.mark.parametrize(("options", "message"), [
    ({"max_frames": 0}, "--max-frames"),
    ({"start": math.inf}, "finite"),
    ({"start": 5.0, "end": 2.0}, "--end"),
    ({"threshold": 1.5}, "--threshold"),
    ({"detector": "yolo"}, "sfd"),
    ({"backend": "tensorflow"}, "torch"),
    ({"classes": 7}, "8"),
    ({"webcam": -1}, "--webcam"),
    ({"open_timeout": 0.0}, "--open-timeout"),
    ({"backend": "onnxruntime", "compile": "default"}, "--compile .* is for the torch backend"),
    # (was: a string or a bool from Python raised TypeError deep in the checks, or was taken as 1)
    ({"threshold": "0.5"}, "--threshold must be a number, got '0.5'"),
    ({"start": "abc"}, "--start must be a number"),
    ({"batch_size": True}, "--batch-size must be a whole number, got True"),
    # (was: NaN and infinity a bare ValueError / OverflowError, a fraction kept, any value taken for a bool, a
    # device or a video writer by any name accepted until used; QA pass, session 39)
    ({"batch_size": math.nan}, "--batch-size must be a whole number, got nan"),
    ({"max_frames": math.inf}, "--max-frames must be a whole number, got inf"),
    ({"webcam": 0.5}, "--webcam must be a whole number, got 0.5"),
    ({"ray_retries": 1.5}, "--ray-retries must be a whole number"),
    ({"landmarks": "no"}, "--landmarks is True or False, got 'no'"),
    ({"no_warmup": 1}, "--no-warmup is True or False, got 1"),
    ({"device": 123}, "--device must be a string, got 123"),
    ({"video_writer": "gstreamer"}, "unknown video_writer 'gstreamer'; choose from auto, ffmpeg, opencv"),
    ({"smooth": 0}, "--smooth must be above 0"),  # (was: taken as no smoothing, where the formula holds values)
    # (was: an internal error once the weights had loaded — an allocation of hundreds of GB; QA pass, session 40)
    ({"batch_size": 1000000}, "--batch-size must be at most 4096, got 1000000"),
    ({"detect_batch": 10 ** 20}, "--detect-batch must be at most 4096"),
])
def test_bad_options_are_usage_errors_naming_the_option(options, message):
    with pytest.raises(UsageError, match=message):
        RunConfig(source="v.mp4", **options)


def test_a_whole_number_given_as_a_float_is_held_as_the_int():
    config = RunConfig(source="v.mp4", batch_size=64.0, max_frames=3.0)
    assert (config.batch_size, config.max_frames) == (64, 3) and type(config.batch_size) is int


@pytest.mark.parametrize("output", [".", "./", "/"])
def test_a_folder_given_as_the_rows_file_is_refused_in_one_line(output):
    # (was: "internal error: ValueError: PosixPath('.') has an empty name", exit 1; "-o .." said this already)
    config = RunConfig(source="v.mp4", output=output).resolved("cpu")
    with pytest.raises(OutputError, match=f"^cannot write the rows {re.escape(output)}: it is a directory; give a"):
        config.check_outputs(earlier=False)


def test_rows_to_a_device_or_pipe_name_no_files_after_them(tmp_path):
    # (was: -o /dev/null wrote /dev/null.summary.json, /dev/null.tracks.csv and /dev/null.segments.csv in /dev)
    pipe = tmp_path / "rows"
    os.mkfifo(pipe)
    for output in ("/dev/null", str(pipe)):
        config = RunConfig(source="v.mp4", output=output).resolved("cpu")
        assert config.summary is None and config.outputs() == {"rows": output}
        with pytest.raises(UsageError, match=f"--annotate mp4: with -o {re.escape(output)} the video has no rows"):
            RunConfig(source="v.mp4", output=output, annotate="mp4").resolved("cpu")
    given = RunConfig(source="v.mp4", output="/dev/null", summary=str(tmp_path / "s.json")).resolved("cpu")
    assert given.summary == str(tmp_path / "s.json")  # (one asked for is written)
    assert RunConfig(source="v.mp4", output=str(tmp_path / "r.csv")).resolved("cpu").summary == str(
        tmp_path / "r.summary.json")


def test_options_that_do_not_fit_together_are_refused_when_resolved():
    with pytest.raises(UsageError, match="--show"):
        RunConfig(source="v.mp4", show=True).resolved("cpu")
    with pytest.raises(UsageError, match="--start"):
        RunConfig(source="rtsp://cam/s", start=3.0).resolved("cpu")
    with pytest.raises(UsageError, match="unknown option"):
        RunConfig.from_options(detectr="sfd")


def test_outputs_that_are_inputs_or_each_other_are_refused_before_any_work(tmp_path):
    video = tmp_path / "v.mp4"
    video.write_bytes(b"not read")
    (tmp_path / "link.mp4").hardlink_to(video)
    cases = [
        {"annotate": str(video)},
        {"output": str(tmp_path / "link.mp4"), "format": "csv"},
        {"output": str(tmp_path / "s.csv"), "summary": str(tmp_path / "s.csv")},
    ]
    for options in cases:
        config = RunConfig(source=str(video), **options).resolved("cpu")
        with pytest.raises((UsageError, OutputError)):
            config.check_outputs()
    for bad in ({"annotate": str(tmp_path / "x.gif")}, {"output": str(tmp_path / "x.txt")},
                {"output": "/proc/emopipe-test.csv"}, {"annotate": str(tmp_path / "noext")}):
        with pytest.raises((UsageError, OutputError)):
            RunConfig(source=str(video), **bad).resolved("cpu").check_outputs()


@pytest.mark.parametrize(("options", "name", "message"), [
    ({"annotate": "clip.mp4"}, "clip.partial.mp4", "the annotated video's temporary name clip.partial.mp4"),
    ({"output": "rows.csv"}, "rows.csv.partial", "the rows' temporary name rows.csv.partial"),
    ({"output": "rows.csv"}, "rows.summary.json.partial", "the summary's temporary name rows.summary.json.partial"),
    ({"summary": "s.json"}, ".s.json.0.part", "the summary's temporary name .s.json.0.part"),
    ({"output": "rows.csv"}, ".rows.tracks.csv.15.part", "the tracks' temporary name .rows.tracks.csv.15.part"),
    ({"output": "rows.csv"}, ".rows.segments.csv.3.part", "the segments' temporary name"),
    ({"report": "r.html"}, "r.partial.html", "the report's temporary name r.partial.html"),
    ({"report": "r.html"}, ".r.partial.html.0.part", "the report's temporary name .r.partial.html.0.part"),
    ({"report": "r.html"}, "r.partial.thumbnails/v.mp4", "the report's thumbnails folder r.partial.thumbnails is"),
    ({"report": "r.html"}, ".r.thumbnails.0.part/v.mp4", "the report's thumbnails folder .r.thumbnails.0.part is"),
    # the hidden lock file a run holds for each output while it runs, then removes (emopipe.io.records.hold_outputs)
    ({"output": "rows.csv"}, ".rows.csv.lock", "the rows' lock file .rows.csv.lock"),
    ({"annotate": "clip.mp4"}, ".clip.mp4.lock", "the annotated video's lock file .clip.mp4.lock"),
])
def test_no_name_an_output_is_written_under_first_is_an_input(tmp_path, monkeypatch, options, name, message):
    # (was: `emopipe clip.partial.mp4 --annotate clip.mp4` wrote the annotated video over its input, then renamed it
    # clip.mp4: exit 0, the input gone; only the outputs' final names were checked)
    monkeypatch.chdir(tmp_path)
    source = tmp_path / name
    source.parent.mkdir(exist_ok=True)
    source.write_bytes(b"the input")
    Path("link.mp4").symlink_to(source)
    for given in ({"source": name}, {"source": "link.mp4"}, {"source": "other.mp4", "weights": name}):
        with pytest.raises(UsageError, match="^" + re.escape(message)) as refused:
            RunConfig(**given, **options).resolved("cpu").check_outputs()
        assert refused.value.exit_code == 2 and "\n" not in str(refused.value)
    assert source.read_bytes() == b"the input"
    RunConfig(source="other.mp4", **options).resolved("cpu").check_outputs()  # (the names alone are fine)


def test_a_live_runs_names_are_checked_against_its_weights(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("cam.emotions.summary.json.partial").write_bytes(b"weights")
    with pytest.raises(UsageError, match=r"^the summary's temporary name cam\.emotions\.summary\.json\.partial is an "
                                         "input"):
        RunConfig(webcam=0, output="cam.emotions.csv", record="rec.mkv",
                  weights="cam.emotions.summary.json.partial").resolved("cpu").check_outputs()
    with pytest.raises(UsageError, match=r"^the recording output rec\.mkv is an input"):
        RunConfig(webcam=0, record="rec.mkv", weights="rec.mkv").resolved("cpu").check_outputs()


def test_the_default_rows_name_follows_the_format():
    assert RunConfig(source="v.mp4", format="jsonl").resolved("cpu").output == "v.emotions.jsonl"
    assert RunConfig(source="v.mp4", format="csv").resolved("cpu").output == "v.emotions.csv"
    live = RunConfig(webcam=0, format="jsonl").resolved("cpu")
    assert (live.output, live.summary) == ("webcam0.emotions.jsonl", "webcam0.emotions.summary.json")


@pytest.mark.parametrize(("output", "fmt"), [("x.csv", "jsonl"), ("x.jsonl", "csv"), ("x.NDJSON", "csv")])
def test_a_format_the_output_name_contradicts_is_refused(output, fmt):
    with pytest.raises(UsageError, match=f"--format {fmt} does not fit"):
        RunConfig(source="v.mp4", output=output, format=fmt).resolved("cpu")


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_standard_output_takes_either_format(fmt):
    assert RunConfig(source="v.mp4", output="-", format=fmt).resolved("cpu").format == fmt


def test_a_very_long_input_name_still_gets_a_valid_default_output_name():
    config = RunConfig(source="/data/" + "x" * 246 + ".mp4").resolved("cpu")
    assert len(Path(config.output).name.encode()) <= 255 and len(Path(config.summary).name.encode()) <= 255


def test_an_input_name_that_is_not_utf8_gets_a_default_output_name_as_its_rows_write_it(tmp_path):
    # (was: "internal error: UnicodeEncodeError" for `emopipe $'zz\xe9.mp4'`: its bytes reach Python as surrogates)
    source = os.fsdecode(os.path.join(os.fsencode(str(tmp_path)), b"zz\xe9.mp4"))
    config = RunConfig(source=source).resolved("cpu")
    assert (config.output, config.summary) == ("zz\\xe9.emotions.csv", "zz\\xe9.emotions.summary.json")
    config.check_outputs(earlier=False)  # (names measured and locked as any other)


def test_paths_may_be_pathlib_paths_and_are_held_as_str(tmp_path):
    # (was: a Path output ran the whole source, then its summary failed "PosixPath is not JSON serializable";
    # a Path weights or source, an AttributeError)
    weights = tmp_path / "w.pth"
    weights.write_bytes(b"not read")
    config = RunConfig(source=tmp_path / "v.mp4", output=tmp_path / "o.csv", report=tmp_path / "r.html",
                       summary=tmp_path / "s.json", annotate=tmp_path / "a.mp4", weights=weights,
                       models_dir=tmp_path, sources=[tmp_path / "v.mp4"], list_files=tmp_path / "l.txt")
    resolved = config.resolved("cpu")
    resolved.check_outputs()
    assert json.loads(json.dumps(resolved.as_dict()))["output"] == str(tmp_path / "o.csv")
    assert resolved.weights == str(weights) and resolved.sources == (str(tmp_path / "v.mp4"),)
    assert all(isinstance(path, str) for path in resolved.outputs().values())


def test_one_source_given_alone_is_one_source_not_its_letters(tmp_path, monkeypatch):
    # (was: run_many("vids", "out") ran the sources v, i, d, s; list_files="l.txt" refused the list file "l")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "vids").mkdir()
    (tmp_path / "vids" / "a.mp4").write_bytes(b"not read")
    (tmp_path / "l.txt").write_text("vids/a.mp4\n")
    assert RunConfig(sources="rtsp://cam/s").sources == ("rtsp://cam/s",)
    assert RunConfig.from_options(list_files="l.txt").list_files == ("l.txt",)
    analyzer = emopipe.Analyzer(device="cpu")
    for i, (sources, options) in enumerate([("vids", {}), (Path("vids"), {}), (None, {"list_files": "l.txt"})]):
        plan = analyzer.plan_many(sources, tmp_path / f"out{i}", **options)
        assert [p.uri for p in plan.planned] == ["vids/a.mp4"]
    with pytest.raises(UsageError, match="sources: 3 is not a path or URL"):
        RunConfig(sources=["a.mp4", 3])


# -- the API ------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def clip(tmp_path_factory):
    return moving_face_video(tmp_path_factory.mktemp("api") / "clip.mp4", frames=4, empty=None)


@pytest.mark.slow
def test_analyze_yields_the_same_records_as_the_command_lines_csv(clip, checkpoints, models_home, tmp_path):
    options = {"detector": "blazeface", "weights": str(checkpoints[8]), "device": "cpu", "batch_size": 2}
    records = list(emopipe.analyze(clip.path, **options))
    assert records and all(isinstance(r, emopipe.FaceRecord) for r in records)
    out = tmp_path / "rows.csv"
    done = subprocess.run([sys.executable, "-m", "emopipe", str(clip.path), "--detector", "blazeface", "--weights",
                           str(checkpoints[8]), "--device", "cpu", "--batch-size", "2", "-o", str(out)],
                          capture_output=True, text=True, cwd=REPO, env=os.environ.copy(), timeout=600)
    assert done.returncode == 0, done.stderr
    with open(out, newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == len(records)
    for row, record in zip(rows, records):
        assert (int(row["frame"]), int(row["track_id"]), row["label"]) == (record.frame, record.track_id, record.label)
        assert float(row["timestamp_s"]) == record.timestamp_s  # (the value written: rounded to the microsecond)
        assert float(row["valence"]) == pytest.approx(record.valence, abs=1e-5)
        assert float(row["arousal"]) == pytest.approx(record.arousal, abs=1e-5)
        assert [float(row[k]) for k in ("x1", "y1", "x2", "y2")] == pytest.approx(record.box, abs=0.01)
        for label, p in record.probabilities_by_label.items():
            assert float(row[f"p_{label}"]) == pytest.approx(p, abs=1e-5)


@pytest.mark.slow
def test_analyzes_timestamps_are_the_values_the_rows_file_writes(checkpoints, models_home, tmp_path):
    # (was: 0.03333333333333333 from analyze(), where the rows file writes 0.033333; QA pass)
    clip = moving_face_video(tmp_path / "clip30.mp4", frames=3, fps=30.0, empty=None)  # 1/30 s: no exact float
    with emopipe.Analyzer(detector="blazeface", weights=str(checkpoints[8]), device="cpu") as analyzer:
        records = list(analyzer.analyze(clip.path))
        analyzer.run(clip.path, output=str(tmp_path / "rows.csv"))
    written = rows(tmp_path / "rows.csv")
    assert len(written) == len(records) >= 3 and len({r.timestamp_s for r in records}) == 3
    assert [r.timestamp_s for r in records] == [float(row["timestamp_s"]) for row in written]
    assert [str(r.timestamp_s) for r in records] == [row["timestamp_s"] for row in written]  # printed alike too


@pytest.mark.slow
def test_an_analyzer_warms_up_once_for_several_sources(clip, checkpoints, models_home, tmp_path):
    with emopipe.Analyzer(detector="blazeface", weights=str(checkpoints[8]), device="cpu") as analyzer:
        first = list(analyzer.analyze(clip.path, max_frames=2))
        second = list(analyzer.analyze(clip.path, max_frames=3))
        with pytest.raises(UsageError, match="batch_size"):
            list(analyzer.analyze(clip.path, batch_size=8))
    assert {r.frame for r in first} == {0, 1} and {r.frame for r in second} == {0, 1, 2}
    assert [r.valence for r in second[:len(first)]] == pytest.approx([r.valence for r in first])
    startups = [s.startup for s in analyzer.summaries]
    assert [s["engine_warmups"] for s in startups] == [1, 0]  # the second source reused the warm engines
    assert [s["detector_warmups"] for s in startups] == [1, 0]  # same frame size: the detector too
    assert analyzer.models is None  # closed: the engines (and their GPU memory) are released



def test_later_engines_count_their_first_sources_startup_from_their_own_start(clip, checkpoints, models_home):
    # (was: from `import emopipe`, as the process's first engines do: a service's analyzer made an hour in, or one
    # opened again after close(), said its first source had waited an hour before the load; QA pass)
    import contextlib
    import time

    options = dict(detector="blazeface", weights=str(checkpoints[8]), device="cpu", no_warmup=True)
    emopipe.Analyzer(**options).open().close()  # (engines loaded in this process before the ones below)
    for opened in (False, True):  # the engines loaded by the source's run; by open()
        began = time.perf_counter()
        analyzer = emopipe.Analyzer(**options)
        with analyzer if opened else contextlib.nullcontext():
            list(analyzer.analyze(clip.path, max_frames=1))
        analyzer.close()
        took = time.perf_counter() - began
        said = analyzer.summaries[0].startup
        assert said["load_s"] > 0 and said["engine_warmups"] == 0
        assert 0 <= said["before_load_s"] <= said["first_row_s"] <= took


@pytest.mark.slow
def test_a_later_sources_startup_is_what_that_source_waited_for(clip, checkpoints, models_home, tmp_path):
    # (was: each later source repeated the one-off load and warm-ups, and counted its first row from `import emopipe`:
    # 30 s on an analyzer's 9th source; QA pass)
    import time

    small = moving_face_video(tmp_path / "small.mp4", frames=2, size=(160, 120), empty=None)
    with emopipe.Analyzer(detector="blazeface", weights=str(checkpoints[8]), device="cpu") as analyzer:
        list(analyzer.analyze(clip.path, max_frames=1))
        began = time.perf_counter()
        list(analyzer.analyze(clip.path, max_frames=1))
        second_took = time.perf_counter() - began
        registry = CollectorRegistry()
        analyzer.run(small.path, output=str(tmp_path / "small.csv"),  # frames of a size not warmed yet
                     metrics=PipelineMetrics(registry))
    first, second, third = analyzer.summaries
    # the first source's as the command line's: the load and the first warm-ups, from the import
    said = first.startup
    assert said["load_s"] > 0 and said["before_load_s"] >= 0 and said["engine_warmups"] == 1
    assert said["first_row_s"] > said["before_load_s"] + said["load_s"] + said["warmup_s"] - 1e-3
    assert (first.load_s, first.warmup_s) == pytest.approx((said["load_s"], said["warmup_s"]), abs=1e-4)
    # a later source's: nothing loaded, no warm-up for a size already warm, its first row from its own start
    said = second.startup
    assert (said["load_s"], said["before_load_s"], said["warmup_s"]) == (0.0, None, 0.0)
    assert (said["engine_warmups"], said["detector_warmups"]) == (0, 0) and (second.load_s, second.warmup_s) == (0, 0)
    assert 0 < said["first_row_s"] <= second_took
    assert "startup: load 0.00 s, warmup 0.00 s" in second.describe()
    # one of a new frame size: the detector's warm-up for it, and nothing else
    said = third.startup
    assert (said["load_s"], said["engine_warmups"], said["detector_warmups"]) == (0.0, 0, 1)
    assert said["engine_warmup_s"] == 0 and said["detector_warmup_s"] > 0
    assert said["warmup_s"] == pytest.approx(said["detector_warmup_s"], abs=2e-4)
    assert third.warmup_s == pytest.approx(said["warmup_s"], abs=1e-4)
    assert json.loads((tmp_path / "small.summary.json").read_text())["startup"] == said  # (the file says the same)
    # and its metrics (was: the first run's load and warm-ups, which this run never waited for)
    assert registry.get_sample_value("emopipe_startup_seconds", {"step": "load"}) == 0.0
    assert registry.get_sample_value("emopipe_startup_seconds", {"step": "warmup"}) == pytest.approx(
        said["warmup_s"], abs=2e-4)


@pytest.mark.slow
def test_an_analyzer_opened_for_a_frame_size_warms_the_detector_for_it_with_emonet(clip, checkpoints, models_home):
    width, height = clip.size
    asked: list[str] = []

    def first_size() -> tuple[int, int]:  # (a worker's: told once the engines are built, before they warm)
        asked.append("engines built" if analyzer.models is not None else "before")
        return height, width

    analyzer = emopipe.Analyzer(detector="blazeface", weights=str(checkpoints[8]), device="cpu")
    with analyzer.open(frame_size=first_size):
        models = analyzer.models
        assert models is not None and asked == ["engines built"]
        assert models.warmed_frame_sizes == {(height, width)} and models.detector_warmups == 1
        assert len(list(analyzer.analyze(clip.path, max_frames=2))) == 2
        analyzer.open(frame_size=(height // 2, width // 2))  # already open: the detector warmed for this size too
        assert models.warmed_frame_sizes == {(height, width), (height // 2, width // 2)}
    assert analyzer.summaries[0].startup["detector_warmups"] == 1  # the source's size was warm: none of its own


@pytest.mark.parametrize("size", [(240,), "x", (-1, 5), (240.5, 320), (True, 320), (240, 320, 3)])
def test_a_bad_frame_size_is_refused_in_one_line_before_the_engines_are_built(size, checkpoints):
    # (was: ~8 s of engine build, then a raw TypeError / RuntimeError from torch; QA pass)
    analyzer = emopipe.Analyzer(detector="blazeface", weights=str(checkpoints[8]), device="cpu",
                                models_dir="/nonexistent")  # (nothing is loaded: the check comes first)
    with pytest.raises(UsageError, match=rf"^frame_size {re.escape(repr(size))}: give the frames' \(height, width\)"):
        analyzer.open(frame_size=size)
    assert analyzer.models is None


@pytest.mark.slow
def test_a_bad_frame_size_told_by_a_function_is_refused_and_leaves_no_unwarmed_engines(clip, checkpoints, models_home):
    analyzer = emopipe.Analyzer(detector="blazeface", weights=str(checkpoints[8]), device="cpu")
    with pytest.raises(UsageError, match=r"^frame_size\(\) returned \(240,\): give the frames' \(height, width\)"):
        analyzer.open(frame_size=lambda: (240,))
    assert analyzer.models is None  # (not kept unwarmed: the next open builds and warms them whole)
    width, height = clip.size
    with analyzer.open(frame_size=lambda: [height, width]):  # a list and a function returning one are fine
        assert analyzer.models is not None and analyzer.models.warmed_frame_sizes == {(height, width)}
        assert analyzer.models.engine_warmups == 1
        with pytest.raises(UsageError, match="frame_size"):
            analyzer.open(frame_size=(0, width))  # already open: refused all the same, the engines kept
        assert analyzer.models is not None


@pytest.mark.slow
def test_a_truncated_file_gives_every_record_that_decodes_then_its_error(checkpoints, models_home, tmp_path):
    whole = moving_face_video(tmp_path / "whole.avi", frames=20, empty=None)
    cut = tmp_path / "cut.avi"
    cut.write_bytes(whole.path.read_bytes()[: len(whole.path.read_bytes()) // 2])
    records = []
    with pytest.raises(emopipe.InputTruncatedError, match="ended early") as raised:
        for record in emopipe.analyze(cut, detector="blazeface", weights=str(checkpoints[8]), device="cpu"):
            records.append(record)
    assert 3 <= len(records) < 20 and raised.value.exit_code == 8


@pytest.mark.slow
def test_run_raises_what_ended_it_early_once_its_files_are_written(checkpoints, models_home, tmp_path, monkeypatch):
    # run() returned these as a normal outcome: a script's loop over videos went on after Ctrl-C / SIGTERM (exit 0),
    # and a truncated file passed for complete (the command exits 8 and analyze() raises; QA pass, session 39)
    from emopipe.pipeline.runner import Pipeline

    whole = moving_face_video(tmp_path / "whole.avi", frames=20, empty=None)
    cut = tmp_path / "cut.avi"
    cut.write_bytes(whole.path.read_bytes()[: len(whole.path.read_bytes()) // 2])
    with emopipe.Analyzer(detector="blazeface", weights=str(checkpoints[8]), device="cpu") as analyzer:
        with pytest.raises(emopipe.InputTruncatedError, match=r"cut\.avi: input ended early") as truncated:
            analyzer.run(cut, output=str(tmp_path / "cut.csv"))
        said = truncated.value.outcome.summary
        assert said.frames == len(rows(Path(said.outputs["rows"]))) >= 3
        assert json.loads(Path(said.outputs["summary"]).read_text())["ended_early"]

        run = Pipeline.run

        def ctrl_c_as_it_ends(self):  # (the pipeline's own Ctrl-C: its rows written as far as they went)
            run(self)
            raise KeyboardInterrupt

        monkeypatch.setattr(Pipeline, "run", ctrl_c_as_it_ends)
        ran = []
        with pytest.raises(emopipe.Interrupted) as interrupted:
            for n in range(3):  # a script's loop over its videos: it stops at the first
                ran.append(n)
                analyzer.run(whole.path, output=str(tmp_path / f"r{n}.csv"), max_frames=2)
    assert ran == [0] and isinstance(interrupted.value, KeyboardInterrupt) and interrupted.value.exit_code == 130
    said = interrupted.value.outcome.summary
    assert interrupted.value.outcome.interrupted and len(rows(Path(said.outputs["rows"]))) == 2
    assert json.loads(Path(said.outputs["summary"]).read_text())["interrupted"] is True


@pytest.mark.slow
def test_ctrl_c_while_the_detector_warms_stops_the_run_before_it_reads_the_source(
        checkpoints, models_home, tmp_path, monkeypatch):
    import signal
    import threading

    from emopipe.pipeline.analysis import SourceRun
    from emopipe.pipeline.runner import Pipeline

    long = moving_face_video(tmp_path / "long.mp4", frames=60, empty=None)
    warm = SourceRun.warm
    generator: list = []  # (kept: the generator is closed by the test, not collected early)

    def warm_then_ctrl_c(self, models):  # the caller's Ctrl-C comes while this thread still warms the detector
        warm(self, models)
        signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)  # (a real signal: it wakes the caller)
        assert self.cancel.wait(60)  # set once the caller has stopped

    pipelines: list = []
    run = Pipeline.run

    def run_and_keep(self):
        pipelines.append(self)
        run(self)

    monkeypatch.setattr(SourceRun, "warm", warm_then_ctrl_c)
    monkeypatch.setattr(Pipeline, "run", run_and_keep)
    with emopipe.Analyzer(detector="blazeface", weights=str(checkpoints[8]), device="cpu",
                          batch_size=1) as analyzer:
        generator.append(analyzer.analyze(long.path))
        with pytest.raises(KeyboardInterrupt):
            list(generator[0])
    # the pipeline made after the Ctrl-C was stopped before it began, not run over the whole video (60 frames)
    (pipeline,) = pipelines
    assert pipeline.summary().frames <= 2



def test_ctrl_c_before_a_runs_first_frame_writes_nothing_and_leaves_the_analyzer_usable(
        clip, checkpoints, models_home, tmp_path, monkeypatch):
    # (docs/api.md: a plain KeyboardInterrupt, no .outcome: nothing was computed; QA pass)
    from emopipe.pipeline.models import Models

    warm = Models.warm_detector
    calls: list[tuple[int, int]] = []

    def ctrl_c_first(self, height, width):
        calls.append((height, width))
        if len(calls) == 1:
            raise KeyboardInterrupt
        return warm(self, height, width)

    monkeypatch.setattr(Models, "warm_detector", ctrl_c_first)
    out = tmp_path / "out"
    out.mkdir()
    with emopipe.Analyzer(detector="blazeface", weights=str(checkpoints[8]), device="cpu", no_progress=True) as a:
        with pytest.raises(KeyboardInterrupt) as stopped:
            a.run(clip.path, output=str(out / "r.csv"), max_frames=1)
        assert not isinstance(stopped.value, emopipe.Interrupted) and list(out.iterdir()) == []
        assert a.summaries == [] and a.models is not None
        outcome = a.run(clip.path, output=str(out / "r.csv"), max_frames=1)  # warmed now, and run
    assert outcome.summary.frames == 1 and len(calls) == 2 and (out / "r.csv").exists()


@pytest.mark.slow
def test_one_source_at_a_time_per_analyzer_and_no_file_options_for_analyze(clip, checkpoints, models_home):
    with pytest.raises(UsageError, match=r"output: analyze\(\) yields the records and writes no file"):
        list(emopipe.analyze(clip.path, output="rows.csv"))
    with emopipe.Analyzer(detector="blazeface", weights=str(checkpoints[8]), device="cpu") as analyzer:
        first = analyzer.analyze(clip.path)
        next(first)  # running: its pipeline holds the engines
        with pytest.raises(UsageError, match="already running a source"):
            next(analyzer.analyze(clip.path))  # beside it, its faces would share the engines' static buffers
        with pytest.raises(UsageError, match="already running a source"):
            analyzer.run(clip.path)
        first.close()
        assert len(analyzer.summaries) == 1  # (was: none for a generator closed early)
        assert [r.frame for r in analyzer.analyze(clip.path, max_frames=1)] == [0]  # free again
        assert len(analyzer.summaries) == 2 and analyzer.summaries[1].frames == 1


@pytest.mark.slow
def test_close_stops_an_unfinished_analyze_then_frees_the_engines(clip, checkpoints, models_home, monkeypatch):
    # (was: close() freed the engines under a paused or running analyze(), whose frames kept coming after it; QA pass)
    import threading
    import time

    analyzer = emopipe.Analyzer(detector="blazeface", weights=str(checkpoints[8]), device="cpu")
    with analyzer:
        paused = analyzer.analyze(clip.path)  # paused in this thread
        assert next(paused).frame == 0
        analyzer.close()
        assert analyzer.models is None and list(paused) == []  # (was: the clip's 3 other frames' records)
        assert len(analyzer.summaries) == 1  # stopped as a break stops it: its summary kept
        assert [r.frame for r in analyzer.analyze(clip.path, max_frames=1)] == [0]  # the analyzer free, opened again

        write = emopipe.api._QueueSink.write

        def slow_after_the_first_frame(self, result):  # the next frame's records come only once the run is stopped
            if result.frame.index > 0:
                self.stop.wait(120)
            write(self, result)

        monkeypatch.setattr(emopipe.api._QueueSink, "write", slow_after_the_first_frame)
        running = analyzer.analyze(clip.path)  # read in another thread, waiting inside next() for a frame
        got: list = []
        asked = threading.Event()

        def read() -> None:
            got.append(next(running))
            asked.set()
            got.extend(running)

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        assert asked.wait(120)
        for _ in range(1200):  # (until that thread is inside its next step: close() must not free the engines under it)
            if running._step.locked():
                break
            time.sleep(0.05)
        analyzer.close()
        assert analyzer.models is None
        reader.join(60)
        assert not reader.is_alive() and [r.frame for r in got] == [0]  # ended, no record after close()
        assert len(analyzer.summaries) == 3


@pytest.mark.slow
def test_close_refuses_while_a_run_goes_on_in_another_thread(clip, checkpoints, models_home, monkeypatch, tmp_path):
    import threading

    from emopipe.pipeline.runner import Pipeline

    began, go_on = threading.Event(), threading.Event()
    run = Pipeline.run

    def held(self):
        began.set()
        assert go_on.wait(120)
        run(self)

    monkeypatch.setattr(Pipeline, "run", held)
    analyzer = emopipe.Analyzer(detector="blazeface", weights=str(checkpoints[8]), device="cpu")
    running = threading.Thread(target=analyzer.run, args=(clip.path,), kwargs={"output": str(tmp_path / "r.csv")},
                               daemon=True)
    running.start()
    assert began.wait(120)
    with pytest.raises(UsageError, match=r"^close\(\): this Analyzer is running a source in another thread"):
        analyzer.close()  # (was: the engines freed under the run)
    assert analyzer.models is not None
    go_on.set()
    running.join(120)
    assert not running.is_alive() and len(rows(tmp_path / "r.csv")) == 4
    analyzer.close()
    assert analyzer.models is None


def test_the_source_given_to_analyze_or_run_decides_live_or_file_defaults(tmp_path, monkeypatch):
    # (was: an analyzer made without its source resolved its engines as for a file: S3FD, and batch 64 on CUDA,
    # for a stream given to emopipe.analyze or Analyzer().run)
    from emopipe.pipeline.analysis import SourceRun

    monkeypatch.chdir(tmp_path)  # (run's default outputs are checked here)
    seen: list[RunConfig] = []

    def not_opened(self):
        seen.append(self.config)
        raise emopipe.SourceUnavailableError("not opened in this test")

    monkeypatch.setattr(SourceRun, "open", not_opened)
    for source in ("udp://127.0.0.1:9", "clip.mp4"):
        with pytest.raises(emopipe.SourceUnavailableError):
            list(emopipe.analyze(source, device="cpu"))
        with pytest.raises(emopipe.SourceUnavailableError):
            emopipe.Analyzer(device="cpu").run(source)
    assert [(c.source, c.detector) for c in seen] == [("udp://127.0.0.1:9", "blazeface")] * 2 + \
        [("clip.mp4", "sfd")] * 2


def test_asking_for_a_sources_config_leaves_the_engines_to_the_source_that_runs(tmp_path, monkeypatch):
    # (was: source_config("rtsp://…") on an analyzer made without a source stored the live engine options, so
    # the engines it then built, and its answers after, were a camera's: BlazeFace for a file)
    import emopipe.api
    from emopipe.pipeline.analysis import SourceRun

    class Built(Exception):
        pass

    def not_built(config):
        built.append(config.detector)
        raise Built

    monkeypatch.chdir(tmp_path)  # (run's default outputs are checked here)
    monkeypatch.setattr(SourceRun, "open", lambda self: None)  # (no source is read: the engines come next)
    monkeypatch.setattr(emopipe.api, "load_models", not_built)
    built: list[str] = []
    fresh = emopipe.Analyzer(device="cpu")
    analyzer = emopipe.Analyzer(device="cpu")
    assert analyzer.source_config("rtsp://x/y").detector == "blazeface"  # a camera's answer …
    with pytest.raises(Built):
        analyzer.open()  # … kept nowhere: built as made (for no source: as for a file)
    assert analyzer.source_config("clip.mp4") == fresh.source_config("clip.mp4")
    analyzer.source_config("rtsp://x/y")
    with pytest.raises(Built):
        analyzer.run("clip.mp4")  # the source that runs shapes them
    analyzer.source_config("clip.mp4")
    with pytest.raises(Built):
        list(analyzer.analyze("rtsp://x/y"))
    assert built == ["sfd", "sfd", "blazeface"]


def test_options_a_run_would_not_use_are_refused_not_ignored(tmp_path, monkeypatch):
    # (was: output=/report= in config= or the Analyzer's options made analyze() write nothing, saying nothing;
    # run() took resume=, parallel=, ray_*= for its one source and ignored them)
    monkeypatch.chdir(tmp_path)
    clip = str(tmp_path / "clip.mp4")  # (never opened: each is refused first)
    with pytest.raises(UsageError, match=r"output, report: analyze\(\) yields the records and writes no file"):
        list(emopipe.analyze(clip, config=RunConfig(output="x.csv", report="r.html"), device="cpu"))
    with pytest.raises(UsageError, match=r"output: analyze\(\)"):
        list(emopipe.Analyzer(output="x.csv", device="cpu").analyze(clip))
    with pytest.raises(UsageError, match=r"metrics_port: analyze\(\) serves no metrics"):
        list(emopipe.analyze(clip, metrics_port=0, device="cpu"))
    with pytest.raises(UsageError, match="--resume, --parallel, --ray-retries: for several sources"):
        emopipe.Analyzer(device="cpu").run(clip, resume=True, parallel=3, ray_retries=5)
    # (was: analyze() took every one of these, and run() --ray, --processes and sources=, for one source, unused)
    for options, named in (({"processes": 2}, "--processes"), ({"ray": "local"}, "--ray"),
                           ({"sources": ["b.mp4"]}, "sources"), ({"list_files": "l.txt"}, "--list"),
                           ({"resume": True}, "--resume")):
        with pytest.raises(UsageError, match=f"^{named}: for several sources in one run"):
            list(emopipe.Analyzer(device="cpu").analyze(clip, **options))
        with pytest.raises(UsageError, match=f"^{named}: for several sources in one run"):
            emopipe.Analyzer(device="cpu").run(clip, **options)
    # (--no-split is no option of several sources: one video is cut into parts over workers too)
    for call in (lambda: list(emopipe.Analyzer(device="cpu").analyze(clip, split=False)),
                 lambda: emopipe.Analyzer(device="cpu").run(clip, split=False)):
        with pytest.raises(UsageError, match=r"^--no-split: keeps each video whole in a run over worker processes"):
            call()
    with pytest.raises(UsageError, match="webcam: a run has one source; give the file or the camera, not both"):
        list(emopipe.Analyzer(device="cpu").analyze(clip, webcam=0))
    # (was: several sources in this process, or cameras, took --ray-workers, --ray-retries … and ignored them)
    with pytest.raises(UsageError, match=r"^--ray-workers, --ray-retries: for a run over Ray \(add --ray\)"):
        emopipe.Analyzer(device="cpu").run_many([clip, clip + "2"], tmp_path / "out", ray_workers=2, ray_retries=5)
    with pytest.raises(UsageError, match=r"^--ray-gpus-per-worker: for a run over Ray"):
        emopipe.Analyzer(device="cpu").run_fleet(["udp://127.0.0.1:9", "udp://127.0.0.1:10"], tmp_path / "cams",
                                                 ray_gpus_per_worker=0.5)
    with pytest.raises(UsageError, match=r"^--ray-keep-warm: for a run over Ray"):
        emopipe.Analyzer(device="cpu").run_many([clip, clip + "2"], tmp_path / "out", ray_keep_warm=60)
    # (was: several sources in this process took --no-split and ignored it: only workers' runs cut videos in parts)
    with pytest.raises(UsageError, match=r"^--no-split: for a run over --processes or --ray workers"):
        emopipe.Analyzer(device="cpu").run_many([clip, clip + "2"], tmp_path / "out", split=False)
    for seconds in (0, -1, float("inf")):
        with pytest.raises(UsageError, match="--ray-keep-warm must be a number of seconds > 0"):
            RunConfig(ray_keep_warm=seconds)
    assert list(tmp_path.iterdir()) == []


def test_run_serves_the_metrics_its_options_ask_for(tmp_path, monkeypatch):
    # (was: Analyzer.run(src, metrics_port=…) served nothing: only the command line made an exporter)
    import emopipe.api
    from emopipe.pipeline.analysis import SourceRun

    monkeypatch.chdir(tmp_path)
    made: list[tuple[RunConfig, object]] = []
    real = emopipe.api.run_metrics

    def recorded(config, **kinds):
        made.append((config, real(config, **kinds)[1]))
        return None, made[-1][1]

    def not_opened(self):
        raise emopipe.SourceUnavailableError("not opened in this test")

    monkeypatch.setattr(emopipe.api, "run_metrics", recorded)
    monkeypatch.setattr(SourceRun, "open", not_opened)
    analyzer = emopipe.Analyzer(device="cpu")
    for options in ({}, {"metrics_port": 0, "metrics_linger": 1.5}, {"pushgateway": "http://127.0.0.1:9"}):
        with pytest.raises(emopipe.SourceUnavailableError):
            analyzer.run("udp://127.0.0.1:9", **options)
    # a live source's default port (the command line's) is not served by the API; one given is
    assert [(config.metrics_port, exporter.port, exporter.linger_s, exporter.pushgateway)
            for config, exporter in made] == [(0, 0, 1.5, None), (None, None, 0.0, "http://127.0.0.1:9")]


def test_a_folder_of_videos_given_as_one_source_says_it_is_several(tmp_path):
    # (was: "no image files in folder", as if the folder were an empty sequence of images)
    (tmp_path / "vids").mkdir()
    (tmp_path / "vids" / "a.mp4").write_bytes(b"not read")
    with pytest.raises(UsageError, match=r"vids is a folder of videos \(1\): each video is a source of its own; run "
                                         r"them with Analyzer.run_many"):
        list(emopipe.analyze(tmp_path / "vids", device="cpu"))


def test_a_checkpoint_whose_classes_disagree_with_classes_is_refused(checkpoints, clip, models_home):
    with pytest.raises(CheckpointError, match="--classes 5"):
        list(emopipe.analyze(clip.path, weights=str(checkpoints[8]), classes=5, device="cpu", detector="blazeface"))


def test_errors_are_the_typed_exceptions_the_cli_maps_to_exit_codes(tmp_path):
    with pytest.raises(emopipe.InputNotFoundError) as found:
        list(emopipe.analyze(tmp_path / "missing.mp4", device="cpu"))
    assert found.value.exit_code == 3


def test_the_engine_is_given_the_model_built_for_it_to_rewrite(tmp_path, monkeypatch):
    """load_models builds EmoNet for its engine alone: the engine fuses it in place instead of copying it first."""
    import torch

    from emopipe.pipeline import models
    from tests.support.checkpoints import random_state

    class Stop(Exception):
        pass

    given: list[dict] = []

    def create_engine(backend, model, options, **kwargs):
        given.append(kwargs)
        raise Stop

    torch.save(random_state(8), tmp_path / "w.pth")
    monkeypatch.setattr(models, "create_engine", create_engine)
    with pytest.raises(Stop):
        models.load_models(RunConfig(source="clip.mp4", weights=str(tmp_path / "w.pth"), device="cpu").resolved("cpu"))
    assert given and given[0]["owns_model"] is True
