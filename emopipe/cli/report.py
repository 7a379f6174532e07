"""``emopipe report ROWS… -o report.html``: the per-track report of rows files written earlier."""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
from pathlib import Path
from typing import Any

from emopipe.cli.parsing import new_parser
from emopipe.config import VIDEO_SUFFIXES, annotated_beside, lockable
from emopipe.errors import InputUnreadableError, UsageError
from emopipe.io.records import ensure_writable, hold_outputs, same_file

logger = logging.getLogger(__name__)


def build_parser() -> argparse.ArgumentParser:
    parser = new_parser(
        "emopipe report",
        "A self-contained HTML report (one section per source, one chart block per face track) from rows files "
        "that emopipe wrote (.csv or .jsonl); no video processing. Thumbnails are cut from each source video "
        "when it can still be read. No output is ever an input (rows files, source videos), and a file already "
        "at an output's name is replaced only when it is an earlier one of its kind that emopipe wrote. Exit codes: "
        "0 ok, 2 bad options (also: an output that is an input, or another file in its way), 3 rows file not found, "
        "4 not an emopipe rows file, 5 output not writable (also: in use by an emopipe run writing it now).")
    parser.add_argument("rows", nargs="+", help="rows files (.csv, .jsonl) written by emopipe")
    parser.add_argument("-o", "--output", required=True, metavar="HTML", help="the report (.html)")
    parser.add_argument("--tracks", metavar="CSV", help="also write the track summaries as CSV")
    parser.add_argument("--segments", metavar="CSV", help="also write the expression and affect segments as CSV")
    parser.add_argument("--no-thumbnails", action="store_true", help="do not read the source videos for thumbnails")
    parser.add_argument("--no-videos", action="store_true",
                        help="do not show the annotated videos emopipe wrote beside the rows files (NAME.annotated.mp4 "
                             "beside NAME.emotions.csv or NAME.csv: by default each is played in its source's "
                             "section, and each time links to that moment of it)")
    parser.add_argument("--start", type=float, metavar="SECONDS",
                        help="the --start the annotated videos were made with (their first frame's time in the "
                             "source), so the times link to the right moment (default: as the run summary beside "
                             "each rows file says, else 0)")
    parser.add_argument("--short-track", type=float, default=1.0, metavar="SECONDS",
                        help="flag tracks seen for less than this long as short")
    return parser


def _outputs(args: argparse.Namespace) -> dict[str, str]:
    """The files this command writes, by role."""
    found = {"report": args.output, "tracks": args.tracks, "segments": args.segments}
    return {role: path for role, path in found.items() if path}


_NAMED = {"report": "-o", "tracks": "--tracks", "segments": "--segments"}  # each output, as its option names it


def _check_outputs(args: argparse.Namespace, inputs: list[str], earlier: bool = True) -> None:
    """The library's checks of every name this command writes (:func:`~emopipe.report.outputs.check_report_outputs`):
    no output, under its own name or a temporary one, is one of ``inputs``, nor is the thumbnails folder one or holds
    one; and (``earlier``) what is at an output's name already is an earlier one of its kind that emopipe wrote."""
    from emopipe.report.outputs import check_report_outputs, refuse_input_names, thumbnails_folder

    outputs = _outputs(args)
    others = {role: path for role, path in outputs.items() if role != "report"}
    if earlier:
        check_report_outputs(args.output, thumbnails=not args.no_thumbnails, inputs=inputs, others=others,
                             named=_NAMED, without_thumbnails="give --no-thumbnails")
    else:
        refuse_input_names(outputs, inputs, None if args.no_thumbnails else thumbnails_folder(args.output))


