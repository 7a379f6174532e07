"""Rows files written by emopipe (CSV or JSON Lines, see :mod:`emopipe.io.records`) read back into
:class:`~emopipe.types.FaceRecord`\\ s, so old runs can be summarised and reported without the video.

The class labels come from the file itself (the CSV's ``p_<label>`` columns, the JSON objects'
``probabilities`` keys). A file that is not an emopipe rows file, or a broken row, is an
:class:`~emopipe.errors.InputUnreadableError` naming the file and line.
"""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from emopipe.errors import InputNotFoundError, InputUnreadableError, UsageError
from emopipe.io.records import FORMATS
from emopipe.types import NUM_LANDMARKS, FaceRecord

_REQUIRED = ("source", "frame", "timestamp_s", "track_id", "x1", "y1", "x2", "y2", "score", "label", "valence",
             "arousal")


def rows_format(path: str | os.PathLike[str]) -> str:
    name = Path(path)
    if name.suffix.lower() == ".partial":  # the rows of a run that did not complete (docs/outputs.md), as they are
        name = name.with_suffix("")
    suffix = name.suffix.lower()
    if suffix not in FORMATS:
        raise InputUnreadableError(f"{path}: not an emopipe rows file (expected a name ending in "
                                   f"{', '.join(FORMATS)}, or that and .partial)")
    return FORMATS[suffix]


def read_records(path: str | os.PathLike[str]) -> Iterator[FaceRecord]:
    """The records of one rows file, in file order (a generator: the file is read as it is consumed)."""
    path = Path(path)
    fmt = rows_format(path)
    if not path.is_file():
        raise InputNotFoundError(f"rows file not found: {path}")
    try:
        # (utf-8-sig: a file saved again by a spreadsheet or an editor that begins it with a byte-order mark is read)
        with open(path, newline="" if fmt == "csv" else None, encoding="utf-8-sig") as f:
            yield from (_read_csv(path, f) if fmt == "csv" else _read_jsonl(path, f))
    except UnicodeDecodeError:
        raise InputUnreadableError(f"{path}: not a text file (expected emopipe {fmt} rows)") from None
    except OSError as exc:
        raise InputUnreadableError(f"cannot read {path}: {exc.strerror or exc}") from None


def read_rows_files(paths: Sequence[str | os.PathLike[str]],
                    file_of: dict[str, Path] | None = None) -> Iterator[FaceRecord]:
    """The records of several rows files in turn (a generator, as :func:`read_records`); ``file_of``, when given,
    is filled with each source's file as its rows are read.

    Each source's rows must come from one file: track ids are numbered per run, so the rows of one
    source in two files (the .csv and .jsonl of one run, or two runs of it) would merge different
    runs' tracks and count their frames twice. Either, and a file given twice, is a
    :class:`~emopipe.errors.UsageError` naming the files.
    """
    files = [Path(p) for p in paths]
    seen: dict[object, int] = {}  # each file by its identity (device and inode, else its resolved name): one look a
    # file, not one a pair of them (an archive's thousands of rows files)
    for i, path in enumerate(files):
        j = seen.setdefault(_identity(path), i)
        if j != i:
            raise UsageError(f"{os.fspath(paths[i])} is {os.fspath(paths[j])} again: give each rows file once")
    file_of = {} if file_of is None else file_of
    for path in files:
        for record in read_records(path):
            first = file_of.setdefault(record.source, path)
            if first is not path:
                raise UsageError(f"{first} and {path} both hold rows of {record.source}: a source's track ids "
                                 "belong to one run, so they cannot be merged (one run's .csv and .jsonl, or two "
                                 "runs of it?); report each file on its own")
            yield record


def _identity(path: Path) -> object:
    """What one file is, however spelled or linked (as :func:`~emopipe.io.records.same_file` tells)."""
    try:
        info = os.stat(path)
        return info.st_dev, info.st_ino
    except (OSError, ValueError):  # (not there: known by its name)
        try:
            return str(path.resolve())
        except (OSError, ValueError, RuntimeError):
            return str(path.absolute())


def _broken(path: Path, line: int, reason: object) -> InputUnreadableError:
    return InputUnreadableError(f"{path}:{line}: not an emopipe row ({reason})")


def _read_csv(path: Path, f: Any) -> Iterator[FaceRecord]:
    reader = csv.reader(f)
    try:
        yield from _csv_records(path, reader)
    except csv.Error as exc:  # a field over the csv module's limit, a NUL byte, an unclosed quote at the end
        raise _broken(path, reader.line_num, exc) from None


