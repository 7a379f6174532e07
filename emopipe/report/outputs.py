"""The report's files: ``tracks.csv``, ``segments.csv``, the thumbnails folder and the HTML page.

Every file is written under a temporary name in its folder and renamed into place once complete, so
a failed or interrupted write never leaves half a file, nor replaces a previous good one
(:func:`~emopipe.io.records.written_whole`, which also removes what a killed write left). Nor is any written over
an input, nor over anything but an earlier file of its kind that emopipe wrote (:func:`check_report_outputs`, which
``emopipe report``, a run's ``--report`` and :func:`write_report` share).
"""

from __future__ import annotations

import csv
import io
import logging
import os
import re
import stat
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from urllib.parse import quote

import numpy as np

from emopipe.errors import InputUnreadableError, OutputError, UsageError
from emopipe.io.records import (
    InputFiles,
    describe_os_error,
    staging_folder,
    temporary_names,
    text_name,
    written_whole,
)
from emopipe.io.video import native_name
from emopipe.report.html import GENERATOR_META, SourceVideo, TrackReport, render
from emopipe.report.segments import SEGMENT_COLUMNS, segments_of
from emopipe.report.thumbnails import jpeg, thumbnails_from_source
from emopipe.report.tracks import (
    SHORT_TRACK_S,
    UNIX_TIME_S,
    TrackCollector,
    TrackSeries,
    frame_interval,
    summarize_series,
)
from emopipe.types import FaceRecord

logger = logging.getLogger(__name__)

TRACK_COLUMNS = ("source", "track_id", "first_s", "last_s", "duration_s", "frames", "gaps", "gap_s",
                 "valence_mean", "valence_median", "valence_p10", "valence_p90",
                 "arousal_mean", "arousal_median", "arousal_p10", "arousal_p90", "dominant", "short")
StrPath = str | os.PathLike[str]
OUTPUT_NAMES = {"report": "the report", "tracks": "the tracks", "segments": "the segments"}  # in the library's words


def analyse(collector: TrackCollector, thumbnails: dict[tuple[str, int], np.ndarray] | None = None, *,
            short_track_s: float = SHORT_TRACK_S) -> list[TrackReport]:
    """Summary, segments and thumbnail of every collected track, by source (first appearance) and track id."""
    by_source: dict[str, list] = {}
    for series in collector.series():
        by_source.setdefault(series.source, []).append(series)
    reports = []
    for tracks in by_source.values():
        interval = frame_interval(tracks)
        for series in sorted(tracks, key=lambda s: s.track_id):
            crop = (thumbnails or {}).get((series.source, series.track_id))
            reports.append(TrackReport(summarize_series(series, interval, short_track_s=short_track_s), series,
                                       segments_of(series, interval), None if crop is None else jpeg(crop)))
    return reports


def _write_atomically(path: Path, data: bytes) -> None:
    try:
        with written_whole(path) as file:
            file.write(data)
    except OSError as exc:
        raise OutputError(f"cannot write {path}: {describe_os_error(exc)}") from None


def _csv_bytes(columns: Sequence[str], rows: Iterable[dict[str, object]]) -> bytes:
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=list(columns), lineterminator="\n", restval="")
    writer.writeheader()
    writer.writerows(rows)
    return text.getvalue().encode("utf-8")


def write_tracks_csv(path: str | os.PathLike[str], reports: Sequence[TrackReport]) -> None:
    """One row per track: the summary's numbers, ``share_<label>`` per expression, the thumbnail's path."""
    shares: dict[str, None] = {}
    for r in reports:
        shares.update(dict.fromkeys(f"share_{label}" for label in r.summary.shares))
    _write_atomically(Path(path), _csv_bytes((*TRACK_COLUMNS, *shares, "thumbnail"),
                                             (r.summary.as_row() for r in reports)))


