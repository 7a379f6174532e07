"""FaceRecord validation, landmark mapping, and the CSV / JSON Lines writers."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from emopipe.errors import OutputError, UsageError
from emopipe.io.records import (
    CsvRecordWriter,
    JsonlRecordWriter,
    hold_outputs,
    landmarks_to_frame,
    open_writer,
    output_format,
    partial_path,
    record_columns,
    staging_folder,
    written_whole,
)
from emopipe.types import LABELS, FaceRecord

REPO = Path(__file__).resolve().parents[1]


def make_record(classes: int = 8, frame: int = 3, track_id: int = 1, seed: int = 0, landmarks: bool = False,
                source: str = "clip.mp4") -> FaceRecord:
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=classes)
    probabilities = np.exp(logits) / np.exp(logits).sum()
    x1, y1 = rng.uniform(0, 200, size=2)
    return FaceRecord.create(
        labels=LABELS[classes], probabilities=probabilities.astype(np.float32), source=source, frame=frame,
        timestamp_s=frame / 29.97, track_id=track_id, box=(x1, y1, x1 + 80.123456, y1 + 90.987654),
        score=float(rng.uniform(0.5, 1)), valence=float(rng.uniform(-1, 1)), arousal=float(rng.uniform(-1, 1)),
        landmarks=rng.uniform(0, 300, size=(68, 2)) if landmarks else None,
    )


# -- FaceRecord --------------------------------------------------------------------------------


def test_create_labels_the_most_probable_class_for_each_model():
    p8 = np.zeros(8)
    p8[7] = 1.0
    assert FaceRecord.create(labels=LABELS[8], probabilities=p8, **_fields()).label == "contempt"
    p5 = np.zeros(5)
    p5[4] = 1.0
    # The 5-class model's index 4 is anger (the reference demo printed the 8-class name "fear").
    assert FaceRecord.create(labels=LABELS[5], probabilities=p5, **_fields()).label == "anger"


def _fields(**overrides):
    fields = dict(source="a.mp4", frame=0, timestamp_s=0.0, track_id=1, box=(0, 0, 10, 10), score=0.9,
                  valence=0.1, arousal=-0.2)
    fields.update(overrides)
    return fields


def test_record_is_frozen_and_its_arrays_read_only():
    record = make_record(landmarks=True)
    with pytest.raises(AttributeError):
        record.frame = 4  # type: ignore[misc]
    with pytest.raises(ValueError):
        record.probabilities[0] = 1.0
    with pytest.raises(ValueError):
        record.landmarks[0, 0] = 1.0  # type: ignore[index]
    assert isinstance(record.box, tuple) and all(isinstance(v, float) for v in record.box)


def test_record_copies_its_inputs():
    probabilities = np.array([0.5, 0.5])
    record = FaceRecord(label="a", probabilities=probabilities, **_fields())
    probabilities[0] = 0.9
    assert record.probabilities.tolist() == [0.5, 0.5]


@pytest.mark.parametrize(("overrides", "message"), [
    ({"frame": -1}, "frame"),
    ({"frame": 1.5}, "frame"),
    ({"track_id": 0}, "track_id"),
    ({"timestamp_s": float("nan")}, "timestamp_s"),
    ({"valence": float("inf")}, "valence"),
    ({"box": (0, 0, 10)}, "box"),
    ({"box": (10, 0, 0, 10)}, "x2 ≥ x1"),
    ({"probabilities": np.array([0.7, 0.7])}, "sum to 1"),
    ({"probabilities": np.array([1.2, -0.2])}, "≥ 0"),
    ({"probabilities": np.ones((2, 2)) / 4}, "vector"),
    ({"label": ""}, "label"),
    ({"landmarks": np.zeros((5, 2))}, "landmarks"),
    ({"source": 3}, "source"),
])
def test_bad_records_are_rejected_with_a_message(overrides, message):
    fields = dict(_fields(), label="neutral", probabilities=np.array([0.25, 0.75]))
    fields.update(overrides)
    with pytest.raises((ValueError, TypeError), match=message):
        FaceRecord(**fields)


def test_create_rejects_probabilities_that_do_not_fit_the_labels():
    with pytest.raises(ValueError, match="expected 5 probabilities"):
        FaceRecord.create(labels=LABELS[5], probabilities=np.full(8, 1 / 8), **_fields())


def _frame_of_faces(seed: int, k: int, classes: int = 8, landmarks: bool = False) -> dict:
    """One frame's k faces as the writer thread has them: float32 boxes and scores, float64 model outputs."""
    rng = np.random.default_rng(seed)
    x1y1 = rng.uniform(0, 600, size=(k, 2))
    boxes = np.concatenate([x1y1, x1y1 + rng.uniform(0, 200, size=(k, 2))], axis=1).astype(np.float32)
    return dict(source="clip.mp4", frame=int(rng.integers(0, 10_000)), timestamp_s=float(rng.uniform(0, 500)),
                labels=LABELS[classes], track_ids=rng.permutation(np.arange(1, 3 * k + 1))[:k], boxes=boxes,
                scores=rng.uniform(0.3, 1, size=k).astype(np.float32),
                probabilities=rng.dirichlet(np.ones(classes), size=k), valence=rng.normal(0, 40, size=k),
                arousal=rng.normal(0, 40, size=k),  # (some checkpoints' outputs are far outside ±1)
                landmarks=rng.uniform(0, 700, size=(k, 68, 2)) if landmarks else None,
                detected=bool(rng.integers(0, 2)), file=f"img{seed}.png" if seed % 3 == 0 else None)


