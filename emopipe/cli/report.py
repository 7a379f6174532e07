"""``emopipe report ROWS… -o report.html``: the per-track report of rows files written earlier."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from emopipe.cli.parsing import new_parser
from emopipe.errors import UsageError

logger = logging.getLogger(__name__)


def build_parser() -> argparse.ArgumentParser:
    parser = new_parser(
        "emopipe report",
        "A self-contained HTML report (one section per source, one chart block per face track) from rows files "
        "that emopipe wrote (.csv or .jsonl); no video processing. Thumbnails are cut from each source video "
        "when it can still be read. Exit codes: 0 ok, 2 bad options, 3 rows file not found, 4 not an emopipe "
        "rows file, 5 output not writable.")
    parser.add_argument("rows", nargs="+", help="rows files (.csv, .jsonl) written by emopipe")
    parser.add_argument("-o", "--output", required=True, metavar="HTML", help="the report (.html)")
    parser.add_argument("--tracks", metavar="CSV", help="also write the track summaries as CSV")
    parser.add_argument("--segments", metavar="CSV", help="also write the expression and affect segments as CSV")
    parser.add_argument("--no-thumbnails", action="store_true", help="do not read the source videos for thumbnails")
    parser.add_argument("--short-track", type=float, default=1.0, metavar="SECONDS",
                        help="flag tracks seen for less than this long as short")
    return parser


def _outputs(args: argparse.Namespace) -> dict[str, str]:
    """The files this command writes, by role."""
    found = {"report": args.output, "tracks": args.tracks, "segments": args.segments}
    return {role: path for role, path in found.items() if path}


def _check(args: argparse.Namespace) -> None:
    from emopipe.io.records import ensure_writable, same_file

    if Path(args.output).suffix.lower() not in (".html", ".htm"):
        raise UsageError(f"-o {args.output}: the report is a web page; name it .html")
    for role in ("tracks", "segments"):  # a typo must not turn a video or a rows file into a CSV
        path = getattr(args, role)
        if path and Path(path).suffix.lower() != ".csv":
            raise UsageError(f"--{role} {path}: the {role} are CSV; name it .csv")
    seen: dict[str, str] = {}
    for role, path in _outputs(args).items():
        for rows in args.rows:
            if same_file(path, rows):
                raise UsageError(f"the {role} output {path} is an input: choose another name (outputs never "
                                 "overwrite inputs)")
        for other_role, other in seen.items():
            if same_file(path, other):
                raise UsageError(f"the {role} and the {other_role} outputs are the same file ({path})")
        seen[role] = path
        ensure_writable(Path(path), f"the {role}")
    if not args.no_thumbnails:
        from emopipe.report.outputs import check_thumbnails_folder, thumbnails_folder

        check_thumbnails_folder(thumbnails_folder(args.output), keep=[*args.rows, *_outputs(args).values()])
    if not args.short_track >= 0:
        raise UsageError(f"--short-track must be a number of seconds ≥ 0, got {args.short_track}")


def _check_sources(args: argparse.Namespace, sources: set[str]) -> None:
    """No output may be a source video the rows name, nor the thumbnails folder one holding them (known once the
    rows are read, before anything is written)."""
    from emopipe.io.records import same_file

    for role, path in _outputs(args).items():
        for source in sources:
            if same_file(path, source):
                raise UsageError(f"the {role} output {path} is {source}, a source of these rows: choose another "
                                 "name (outputs never overwrite inputs)")
    if not args.no_thumbnails:
        from emopipe.report.outputs import check_thumbnails_folder, thumbnails_folder

        check_thumbnails_folder(thumbnails_folder(args.output), keep=sorted(sources))


def run(args: argparse.Namespace) -> int:
    from emopipe.report.outputs import write_collected_report, write_segments_csv, write_tracks_csv
    from emopipe.report.rows import read_rows_files
    from emopipe.report.tracks import TrackCollector

    _check(args)
    collector = TrackCollector()
    collector.add(read_rows_files(args.rows))
    _check_sources(args, {series.source for series in collector.series()})
    # tracks.csv names each thumbnail relative to its own folder, as the main command's does
    reports = write_collected_report(collector, args.output, thumbnails=not args.no_thumbnails,
                                     short_track_s=args.short_track,
                                     thumbnails_relative_to=Path(args.tracks).parent if args.tracks else None)
    if args.tracks:
        write_tracks_csv(args.tracks, reports)
    if args.segments:
        write_segments_csv(args.segments, reports)
    sources = len({r.summary.source for r in reports})
    pictures = sum(1 for r in reports if r.thumbnail_jpeg)
    size = Path(args.output).stat().st_size
    logger.info("%s: %d track(s) of %d source(s), %d thumbnail(s), %.1f kB", args.output, len(reports), sources,
                pictures, size / 1000)
    return 0
