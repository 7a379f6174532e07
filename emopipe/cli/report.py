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


def _check(args: argparse.Namespace) -> None:
    from emopipe.io.records import ensure_writable

    if Path(args.output).suffix.lower() not in (".html", ".htm"):
        raise UsageError(f"-o {args.output}: the report is a web page; name it .html")
    outputs = {"report": args.output, "tracks": args.tracks, "segments": args.segments}
    seen: dict[str, Path] = {}
    for role, path in outputs.items():
        if not path:
            continue
        resolved = Path(path).resolve()
        if any(resolved == Path(rows).resolve() for rows in args.rows):
            raise UsageError(f"the {role} output {path} is an input: choose another name (outputs never overwrite "
                             "inputs)")
        for other_role, other in seen.items():
            if resolved == other:
                raise UsageError(f"the {role} and the {other_role} outputs are the same file ({path})")
        seen[role] = resolved
        ensure_writable(Path(path), f"the {role}")
    if not args.short_track >= 0:
        raise UsageError(f"--short-track must be a number of seconds ≥ 0, got {args.short_track}")


def run(args: argparse.Namespace) -> int:
    from emopipe.report.outputs import write_report, write_segments_csv, write_tracks_csv
    from emopipe.report.rows import read_rows_files

    _check(args)
    reports = write_report(read_rows_files(args.rows), args.output, thumbnails=not args.no_thumbnails,
                           short_track_s=args.short_track)
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