def _one_by_one(faces: dict) -> list[FaceRecord]:
    landmarks = faces["landmarks"]
    return [FaceRecord.create(labels=faces["labels"], probabilities=faces["probabilities"][i], source=faces["source"],
                              frame=faces["frame"], timestamp_s=faces["timestamp_s"],
                              track_id=int(faces["track_ids"][i]), box=tuple(faces["boxes"][i]),
                              score=float(faces["scores"][i]), valence=float(faces["valence"][i]),
                              arousal=float(faces["arousal"][i]), landmarks=None if landmarks is None else landmarks[i],
                              detected=faces["detected"], file=faces["file"])
            for i in range(len(faces["track_ids"]))]


def test_a_frames_records_made_together_equal_those_made_one_by_one():
    for seed in range(300):
        faces = _frame_of_faces(seed, k=1 + seed % 6, classes=(5, 8)[seed % 2], landmarks=seed % 4 == 0)
        together, alone = FaceRecord.for_frame(**faces), _one_by_one(faces)
        assert len(together) == len(alone) == 1 + seed % 6
        for a, b in zip(together, alone):
            for f in dataclasses.fields(FaceRecord):
                x, y = getattr(a, f.name), getattr(b, f.name)
                assert type(x) is type(y), (f.name, type(x), type(y))
                if isinstance(x, np.ndarray):
                    assert x.dtype == y.dtype == np.float64 and np.array_equal(x, y) and not x.flags.writeable
                elif isinstance(x, tuple):
                    assert x == y and all(type(u) is type(v) for u, v in zip(x, y)), f.name
                else:
                    assert x == y, f.name
    assert FaceRecord.for_frame(**{**_frame_of_faces(0, k=1), "track_ids": np.zeros(0, np.int64)}) == []


def test_a_frames_records_keep_their_own_copies():
    faces = _frame_of_faces(7, k=3, landmarks=True)
    records = FaceRecord.for_frame(**faces)
    kept = [(r.probabilities.copy(), r.landmarks.copy()) for r in records]  # type: ignore[union-attr]
    faces["probabilities"][:] = 0.5
    faces["landmarks"][:] = -1.0
    assert all(np.array_equal(r.probabilities, p) and np.array_equal(r.landmarks, lm)
               for r, (p, lm) in zip(records, kept))


def _spoil(faces: dict, how: str) -> dict:
    """One face (the third of five) made bad in one way."""
    faces = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in faces.items()}
    if how == "nan valence":
        faces["valence"][2] = np.nan
    elif how == "inf score":
        faces["scores"][2] = np.inf
    elif how == "box inside out":
        faces["boxes"][2, [0, 2]] = faces["boxes"][2, [2, 0]] + [1, 0]
    elif how == "probabilities over 1":
        faces["probabilities"][2, 0] += 0.5
    elif how == "a negative probability":
        faces["probabilities"][2] = 0.0
        faces["probabilities"][2, :2] = [1.2, -0.2]
    elif how == "track id 0":
        faces["track_ids"][2] = 0
    elif how == "nan landmark":
        faces["landmarks"][2, 5, 1] = np.nan
    elif how == "negative frame":
        faces["frame"] = -1
    elif how == "nan timestamp":
        faces["timestamp_s"] = float("nan")
    elif how == "labels of another model":
        faces["labels"] = LABELS[5]
    return faces


@pytest.mark.parametrize("how", ["nan valence", "inf score", "box inside out", "probabilities over 1",
                                 "a negative probability", "track id 0", "nan landmark", "negative frame",
                                 "nan timestamp", "labels of another model"])
