"""One run configuration: every option of ``emopipe SOURCE``, validated once, defaults resolved in one place.

:class:`RunConfig` is what the command line parses into and what :func:`emopipe.analyze` and
:class:`emopipe.Analyzer` take. Field names are the command line's long options with underscores
(``--max-frames`` → ``max_frames``, ``--no-warmup`` → ``no_warmup``); ``None`` means "the default
for this run", which :meth:`RunConfig.resolved` decides: it depends on the device (batch size,
precision, decoder) and on the source (files or a live camera/stream: detector, batching, output name).
Nothing here imports torch until a run is resolved on an ``auto`` device.
"""

from __future__ import annotations

import math
import numbers
import os
import re
import stat
from collections.abc import Iterable
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

from emopipe.errors import OutputError, UsageError
from emopipe.io.encode import WRITERS, choose_ffmpeg
from emopipe.io.records import (
    MAX_NAME_BYTES,
    STDOUT,
    InputFiles,
    ensure_writable,
    lock_path,
    output_format,
    partial_path,
    same_file,
    temporary_names,
    text_name,
)
from emopipe.io.uris import check_url, is_live, redact_uri, webcam_index
from emopipe.types import MAX_BATCH_SIZE, PRECISION_NAMES

DETECTOR_NAMES = ("sfd", "blazeface", "blazeface_back")  # emopipe.vision.detectors.DETECTORS, without importing it
BACKEND_NAMES = ("torch", "onnxruntime")  # emopipe.engines.registry.BACKENDS, likewise

DECODERS = ("auto", "nvdec", "opencv")
VIDEO_SUFFIXES = (".mp4", ".mkv", ".avi")  # annotated video and live recording containers
REPORT_SUFFIXES = (".html", ".htm")
AUTO_PROCESSES = "auto"  # --processes auto: the count chosen for the machine (emopipe.processes.workers_for)
DEFAULT_OUTPUT_DIR = "emopipe-out"  # several sources: their files go in this folder unless -o says otherwise

FILE_DETECTOR = "sfd"
LIVE_DETECTOR = "blazeface"
CUDA_BATCH_SIZE = 64  # faces per EmoNet batch on CUDA: full batches at 700–900 frames/s of one face
# Frames per detector call for files on CUDA. Larger calls spread the per-call host work (launch, NMS, crop
# bookkeeping) over more frames: BlazeFace's small fixed input makes 32 cheap (H100, 4 long 720p videos:
# 824–883 frames/s against 679–699 at 8; docs/benchmarks.md); S3FD works near full resolution, so stays at 8.
CUDA_FRAMES_PER_DETECT_BATCH = {"sfd": 8, "blazeface": 32, "blazeface_back": 32}
DEFAULT_METRICS_PORT = 9478  # live mode serves here unless --metrics-port says otherwise
DEFAULT_METRICS_HOST = "127.0.0.1"
DEFAULT_MAX_WAIT_MS = 5.0
DEFAULT_METRICS_MAX_SOURCES = 64  # emopipe.observe.metrics.DEFAULT_MAX_SOURCES, without importing prometheus
StrPath = str | os.PathLike[str]  # a path as a str or a pathlib.Path (or a URL, as a str)
PATH_FIELDS = ("source", "output", "annotate", "summary", "report", "weights", "models_dir", "record")
FLEET_CUDA_BATCH = 16  # several cameras on CUDA: frames per detector call and faces per EmoNet batch, at most
# (H100, 16 paced 720p30 cameras: batches of 4: 400 frames/s, drops 35 %; of 16: 477, 0.9 %; docs/benchmarks.md)


@dataclass(frozen=True)
class Written:
    """A name a run may write: an output's own (``output``), the partial name it is written under and stays under when
    a run does not complete (``partial``), a temporary name it is written whole under, for a moment (``temporary``:
    :func:`~emopipe.io.records.temporary_names`), or the hidden lock file a one-source run holds for it while it runs,
    then removes (``lock``: :func:`~emopipe.io.records.lock_path`)."""

    role: str  # the output's, as RunConfig.outputs names it
    path: str
    kind: str = "output"

    @property
    def folder(self) -> bool:
        """A folder, replaced whole (the report's thumbnails)."""
        return self.role == "thumbnails"

    def describe(self) -> str:
        what = self.role.replace("_", " ")
        if self.kind == "output":
            return f"the {what} output {self.path}"
        owner = f"{what}'" if what.endswith("s") else f"{what}'s"
        return f"the {owner} {'lock file' if self.kind == 'lock' else 'temporary name'} {self.path}"