def write_segments_csv(path: str | os.PathLike[str], reports: Sequence[TrackReport]) -> None:
    _write_atomically(Path(path), _csv_bytes(SEGMENT_COLUMNS, (s.as_row() for r in reports for s in r.segments)))


def check_thumbnails_folder(folder: str | os.PathLike[str], keep: Iterable[str | os.PathLike[str]] = ()) -> None:
    """The thumbnails replace a folder of that name whole, never a file (the run's rows, a video): OutputError;
    nor a folder that is, or holds, one of the paths in ``keep`` (the run's inputs and other outputs): UsageError."""
    folder = Path(folder)
    if (folder.exists() or folder.is_symlink()) and not folder.is_dir():
        raise OutputError(f"cannot write the thumbnails in {folder}: it is not a folder (a file there is never "
                          "replaced); move it, or name the report otherwise")
    for path in keep:
        if _within(Path(path), folder):
            raise UsageError(f"the report's thumbnails folder {folder} is or holds {path}, which replacing the "
                             "folder would delete: name the report otherwise (outputs never overwrite inputs)")


THUMBNAIL_NAME = re.compile(r"(source-[0-9]+-)?track-[0-9]+\.jpg")  # save_thumbnails' names
_HEAD_BYTES = 64 * 1024  # enough to read a CSV header or a page's <head> (its title is short)


def not_an_earlier_output(role: str, path: str | os.PathLike[str]) -> str | None:
    """Why what is at ``path`` is not an earlier file of this kind that emopipe wrote (``role``: ``report``, ``tracks``,
    ``segments``, ``thumbnails``), in words that follow "it exists and"; None when it is one, or when nothing (or an
    empty file) is there.
    The report's files replace only their own kind: not a page of the user's, another run's rows named ``.csv``, a
    folder of photos named as the thumbnails'."""
    path = Path(path)
    if role == "thumbnails":
        # (a file there is refused by check_thumbnails_folder; a link is replaced, not what it links to)
        if not path.is_dir() or path.is_symlink():
            return None
        try:
            for entry in sorted(path.iterdir()):
                if not (THUMBNAIL_NAME.fullmatch(entry.name) and entry.is_file() and not entry.is_symlink()):
                    return f"holds {entry.name}, which is not a thumbnail emopipe wrote"
        except OSError as exc:
            return f"cannot be read to tell ({describe_os_error(exc)})"
        return None
    try:
        info = os.stat(path)
        if not stat.S_ISREG(info.st_mode):  # (a FIFO or a device: never opened to be read here)
            return "is not a regular file"
        if info.st_size == 0:
            return None
        with open(path, "rb") as f:
            head = f.read(_HEAD_BYTES)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"cannot be read to tell ({describe_os_error(exc)})"
    if role == "report":
        return None if GENERATOR_META.encode() in head else "is not a page emopipe wrote"
    header = next(csv.reader([head.split(b"\n", 1)[0].decode("utf-8", "replace").rstrip("\r")]), [])
    if role == "tracks" and tuple(header[:len(TRACK_COLUMNS)]) == TRACK_COLUMNS:
        return None
    if role == "segments" and tuple(header) == SEGMENT_COLUMNS:
        return None
    return f"does not begin with the header of the {role} file emopipe writes"