def test_a_bad_face_among_good_ones_fails_as_making_it_alone_does(how):
    faces = _spoil(_frame_of_faces(11, k=5, landmarks=True), how)
    with pytest.raises((ValueError, TypeError)) as alone:
        _one_by_one(faces)
    with pytest.raises(type(alone.value), match=re.escape(str(alone.value))):
        FaceRecord.for_frame(**faces)


# -- landmarks -----------------------------------------------------------------------------------


def test_landmarks_map_from_crop_to_frame_pixels():
    box = np.array([100.0, 50.0, 164.0, 178.0])  # 64 wide, 128 tall: the crop squeezes y twice as much as x
    crop_points = np.array([[0.0, 0.0], [256.0, 256.0], [128.0, 64.0]])
    expected = np.array([[100.0, 50.0], [164.0, 178.0], [132.0, 82.0]])
    np.testing.assert_allclose(landmarks_to_frame(crop_points, box), expected)


def test_landmarks_map_a_batch_of_faces_each_with_its_own_box():
    boxes = np.array([[0.0, 0.0, 256.0, 256.0], [10.0, 20.0, 138.0, 148.0]])
    points = np.tile(np.array([[128.0, 128.0]]), (2, 68, 1))
    mapped = landmarks_to_frame(points, boxes)
    assert mapped.shape == (2, 68, 2)
    np.testing.assert_allclose(mapped[0], 128.0)
    np.testing.assert_allclose(mapped[1], np.tile([74.0, 84.0], (68, 1)))


def test_landmark_mapping_rejects_mismatched_faces():
    with pytest.raises(ValueError, match="same faces"):
        landmarks_to_frame(np.zeros((3, 68, 2)), np.zeros((2, 4)))


# -- formats and columns -------------------------------------------------------------------------


@pytest.mark.parametrize(("path", "fmt", "expected"), [
    ("out.csv", None, "csv"), ("OUT.CSV", None, "csv"), ("out.jsonl", None, "jsonl"), ("out.ndjson", None, "jsonl"),
    ("-", None, "csv"), ("results", None, "csv"), ("out.txt", "jsonl", "jsonl"), ("-", "jsonl", "jsonl"),
])
def test_output_format(path, fmt, expected):
    assert output_format(path, fmt) == expected


@pytest.mark.parametrize(("path", "fmt"), [("out.json", None), ("out.txt", None), ("out.csv", "xml"),
                                           ("out.csv", "jsonl"), ("out.jsonl", "csv")])
def test_unknown_output_format_is_a_usage_error(path, fmt):
    with pytest.raises(UsageError):
        output_format(path, fmt)


@pytest.mark.parametrize("classes", [8, 5])
def test_columns_name_the_model_classes(classes):
    columns = record_columns(LABELS[classes], landmarks=False)
    assert columns[:10] == ["source", "frame", "timestamp_s", "track_id", "x1", "y1", "x2", "y2", "score", "label"]
    assert columns[10:-2] == [f"p_{label}" for label in LABELS[classes]]
    assert columns[-2:] == ["valence", "arousal"]
    with_landmarks = record_columns(LABELS[classes], landmarks=True)
    assert with_landmarks[:len(columns)] == columns
    assert with_landmarks[len(columns):][:3] == ["lm0_x", "lm0_y", "lm1_x"]
    assert with_landmarks[-1] == "lm67_y" and len(with_landmarks) == len(columns) + 136


# -- CSV -----------------------------------------------------------------------------------------


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


@pytest.mark.parametrize("classes", [8, 5])
def test_csv_round_trip(tmp_path, classes):
    records = [make_record(classes, frame=f, track_id=t, seed=10 * f + t) for f in range(3) for t in (1, 2)]
    path = tmp_path / "out.csv"
    with open_writer(path, labels=LABELS[classes]) as writer:
        assert isinstance(writer, CsvRecordWriter)
        writer.write(records[:2])
        writer.write(records[2:])
    rows = read_csv(path)
    assert len(rows) == len(records)
    assert list(rows[0]) == record_columns(LABELS[classes], landmarks=False)
    assert not any(k.startswith("lm") for k in rows[0])
    for row, record in zip(rows, records, strict=True):
        assert row["source"] == "clip.mp4"
        assert int(row["frame"]) == record.frame and int(row["track_id"]) == record.track_id
        assert float(row["timestamp_s"]) == pytest.approx(record.timestamp_s, abs=5e-7)
        assert [float(row[k]) for k in ("x1", "y1", "x2", "y2")] == pytest.approx(record.box, abs=0.005)
        assert float(row["score"]) == pytest.approx(record.score, abs=5e-7)
        assert row["label"] == record.label == LABELS[classes][int(np.argmax(record.probabilities))]
        probabilities = [float(row[f"p_{label}"]) for label in LABELS[classes]]
        np.testing.assert_allclose(probabilities, record.probabilities, atol=5e-7)
        assert float(row["valence"]) == pytest.approx(record.valence, abs=5e-7)
        assert float(row["arousal"]) == pytest.approx(record.arousal, abs=5e-7)