# written whole, under temporary names (the ONNX model: emopipe export-onnx's)
WHOLE_ROLES = ("summary", "report", "thumbnails", "tracks", "segments", "ONNX_model")


def written_as(role: str, path: str, partial: Path | None = None) -> list[Written]:
    """The names an output is written under: its own, its ``partial`` name, and the temporary names of both where it
    is written whole (a file: written_whole; a folder: staging_folder)."""
    names = [Written(role, path), *([Written(role, str(partial), "partial")] if partial is not None else [])]
    if role in WHOLE_ROLES:
        names += [Written(role, str(temporary), "temporary") for name in list(names)
                  for temporary in temporary_names(Path(name.path))]
    return names


def lockable(path: str) -> bool:
    """Whether an output is held while it is written (:func:`~emopipe.io.records.hold_outputs`): a file, or a name not
    there yet; not a device or a FIFO (``/dev/null``: written in place, it holds no result to protect)."""
    return os.path.isfile(path) or not os.path.exists(path)


def refuse_inputs(written: Iterable[Written], inputs: InputFiles, keep: Iterable[str], advice: str,
                  name_input: bool = False) -> None:
    """No name in ``written`` is one of the ``inputs``; no folder in it (replaced whole) is or holds an input or a path
    of ``keep`` (the run's other outputs). UsageError naming the first, with ``advice`` (``name_input``: and the input
    it is, where spelled otherwise — one the user did not name, such as a source a rows file names)."""
    from emopipe.report.outputs import check_thumbnails_folder

    keep = [*inputs.paths, *keep]
    for name in written:
        if name.folder:
            # (a temporary folder that is not there holds nothing; one that is, a killed write's, goes whole)
            if name.kind != "temporary" or os.path.isdir(name.path):
                check_thumbnails_folder(name.path, keep=keep)
        elif (found := inputs.named_by(name.path)) is not None:
            which = f"{found}, " if name_input and found != name.path else ""
            raise UsageError(f"{name.describe()} is {which}an input of this run: {advice} (outputs never overwrite "
                             "inputs)")