def refuse_input_names(outputs: Mapping[str, StrPath], inputs: Iterable[StrPath],
                       thumbnails: StrPath | None = None) -> None:
    """No file the report writes is an input: ``outputs`` (by role: ``report``, ``tracks``, ``segments``) neither under
    its own name nor under a temporary one it is written whole under (``.NAME.0.part``…), however spelled or linked;
    nor is the ``thumbnails`` folder (replaced whole), nor one of its temporary names where there, an input or an
    output, nor holds one (:func:`check_thumbnails_folder`). ``inputs``: the rows files, and the sources the rows name.
    UsageError naming the name and the input (a file in the thumbnails folder's way: OutputError)."""
    files = InputFiles(inputs)
    for role, path in outputs.items():
        owner = f"{role}'" if role.endswith("s") else f"{role}'s"
        names = [(str(path), f"the {role} output {path}"),
                 *((str(t), f"the {owner} temporary name {t}") for t in temporary_names(Path(path)))]
        for name, described in names:
            found = files.named_by(name)
            if found is not None:
                which = f"{found}, " if found != name else ""
                raise UsageError(f"{described} is {which}an input of this run: choose another name (outputs never "
                                 "overwrite inputs)")
    if thumbnails is not None:
        keep = [*files.paths, *outputs.values()]
        check_thumbnails_folder(thumbnails, keep=keep)
        # (a temporary folder that is not there holds nothing; one that is, a killed write's, goes whole)
        for temporary in temporary_names(Path(thumbnails)):
            if temporary.is_dir():
                check_thumbnails_folder(temporary, keep=keep)


def refuse_other_files(outputs: Mapping[str, StrPath], thumbnails: StrPath | None = None, *,
                       named: Mapping[str, str] = OUTPUT_NAMES,
                       without_thumbnails: str | None = "write it with thumbnails=False") -> None:
    """A file already at an output's name (``outputs`` by role, as :func:`not_an_earlier_output` knows them) is
    replaced only when it is of its kind and emopipe's, an earlier report's or a run's; so is the ``thumbnails`` folder:
    any other is the user's or another tool's, refused (UsageError, naming it as ``named`` does, and telling how to
    write no thumbnails: ``without_thumbnails``, None where there is no way)."""
    for role, path in outputs.items():
        why = not_an_earlier_output(role, path)
        if why is not None:
            raise UsageError(f"{named.get(role, f'the {role}')} {path} exists and {why}: the report replaces only its "
                             "own earlier files; choose another name, or move or remove that file")
    if thumbnails is not None:
        why = not_an_earlier_output("thumbnails", thumbnails)
        if why is not None:
            ways = ", ".join(["name the report otherwise", *([without_thumbnails] if without_thumbnails else []),
                              "or move or remove that folder"])
            raise UsageError(f"the report's thumbnails folder {thumbnails} (replaced whole) exists and {why}: {ways}")


def check_report_outputs(page: StrPath, *, thumbnails: bool = True, inputs: Iterable[StrPath] = (),
                         others: Mapping[str, StrPath] | None = None, named: Mapping[str, str] = OUTPUT_NAMES,
                         without_thumbnails: str | None = "write it with thumbnails=False") -> None:
    """What :func:`write_report`, ``emopipe report`` and a run's ``--report`` check before anything is written (the
    outputs never overwrite an input, nor anything but an earlier file of their kind that emopipe wrote): the
    ``page``, its thumbnails folder (``thumbnails``: written) and the ``others`` (``tracks``, ``segments``) are no
    input (:func:`refuse_input_names`; ``inputs``: the rows files and the sources), then what is at their names is
    emopipe's (:func:`refuse_other_files`). UsageError, one line (a file at the thumbnails folder's name:
    OutputError)."""
    if Path(page).name in ("", ".", ".."):  # (".", "/": a folder, no page's name)
        raise UsageError(f"{page}: the report is a web page; name it .html")
    outputs = {"report": page, **(others or {})}
    folder = thumbnails_folder(page) if thumbnails else None
    refuse_input_names(outputs, inputs, thumbnails=folder)
    refuse_other_files(outputs, folder, named=named, without_thumbnails=without_thumbnails)
    if Path(page).suffix.lower() not in (".html", ".htm"):  # (as emopipe report's -o: a browser opens it by its name)
        raise UsageError(f"{page}: the report is a web page; name it .html")


def _within(path: Path, folder: Path) -> bool:
    """Is ``path`` ``folder`` or in it, as spelled or with links followed?"""
    try:
        return (Path(os.path.abspath(path)).is_relative_to(os.path.abspath(folder))
                or path.resolve().is_relative_to(folder.resolve()))
    except (OSError, ValueError, RuntimeError):  # (a NUL in a stream URI, a link loop)
        return False