def test_csv_numbers_are_rounded(tmp_path):
    record = FaceRecord(label="b", probabilities=np.array([1 / 3, 2 / 3]),
                        **_fields(timestamp_s=1 / 3, box=(1 / 3, 2 / 3, 10 + 1 / 3, 20 + 2 / 3), score=0.123456789))
    path = tmp_path / "out.csv"
    with open_writer(path, labels=("a", "b")) as writer:
        writer.write([record])
    row = read_csv(path)[0]
    assert row["timestamp_s"] == "0.333333"
    assert [row[k] for k in ("x1", "y1", "x2", "y2")] == ["0.33", "0.67", "10.33", "20.67"]
    assert row["score"] == "0.123457"
    assert (row["p_a"], row["p_b"]) == ("0.333333", "0.666667")


def test_csv_with_landmarks(tmp_path):
    with_points = make_record(landmarks=True)
    without_points = make_record(frame=4)
    path = tmp_path / "out.csv"
    with open_writer(path, labels=LABELS[8], landmarks=True) as writer:
        writer.write([with_points, without_points])
    rows = read_csv(path)
    points = [[float(rows[0][f"lm{i}_{a}"]) for a in "xy"] for i in range(68)]
    np.testing.assert_allclose(points, with_points.landmarks, atol=0.005)
    assert all(rows[1][f"lm{i}_x"] == "" for i in range(68))  # a face without landmarks leaves them empty


@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_detected_column_marks_boxes_between_key_frames(tmp_path, suffix):
    from dataclasses import replace

    detected, between = make_record(frame=3), replace(make_record(frame=4), detected=False)
    path = tmp_path / f"out{suffix}"
    with open_writer(path, labels=LABELS[8], detected=True) as writer:
        writer.write([detected, between])
    if suffix == ".csv":
        header = path.read_text().splitlines()[0].split(",")
        assert header == record_columns(LABELS[8], landmarks=False, detected=True)
        assert header[header.index("score") + 1] == "detected"
        assert [r["detected"] for r in read_csv(path)] == ["1", "0"]
    else:
        assert [json.loads(line)["detected"] for line in path.read_text().splitlines()] == [True, False]
    plain = tmp_path / f"plain{suffix}"
    with open_writer(plain, labels=LABELS[8]) as writer:  # without --detect-every: no such column
        writer.write([detected])
    assert "detected" not in plain.read_text()


def test_csv_quotes_awkward_source_names(tmp_path):
    record = make_record(source='my, "odd"\nvideo.mp4')
    path = tmp_path / "out.csv"
    with open_writer(path, labels=LABELS[8]) as writer:
        writer.write([record])
    assert read_csv(path)[0]["source"] == 'my, "odd"\nvideo.mp4'


@pytest.mark.parametrize("classes", [8, 5])
def test_no_faces_gives_a_header_only_csv(tmp_path, classes):
    path = tmp_path / "empty.csv"
    with open_writer(path, labels=LABELS[classes]) as writer:
        writer.write([])
    text = path.read_text()
    assert text == ",".join(record_columns(LABELS[classes], landmarks=False)) + "\n"
    assert "p_contempt" in text if classes == 8 else "p_contempt" not in text and "p_fear" not in text


def test_each_write_reaches_the_file_before_close(tmp_path):
    path = tmp_path / "out.csv"
    writer = open_writer(path, labels=LABELS[8])
    partial = partial_path(path)  # rows are on disk as they come, under the partial name until the end
    try:
        assert len(read_csv(partial)) == 0 and partial.read_text().startswith("source,frame,")  # header at open
        writer.write([make_record(frame=0)])
        assert [int(r["frame"]) for r in read_csv(partial)] == [0]
        writer.write([make_record(frame=1), make_record(frame=2)])
        assert [int(r["frame"]) for r in read_csv(partial)] == [0, 1, 2]
        assert writer.rows_written == 3 and not path.exists()
    finally:
        writer.close()
    assert [int(r["frame"]) for r in read_csv(path)] == [0, 1, 2] and not partial.exists()