def _check(args: argparse.Namespace) -> None:
    if Path(args.output).suffix.lower() not in (".html", ".htm"):
        raise UsageError(f"-o {args.output}: the report is a web page; name it .html")
    for role in ("tracks", "segments"):  # a typo must not turn a video or a rows file into a CSV
        path = getattr(args, role)
        if path and Path(path).suffix.lower() != ".csv":
            raise UsageError(f"--{role} {path}: the {role} are CSV; name it .csv")
    if args.start is not None and not (math.isfinite(args.start) and args.start >= 0):  # (as the run's --start)
        raise UsageError(f"--start must be a finite number of seconds ≥ 0, got {args.start}")
    if not args.short_track >= 0:
        raise UsageError(f"--short-track must be a number of seconds ≥ 0, got {args.short_track}")
    outputs = _outputs(args)
    seen: dict[str, str] = {}
    for role, path in outputs.items():
        for other_role, other in seen.items():
            if same_file(path, other):
                raise UsageError(f"the {role} and the {other_role} outputs are the same file ({path})")
        seen[role] = path
    _check_outputs(args, list(args.rows), earlier=False)  # (the sources, and what is there: once the rows are read)
    for role, path in outputs.items():
        ensure_writable(Path(path), f"the {role}")


def _locked(args: argparse.Namespace) -> list[str]:
    """The outputs held while this command runs, as a run holds its own (RunConfig.locked_outputs): each file's; the
    page's lock covers its thumbnails folder."""
    return [path for path in _outputs(args).values() if lockable(path)]


def _video_beside(rows: Path) -> Path | None:
    """The annotated video emopipe wrote beside a rows file (named after it, in any container), if there is one."""
    found = (Path(annotated_beside(str(rows), container)) for container in VIDEO_SUFFIXES)
    return next((video for video in found if video.is_file()), None)


def _run_summary(rows: Path) -> dict[str, Any] | None:
    """The summary of the run that wrote a rows file: ``NAME.summary.json`` beside ``NAME.csv``, whose ``outputs``
    name this rows file and whose ``source`` is named; None when there is no such summary to tell."""
    summary = rows.with_name(rows.name.rsplit(".", 1)[0] + ".summary.json")
    try:
        with open(summary, encoding="utf-8") as f:
            found = json.load(f)
    except (OSError, ValueError):
        return None
    if not isinstance(found, dict) or not isinstance(found.get("source"), str):
        return None
    written = (found.get("outputs") or {}).get("rows") if isinstance(found.get("outputs"), dict) else None
    return found if isinstance(written, str) and Path(written).name == rows.name else None


def _faceless_source(rows: Path) -> str | None:
    """The source of a rows file that holds no row (no face was found in it), as the run's summary beside the file
    names it (:func:`_run_summary`)."""
    summary = _run_summary(rows)
    return summary["source"] if summary is not None else None


def _starts(file_of: dict[str, Path]) -> dict[str, float]:
    """Where each source's annotated video begins in it (the run's ``--start``), as the run summary beside its rows
    file says (by source; a source whose summary does not say is left out: 0)."""
    starts = {}
    for source, rows in file_of.items():
        summary = _run_summary(rows)
        start = summary.get("start_s") if summary is not None else None
        if isinstance(start, (int, float)) and not isinstance(start, bool) and math.isfinite(start) and start > 0:
            starts[source] = float(start)
    return starts


def _sources_run(rows: list[str], file_of: dict[str, Path]) -> list[str]:
    """Every source of the rows files, in the files' order: those of their rows, and those where no face was found
    (a file of no row whose run summary names its source: the page lists it, saying so; added to ``file_of``)."""
    sources = []
    held_by: dict[Path, list[str]] = {}
    for source, file in file_of.items():
        held_by.setdefault(file, []).append(source)
    for name in rows:
        path = Path(name)
        held = held_by.get(path, [])
        if not held:
            source = _faceless_source(path)
            if source is None:
                logger.warning("%s holds no row (no face found?), and no run summary beside it names its source: "
                               "it is not on the page", name)
            elif source not in file_of:  # (a source with rows in another file has its section)
                held = [source]
                file_of[source] = path
        sources += held
    return list(dict.fromkeys(sources))