def save_thumbnails(folder: str | os.PathLike[str], reports: Sequence[TrackReport],
                    relative_to: str | os.PathLike[str] | None = None,
                    keep: Iterable[str | os.PathLike[str]] = (), sources_run: Sequence[str] = ()) -> list[TrackReport]:
    """Each track's thumbnail as a JPEG in ``folder`` (replaced whole, once all are written: never a file, a folder
    that is or holds a path of ``keep``, nor one emopipe did not make — :func:`check_thumbnails_folder`,
    :func:`refuse_other_files`); the reports again, their summaries naming the files (relative to ``relative_to``,
    else as written). Of several sources, ``source-N-track-M.jpg``: N is the source's place on the page (``sources_run``
    first, those without a face too, as :func:`~emopipe.report.html.render` numbers them), so the picture of the page's
    ``#source-N-track-M`` is ``source-N-track-M.jpg``."""
    folder = Path(folder)
    with_pictures = [r for r in reports if r.thumbnail_jpeg]
    if not with_pictures:
        return list(reports)
    check_thumbnails_folder(folder, keep=keep)
    refuse_other_files({}, folder, without_thumbnails=None)
    sources = list(dict.fromkeys([*sources_run, *(r.summary.source for r in reports)]))
    names = {}
    for r in with_pictures:
        prefix = f"source-{sources.index(r.summary.source) + 1}-" if len(sources) > 1 else ""
        names[id(r)] = f"{prefix}track-{r.summary.track_id}.jpg"
    try:
        # everything in one staging folder (what a killed write left there goes with the next write of the folder)
        with staging_folder(folder) as staging:
            pictures = staging / "new"
            pictures.mkdir()  # (as any new folder: the umask's permissions)
            for r in with_pictures:
                (pictures / names[id(r)]).write_bytes(r.thumbnail_jpeg)  # type: ignore[arg-type]
            if folder.exists():
                os.replace(folder, staging / "earlier")  # (removed with the staging folder)
            os.replace(pictures, folder)
    except OSError as exc:
        raise OutputError(f"cannot write the thumbnails {folder}: {describe_os_error(exc)}") from None
    base = Path(relative_to) if relative_to is not None else None
    updated = []
    for r in reports:
        if id(r) in names:
            picture = folder / names[id(r)]
            shown = os.path.relpath(picture, base) if base is not None else str(picture)
            r = replace(r, summary=replace(r.summary, thumbnail=shown))
        updated.append(r)
    return updated


VideoPaths = Mapping[str, "str | os.PathLike[str]"]  # a source's annotated video, by source
Starts = float | Mapping[str, float]  # where the annotated videos begin in their sources (--start): all, or by source


def _start_of(start_s: Starts, source: str) -> float:
    return start_s if isinstance(start_s, (int, float)) else start_s.get(source, 0.0)


def video_links(page: str | os.PathLike[str], videos: VideoPaths | None,
                start_s: Starts = 0.0) -> dict[str, SourceVideo]:
    """The annotated videos that exist, as the page at ``page`` links them: relative to its folder (the page and
    the videos move together), their first frames at ``start_s`` of their sources (``--start``)."""
    folder = Path(page).absolute().parent
    links = {}
    for source, video in (videos or {}).items():
        path = Path(video).absolute()
        if path.is_file():
            # (quoted by its bytes: a name that is not UTF-8 — Latin-1 — as %XX of its own bytes, not an error)
            links[source] = SourceVideo(quote(os.fsencode(Path(os.path.relpath(path, folder)).as_posix())),
                                        _start_of(start_s, source))
    return links