def test_an_unfinished_run_never_replaces_an_earlier_file(tmp_path):
    path = tmp_path / "out.csv"
    path.write_text("earlier good results\n")
    writer = open_writer(path, labels=LABELS[8])
    writer.commit_on_close = False
    writer.write([make_record(frame=0)])
    writer.close()
    where = writer.commit(complete=None)  # failed or interrupted: keep the rows, but not over the earlier file
    assert where == str(partial_path(path)) and path.read_text() == "earlier good results\n"
    assert [int(r["frame"]) for r in read_csv(partial_path(path))] == [0]


def test_an_unfinished_run_with_nothing_to_lose_keeps_its_rows_under_the_final_name(tmp_path):
    path = tmp_path / "out.csv"
    with pytest.raises(KeyboardInterrupt), open_writer(path, labels=LABELS[8]) as writer:
        writer.write([make_record(frame=0)])
        raise KeyboardInterrupt
    assert [int(r["frame"]) for r in read_csv(path)] == [0] and not partial_path(path).exists()


def test_a_complete_run_replaces_the_earlier_file_at_once(tmp_path):
    path = tmp_path / "out.csv"
    path.write_text("old\n")
    with open_writer(path, labels=LABELS[8]) as writer:
        writer.write([make_record(frame=3)])
        assert path.read_text() == "old\n"  # replaced only when complete, by one rename
    assert [int(r["frame"]) for r in read_csv(path)] == [3]


def test_a_failed_write_leaves_only_complete_rows(tmp_path, monkeypatch):
    path = tmp_path / "out.csv"
    with open_writer(path, labels=LABELS[8]) as writer:
        writer.write([make_record(frame=0)])
        file = writer._sink._file  # the raw file underneath

        real_write = file.write
        calls = {"n": 0}

        class Interrupted:
            def write(self, data):
                calls["n"] += 1
                if calls["n"] == 1:
                    return real_write(bytes(data)[:17])  # the OS took part of the batch…
                raise KeyboardInterrupt  # …then Ctrl-C

            def __getattr__(self, name):
                return getattr(file, name)

        monkeypatch.setattr(writer._sink, "_file", Interrupted())
        with pytest.raises(KeyboardInterrupt):
            writer.write([make_record(frame=1), make_record(frame=2)])
        monkeypatch.setattr(writer._sink, "_file", file)
        writer.write([make_record(frame=3)])
    assert [int(r["frame"]) for r in read_csv(path)] == [0, 3]
    assert path.read_text().endswith("\n")


def test_writer_rejects_records_of_another_model(tmp_path):
    with open_writer(tmp_path / "out.csv", labels=LABELS[5]) as writer, pytest.raises(ValueError, match="5"):
        writer.write([make_record(8)])


def test_closed_writer_refuses_to_write(tmp_path):
    writer = open_writer(tmp_path / "out.csv", labels=LABELS[8])
    writer.close()
    writer.close()  # closing twice is harmless
    with pytest.raises(ValueError, match="closed"):
        writer.write([make_record()])


# -- JSON Lines ----------------------------------------------------------------------------------


@pytest.mark.parametrize("suffix", [".jsonl", ".ndjson"])
@pytest.mark.parametrize("classes", [8, 5])
def test_jsonl_round_trip(tmp_path, suffix, classes):
    records = [make_record(classes, frame=f, seed=f, landmarks=f != 1) for f in range(3)]
    path = tmp_path / f"out{suffix}"
    with open_writer(path, labels=LABELS[classes], landmarks=True) as writer:
        assert isinstance(writer, JsonlRecordWriter)
        writer.write(records)
    lines = path.read_text().splitlines()
    assert len(lines) == 3
    for line, record in zip(lines, records, strict=True):
        row = json.loads(line)
        assert list(row) == ["source", "frame", "timestamp_s", "track_id", "x1", "y1", "x2", "y2", "score", "label",
                             "probabilities", "valence", "arousal", "landmarks"]
        assert row["frame"] == record.frame and row["track_id"] == record.track_id and row["source"] == "clip.mp4"
        assert row["timestamp_s"] == pytest.approx(record.timestamp_s, abs=5e-7)
        assert [row[k] for k in ("x1", "y1", "x2", "y2")] == pytest.approx(record.box, abs=0.005)
        assert list(row["probabilities"]) == list(LABELS[classes])
        np.testing.assert_allclose(list(row["probabilities"].values()), record.probabilities, atol=5e-7)
        assert row["label"] == max(row["probabilities"], key=row["probabilities"].get)
        assert row["valence"] == pytest.approx(record.valence, abs=5e-7)
        assert row["arousal"] == pytest.approx(record.arousal, abs=5e-7)
        if record.landmarks is None:
            assert row["landmarks"] is None
        else:
            np.testing.assert_allclose(row["landmarks"], record.landmarks, atol=0.005)