def _csv_records(path: Path, reader: Any) -> Iterator[FaceRecord]:
    header = next(reader, None)
    if header is None:
        return
    missing = [c for c in _REQUIRED if c not in header]
    if missing:
        made = next((f"; it is the {kind} file emopipe writes beside the rows: give the rows file itself"
                     for kind, first in (("tracks", ["source", "track_id", "first_s"]),
                                         ("segments", ["source", "track_id", "kind", "segment"]))
                     if header[:len(first)] == first), "")
        raise InputUnreadableError(f"{path}: not an emopipe rows file (no column {', '.join(missing)}){made}")
    labels = tuple(c[2:] for c in header if c.startswith("p_"))
    where = {name: i for i, name in enumerate(header)}
    p_columns = [where[f"p_{label}"] for label in labels]
    lm_columns = [where.get(f"lm{i}_{axis}") for i in range(NUM_LANDMARKS) for axis in ("x", "y")]
    has_landmarks = all(c is not None for c in lm_columns)
    for number, row in enumerate(reader, start=2):
        if not row:
            continue
        try:
            if len(row) != len(header):
                raise ValueError(f"{len(row)} values for {len(header)} columns")
            landmarks = None
            if has_landmarks and row[lm_columns[0]] != "":  # type: ignore[index]
                landmarks = [[float(row[lm_columns[2 * i]]), float(row[lm_columns[2 * i + 1]])]  # type: ignore[index]
                             for i in range(NUM_LANDMARKS)]
            yield FaceRecord(
                source=row[where["source"]], frame=_whole_text(row[where["frame"]], "frame"),
                timestamp_s=float(row[where["timestamp_s"]]), track_id=_whole_text(row[where["track_id"]], "track_id"),
                box=tuple(float(row[where[k]]) for k in ("x1", "y1", "x2", "y2")),  # type: ignore[arg-type]
                score=float(row[where["score"]]), label=row[where["label"]],
                probabilities=[float(row[c]) for c in p_columns], valence=float(row[where["valence"]]),
                arousal=float(row[where["arousal"]]), landmarks=landmarks,
                detected=bool(_whole_text(row[where["detected"]], "detected")) if "detected" in where else True,
                labels=labels,
                file=row[where["file"]] if "file" in where else None,  # (a folder of images: the image's name)
            )
        except (ValueError, TypeError, OverflowError) as exc:
            raise _broken(path, number, exc) from None


def _text_or_none(value: Any, name: str) -> str | None:
    if value is not None and not isinstance(value, str):
        raise ValueError(f"{name} is not a string")
    return value


def _whole(value: Any, name: str) -> int:
    """A JSON number that must be whole (a frame, a track id): 3 or 3.0, never 3.5 taken as 3 (a track 1.5 became 1,
    its rows merged into track 1's)."""
    if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
        raise ValueError(f"{name} is not a whole number: {value!r}")
    return int(value)


def _whole_text(text: str, name: str) -> int:
    """A CSV field that must be a whole number: 3, or 3.0 as pandas writes an integer column a missing value turned
    into floats; never 3.5."""
    try:
        return int(text)
    except ValueError:
        return _whole(float(text), name)


def _read_jsonl(path: Path, f: Any) -> Iterator[FaceRecord]:
    labels: tuple[str, ...] | None = None  # the first row's: every row of a run has the same classes
    for number, line in enumerate(f, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            if not isinstance(row, dict):
                raise ValueError("not a JSON object")
            missing = [c for c in _REQUIRED if c not in row] + ([] if "probabilities" in row else ["probabilities"])
            if missing:
                raise ValueError(f"no field {', '.join(missing)}")
            probabilities = row["probabilities"]
            if not isinstance(probabilities, dict):
                raise ValueError("probabilities is not an object {label: p}")
            if labels is None:
                labels = tuple(probabilities)
            elif tuple(probabilities) != labels:
                raise ValueError(f"labels {', '.join(probabilities)}, where the rows before have {', '.join(labels)}")
            yield FaceRecord(
                source=str(row["source"]), frame=_whole(row["frame"], "frame"), timestamp_s=float(row["timestamp_s"]),
                track_id=_whole(row["track_id"], "track_id"),
                box=tuple(float(row[k]) for k in ("x1", "y1", "x2", "y2")),  # type: ignore[arg-type]
                score=float(row["score"]), label=str(row["label"]),
                probabilities=[float(p) for p in probabilities.values()], valence=float(row["valence"]),
                arousal=float(row["arousal"]), landmarks=row.get("landmarks"),
                detected=bool(row.get("detected", True)), labels=tuple(probabilities),
                file=_text_or_none(row.get("file"), "file"),
            )
        except RecursionError:  # json nests by recursion: a deeply nested value ends it
            raise _broken(path, number, "nested too deeply") from None
        except (ValueError, TypeError, KeyError, OverflowError) as exc:  # (OverflowError: int() of a huge float)
            raise _broken(path, number, exc) from None