@dataclass(frozen=True)
class RunConfig:
    """Every option of a run. ``None``: the default, decided by :meth:`resolved` for the device and source.

    Paths may be given as ``os.PathLike`` (``pathlib.Path``) and are held as ``str``; ``sources`` and
    ``list_files`` take one path or several."""

    source: str | None = None  # a video, image, folder of images, webcam:N or a stream URL
    # several sources in one run (Analyzer.run_many; cameras and streams: Analyzer.run_fleet): as given, expanded
    # by emopipe.io.inputs
    sources: tuple[str, ...] = ()
    # ``sources`` are that expansion already (the command line's): planned as they are. A second pass read a name
    # the first gave that opens nothing (a link to nothing, clip[2].mp4) as a glob, and listed image folders again
    sources_expanded: bool = False
    list_files: tuple[str, ...] = ()  # --list FILE: one source per line
    recursive: bool = False  # folders: their whole tree (each video, each folder of images one sequence)
    resume: bool = False  # skip the sources an earlier run into the same folder finished
    parallel: int | None = None  # sources opened and decoded ahead at once (default: 2)
    # the same run over worker processes of this machine (emopipe.processes); None: in this process; "auto": as many
    # as the machine is measured to gain from (emopipe.processes.workers_for), in this process where that is one
    processes: int | str | None = None
    # --processes with fewer videos than workers: long videos cut into parts over the workers (emopipe.pipeline.parts)
    split: bool = True
    # --processes: where NVIDIA MPS does not run, start it for the workers, ended with the command (cuda_context.OwnMps)
    mps: bool = False
    # the same run over a Ray cluster (emopipe.cluster)
    ray: str | None = None  # a cluster address, "auto" (RAY_ADDRESS), or "local" (start one here)
    ray_workers: int | None = None  # default: one per GPU of the cluster
    ray_gpus_per_worker: float | None = None  # default: 1 where the cluster has GPUs, else 0 (CPU workers)
    ray_retries: int = 2  # times a source goes to another worker after its worker died
    ray_keep_warm: float | None = None  # seconds the workers wait warm on the cluster for the next run (None: end)
    # outputs
    output: str | None = None  # rows file (.csv/.jsonl, "-" for stdout); default SOURCE_NAME.emotions.csv (.jsonl)
    format: str | None = None  # csv | jsonl; default from the output's extension
    annotate: str | None = None  # annotated video (.mp4/.mkv/.avi); live: the recording
    video_writer: str = "auto"  # auto | ffmpeg | opencv: what encodes the annotated video (emopipe.io.encode)
    summary: str | None = None  # run summary JSON ("-" for stdout); default OUTPUT.summary.json
    report: str | None = None  # self-contained HTML report of the tracks (docs/report.md)
    landmarks: bool = False
    smooth: float | None = None  # per-track exponential smoothing weight of the newest value
    no_progress: bool = False
    # input range
    start: float | None = None  # seconds
    end: float | None = None  # seconds (live: how long to run)
    max_frames: int | None = None
    decoder: str = "auto"
    # face detection
    detector: str | None = None  # default: sfd for files, blazeface live
    detect_size: int | None = None
    detect_batch: int | None = None  # frames per detector call
    detect_every: int = 1
    threshold: float = 0.5
    min_face: float = 0.0
    max_faces: int | None = None
    margin: float = 0.0
    # model and engine
    classes: int | None = None  # 8 or 5; with --weights, read from the file
    weights: str | None = None
    models_dir: str | None = None
    backend: str = "torch"
    device: str = "auto"
    precision: str | None = None  # default fp16 on CUDA, fp32 on the CPU
    batch_size: int | None = None  # default 64 on CUDA, 1 on the CPU and live
    no_cudnn_benchmark: bool = False
    no_cudnn_epilogue: bool = False
    no_warmup: bool = False
    no_cuda_graphs: bool = False
    compile: str | None = None
    # metrics
    metrics_port: int | None = None  # live: DEFAULT_METRICS_PORT unless given
    metrics_host: str = DEFAULT_METRICS_HOST
    metrics_linger: float = 0.0
    pushgateway: str | None = None
    metrics_max_sources: int = DEFAULT_METRICS_MAX_SOURCES  # sources with a `source` label; the rest: "other"
    # live mode
    webcam: int | None = None
    show: bool = False
    serve: str | None = None  # HOST:PORT
    record: str | None = None
    max_wait_ms: float = DEFAULT_MAX_WAIT_MS
    open_timeout: float = 10.0
    read_timeout: float = 5.0
    reconnect_timeout: float = 60.0

    def __post_init__(self) -> None:
        # paths may be given as os.PathLike (pathlib.Path): held as str, as the command line gives them
        for name in PATH_FIELDS:
            value = getattr(self, name)
            if isinstance(value, os.PathLike):
                object.__setattr__(self, name, os.fspath(value))
        object.__setattr__(self, "sources", path_items(self.sources, "sources"))
        object.__setattr__(self, "list_files", path_items(self.list_files, "list_files"))
        _typed(self)
        _positive("max_frames", self.max_frames)
        _positive("detect_size", self.detect_size)
        _positive("detect_batch", self.detect_batch)
        _positive("detect_every", self.detect_every)
        _positive("max_faces", self.max_faces)
        _positive("batch_size", self.batch_size)
        for name in ("batch_size", "detect_batch"):
            value = getattr(self, name)
            if value is not None and value > MAX_BATCH_SIZE:
                raise UsageError(f"--{_flag(name)} must be at most {MAX_BATCH_SIZE}, got {value}")
        _positive("parallel", self.parallel)
        _positive("ray_workers", self.ray_workers)
        if isinstance(self.processes, str):
            if self.processes != AUTO_PROCESSES:
                raise UsageError(f"--processes must be a whole number ≥ 1 or {AUTO_PROCESSES!r}, "
                                 f"got {self.processes!r}")
        else:
            _positive("processes", self.processes)
        if self.processes is not None and self.ray:
            raise UsageError("--processes and --ray: the workers are either this machine's processes or Ray's; "
                             "choose one")
        if self.mps and self.processes is None:
            raise UsageError("--mps: for the workers of --processes (on a Ray cluster, start MPS on its machines: "
                             "docs/cluster.md)")
        if self.ray_gpus_per_worker is not None and not (math.isfinite(self.ray_gpus_per_worker)
                                                         and self.ray_gpus_per_worker >= 0):
            raise UsageError(f"--ray-gpus-per-worker must be a number ≥ 0, got {self.ray_gpus_per_worker}")
        if self.ray_retries < 0:
            raise UsageError(f"--ray-retries must be ≥ 0, got {self.ray_retries}")
        if self.ray_keep_warm is not None and not (math.isfinite(self.ray_keep_warm) and self.ray_keep_warm > 0):
            raise UsageError(f"--ray-keep-warm must be a number of seconds > 0, got {self.ray_keep_warm}")
        for name in ("start", "end"):
            value = getattr(self, name)
            if value is not None and not (math.isfinite(value) and value >= 0):
                raise UsageError(f"--{name} must be a finite number of seconds ≥ 0, got {value}")
        for name in ("min_face", "margin", "metrics_linger", "max_wait_ms"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise UsageError(f"--{_flag(name)} must be a finite number ≥ 0, got {value}")
        for name in ("open_timeout", "read_timeout", "reconnect_timeout"):
            if not getattr(self, name) > 0:  # (inf is allowed: keep trying)
                raise UsageError(f"--{_flag(name)} must be > 0 seconds, got {getattr(self, name)}")
        if self.threshold is not None and not 0 <= self.threshold <= 1:
            raise UsageError(f"--threshold must be between 0 and 1, got {self.threshold}")
        if self.smooth is not None and not 0 < self.smooth <= 1:  # (0 would hold the first value for ever)
            raise UsageError(f"--smooth must be above 0 and at most 1 (the newest value's weight), got {self.smooth}")
        if self.end is not None and self.start is not None and self.end <= self.start:
            raise UsageError(f"--end ({self.end}) must be after --start ({self.start})")
        _choice("decoder", self.decoder, DECODERS)
        _choice("video_writer", self.video_writer, WRITERS)
        _choice("detector", self.detector, DETECTOR_NAMES)
        _choice("backend", self.backend, BACKEND_NAMES)
        if self.compile is not None and self.backend == "onnxruntime":
            raise UsageError("--compile (torch.compile) is for the torch backend; the onnxruntime backend runs an "
                             "exported graph that ONNX Runtime optimises itself")
        _choice("precision", self.precision, PRECISION_NAMES)
        _choice("format", self.format, ("csv", "jsonl"))
        _choice("classes", self.classes, (8, 5))
        if self.webcam is not None and self.webcam < 0:
            raise UsageError(f"--webcam takes a camera index ≥ 0, got {self.webcam}")
        if self.webcam is not None and self.source:
            raise UsageError(f"give either SOURCE ({self.source}) or --webcam {self.webcam}, not both")
        if not (isinstance(self.metrics_max_sources, int) and self.metrics_max_sources >= 0):
            raise UsageError(f"--metrics-max-sources must be a whole number ≥ 0, got {self.metrics_max_sources}")
        if self.metrics_port is not None and not 0 <= self.metrics_port <= 65535:
            raise UsageError(f"--metrics-port must be between 0 and 65535, got {self.metrics_port}")

    # -- options by name ------------------------------------------------------------------------

    @classmethod
    def option_names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))

    @classmethod
    def from_options(cls, config: RunConfig | None = None, **options: Any) -> RunConfig:
        """``config`` (or the defaults) with ``options`` replaced; unknown names are a UsageError listing them."""
        unknown = sorted(set(options) - set(cls.option_names()))
        if unknown:
            raise UsageError(f"unknown option(s) {', '.join(unknown)}; options are the command line's long options "
                             f"with underscores: {', '.join(cls.option_names())}")
        return replace(config, **options) if config is not None else cls(**options)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def many(self) -> bool:
        """Several sources (or a collection: a folder of videos, a glob, a list file) in one run."""
        return bool(self.sources or self.list_files or self.ray or self.processes)

    @property
    def fleet(self) -> bool:
        """Several sources that are cameras or streams: one live run for all of them (emopipe.pipeline.fleet).
        Cameras and files in one run are refused: a file is read as fast as possible, a camera at its pace."""
        live = [s for s in self.sources if is_live(s)]
        for uri in live:
            check_url(uri)
        if live and len(live) < len(self.sources):
            files = [s for s in self.sources if not is_live(s)]
            raise UsageError(f"cameras and streams ({', '.join(redact_uri(s) for s in live[:3])}) and files "
                             f"({', '.join(files[:3])}) cannot share a run: run the files and the cameras apart")
        return bool(live)

    # -- what kind of run ----------------------------------------------------------------------

    @property
    def uri(self) -> str:
        """The source as given (``--webcam N`` becomes ``webcam:N``)."""
        if self.webcam is not None:
            return f"webcam:{self.webcam}"
        if not self.source:
            raise UsageError("give a SOURCE (a video, an image, a folder of images or a stream URL) or --webcam N")
        return self.source

    @property
    def live(self) -> bool:
        return is_live(self.uri)

    # -- defaults ------------------------------------------------------------------------------

    def resolved(self, device_type: str | None = None) -> RunConfig:
        """Every default decided: for the device (``cuda`` or ``cpu``; found from ``device`` when not given)
        and for the kind of source. Raises UsageError for options that do not fit together."""
        live = self.live
        if live:
            check_url(self.uri)
        if device_type is None:
            from emopipe.model.devices import resolve_device  # (imports torch)

            device_type = resolve_device(self.device).type
        cuda = device_type == "cuda"
        values: dict[str, Any] = {"source": self.uri, "webcam": None}
        if live:
            values.update(self._live_defaults(cuda))
        else:
            used = [flag for flag, value in (("--show", self.show), ("--serve", self.serve), ("--record", self.record))
                    if value]
            if used:
                raise UsageError(f"{', '.join(used)}: for a camera or a network stream; for a file, --annotate "
                                 "writes the annotated video")
            detector = self.detector or FILE_DETECTOR
            per_call = CUDA_FRAMES_PER_DETECT_BATCH.get(detector, CUDA_FRAMES_PER_DETECT_BATCH[FILE_DETECTOR])
            detect_batch = self.detect_batch or (-(-per_call // self.detect_every) if cuda else 1)
            values.update(detector=detector, batch_size=self.batch_size or
                          (CUDA_BATCH_SIZE if cuda else 1), detect_batch=detect_batch,
                          output=self.output or default_output(self.uri, self.format))
        values["precision"] = self.precision or ("fp16" if cuda else "fp32")
        output = values["output"]
        values["format"] = output_format(output, self.format)  # ("-" and no extension: csv)
        values["summary"] = self.summary if self.summary is not None else (
            None if _a_stream(output) else _beside(output, ".summary.json"))
        for role in ("annotate", "record"):  # a container alone (--annotate mp4): the video beside the rows
            video = values.get(role, getattr(self, role))
            container = video_container(video) if video else None
            if container is not None:
                if _a_stream(output):
                    raise UsageError(f"--{role} {video}: with -o {output} the video has no rows file to go beside; "
                                     "give it a file name (out.mp4)")
                values[role] = annotated_beside(output, container)
        if live and self.metrics_port is None:
            values["metrics_port"] = DEFAULT_METRICS_PORT
        if self.metrics_linger and values.get("metrics_port", self.metrics_port) is None:
            raise UsageError("--metrics-linger needs --metrics-port (there is nothing to scrape otherwise)")
        if self.metrics_host != DEFAULT_METRICS_HOST and values.get("metrics_port", self.metrics_port) is None:
            raise UsageError("--metrics-host needs --metrics-port (a file run serves no metrics otherwise)")
        return replace(self, **values)

    def _live_defaults(self, cuda: bool) -> dict[str, Any]:
        if self.start is not None:
            raise UsageError("--start applies to files; a camera or stream starts now (--end SECONDS: how long to run)")
        if self.decoder == "nvdec":
            raise UsageError("--decoder nvdec decodes video files; cameras and network streams are decoded on the CPU")
        record = self.record
        if self.annotate:
            if self.record:
                raise UsageError("--annotate and --record both record the annotated stream; give one")
            record = self.annotate
        # several cameras on a GPU: their frames and faces share small static batches (a partial one runs
        # after --max-wait-ms, so no camera waits for another); one camera, or the CPU: batches of one
        shared = min(FLEET_CUDA_BATCH, len(self.sources)) if cuda and len(self.sources) > 1 else 1
        return {"detector": self.detector or LIVE_DETECTOR, "batch_size": self.batch_size or shared,
                "detect_batch": self.detect_batch or shared,
                "output": self.output or default_output(self.uri, self.format), "record": record, "annotate": None}

    # -- outputs -------------------------------------------------------------------------------

    def output_folder(self, output_dir: StrPath | None = None) -> Path:
        """The folder a many-source run writes its files in: ``output_dir``, else ``-o``, else emopipe-out.
        Refused (UsageError) where it names a file or a rows file, before anything is made."""
        directory = Path(output_dir if output_dir is not None else (self.output or DEFAULT_OUTPUT_DIR))
        if str(directory) == STDOUT or (directory.exists() and not directory.is_dir()) or (
                directory.suffix.lower() in (".csv", ".jsonl") and not directory.exists()):
            raise UsageError(f"-o {directory}: with several sources (or --ray) the output is a folder (a rows file per "
                             "source goes in it); give a folder name")
        return directory

    def outputs(self) -> dict[str, str]:
        """The files this run writes, by role (on a resolved config)."""
        found = {"rows": self.output, "summary": self.summary, "annotated_video": self.annotate,
                 "recording": self.record, "report": self.report}
        if self.output and not _a_stream(self.output):  # the track summaries and segments, beside the rows
            found.update(tracks=_beside(self.output, ".tracks.csv"), segments=_beside(self.output, ".segments.csv"))
        if self.report:  # the report's pictures: a folder beside it, replaced whole
            from emopipe.report.outputs import thumbnails_folder

            found["thumbnails"] = str(thumbnails_folder(self.report))
        return {role: path for role, path in found.items() if path and path != STDOUT}

    def written(self) -> list[Written]:
        """Every name this run may write (on a resolved config): each output's (:meth:`outputs`), the partial name it
        stays under when the run does not complete (beside an earlier run's files), and the temporary names of those
        written whole (:func:`written_as`). The live recording is written in place, under its own name only."""
        found = []
        for role, path in self.outputs().items():
            if not Path(path).name:  # (".", "/": a folder, with no name to write beside)
                raise OutputError(f"cannot write the {role.replace('_', ' ')} {path}: it is a directory; give a file "
                                  "name")
            found += written_as(role, path, self._partial_name(role, Path(path)))
        return found

    def _partial_name(self, role: str, path: Path) -> Path | None:
        """Where an output stays when the run does not complete, beside an earlier run's files; None for those never
        kept so (the tracks and segments are not written then; the live recording is written in place)."""
        if role in ("rows", "summary"):
            return partial_path(path)
        if role in ("annotated_video", "report"):  # (the suffix stays last: it says what the file is)
            return partial_path(path, keep_suffix=True)
        if role == "thumbnails":  # the folder beside the report's partial name
            from emopipe.report.outputs import thumbnails_folder

            assert self.report is not None
            return thumbnails_folder(partial_path(Path(self.report), keep_suffix=True))
        return None

    def earlier_outputs(self) -> list[str]:
        """The outputs (on a resolved config) already there, an earlier run's: files, and the thumbnails folder
        (never a device or a FIFO such as ``/dev/null``: written in place, they hold no earlier result)."""
        return [path for role, path in self.outputs().items()
                if (Path(path).is_dir() if role == "thumbnails" else Path(path).is_file())]

    def locked_outputs(self) -> list[str]:
        """The outputs a one-source run holds while it runs (:func:`~emopipe.io.records.hold_outputs`, on a resolved
        config): each file's, not the thumbnails folder's (the report's lock covers it) nor a device's or FIFO's
        (``/dev/null``: written in place, it holds no result to protect)."""
        return [path for role, path in self.outputs().items() if role != "thumbnails" and lockable(path)]

    def check_outputs(self, earlier: bool = True) -> None:
        """Every output checked before anything is loaded: its format, that it is not an input or another
        output (also through links), and that its folder exists and is writable; and (``earlier``) that a live
        run's files are not there yet (:meth:`refuse_earlier_outputs`; a run checks that once it holds its names)."""
        if self.output:
            output_format(self.output, self.format)
        for role in ("annotate", "record"):
            path = getattr(self, role)
            if path and Path(path).suffix.lower() not in VIDEO_SUFFIXES:
                *others, last = VIDEO_SUFFIXES
                raise UsageError(f"--{role} {path}: the video must be {', '.join(others)} or {last}")
        ffmpeg = choose_ffmpeg(self.video_writer) if self.annotate or self.record else None
        if self.live and self.record and Path(self.record).suffix.lower() == ".mp4" and ffmpeg is None:
            # a live run ends whenever it is stopped: killed (SIGKILL, power loss), OpenCV's .mp4 would have no
            # index (written at close) and play nothing; FFmpeg's is fragmented, Matroska and AVI play up to the kill
            mkv = Path(self.record).with_suffix(".mkv")
            raise UsageError(f"the live recording {self.record} would be unplayable if the run were killed (power "
                             f"loss, SIGKILL): OpenCV's .mp4 is readable only once closed; record to {mkv} or "
                             f"{mkv.with_suffix('.avi')}, which play up to shortly before a kill, or let FFmpeg write "
                             "the .mp4 in fragments (install it, or pip install \"emopipe[video]\"; "
                             "--video-writer auto)")
        if self.report and Path(self.report).suffix.lower() not in REPORT_SUFFIXES:
            raise UsageError(f"--report {self.report}: the report is a web page; name it .html")
        if self.summary and self.summary != STDOUT and Path(self.summary).suffix.lower() != ".json":
            raise UsageError(f"--summary {self.summary}: the summary is JSON; name it .json")
        inputs = InputFiles(p for p in (self.source, self.weights) if p and not is_live(p))
        seen: list[Written] = []
        outputs = self.outputs()
        written = self.written()
        locked = set(self.locked_outputs())
        for role, path in outputs.items():
            # every name it is written under: its own, its partial name and its temporary ones
            names = [name for name in written if name.role == role]
            for name in names:
                if name.kind == "temporary":  # (named after the others: told apart as they are)
                    continue
                for other in seen:
                    if not same_file(name.path, other.path):
                        continue
                    if name.kind == other.kind == "output":
                        raise UsageError(f"the {role.replace('_', ' ')} and the {other.role.replace('_', ' ')} "
                                         f"outputs are the same file ({name.path}): give each its own name")
                    raise UsageError(f"{name.describe()} and {other.describe()} are the same file: give each output "
                                     "its own name")
                seen.append(name)
            if path in locked:  # (made and removed by the run: never an input's name)
                names.append(Written(role, str(lock_path(Path(path))), "lock"))
            refuse_inputs(names, inputs, keep=[p for r, p in outputs.items() if r != role],
                          advice="choose another name")
            if role != "thumbnails":  # (a folder in the report's folder, checked as the report's)
                ensure_writable(Path(path), f"the {role.replace('_', ' ')}")
        if earlier:
            self.refuse_earlier_outputs()

    def refuse_earlier_outputs(self) -> None:
        """A live run's outputs that are there already, an earlier run's (or one's still going), refused
        (:meth:`_refuse_earlier_outputs`); nothing for a file's run, which keeps its files aside at the end instead."""
        if not self.live:
            return
        existing = set(self.earlier_outputs())
        earlier = {role: path for role, path in self.outputs().items() if path in existing}  # there already, by role
        if earlier:
            self._refuse_earlier_outputs(earlier)

    def _refuse_earlier_outputs(self, earlier: dict[str, str]) -> None:
        """A live run writes its rows and recording as they come and ends by Ctrl-C: it can neither keep them aside
        nor tell a complete run from a cut-short one, so it never starts over an earlier run's files — not even a
        faceless run's rows (a header, beside a summary counting its frames), nor those of a run still going.
        Every such file is named at once, with the options that give this run other names."""
        after_rows = ["tracks", "segments"]  # the files named after the rows
        if self.output and self.summary == _beside(self.output, ".summary.json"):
            after_rows.insert(0, "summary")
        options = {"-o": {"rows", *after_rows}, "--summary": {"summary"} - set(after_rows),
                   "--record": {"recording"}, "--report": {"report", "thumbnails"}}
        chosen = [option for option, roles in options.items() if roles & earlier.keys()]
        if "-o" in chosen and set(after_rows) & earlier.keys():
            chosen[0] += f" (the {', '.join(after_rows[:-1])} and {after_rows[-1]} are named after the rows)"
        one = len(earlier) == 1
        names = ", ".join(f"{path} ({role.replace('_', ' ')})" for role, path in earlier.items())
        raise UsageError(f"{names} already exist{'s' if one else ''} (an earlier run's?): a live run writes its files "
                         f"as it goes, so it never starts over earlier ones; give this run other names with "
                         f"{', '.join(chosen)}, or move or remove {'that file' if one else 'those files'}")


def path_items(items: StrPath | Iterable[StrPath] | None,
               what: str = "sources") -> tuple[str, ...]:
    """Several paths or URLs as a tuple of str. One given alone (a str, a Path) is one item, not its letters."""
    if items is None:
        return ()
    if isinstance(items, (str, os.PathLike)):
        items = (items,)
    found = tuple(os.fspath(item) if isinstance(item, (str, os.PathLike)) else item for item in items)
    wrong = [item for item in found if not isinstance(item, str)]
    if wrong:
        raise UsageError(f"{what}: {wrong[0]!r} is not a path or URL")
    return found


def _flag(name: str) -> str:
    return name.replace("_", "-")


def _typed(config: RunConfig) -> None:
    """Each option holds the kind of value its type names: a string, a bool or a float given from Python where
    another kind is meant failed later, obscurely (NaN as a batch size), or was taken for true (``landmarks="no"``).
    A whole number given as a float (``64.0``) is held as the int."""
    for field in fields(config):
        kinds = {kind.strip() for kind in str(field.type).split("|")} - {"None"}
        value = getattr(config, field.name)
        if value is None and "None" in str(field.type):
            continue
        flag = f"--{_flag(field.name)}"
        if kinds == {"bool"}:
            if not isinstance(value, bool):
                raise UsageError(f"{flag} is True or False, got {value!r}")
        elif kinds == {"int"}:
            if isinstance(value, numbers.Real) and not isinstance(value, (bool, numbers.Integral)) \
                    and math.isfinite(value) and int(value) == value:
                object.__setattr__(config, field.name, int(value))
            elif isinstance(value, bool) or not isinstance(value, numbers.Integral):
                raise UsageError(f"{flag} must be a whole number, got {value!r}")
        elif kinds in ({"float"}, {"int", "float"}):
            if isinstance(value, bool) or not isinstance(value, numbers.Real):
                raise UsageError(f"{flag} must be a number, got {value!r}")
        elif kinds == {"str"} and not isinstance(value, str):
            raise UsageError(f"{flag} must be a string, got {value!r}")


def _positive(name: str, value: int | None) -> None:
    if value is not None and (int(value) != value or value < 1):
        raise UsageError(f"--{_flag(name)} must be a whole number ≥ 1, got {value}")


def _choice(name: str, value: object, choices: tuple[object, ...]) -> None:
    if value is not None and value not in choices:
        raise UsageError(f"unknown {name} {value!r}; choose from {', '.join(str(c) for c in choices)}")


def _a_stream(output: str) -> bool:
    """Rows written to standard output (``-``) or to a device or pipe (``/dev/null``, ``/dev/stdout``, ``>(…)``):
    written in place, with no files named after them (/dev/null.summary.json was written in /dev)."""
    if output == STDOUT:
        return True
    try:
        kind = os.stat(output).st_mode
    except (OSError, ValueError):
        return False
    return not (stat.S_ISREG(kind) or stat.S_ISDIR(kind))


def _beside(output: str, suffix: str) -> str:
    path = Path(output)
    return str(path.with_suffix("") if path.name else path) + suffix  # (".", "/": refused as folders later)


def video_container(value: str) -> str | None:
    """The suffix (``.mp4``) of ``--annotate``/``--record`` given a container alone (``mp4``, ``.MKV``), else None
    (a file name)."""
    suffix = "." + value.lower().lstrip(".")
    return suffix if suffix in VIDEO_SUFFIXES else None


def annotated_beside(output: str, container: str) -> str:
    """The annotated video named after the rows file: ``clip.emotions.csv`` → ``clip.annotated.mp4``."""
    stem = str(Path(output).with_suffix(""))
    return stem.removesuffix(".emotions") + f".annotated{container}"


def rows_suffix(fmt: str | None) -> str:
    """The ending of a rows file emopipe names itself: ``.emotions.csv``, or ``.emotions.jsonl`` for JSON Lines."""
    return ".emotions.jsonl" if fmt == "jsonl" else ".emotions.csv"


def default_output(uri: str, fmt: str | None = None) -> str:
    """``NAME.emotions.csv`` (``.jsonl`` for that format) in the current folder, the name from the source, cut to
    fit a file name's limit."""
    index = webcam_index(uri)
    if index is not None:
        stem = f"webcam{index}"
    elif is_live(uri):
        rest = redact_uri(uri).split("://", 1)[1].split("?", 1)[0].rsplit("@", 1)[-1]
        stem = re.sub(r"[^A-Za-z0-9.-]+", "_", rest).strip("_.") or "stream"
    else:
        name = Path(uri.rstrip("/")).name or "emopipe"
        stem = name.rsplit(".", 1)[0] if "." in name else name
    # room for the longest name derived from it: NAME.emotions.summary.json
    room = MAX_NAME_BYTES - len(".emotions.summary.json")
    # (a name that is not UTF-8 is written as the rows' source column writes it: zz\xe9)
    stem = text_name(stem).encode()[:room].decode(errors="ignore")
    return stem + rows_suffix(fmt)