def video_length(path: str | os.PathLike[str]) -> tuple[float, float] | None:
    """How long a video lasts and its frame interval, in seconds, from its container's frame count and rate (None
    when it does not say)."""
    import cv2

    try:
        with native_name(Path(path)) as name:  # (OpenCV crashes on a name that is not UTF-8)
            capture = cv2.VideoCapture(name)
    except InputUnreadableError:
        return None
    try:
        frames, fps = capture.get(cv2.CAP_PROP_FRAME_COUNT), capture.get(cv2.CAP_PROP_FPS)
    finally:
        capture.release()
    return (frames / fps, 1 / fps) if frames > 0 and fps > 0 else None


def warn_links_past_the_end(series: Iterable[TrackSeries], videos: VideoPaths | None, start_s: Starts = 0.0) -> None:
    """A warning for each annotated video that the page's times would link past the end of: its rows reach further
    into it than it lasts, as when it was made with ``--start S`` and the page is written without (its first frame is
    then taken for the source's first, and every link lands S seconds late)."""
    reach: dict[str, float] = {}
    first: dict[str, float] = {}
    for s in series:
        if len(s):
            reach[s.source] = max(reach.get(s.source, -np.inf), float(s.times[-1]) - _start_of(start_s, s.source))
            first[s.source] = min(first.get(s.source, np.inf), float(s.times[0]))
    for source, video in (videos or {}).items():
        # (a live source's times are the wall clock's: the page links none of them)
        if source not in reach or first[source] > UNIX_TIME_S or not Path(video).is_file():
            continue
        length = video_length(video)
        if length is None:
            continue
        seconds, interval = length
        # (the last frame's time is seconds − interval; a container's count may be an estimate: some slack)
        if reach[source] > seconds + max(2 * interval, 0.5):
            logger.warning("%s lasts %.2f s, but the faces of %s are seen until %.2f s into it (its first frame taken "
                           "as %g s into the source): its links would land past its end; was it made with --start? "
                           "give the same --start here", text_name(video), seconds, source, reach[source],
                           _start_of(start_s, source))


def write_html(path: str | os.PathLike[str], reports: Sequence[TrackReport], title: str = "emopipe report",
               sources_run: Sequence[str] = (), videos: VideoPaths | None = None, start_s: Starts = 0.0) -> int:
    """The self-contained page (``sources_run``: see :func:`render`; ``videos``: each source's annotated video,
    whose first frame is ``start_s`` into its source); returns its size in bytes. A file at ``path`` that is not a page
    emopipe wrote is never replaced (:func:`refuse_other_files`: UsageError)."""
    refuse_other_files({"report": path})
    data = render(reports, title=title, sources_run=sources_run,
                  videos=video_links(path, videos, start_s)).encode("utf-8")
    _write_atomically(Path(path), data)
    return len(data)


def thumbnails_folder(path: str | os.PathLike[str]) -> Path:
    """``NAME.thumbnails`` beside ``NAME.ext``."""
    path = Path(path)
    return path.with_name(path.name.rsplit(".", 1)[0] + ".thumbnails") if "." in path.name else \
        path.with_name(path.name + ".thumbnails")


def write_report(records: Iterable[FaceRecord], path: str | os.PathLike[str], *, thumbnails: bool = True,
                 short_track_s: float = SHORT_TRACK_S,
                 thumbnails_relative_to: str | os.PathLike[str] | None = None,
                 sources_run: Sequence[str] = (), videos: VideoPaths | None = None,
                 start_s: Starts = 0.0, inputs: Iterable[str | os.PathLike[str]] = ()) -> list[TrackReport]:
    """The HTML report of ``records`` (from :func:`emopipe.analyze` or :func:`emopipe.read_records`) at
    ``path``; thumbnails, when asked for, are cut from each source (video, image or folder of images) that can
    still be read, and also saved in ``NAME.thumbnails`` beside the page. Returns what the page shows (the
    summaries name the thumbnails relative to ``thumbnails_relative_to``, by default the page's folder).
    ``sources_run``: every source of the run, in order; the page lists those without a face too. ``videos``: each
    source's annotated video (by source; its first frame ``start_s`` into the source — one time for all, or by
    source), shown in its section and linked from its times.

    It refuses, as ``emopipe report`` does, before anything is written (:func:`check_report_outputs`: UsageError,
    one line): to write over a source of the records or one of ``inputs`` (the rows files they were read from), a
    file that is not a page emopipe wrote, or a thumbnails folder emopipe did not make; an earlier page of emopipe's
    (and its thumbnails) is replaced."""
    collector = TrackCollector()
    collector.add(records)
    return write_collected_report(collector, path, thumbnails=thumbnails, short_track_s=short_track_s,
                                  thumbnails_relative_to=thumbnails_relative_to, sources_run=sources_run,
                                  videos=videos, start_s=start_s, inputs=inputs)