def _manifest_paths(rows: list[str], sources: list[str]) -> dict[str, str]:
    """Where the sources that are not where their rows name them are (a path relative to the folder the run was made
    from, and this command run from another): as the manifest of a many-source run's folder, beside a rows file, says
    (its lines' absolute ``path``), when there is one in the rows file's folder or above it (``DIR/a/clip.emotions.csv``
    of ``a/clip.mp4``: ``DIR/manifest.jsonl``)."""
    from emopipe.report.outputs import named_file

    missing = {source for source in sources if not os.path.lexists(named_file(source))}
    manifests = []
    for folder in dict.fromkeys(Path(os.path.abspath(name)).parent for name in rows) if missing else ():
        manifests += [m for m in (f / "manifest.jsonl" for f in (folder, *folder.parents)) if m.is_file()][:1]
    found: dict[str, str] = {}
    for manifest in dict.fromkeys(manifests):
        if not missing:
            break
        try:
            with open(manifest, encoding="utf-8") as f:
                lines = f.readlines()
        except (OSError, UnicodeDecodeError):
            continue
        for line in lines:
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if not isinstance(entry, dict) or entry.get("source") not in missing:
                continue
            path = entry.get("path")
            if isinstance(path, str) and os.path.exists(path := named_file(path)):
                found[entry["source"]] = path
                missing.discard(entry["source"])
    return found


def run(args: argparse.Namespace) -> int:
    from emopipe.report.outputs import write_collected_report, write_segments_csv, write_tracks_csv
    from emopipe.report.rows import read_rows_files
    from emopipe.report.tracks import RepeatedFrameError, TrackCollector

    _check(args)
    # the names are this command's until written: a run (or another report) writing the same page at the same moment
    # is refused (exit 5), never silently replaced; an earlier one's files are looked for once held
    with hold_outputs(_locked(args)):
        collector = TrackCollector()
        file_of: dict[str, Path] = {}
        collector.add(read_rows_files(args.rows, file_of))
        try:
            collector.series()  # (before anything is written)
        except RepeatedFrameError as exc:  # said of its rows file
            raise InputUnreadableError(f"{file_of[exc.source]}: {exc}") from None
        # no name this command writes is a source the rows name (a video, an image, a folder of images), known once
        # the rows are read; then a file already at an output's name is replaced only when it is of its kind and
        # emopipe's (checked after the inputs: an input there is named so). Before anything is written.
        sources_run = _sources_run(list(args.rows), file_of)
        located = {} if args.no_thumbnails else _manifest_paths(list(args.rows), sources_run)
        _check_outputs(args, [*args.rows, *sources_run, *located.values()])
        videos = {} if args.no_videos else {source: video for source, rows in file_of.items()
                                            if (video := _video_beside(rows)) is not None}
        # tracks.csv names each thumbnail relative to its own folder, as the main command's does
        reports = write_collected_report(collector, args.output, thumbnails=not args.no_thumbnails,
                                         short_track_s=args.short_track,
                                         thumbnails_relative_to=Path(args.tracks).parent if args.tracks else None,
                                         sources_run=sources_run, videos=videos,
                                         start_s=args.start if args.start is not None else _starts(file_of),
                                         inputs=args.rows, source_paths=located)
        if args.tracks:
            write_tracks_csv(args.tracks, reports)
        if args.segments:
            write_segments_csv(args.segments, reports)
    faceless = len(sources_run) - len({r.summary.source for r in reports})
    pictures = sum(1 for r in reports if r.thumbnail_jpeg)
    size = Path(args.output).stat().st_size
    logger.info("%s: %d track(s) of %d source(s)%s, %d thumbnail(s), %.1f kB", args.output, len(reports),
                len(sources_run), f" ({faceless} of them without a face)" if faceless else "", pictures, size / 1000)
    return 0