def test_jsonl_without_landmarks_has_no_landmark_field_and_no_faces_gives_an_empty_file(tmp_path):
    path = tmp_path / "out.jsonl"
    with open_writer(path, labels=LABELS[8], landmarks=False) as writer:
        assert partial_path(path).read_text() == "" and not path.exists()
        writer.write([make_record(landmarks=True)])
    assert "landmarks" not in json.loads(path.read_text())


# -- standard output -----------------------------------------------------------------------------


def test_dash_writes_to_stdout(capsys):
    with open_writer("-", labels=LABELS[5]) as writer:
        writer.write([make_record(5)])
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert len(rows) == 1 and rows[0]["label"] in LABELS[5]
    assert sys.stdout.closed is False


def test_dash_jsonl_writes_to_stdout(capsys):
    with open_writer("-", fmt="jsonl", labels=LABELS[8]) as writer:
        writer.write([make_record(8), make_record(8, frame=4)])
    assert [json.loads(line)["frame"] for line in capsys.readouterr().out.splitlines()] == [3, 4]


class _Stdout(io.StringIO):
    """Standard output whose writes fail with ``error``."""

    def __init__(self, error: OSError) -> None:
        super().__init__()
        self.error = error

    def write(self, text: str) -> int:
        raise self.error


def test_dash_whose_reader_has_gone_raises_broken_pipe_for_the_command_to_end_quietly(monkeypatch):
    monkeypatch.setattr(sys, "stdout", _Stdout(BrokenPipeError(32, "Broken pipe")))
    with pytest.raises(BrokenPipeError), open_writer("-", labels=LABELS[8]) as writer:  # not an OutputError (exit 5)
        writer.write([make_record(8)])
    monkeypatch.setattr(sys, "stdout", _Stdout(OSError(5, "Input/output error")))
    with pytest.raises(OutputError, match="Input/output error"), open_writer("-", labels=LABELS[8]) as writer:
        writer.write([make_record(8)])


# -- unwritable outputs --------------------------------------------------------------------------


def test_missing_directory_is_an_output_error_at_open(tmp_path):
    with pytest.raises(OutputError, match="does not exist"):
        open_writer(tmp_path / "nope" / "out.csv", labels=LABELS[8])


def test_directory_as_output_is_an_output_error(tmp_path):
    with pytest.raises(OutputError, match="directory"):
        open_writer(tmp_path, fmt="csv", labels=LABELS[8])