_ESCAPED_BYTE = re.compile(r"\\x([89a-fA-F][0-9a-fA-F])")  # a name's byte that is not UTF-8, as the rows write it


def named_file(name: str) -> str:
    """The file a source's name in the rows (or a manifest's path) is: as written, or, where that is not there, with
    each ``\\xNN`` that a rows file writes for a name's byte that is not UTF-8 (``zz\\xe9.mp4``) that byte again."""
    if "\\x" not in name or os.path.lexists(name):
        return name
    raw = _ESCAPED_BYTE.sub(lambda m: chr(0xDC00 + int(m[1], 16)), name)  # (as os.fsdecode holds such a byte)
    return raw if os.path.lexists(raw) else name


def write_collected_report(collector: TrackCollector, path: str | os.PathLike[str], *, thumbnails: bool = True,
                           short_track_s: float = SHORT_TRACK_S,
                           thumbnails_relative_to: str | os.PathLike[str] | None = None,
                           sources_run: Sequence[str] = (), videos: VideoPaths | None = None,
                           start_s: Starts = 0.0, inputs: Iterable[str | os.PathLike[str]] = (),
                           source_paths: Mapping[str, StrPath] | None = None) -> list[TrackReport]:
    """:func:`write_report` of tracks already collected; ``source_paths``: where a source is read for its thumbnails
    when it is not where its name says (by source: a many-source run's manifest's ``path``)."""
    sources = [*sources_run, *sorted({series.source for series in collector.series()})]
    source_paths = {source: named_file(os.fspath((source_paths or {}).get(source, source))) for source in sources}
    # never written over: the rows files, every source (those without a face too), the annotated videos shown
    known = [*inputs, *sources, *source_paths.values(), *(videos or {}).values()]
    check_report_outputs(path, thumbnails=thumbnails, inputs=known)
    crops: dict[tuple[str, int], np.ndarray] = {}
    if thumbnails:
        by_source: dict[str, list[TrackSeries]] = {}
        for series in collector.series():
            by_source.setdefault(series.source, []).append(series)
        gone = [source for source in by_source if not os.path.exists(source_paths[source])]
        if len(gone) > 1:  # said once, not a line each (a report of a moved archive's rows said hundreds)
            shown = ", ".join(text_name(source) for source in gone[:3])
            logger.info("no thumbnails for %d sources: they are not there (%s%s)", len(gone), shown,
                        f" and {len(gone) - 3} more" if len(gone) > 3 else "")
        for source, tracks in by_source.items():
            if len(gone) < 2 or source not in gone:
                crops.update(thumbnails_from_source(tracks, source_paths[source]))
    reports = analyse(collector, crops, short_track_s=short_track_s)
    if crops:
        base = thumbnails_relative_to if thumbnails_relative_to is not None else Path(path).parent
        reports = save_thumbnails(thumbnails_folder(path), reports, relative_to=base, keep=[*known, path],
                                  sources_run=sources_run)
    warn_links_past_the_end(collector.series(), videos, start_s)
    write_html(path, reports, sources_run=sources_run, videos=videos, start_s=start_s)
    return reports
