"""Many sources in one run: one pipeline, one warmup, a rows file per source and a run manifest.

The sources are read one after another into a single :class:`~emopipe.pipeline.runner.Pipeline` by a
:class:`SourceChain`, which opens and decodes the next ``parallel`` sources ahead on threads of its own, so
there is no pause between sources and the detector's and EmoNet's static batches are shared across them.
Frames carry their source's position (``Frame.stream``); on the writer thread a :class:`PerSourceSink` hands
each frame to that source's tracker and rows file, and — as frames arrive in order — finishes a source when
its last frame is written (or the first frame of a later one arrives, or the run ends): its files are written
under partial names, its line appended to the manifest, then the files take their final names, the rows last
(:meth:`PerSourceSink._finish` says why). A source that cannot be opened or read is recorded as ``failed`` and the
others go on. A sink with no manifest (a cluster worker's: its driver writes the lines) leaves the files under
their partial names and lists the renames in the source's result; the driver does them after the line.

A chain can also be *fed* (``feeding=True``): sources are added while it runs (:meth:`SourceChain.extend`) and
it waits for more until :meth:`SourceChain.end_feed`. A cluster worker runs one such chain through one pipeline
for its whole life, so the GPU never drains between the shares the driver hands it.

``DIR/manifest.jsonl`` gets one JSON line per source as it finishes (append-only, flushed and synced, so it
survives a killed run); ``--resume`` skips sources whose latest line says ``ok`` (or ``skipped``) and whose
outputs all exist, and runs the others again, replacing their partial files: no row is duplicated. Each source
keeps the names the earlier run gave its files, and no source takes another's.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import queue
import re
import stat
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from emopipe.config import RunConfig, Written, default_output, rows_suffix
from emopipe.errors import EmopipeError, InputTruncatedError, OutputError, UsageError
from emopipe.io.inputs import source_key
from emopipe.io.records import MANIFEST as MANIFEST  # (named here for the run's other modules too)
from emopipe.io.records import (
    MAX_NAME_BYTES,
    RecordWriter,
    open_writer,
    partial_path,
    remove_earlier,
    temporary_names,
    text_name,
)
from emopipe.io.sources import Source, open_source, source_kind
from emopipe.io.uris import is_live, is_url, redact_uri
from emopipe.pipeline.hooks import Sink
from emopipe.pipeline.sinks import FaceRecorder, RecordSink, TrackWatcher
from emopipe.pipeline.summary import RunSummary
from emopipe.report.outputs import analyse, write_segments_csv, write_tracks_csv
from emopipe.types import Frame, FrameResult, SourceInfo
from emopipe.vision.annotate import AnnotatedVideoWriter

logger = logging.getLogger(__name__)

RUN_SUMMARY = "summary.json"
STATUSES = ("ok", "failed", "interrupted", "skipped")
DONE = frozenset({"ok", "skipped"})
# a source's name leaves room for the longest file named from it: NAME.emotions.summary.json.partial
NAME_ROOM = MAX_NAME_BYTES - 40


# -- where each source's files go -----------------------------------------------------------------


@dataclass(frozen=True)
class PlannedSource:
    """One source of a many-source run and the files it writes."""

    position: int  # in the run's order (the frames' ``stream``)
    uri: str
    rows: Path
    summary: Path
    directory: Path = Path()  # the run's output folder
    video: Path | None = None  # its annotated video (--annotate mp4|mkv|avi), beside its rows
    # A part of a long video (emopipe.pipeline.parts): (k, n), its stretch of the video (None: the run's --start and
    # --end), and from when its rows count (before it: the overlap with the part before, where tracks are matched)
    # and until when (after it, with --detect-every: the frames up to the next key frame, which the boxes before it
    # are interpolated towards)
    part: tuple[int, int] | None = None
    start_s: float | None = None
    end_s: float | None = None
    keep_from_s: float | None = None
    keep_until_s: float | None = None
    # what messages, metrics and the live page call it where its URI without credentials is another camera's too
    # (two cloud cameras whose URLs differ only in their token): see :attr:`shown_as`
    label: str | None = None

    @property
    def shown_as(self) -> str:
        """What messages, metric labels and the live page call it: its URI without credentials, told apart by its rows
        file's name where that is another source's too."""
        return self.label or redact_uri(self.uri)

    @property
    def key(self) -> str:
        """What a driver knows it by: its source, or its source and part (a video's parts go out as sources)."""
        return self.uri if self.part is None else f"{self.uri}#part{self.part[0]}of{self.part[1]}"

    def video_part(self, part: int) -> Path | None:
        """Its annotated video's ``part`` (1, 2…): a camera over Ray records a new part each time its worker dies and it
        moves to another (a second FFmpeg cannot go on in the first's file), ``NAME.annotated.2.mp4`` after
        ``NAME.annotated.mp4``; part 1 is :attr:`video` itself."""
        if self.video is None or part == 1:
            return self.video
        return self.video.with_name(f"{self.video.stem}.{part}{self.video.suffix}")

    @staticmethod
    def video_role(part: int) -> str:
        """The ``outputs`` key of a video's ``part``: ``annotated_video``, ``annotated_video_2``…"""
        return "annotated_video" if part == 1 else f"annotated_video_{part}"

    def recorded_parts(self, last: int) -> dict[str, str]:
        """Of its video's parts 1 to ``last``, those written with frames (a worker that died before its first left
        none), by ``outputs`` key."""
        parts = ((part, self.video_part(part)) for part in range(1, last + 1))
        return {self.video_role(part): str(path) for part, path in parts
                if path is not None and path.exists() and path.stat().st_size > 0}

    @property
    def tracks(self) -> Path:  # per face track (docs/report.md), beside the rows like a one-source run's
        return self.rows.with_suffix(".tracks.csv")

    @property
    def segments(self) -> Path:
        return self.rows.with_suffix(".segments.csv")

    @property
    def files(self) -> tuple[Path, ...]:
        """Every file its run writes under its final name."""
        return tuple(path for _, path in self.roles())

    def roles(self) -> list[tuple[str, Path]]:
        """Its files by role, as the summary's and the manifest's ``outputs`` name them."""
        roles = [("rows", self.rows), ("tracks", self.tracks), ("segments", self.segments), ("summary", self.summary)]
        return roles + ([("annotated_video", self.video)] if self.video is not None else [])

    def written(self, temporaries: bool = True) -> list[Written]:
        """Every name its run may write: each file's own and the partial name it is written under first (and stays
        under when the run is cut off), and (``temporaries``) the temporary names the tracks and segments are written
        whole under."""
        names = []
        for role, path in self.roles():
            # (the video's suffix stays last: it names the container)
            partial = partial_path(path, keep_suffix=role == "annotated_video")
            names += [Written(role, str(path)), Written(role, str(partial), "partial")]
            if temporaries and role in ("tracks", "segments"):
                names += [Written(role, str(temporary), "temporary") for temporary in temporary_names(partial)]
        return names

    @property
    def name(self) -> str:
        """Its name in the folder (``a/clip`` of ``DIR/a/clip.emotions.csv``), as the manifest records it."""
        return self.summary.relative_to(self.directory).as_posix().removesuffix(".emotions.summary.json")


def _absolute(uri: str) -> Path:
    return Path(os.path.abspath(uri))  # (".." and "." removed from the text; links kept, unlike resolve())


def _relative_stems(uris: Sequence[str]) -> list[str]:
    """Names for the outputs that differ whenever the inputs differ: a file's path relative to the folder all
    the files share (without its extension; a/clip.mp4 and b/clip.mp4 → a/clip, b/clip; a folder of images
    keeps its whole name), a stream's cleaned URL.
    Paths are taken as given, links not followed: a link's outputs are named after the link, not its target."""
    files = [_absolute(u) for u in uris if not is_live(u)]
    common = Path(os.path.commonpath([str(f.parent) for f in files])) if files else Path("/")
    stems = []
    for uri in uris:
        if is_live(uri):
            stems.append(default_output(uri).removesuffix(".emotions.csv"))
            continue
        relative = _absolute(uri).relative_to(common)
        parts = [re.sub(r"[^\w.+-]+", "_", p) for p in relative.parts]
        name = parts[-1]
        dotted = "." in name.lstrip(".") and not Path(uri).is_dir()  # (a folder's name has no extension: take.1)
        stem = name.rsplit(".", 1)[0] if dotted else name
        if len(stem.encode()) > NAME_ROOM:  # cut, with a hash of the whole name so that cut names still differ
            stem = stem.encode()[:NAME_ROOM - 20].decode(errors="ignore") + "-" + \
                hashlib.sha1(name.encode()).hexdigest()[:12]
        stems.append("/".join([*parts[:-1], stem]))
    return stems


def _fitted(stem: str, suffix: str = "") -> str:
    """``stem`` + ``suffix``, its last part cut so that every file named from it fits a file name's limit."""
    folder, _, last = stem.rpartition("/")
    last = last.encode()[:NAME_ROOM - len(suffix.encode())].decode(errors="ignore") + suffix
    return f"{folder}/{last}" if folder else last


def plan_outputs(uris: Sequence[str], directory: Path, fmt: str, *, own: dict[str, str] | None = None,
                 reserved: set[str] | None = None, video: str | None = None) -> list[PlannedSource]:
    """Each source's rows file and summary under ``directory``; names that would collide get a suffix. ``video``
    (a container's suffix, ``.mp4``): each source's annotated video too, ``NAME.annotated.mp4``.

    ``own`` (``--resume``): the name (``a/clip`` of ``a/clip.emotions.csv``) an earlier run gave a source, which it
    keeps; ``reserved``: names the earlier run gave other sources, which no source here takes — names follow the
    set of sources, and a source added later must never be given (and overwrite) another's finished files."""
    suffix = rows_suffix(fmt)
    taken = {name.lower() for name in reserved or ()}
    kept: dict[str, str] = {}
    for uri, name in (own or {}).items():  # (one earlier name claimed by two sources: the first keeps it)
        if uri in uris and name.lower() not in taken:
            kept[uri] = name
            taken.add(name.lower())
    planned = []
    for position, (uri, stem) in enumerate(zip(uris, _relative_stems(uris))):
        if uri in kept:
            name = kept[uri]
        else:
            name, n = _fitted(stem), 1
            while name.lower() in taken:  # e.g. clip.mp4 and clip.mkv in one folder
                n += 1
                name = _fitted(stem, f"-{n}")
            taken.add(name.lower())
        planned.append(PlannedSource(position, uri, directory / f"{name}{suffix}",
                                     directory / f"{name}.emotions.summary.json", directory,
                                     directory / f"{name}.annotated{video}" if video else None))
    return _told_apart(planned)


def _told_apart(planned: list[PlannedSource]) -> list[PlannedSource]:
    """``planned``, those whose URIs read the same without credentials labelled with their rows file's name first
    (``cam-2.emotions.csv: rtsp://…``; after the URI a query's secret would swallow it when redacted again): one metric
    label, one tile name for two cameras would add their numbers together."""
    shown = Counter(redact_uri(p.uri) for p in planned)
    return [replace(p, label=f"{p.rows.name}: {redact_uri(p.uri)}") if shown[redact_uri(p.uri)] > 1 else p
            for p in planned]


# -- the manifest -----------------------------------------------------------------------------------


def file_facts(source: str) -> dict[str, int] | None:
    """A source file's size and modification time (nanoseconds), as a manifest line records them; None for anything
    but a regular file (a folder of images, a stream) or one that is not there."""
    try:
        facts = os.stat(source)
    except (OSError, ValueError):
        return None
    return {"size": facts.st_size, "mtime_ns": facts.st_mtime_ns} if stat.S_ISREG(facts.st_mode) else None


class Manifest:
    """``manifest.jsonl``: one line per finished source, appended and synced as it finishes.

    A many-file run's manifest (``files=True``) also gives each line the source's absolute ``path`` and its
    outputs relative to the folder (``files``), so ``--resume`` knows a source however it is spelled and from
    whichever folder the command runs, and finds its files where the folder is now (moved or copied whole)."""

    def __init__(self, directory: Path, files: bool = False) -> None:
        self.directory = directory
        self.path = directory / MANIFEST
        self.files = files
        self.options: dict[str, Any] | None = None  # a many-file run's results options, on each line it writes
        self._lock = threading.Lock()

    def previous(self) -> dict[str, dict[str, Any]]:
        """The latest line for each source from earlier runs, by its ``path`` where the line has one, else by the
        source as given. Lines a killed run cut, or edited into another shape, are passed over."""
        latest: dict[str, dict[str, Any]] = {}
        if not self.path.exists():
            return latest
        try:
            text = self.path.read_bytes().decode("utf-8", errors="replace")  # (a line cut inside a character)
        except OSError as exc:
            raise OutputError(f"cannot read the manifest {self.path}: {exc.strerror or exc}") from None
        for line in text.splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if not (isinstance(entry, dict) and isinstance(entry.get("source"), str)
                    and isinstance(entry.get("outputs", {}), dict) and isinstance(entry.get("files", {}), dict)):
                continue
            path = entry.get("path")
            key = path if isinstance(path, str) else entry["source"]
            earlier = latest.get(key)
            if earlier is not None and not (entry.get("files") or entry.get("outputs")):
                # a line without files (a redo that could not open its source, or was cut off before it began)
                # keeps the names its files have from an earlier line: still its own, not a clash next time
                entry = {**entry, "named_as": earlier.get("named_as") or earlier}
            latest[key] = entry
        return latest

    def entry_for(self, previous: dict[str, dict[str, Any]], uri: str) -> dict[str, Any] | None:
        """A source's latest line in ``previous`` (:meth:`previous`), however it was spelled then."""
        return previous.get(source_key(uri)) or previous.get(uri)

    def outputs_of(self, entry: dict[str, Any]) -> dict[str, Path]:
        """Where an earlier line's outputs are now: under this folder where the line says (``files``), else as
        the line gives them."""
        files = entry.get("files") or {}
        if files:
            return {role: self.directory / name for role, name in files.items() if isinstance(name, str)}
        return {role: Path(path) for role, path in entry.get("outputs", {}).items() if isinstance(path, str)}

    def name_of(self, entry: dict[str, Any]) -> str | None:
        """The name (``a/clip``) an earlier run gave a source's files, or None."""
        if not (entry.get("files") or entry.get("outputs")) and isinstance(entry.get("named_as"), dict):
            entry = entry["named_as"]
        for path in self.outputs_of(entry).values():
            try:
                relative = path.resolve().relative_to(self.directory.resolve()).as_posix()
            except ValueError:
                continue
            relative = relative.removesuffix(".partial")  # (an interrupted source's rows)
            for ending in (".emotions.summary.json", ".emotions.csv", ".emotions.jsonl"):
                if relative.endswith(ending):
                    return relative.removesuffix(ending)
        return None

    def names(self, previous: dict[str, dict[str, Any]], uris: Sequence[str]) -> tuple[dict[str, str], set[str]]:
        """For :func:`plan_outputs`: the names earlier lines gave ``uris`` (each keeps its own), and those they gave
        other sources (reserved). An older line of a source here (spelled otherwise, or without ``path``) is its
        own, not another's."""
        own = {uri: name for uri in uris if (entry := self.entry_for(previous, uri)) and (name := self.name_of(entry))}
        paths = {source_key(uri) for uri in uris}

        def current(entry: dict[str, Any]) -> bool:  # a line with a path is that file's, however it is spelled
            path = entry.get("path")
            return path in paths if isinstance(path, str) else entry["source"] in uris or entry["source"] in paths

        reserved = {name for entry in previous.values() if not current(entry) and (name := self.name_of(entry))}
        return own, reserved

    def append(self, entry: dict[str, Any], *, as_line: dict[str, Any] | None = None) -> None:
        """Add ``entry`` as a line (with the run's :attr:`options`; ``as_line``: an earlier line's instead, for a
        source that line's run did — a ``--resume``'s ``skipped`` line)."""
        options = self.options if as_line is None else as_line.get("options")
        if isinstance(options, dict):
            entry = {**entry, "options": options}
        if self.files:
            entry = dict(entry)
            source = entry.get("source", "")
            if not (is_url(source) or is_live(source)):
                entry.setdefault("path", source_key(source))
            # the file its results were made from (a --resume tells a source replaced since): an earlier line's for a
            # source it did, this file's now for a source done now
            made_from = as_line.get("source_file") if as_line is not None else (
                file_facts(source) if entry.get("status") == "ok" else None)
            if isinstance(made_from, dict):
                entry["source_file"] = made_from
            where = self.directory.resolve()
            files = {}
            for role, output in entry.get("outputs", {}).items():
                with contextlib.suppress(ValueError):
                    files[role] = Path(output).resolve().relative_to(where).as_posix()
            if files:
                entry["files"] = files
        # A name whose bytes are not UTF-8 (Python holds them as lone surrogates) is written as valid UTF-8 all the
        # same: the source and the error, for people, with those bytes as \\xNN; any other field (the ``path`` that
        # --resume knows the file by) exactly, as a JSON escape (\\udcNN) that reads back as the name.
        entry = {key: text_name(value) if key in ("source", "error") and isinstance(value, str) else value
                 for key, value in entry.items()}
        line = json.dumps(entry, ensure_ascii=False) + "\n"
        with self._lock:
            try:
                with open(self.path, "a+b") as file:
                    if file.seek(0, os.SEEK_END):
                        file.seek(-1, os.SEEK_END)
                        if file.read(1) != b"\n":  # a line a killed run cut: the next one starts on its own line
                            line = "\n" + line
                    file.write(line.encode("utf-8", errors="backslashreplace"))  # (only a lone surrogate fails)
                    file.flush()
                    os.fsync(file.fileno())
            except OSError as exc:
                raise OutputError(f"cannot write the manifest {self.path}: {exc.strerror or exc}") from None

    def done(self, entry: dict[str, Any] | None, wanted: Sequence[str] = ()) -> bool:
        """A source an earlier run finished: its latest line says so, every output it lists is there, and it lists
        the ``wanted`` roles (``annotated_video``: a source finished without its video is done again with it)."""
        if not entry or entry.get("status") not in DONE:
            return False
        outputs = self.outputs_of(entry)
        return all(role in outputs for role in wanted) and all(path.exists() for path in outputs.values())


# -- reading many sources as one ---------------------------------------------------------------------


@dataclass
class _Reading:
    """What the chain knows about one source while and after it is read."""

    planned: PlannedSource
    info: SourceInfo | None = None
    decoder: str = "opencv"
    frames: int = 0
    error: EmopipeError | None = None
    ended_early: str | None = None
    finished: bool = False  # read to its end (or failed)
    started_s: float = field(default_factory=time.perf_counter)


_END = object()
IDLE_POLL_S = 0.05  # a fed chain waiting for sources lets its sink finish the sources written meanwhile this often


class SourceChain:
    """The frames of many sources, one source after another, each frame tagged with its source's position.

    ``open_one`` opens a source (a failure is recorded for that source; the chain goes on); a part of a video
    (:attr:`PlannedSource.part`) with its ``start_s`` and ``end_s``. Up to
    ``parallel`` sources are opened and decoded ahead, each on its own thread into a small bounded queue,
    so the next source's first frames are ready when the current one ends. ``feeding``: more sources come
    through :meth:`extend` while the chain is read; it ends once :meth:`end_feed` is called and all are read.
    """

    def __init__(self, planned: Sequence[PlannedSource], open_one: Callable[..., Source], parallel: int = 2,
                 queue_frames: int = 32, feeding: bool = False, held: bool = False) -> None:
        if parallel < 1:
            raise UsageError(f"--parallel must be at least 1, got {parallel}")
        self.readings = [_Reading(p) for p in planned]
        self.uris = [p.uri for p in planned]  # by position; a fed chain's grows (the metrics' source names)
        self._open_one = open_one
        self._parallel = parallel
        self._queue_frames = queue_frames
        self._stop = threading.Event()
        self._queues: dict[int, queue.Queue[Any]] = {}
        self._threads: list[threading.Thread] = []
        self._ahead = threading.Lock()  # (sources are opened ahead from the reading thread and from extend)
        self._more = threading.Condition()
        self.feeding = feeding
        self.on_idle: Callable[[], None] | None = None  # called while a fed chain waits for more sources
        # called (by the thread iterating) once a source's last frame is taken, before the next source's first
        self.on_read: Callable[[int], None] | None = None
        # called once sources have begun (their reading started; no lock held): a cluster worker tells its driver
        # which source it is in, so one cut off before its first frame is written is recorded as one process does
        self.on_begin: Callable[[], None] | None = None
        self.reading = 0  # the position being read
        self.started = 0  # sources whose reading has begun (in order)
        # held: no source is opened (nor decoded) until release_reading(); a cluster worker's chain is made so, and
        # its detector warmed for the first source's frame size first: a CUDA graph captured while NVDEC decodes
        # killed workers (the decoder's thread failed with CUDA error 906 and ended the process; session 22)
        self.held = held
        self.ended_early: str | None = None
        self.info = SourceInfo(uri=f"{len(planned)} sources" if not feeding else "fed sources", width=1, height=1,
                               fps=None, frame_count=None, kind="video")

    # -- Source protocol ------------------------------------------------------------------------

    @property
    def expected_frames(self) -> int | None:
        return None

    @property
    def decoder(self) -> str:
        """The decoders the opened sources were read with: ``nvdec``, ``opencv``, or ``nvdec+opencv`` when some
        fell back (a codec NVDEC lacks); ``none`` before any opened."""
        used = sorted({r.decoder for r in self.readings if r.info is not None})
        return "+".join(used) or "none"

    def __enter__(self) -> SourceChain:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._stop.set()
        with self._more:
            self._more.notify_all()
        for thread in self._threads:
            thread.join(timeout=5.0)

    def __iter__(self) -> Iterator[Frame]:
        position = 0
        while self._wait_for(position):
            self.reading = position
            self._start_ahead(position)
            items = self._queues[position]
            while True:
                item = items.get()
                if item is _END:
                    break
                yield item
            del self._queues[position]
            if self.on_read is not None:
                self.on_read(position)
            position += 1

    # -- feeding -----------------------------------------------------------------------------------

    def extend(self, planned: Sequence[PlannedSource]) -> range:
        """Add sources to a fed chain (numbered on from its last); their positions."""
        with self._more:
            if not self.feeding:
                raise RuntimeError("sources are added only to a fed chain that has not ended")
            first = len(self.readings)
            for k, source in enumerate(planned):
                self.readings.append(_Reading(replace(source, position=first + k)))
                self.uris.append(source.uri)
            self._more.notify_all()
        self._start_ahead(self.reading)  # the new sources open now if the chain is near its end
        return range(first, first + len(planned))

    def end_feed(self) -> None:
        """No more sources: the chain ends once those it has are read."""
        with self._more:
            self.feeding = False
            self._more.notify_all()

    def _wait_for(self, position: int) -> bool:
        """Whether there is a source at ``position``, once there is one (a fed chain waits, calling
        ``on_idle`` every IDLE_POLL_S); False when the chain has ended or is stopped."""
        while True:
            with self._more:
                if self._stop.is_set():
                    return False
                if position < len(self.readings):
                    return True
                if not self.feeding:
                    return False
                self._more.wait(timeout=IDLE_POLL_S)
            if self.on_idle is not None:
                self.on_idle()

    # -- reading ahead ---------------------------------------------------------------------------

    def start(self) -> None:
        """Start opening the first sources now (before the engines warm up)."""
        self._start_ahead(0)

    def first_planned(self) -> PlannedSource | None:
        """The first source, once there is one (a fed chain waits for it); None if the chain ended or stopped."""
        return self.readings[0].planned if self._wait_for(0) else None

    def release_reading(self) -> None:
        """Let a held chain open and decode its sources (from where it is)."""
        self.held = False
        self._start_ahead(self.reading)

    def first_info(self) -> SourceInfo | None:
        """The first source that opens (its frame size warms the detector); None if none does. A fed chain waits
        for its first source, not for more once those it has all failed: the pipeline must start to report their
        failures (until then its driver, waiting for them, would send nothing more)."""
        position = 0
        while self._wait_for(position) if position == 0 else position < len(self.readings):
            reading = self.readings[position]
            position += 1
            self._start_ahead(position - 1)
            while reading.info is None and not reading.finished and not self._stop.is_set():
                time.sleep(0.005)
            if reading.info is not None:
                return reading.info
        return None

    def opened_frame_size(self) -> tuple[int, int] | None:
        """The first source's (height, width) if it has opened by now (without waiting for it), else None."""
        if not self.readings:
            return None
        info = self.readings[0].info
        return (info.height, info.width) if info is not None else None

    def _start_ahead(self, position: int) -> None:
        if self.held:
            return
        with self._ahead:
            before = self.started
            while self.started < min(len(self.readings), position + self._parallel):
                k = self.started
                self._queues[k] = queue.Queue(maxsize=self._queue_frames)
                thread = threading.Thread(target=self._read, args=(k,), name=f"emopipe-source-{k}", daemon=True)
                self._threads = [t for t in self._threads if t.is_alive()]  # (a fed chain reads many over its life)
                self._threads.append(thread)
                self.started += 1
                thread.start()
        if self.started > before and self.on_begin is not None:
            self.on_begin()

    def _put(self, items: queue.Queue[Any], item: Any) -> bool:
        while not self._stop.is_set():
            try:
                items.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def _read(self, position: int) -> None:
        reading, items = self.readings[position], self._queues[position]
        try:
            planned = reading.planned
            window = {} if planned.part is None else {"start_s": planned.start_s, "end_s": planned.end_s}
            with self._open_one(planned.uri, **window) as source:
                reading.info, reading.decoder = source.info, getattr(source, "decoder", "opencv")
                for frame in source:
                    if not self._put(items, replace(frame, stream=position)):  # type: ignore[type-var]
                        return
                    reading.frames += 1
                reading.ended_early = source.ended_early
        except EmopipeError as exc:
            reading.error = exc
        except Exception as exc:  # a decoder's own failure: this source fails, the others go on
            reading.error = InputTruncatedError(f"reading {reading.planned.shown_as} failed: {exc}")
        finally:
            reading.finished = True
            self._put(items, _END)


def expected_frames(uri: str, config: RunConfig) -> int | None:
    """The frames ``uri`` will give under ``--start``/``--end``/``--max-frames``, as its container (or its
    folder of images) declares them: the source is opened on the CPU, not read through. None when it does
    not say, or cannot be opened (that source's run reports why)."""
    try:
        with open_source(uri, start_s=config.start, end_s=config.end, max_frames=config.max_frames) as source:
            return source.expected_frames
    except Exception:  # any failure: only a progress bar's total depends on it
        return None


def frame_size_of(uri: str) -> tuple[int, int] | None:
    """(height, width) of the frames of the video file ``uri``, upright as every reader gives them (OpenCV, on the
    CPU: its first frame decoded); None for another kind of source or a file that does not open. What a Ray worker
    warms its detector for as it starts (the largest source's), rather than at its first share."""
    if source_kind(uri) != "video":
        return None
    try:
        with open_source(uri) as source:
            return source.info.height, source.info.width
    except Exception:  # any failure: the worker then warms at its first share, as without it
        return None


# -- writing each source's files ------------------------------------------------------------------------


@dataclass
class SourceResult:
    """How one source of a many-source run ended (its manifest line)."""

    source: str
    status: str
    frames: int = 0
    faces: int = 0
    rows: int = 0
    seconds: float = 0.0
    error: str | None = None
    exit_code: int | None = None
    kind: str | None = None  # the error's class, for scripts
    outputs: dict[str, str] = field(default_factory=dict)
    ended_early: str | None = None
    part: str | None = None  # a part of a video (PlannedSource.key): the driver joins the parts into the source's line
    lead_frames: int | None = None  # a part's: its frames before its rows count (the overlap)
    tail_frames: int | None = None  # a part's: its frames after its rows count (up to a key frame, --detect-every)
    # (partial, final) renames still to do, the rows last: a cluster worker's, done by the driver once the source's
    # manifest line is written (:func:`publish`); empty once done, and never in the line
    renames: list[tuple[Path, Path]] = field(default_factory=list)

    @classmethod
    def failed_before(cls, planned: PlannedSource, error: str, kind: str, exit_code: int = 1) -> SourceResult:
        """``planned`` failed before a worker finished it (the worker died, or none started): a part of a video's
        result is its part's, which the driver joins into the video's line."""
        return cls(source=planned.uri, status="failed", error=error, exit_code=exit_code, kind=kind,
                   part=planned.key if planned.part is not None else None)

    def as_dict(self) -> dict[str, Any]:
        entry = {k: v for k, v in self.__dict__.items() if v is not None and k != "renames"}
        entry["finished_at"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        return entry


class PerSourceSink(Sink):
    """Hands each frame to its source's tracker and rows file; finishes each source once its last frame is
    written (or a later source's first frame comes, or the run ends). The writer thread writes; a fed chain's
    reading thread calls :meth:`settle` while it waits for sources (a lock keeps them apart).

    Without a manifest (a cluster worker's) the files stay under their partial names: whoever writes a source's line
    gives them their names after it, so here the renames go back in the result (:attr:`SourceResult.renames`)."""

    def __init__(self, chain: SourceChain, config: RunConfig, labels: Sequence[str], manifest: Manifest | None,
                 on_result: Callable[[SourceResult], None] | None = None) -> None:
        self.chain = chain
        self.config = config
        self.labels = tuple(labels)
        self.manifest = manifest
        self.on_result = on_result
        self.results: list[SourceResult] = []
        self._next = 0  # the first source not finished yet
        self._sink: RecordSink | None = None
        self._writer: RecordWriter | None = None
        self._video: AnnotatedVideoWriter | None = None
        self._video_error: OutputError | None = None  # its video could not be written: the source fails at its end
        self._failure: EmopipeError | None = None  # what ended the run in the source in flight (a full disk): it failed
        self._tracks: TrackWatcher | None = None
        self._faces = 0
        self._written = 0  # frames of the current source written
        self._lead = 0  # of them, a part's before its rows count (its overlap with the part before)
        self._tail = 0  # and after (read up to the next key frame, --detect-every)
        self._detected = 0  # of them, frames the detector ran on (--detect-every: the key frames)
        # a source's time runs from the one before it finished; the first's from the end of the warm-ups (begin)
        self._last_finished_s = time.perf_counter()
        self._closed = False
        self._lock = threading.RLock()

    def begin(self) -> None:
        """The warm-ups are over: the first source's time runs from now. (The sink is made before the detector warms
        for the first source's frame size, so that a signal meanwhile finishes that source: :meth:`close`.)"""
        self._last_finished_s = time.perf_counter()

    @contextlib.contextmanager
    def _ending_the_run(self) -> Iterator[None]:
        """What fails here (a source's rows or files that cannot be written: a full disk) ends the run: kept, so
        that :meth:`close` records the source it failed in as failed with it, not interrupted."""
        try:
            yield
        except EmopipeError as exc:
            self._failure = exc
            raise

    def write(self, result: FrameResult) -> None:
        with self._lock, self._ending_the_run():
            self._write(result)

    def _write(self, result: FrameResult) -> None:
        stream = result.frame.stream
        self._finish_before(stream)
        if self._sink is None:
            self._open(stream)
        assert self._sink is not None
        self._sink.write(result)
        if self._video is not None and self._video_error is None:
            try:
                self._video.write(result.frame.bgr, self._sink.last_records)
            except OutputError as exc:  # (FFmpeg stopped: a full disk) this source fails, its rows go on
                self._video_error = exc
        self._faces += len(result.faces)
        self._written += 1
        planned = self.chain.readings[stream].planned
        if planned.keep_from_s is not None and result.frame.timestamp_s < planned.keep_from_s:
            self._lead += 1
        elif planned.keep_until_s is not None and result.frame.timestamp_s >= planned.keep_until_s:
            self._tail += 1
        else:  # (a part's: of its own stretch only, so its video's sum is one process's)
            self._detected += result.detected
        self._settle()

    def flush(self) -> None:
        """Write the current source's rows held back (its sink holds them until the writer is idle)."""
        with self._lock, self._ending_the_run():
            if self._sink is not None:
                self._sink.flush()

    def settle(self) -> None:
        """Finish the sources read to their end whose every frame is written (in order)."""
        with self._lock, self._ending_the_run():
            self._settle()

    def _settle(self) -> None:
        readings = self.chain.readings
        # (``finished`` is set after a source's last frame is counted, so its count is final then)
        while self._next < len(readings) and readings[self._next].finished \
                and self._written == readings[self._next].frames:
            self._finish(self._next, interrupted=False)

    def close(self) -> None:
        """The run ended: each source read to its end with every frame written is finished; the first one
        that is not (the run was interrupted or failed in it — also before the pipeline ran, once the source's reading
        had begun) is marked interrupted, or failed where writing it failed (its rows kept under their partial name);
        later ones never started. Once: a second call (the run's, after the pipeline closed its sinks) does nothing,
        where it would take the next source for the one it was in."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._failure is None:  # (else the source that failed is the first not finished: not tried again)
                self._settle()
            readings = self.chain.readings
            if self._next < len(readings):
                reading = readings[self._next]
                if self._sink is not None or reading.frames or self.chain.started > self._next:
                    self._finish(self._next, interrupted=self._failure is None, failure=self._failure)

    def _open(self, stream: int) -> None:
        planned = self.chain.readings[stream].planned
        try:
            planned.rows.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:  # (a file in the way of its folder, no permission): said as what it is, not a bug
            raise OutputError(f"cannot create the folder {planned.rows.parent}: {exc.strerror or exc}") from None
        info = self.chain.readings[stream].info
        self._writer = open_writer(planned.rows, fmt=self.config.format, labels=self.labels,
                                   landmarks=self.config.landmarks, detected=self.config.detect_every > 1,
                                   files=info is not None and info.kind == "images")
        self._writer.commit_on_close = False
        uri = info.uri if info is not None else planned.shown_as
        # (a part of a video: its tracks are summarised once the parts are joined, from the joined rows)
        self._tracks = TrackWatcher(thumbnails=False) if planned.part is None else None
        recorder = FaceRecorder(uri, self.labels, smoothing=self.config.smooth, precision=self.config.precision)
        if planned.video is not None and info is not None:  # (under its partial name until the source is done)
            self._video = AnnotatedVideoWriter(planned.video, info.fps or 1.0, (info.width, info.height), partial=True,
                                               writer=self.config.video_writer)
        # (the video is written here, not by the sink: a video that fails fails its source, not the run)
        watchers = [self._tracks] if self._tracks is not None else []
        self._sink = RecordSink(recorder, self._writer, None, watchers=watchers, hold_rows=True)
        self._faces = 0

    def _finish_before(self, stream: int) -> None:
        while self._next < stream:
            self._finish(self._next, interrupted=False)

    def _finish(self, position: int, interrupted: bool, failure: EmopipeError | None = None) -> None:
        """Write ``position``'s line and give its files their names; ``interrupted``, or its ``failure`` to be
        written (the run ends on it), leave them under their partial names."""
        cut = interrupted or failure is not None
        reading = self.chain.readings[position]
        planned = reading.planned
        if self._sink is None and reading.error is None and not cut:
            self._open(position)  # a source with no frame at all still gets its (header-only) rows file
        outputs: dict[str, str] = {}
        rows = 0
        writer, video = self._writer, self._video
        video_error = self._video_error
        if self._sink is not None and writer is not None:
            self._sink.close()  # the rows are all written, still under their partial name
            rows = writer.rows_written
            outputs["rows"] = writer.commit(False) if cut else str(planned.rows)  # (cut: stays partial)
        if video is not None:
            try:
                video.close()  # (FFmpeg's file finished; still under its partial name)
            except OutputError as exc:  # (a full disk): the source failed, its rows kept; --resume does it again
                video_error = video_error or exc
            if video_error is not None:
                video = None
            elif cut:
                outputs["annotated_video"] = str(video.writing)
        # the run's time on this source: since the source before it finished, or since it was added if later (a fed
        # chain may have waited for it), so a short source's time is not just the gap between its first and last rows
        now = time.perf_counter()
        seconds = now - max(self._last_finished_s, reading.started_s)
        self._last_finished_s = now
        error = failure or reading.error
        if video_error is not None and error is None:
            error = video_error
        if interrupted:
            status = "interrupted"
        elif error is not None:
            status = "failed"
        elif reading.ended_early:
            status = "failed"
            error = InputTruncatedError(f"{planned.shown_as}: input ended early: {reading.ended_early}")
        else:
            status = "ok"
        # interrupted: the frames written (more may have been read ahead, never analysed)
        frames = self._written if cut else reading.frames
        result = SourceResult(source=planned.uri, status=status, frames=frames, faces=self._faces, rows=rows,
                              seconds=round(seconds, 4), error=str(error) if error else None,
                              exit_code=error.exit_code if error else (130 if interrupted else None),
                              kind=type(error).__name__ if error else None, outputs=outputs,
                              ended_early=reading.ended_early)
        if planned.part is not None:
            result.part, result.lead_frames, result.tail_frames = planned.key, self._lead, self._tail
        # Crash-safe at every instant (even SIGKILL): every file is written under its partial name, then any earlier
        # attempt's files are removed, then the manifest line claims the names, then the files take them, the rows
        # last. Killed before the line, a source has no file under a final name; after it, --resume finds its line
        # owning the names and redoes it until all its files are there (Manifest.done). A cluster worker stops
        # before the line: its driver writes the line and then renames, so the order holds across the two processes.
        staged: list[tuple[Path, Path]] = []  # (partial, final), renamed once the line is written
        complete = not cut and "rows" in outputs
        if complete and video is not None and planned.video is not None:  # staged first: the rows take theirs last
            staged.append((video.writing, planned.video))
            outputs["annotated_video"] = result.outputs["annotated_video"] = str(planned.video)
        if complete:
            tracks = self._write_tracks(planned, outputs, staged) if self._tracks is not None else None
            summary = RunSummary(source=planned.uri, decoder=reading.decoder, frames=reading.frames, faces=self._faces,
                                 seconds=round(seconds, 4), fps=reading.frames / seconds if seconds else 0.0,
                                 faces_per_s=self._faces / seconds if seconds else 0.0,
                                 detect_every=self.config.detect_every, frames_detected=self._detected,
                                 ended_early=reading.ended_early, outputs=dict(outputs), tracks=tracks,
                                 start_s=self.config.start)
            staged.append((_write_partial(planned.summary, summary.as_dict()), planned.summary))
            result.outputs["summary"] = str(planned.summary)
            assert writer is not None
            rows_at = Path(writer.commit(False))  # (its partial name; the final one where written in place)
            if rows_at != planned.rows:  # the rows last: a rows file under its final name has its other files beside it
                staged.append((rows_at, planned.rows))
            # an earlier attempt's files of this source (one that failed, or was cut off while its files took their
            # names): left beside the new ones, they would make the source look done before all its files are there
            remove_earlier(planned.files)
        if self.manifest is None:  # a cluster worker's: the driver writes the line, then does the renames
            result.renames = staged
        else:
            self.manifest.append(result.as_dict())
            publish(staged)
        self.results.append(result)
        self._sink = self._writer = self._tracks = self._video = self._video_error = None
        self._faces = self._written = self._detected = self._lead = self._tail = 0
        self._next = position + 1
        # last, once the source is finished: a callback that raises (the caller's bug, raised from the run) cannot
        # leave it half done, to be finished again by close() with its published rows removed as an earlier attempt's
        if self.on_result is not None:
            self.on_result(result)

    def _write_tracks(self, planned: PlannedSource, outputs: dict[str, str],
                      staged: list[tuple[Path, Path]]) -> list[dict[str, Any]] | None:
        """The source's track summaries and segments (docs/report.md), under partial names added to ``staged``;
        they are derived from the rows, which are complete: failing to write them is a warning, not the source's
        failure."""
        assert self._tracks is not None
        try:
            reports = analyse(self._tracks.collector)
            write_tracks_csv(partial_path(planned.tracks), reports)
            write_segments_csv(partial_path(planned.segments), reports)
        except (EmopipeError, ImportError, OSError) as exc:
            logger.warning("%s: track summaries not written (the rows are complete): %s", planned.shown_as,
                           exc)
            return None
        staged += [(partial_path(planned.tracks), planned.tracks), (partial_path(planned.segments), planned.segments)]
        outputs.update(tracks=str(planned.tracks), segments=str(planned.segments))
        return [r.summary.as_dict() for r in reports]


def publish(renames: Sequence[tuple[Path, Path]]) -> None:
    """Give a source's files their final names, in order (the rows last); only once its manifest line is written,
    which claims the names (:meth:`PerSourceSink._finish` says why)."""
    for partial, final in renames:
        _rename(partial, final)


def _rename(partial: Path, final: Path) -> None:
    try:
        os.replace(partial, final)
    except OSError as exc:
        raise OutputError(f"cannot write {final}: {exc.strerror or exc}") from None


def _write_partial(path: Path, data: Any) -> Path:
    """``data`` as JSON under ``path``'s partial name, which it returns."""
    partial = partial_path(path)
    try:
        partial.write_text(json.dumps(data, indent=2) + "\n")
    except OSError as exc:
        raise OutputError(f"cannot write {path}: {exc.strerror or exc}") from None
    return partial


def _write_json(path: Path, data: Any) -> None:
    _rename(_write_partial(path, data), path)


def write_run_summary(directory: Path, data: dict[str, Any]) -> Path:
    path = directory / RUN_SUMMARY
    _write_json(path, data)
    return path