def test_parent_that_is_a_file_is_an_output_error(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(OutputError, match="not a directory"):
        open_writer(tmp_path / "file" / "out.csv", labels=LABELS[8])


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores file permissions")
def test_read_only_directory_is_an_output_error(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        with pytest.raises(OutputError, match="permission denied"):
            open_writer(locked / "out.csv", labels=LABELS[8])
    finally:
        locked.chmod(0o700)


def test_os_refusal_at_open_is_an_output_error_with_one_line(tmp_path, monkeypatch):
    """Whatever the checks miss (read-only file system, quota, root-only paths), open() reports it."""
    import builtins

    real_open = builtins.open

    def refusing_open(file, mode="r", *args, **kwargs):
        if str(file).endswith(("out.csv", "out.csv.partial")):
            raise PermissionError(13, "Permission denied", str(file))
        return real_open(file, mode, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", refusing_open)
    with pytest.raises(OutputError, match=r"out\.csv: permission denied$") as caught:
        open_writer(tmp_path / "out.csv", labels=LABELS[8])
    assert "\n" not in str(caught.value)


def test_a_full_disk_during_writing_is_an_output_error(tmp_path):
    if not os.path.exists("/dev/full"):
        pytest.skip("needs /dev/full")
    # (said as the run's other outputs say it, not the C library's "No space left on device")
    with pytest.raises(OutputError, match=r"^cannot write output /dev/full: no space left on the device$"):
        open_writer("/dev/full", fmt="csv", labels=LABELS[8])  # the header write hits "no space left"


@pytest.mark.parametrize("labels", [("a",), ("a", "a"), ("a", "")])
def test_bad_labels_are_rejected(tmp_path, labels):
    with pytest.raises(ValueError, match="labels"):
        open_writer(tmp_path / "out.csv", labels=labels)


# -- files written whole ------------------------------------------------------------------------------

WRITER = """
import sys
from pathlib import Path
from emopipe.io.records import written_whole

with written_whole(Path(sys.argv[1])) as file:
    file.write(sys.argv[2].encode())
    file.flush()
    print("writing", flush=True)
    sys.stdin.readline()  # (until the test lets it finish, or kills it)
"""


def _holding(script: str, said: str, target: Path, text: str) -> subprocess.Popen:
    """Another process running ``script`` on ``target`` and ``text``, held once it has said ``said`` (until the test
    writes a line to it, or kills it)."""
    process = subprocess.Popen([sys.executable, "-c", script, str(target), text], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert process.stdout is not None and process.stdout.readline() == said + "\n"
    return process


def writer_in_its_temporary_file(target: Path, text: str) -> subprocess.Popen:
    """Another process in the middle of writing ``target``: it has written ``text`` under its temporary name."""
    return _holding(WRITER, "writing", target, text)


def test_a_killed_writers_temporary_file_goes_with_the_next_write_but_a_live_writers_stays(tmp_path):
    target = tmp_path / "t.csv"
    killed = writer_in_its_temporary_file(target, "killed")
    killed.send_signal(signal.SIGKILL)  # no clean-up runs
    killed.wait(timeout=60)
    assert [p.name for p in tmp_path.iterdir()] == [".t.csv.0.part"]
    live = writer_in_its_temporary_file(target, "live")  # takes over the killed writer's name: never its bytes
    (tmp_path / ".t.csv.3.part").write_text("another killed writer's")  # (unlocked: nobody is writing it)
    with written_whole(target) as file:
        file.write(b"mine")
    assert target.read_text() == "mine"
    assert sorted(p.name for p in tmp_path.iterdir()) == [".t.csv.0.part", "t.csv"]  # the live writer's stays
    assert (tmp_path / ".t.csv.0.part").read_text() == "live"
    live.communicate("\n", timeout=60)
    assert live.returncode == 0
    assert [p.name for p in tmp_path.iterdir()] == ["t.csv"] and target.read_text() == "live"


STAGER = """
import sys
from pathlib import Path
from emopipe.io.records import staging_folder

with staging_folder(Path(sys.argv[1])) as folder:
    (folder / "picture.jpg").write_text(sys.argv[2])
    print("staging", flush=True)
    sys.stdin.readline()  # (until the test lets it finish, or kills it)
"""


def stager_in_its_folder(target: Path, text: str) -> subprocess.Popen:
    """Another process in the middle of building ``target`` in its staging folder, a file ``text`` in it."""
    return _holding(STAGER, "staging", target, text)


def test_a_killed_writers_staging_folder_goes_with_the_next_one_but_a_live_writers_stays(tmp_path):
    target = tmp_path / "r.thumbnails"
    killed = stager_in_its_folder(target, "killed")
    killed.send_signal(signal.SIGKILL)  # no clean-up runs
    killed.wait(timeout=60)
    assert [p.name for p in tmp_path.iterdir()] == [".r.thumbnails.0.part"]
    live = stager_in_its_folder(target, "live")  # takes over the killed writer's name: never its files
    (tmp_path / ".r.thumbnails.3.part").mkdir()  # another killed writer's (unlocked: nobody is filling it)
    (tmp_path / ".r.thumbnails.3.part" / "picture.jpg").write_text("killed")
    (tmp_path / ".r.thumbnails.5.part").write_text("a file: not a staging folder")  # (a written_whole's)
    with staging_folder(target) as mine:
        assert mine == tmp_path / ".r.thumbnails.1.part" and not list(mine.iterdir())
        (mine / "picture.jpg").write_text("mine")
        assert sorted(p.name for p in tmp_path.iterdir()) == [".r.thumbnails.0.part", ".r.thumbnails.1.part",
                                                              ".r.thumbnails.5.part"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [".r.thumbnails.0.part", ".r.thumbnails.5.part"]
    assert (tmp_path / ".r.thumbnails.0.part" / "picture.jpg").read_text() == "live"  # the live writer's stays
    live.communicate("\n", timeout=60)
    assert live.returncode == 0
    assert [p.name for p in tmp_path.iterdir()] == [".r.thumbnails.5.part"]


def test_a_write_that_fails_leaves_no_temporary_file_and_the_earlier_file_whole(tmp_path):
    target = tmp_path / "t.csv"
    target.write_text("earlier")
    with pytest.raises(OSError, match="disk full"), written_whole(target) as file:
        file.write(b"half")
        raise OSError(28, "disk full")
    assert [p.name for p in tmp_path.iterdir()] == ["t.csv"] and target.read_text() == "earlier"


# -- the names a one-source run holds while it runs ------------------------------------------------------------

HOLDER = """
import sys
from pathlib import Path
from emopipe.io.records import hold_outputs

with hold_outputs([sys.argv[1], Path(sys.argv[1]).with_suffix(".summary.json")]):
    Path(sys.argv[1]).with_name(Path(sys.argv[1]).name + ".partial").write_text(sys.argv[2])
    print("holding", flush=True)
    sys.stdin.readline()  # (until the test lets it finish, or kills it)
"""


def test_a_second_holder_of_an_output_name_is_refused_until_the_first_ends_and_no_lock_file_stays(tmp_path):
    rows = tmp_path / "rows.csv"
    first = _holding(HOLDER, "holding", rows, "the first run's rows")  # another process's run, writing its rows
    assert sorted(p.name for p in tmp_path.iterdir()) == [".rows.csv.lock", ".rows.summary.json.lock",
                                                          "rows.csv.partial"]
    # the same rows, or another run's rows beside the same summary: refused (the lock it took first goes with it)
    for names in ([rows], [tmp_path / "other.csv", tmp_path / "." / "rows.summary.json"]):
        with pytest.raises(OutputError, match=r"^\S*rows\.\S+ is in use by another emopipe run \(it holds \.rows\."
                                              r"\S+\.lock\); wait for that run to end") as refused, hold_outputs(names):
            pytest.fail("the names were taken while another run held them")
        assert refused.value.exit_code == 5 and "\n" not in str(refused.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".rows.csv.lock", ".rows.summary.json.lock",
                                                          "rows.csv.partial"]  # nothing of the refused runs'
    assert (tmp_path / "rows.csv.partial").read_text() == "the first run's rows"
    first.communicate("\n", timeout=60)  # its normal end: its lock files go with it
    assert first.returncode == 0
    assert [p.name for p in tmp_path.iterdir()] == ["rows.csv.partial"]
    with hold_outputs([rows]):
        assert sorted(p.name for p in tmp_path.iterdir()) == [".rows.csv.lock", "rows.csv.partial"]
    assert [p.name for p in tmp_path.iterdir()] == ["rows.csv.partial"]


def test_a_killed_holders_lock_files_refuse_no_later_run_and_go_with_its_end(tmp_path):
    rows = tmp_path / "rows.csv"
    killed = _holding(HOLDER, "holding", rows, "killed")
    killed.send_signal(signal.SIGKILL)  # no clean-up runs: the kernel drops its locks
    killed.wait(timeout=60)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".rows.csv.lock", ".rows.summary.json.lock",
                                                          "rows.csv.partial"]
    with hold_outputs([rows, tmp_path / "rows.summary.json"]):
        pass
    assert [p.name for p in tmp_path.iterdir()] == ["rows.csv.partial"]


def test_a_file_in_the_way_of_a_lock_file_is_refused_and_kept(tmp_path):
    (tmp_path / ".rows.csv.lock").write_text("not a lock")
    in_the_way = r"\.rows\.csv\.lock is in the way of the lock file of \S*rows\.csv"
    with pytest.raises(OutputError, match=in_the_way) as refused, hold_outputs([tmp_path / "rows.csv"]):
        pytest.fail("took a file that is not a lock file")
    assert refused.value.exit_code == 5
    assert [p.name for p in tmp_path.iterdir()] == [".rows.csv.lock"]
    assert (tmp_path / ".rows.csv.lock").read_text() == "not a lock"


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_names_that_are_not_utf8_are_written_as_valid_utf8(tmp_path, fmt):
    # (a folder of images with such a file: "internal error: UnicodeEncodeError", a header-only rows file left)
    odd = os.fsdecode(b"v/zz\xe9.mp4")
    record = dataclasses.replace(make_record(source=odd), file=os.fsdecode(b"\xe9t\xe9.png"))
    path = tmp_path / f"rows.{fmt}"
    with open_writer(path, labels=LABELS[8], files=True) as writer:
        writer.write([record])
    text = path.read_bytes().decode("utf-8")  # (strict: valid UTF-8)
    if fmt == "csv":
        row = next(csv.DictReader(io.StringIO(text)))
    else:
        row = json.loads(text)
    assert (row["source"], row["file"]) == ("v/zz\\xe9.mp4", "\\xe9t\\xe9.png")
