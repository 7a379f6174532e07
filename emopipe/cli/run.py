"""``emopipe SOURCE``: parse the options into a :class:`~emopipe.config.RunConfig` and run it.

All the run's logic is in :class:`emopipe.Analyzer`; this module only knows argparse.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from dataclasses import fields, replace
from typing import TYPE_CHECKING, Any

from emopipe._heap import imports_uncollected
from emopipe.cli.parsing import new_parser, say
from emopipe.config import (
    AUTO_PROCESSES,
    BACKEND_NAMES,
    DEFAULT_MAX_WAIT_MS,
    DEFAULT_METRICS_HOST,
    DEFAULT_METRICS_PORT,
    DETECTOR_NAMES,
    RunConfig,
)
from emopipe.errors import INTERRUPTED_EXIT_CODE, SOME_SOURCES_FAILED_EXIT_CODE, Interrupted, UsageError
from emopipe.io.encode import WRITERS
from emopipe.io.inputs import expand_inputs
from emopipe.io.records import text_name
from emopipe.io.uris import is_live, redact_uri
from emopipe.model import cuda_context, early_plans
from emopipe.model.places import cache_root
from emopipe.types import PRECISION_NAMES

if TYPE_CHECKING:
    from emopipe.api import Analyzer, ManyOutcome
    from emopipe.pipeline.archive import SourceResult
    from emopipe.pipeline.many import FleetOutcome
    from emopipe.pipeline.summary import RunSummary

logger = logging.getLogger(__name__)

PUSH_JOB = "emopipe-batch"  # (emopipe.observe.exposition.PUSH_JOB, named in the help without importing prometheus)


def _count_or_auto(value: str) -> int | str:
    """``--processes``: a whole number (checked by RunConfig, which says what is wrong), or ``auto``."""
    if value.strip().lower() == AUTO_PROCESSES:
        return AUTO_PROCESSES
    try:
        return int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a whole number ≥ 1 or {AUTO_PROCESSES!r}, got {value!r}") from None


def build_parser() -> argparse.ArgumentParser:
    parser = new_parser(
        "emopipe",
        "Per-face emotion (EmoNet expressions, valence, arousal) for every frame of a video, an image or a "
        "folder of images. Exit codes: 0 ok, 1 internal error (a bug), 2 bad options, 3 input not found, 4 input "
        "unreadable, 5 output not writable (or in use by another run), 6 weights problem, 7 camera/stream "
        "unavailable, 8 input ended early, 9 some of several sources failed, 10 the GPU out of memory, "
        "130 interrupted (Ctrl-C or SIGTERM), 141 standard output closed by its reader.",
    )
    parser.add_argument("sources", nargs="*", metavar="SOURCE",
                        help="video file, image file or folder of images; or a network stream (rtsp://, http(s)://…) "
                             "read live, or a camera of an installed capture plug-in (its scheme://…: docs/live.md, "
                             "'Cameras of your own'). Several sources, a folder of videos or a quoted glob "
                             "('clips/**/*.mp4') run in one process, warmed once, with a rows file per source in "
                             "the -o folder, named after the path given (a link after the link). A folder holding "
                             "videos gives its "
                             "videos (its images and hidden files are skipped); a folder of images only is one "
                             "image sequence; its subfolders only with --recursive (a warning says how many are "
                             "left out); a glob takes what it matches as a folder does (not images beside "
                             "videos), each folder it matches as if named (its files not taken again: 'dir/**' "
                             "is each folder of the tree), and skips other files with a warning; a missing name "
                             "with brackets "
                             "(take[1].mp4) is a missing file. Several cameras or "
                             "streams (and --webcam N beside them) run live in one process, a rows file per camera "
                             "in the -o folder (docs/live.md)")
    out = parser.add_argument_group("outputs")
    out.add_argument("-o", "--output", help="per-face rows, .csv or .jsonl ('-' for stdout; default: "
                                            "SOURCE_NAME.emotions.csv, or .jsonl with --format jsonl, in the "
                                            "current folder); a folder (one that exists, or a name ending in /) "
                                            "gets a many-source run's files, for one source too")
    out.add_argument("--format", choices=["csv", "jsonl"], help="row format (default: from the output's extension; "
                                                                "a format the extension contradicts is refused)")
    out.add_argument("--annotate", metavar="VIDEO",
                     help="also write an annotated video (.mp4, .mkv or .avi); a container alone (mp4, mkv, avi) names "
                          "it after the rows (clip.annotated.mp4), and with several sources gives each its own")
    out.add_argument("--video-writer", choices=WRITERS, default=RunConfig.video_writer,
                     help="what encodes --annotate and --record: FFmpeg (H.264; an .mp4 in one-second fragments, "
                          "playable after a kill) or OpenCV (MPEG-4 Part 2; its .mp4 unplayable until closed); "
                          "auto: FFmpeg where found (EMOPIPE_FFMPEG, the emopipe[video] extra, or PATH)")
    out.add_argument("--summary", metavar="JSON", help="run summary as JSON ('-' for stdout; default: next to the "
                                                       "output as OUTPUT.summary.json)")
    out.add_argument("--report", metavar="HTML",
                     help="also write a self-contained HTML report of every face track: thumbnail, valence/arousal "
                          "over time, expressions, circumplex (docs/report.md); with several sources, one page for "
                          "all. Every rows file gets its per-track OUTPUT.tracks.csv and OUTPUT.segments.csv beside "
                          "it, with or without --report")
    out.add_argument("--landmarks", action="store_true", help="add the 68 landmarks (frame pixels) to each row")
    out.add_argument("--smooth", type=float, default=None, metavar="ALPHA",
                     help="per-track exponential smoothing: the newest value's weight, above 0 and at most 1 "
                          "(off by default)")
    out.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")

    many = parser.add_argument_group(
        "several sources", "Outputs go in a folder (-o DIR, default emopipe-out): per source NAME.emotions.csv, "
        "its tracks and segments and its summary (names follow the sources' paths, so clips of the same name in "
        "different folders never collide), manifest.jsonl (a line per source as it finishes: ok, failed, "
        "interrupted, skipped) and summary.json. A source that fails is recorded and the others go on: exit code 9 "
        "if any failed.")
    many.add_argument("--list", dest="list_files", action="append", default=[], metavar="FILE",
                      help="read sources from FILE, one per line (# comments; folders, globs and ~ expanded)")
    many.add_argument("--recursive", action="store_true",
                      help="folders: their whole tree — each video, and each folder of images (with no video of "
                           "its own) as one image sequence named after its path")
    many.add_argument("--resume", action="store_true",
                      help="continue a run into the same folder: skip the sources it finished, redo the others "
                           "(each keeps its file names; a source added since never takes another's)")
    many.add_argument("--parallel", type=int, metavar="N",
                      help="sources opened and decoded ahead at once (default: 2)")
    many.add_argument("--processes", type=_count_or_auto, metavar="N|auto",
                      help="spread the sources over N worker processes of this machine, each warmed once (with "
                           "several GPUs, each on one in turn); several on one GPU run side by side only under NVIDIA "
                           "MPS (docs/cluster.md): 4 a GPU under MPS fill an H100 with 720p video. 'auto': 4 a GPU "
                           "under MPS, else one a GPU, at most one per 4 cores; on one GPU without MPS, or the CPU, "
                           "this process. Files only, not cameras; a dead worker's sources go to another "
                           "(--ray-retries times)")
    many.add_argument("--mps", action="store_true",
                      help="--processes: where NVIDIA MPS does not run, start it for the workers (a daemon of this "
                           "command's own, which no other process uses, ended with it), so the workers on a GPU run "
                           "side by side; 'auto' then counts 4 a GPU")
    many.add_argument("--no-split", dest="split", action="store_false",
                      help="--processes, --ray: keep each video whole in one worker. By default, with fewer videos "
                           "than workers, long videos are cut into parts of 40 s or more, one worker each, and joined "
                           "again: the rows one process writes, the same files (not with --smooth, --annotate or "
                           "--max-frames, which keep videos whole)")
    many.add_argument("--ray", nargs="?", const="auto", metavar="ADDRESS",
                      help="spread the sources over a Ray cluster: ADDRESS (default: $RAY_ADDRESS or the cluster "
                           "on this machine), or 'local' to start one here; one worker per GPU, each warmed once; "
                           "cameras and streams are dealt out round-robin, each worker a fleet of its share, and a "
                           "dead worker's cameras go on on a new one (needs 'emopipe[ray]'; docs/cluster.md)")
    many.add_argument("--ray-workers", type=int, metavar="N",
                      help="workers (default: one per GPU of the cluster; with --ray local, at most what fits); "
                           "these --ray-* options need --ray")
    many.add_argument("--ray-gpus-per-worker", type=float, metavar="F",
                      help="GPUs each worker takes, fractions allowed (default: 1; 0 on a cluster without GPUs)")
    many.add_argument("--ray-retries", type=int, default=RunConfig.ray_retries, metavar="N",
                      help="times a source (or camera) goes to another worker after its worker died")
    many.add_argument("--ray-keep-warm", type=float, metavar="SECONDS",
                      help="after the run, the workers wait warm on the cluster this long for the next run with the "
                           "same options, which then starts on them in about a second (they hold their GPUs "
                           "meanwhile; not with --ray local, whose Ray stops with the run)")

    src = parser.add_argument_group("input range")
    src.add_argument("--start", type=float, metavar="SECONDS",
                     help="start at this time of a video (reached by a seek; rows keep the video's own frame numbers "
                          "and times)")
    src.add_argument("--end", type=float, metavar="SECONDS", help="stop at this time")
    src.add_argument("--max-frames", type=int, metavar="N", help="stop after N frames")
    src.add_argument("--decoder", choices=["auto", "nvdec", "opencv"], default="auto",
                     help="video decoding: nvdec (on the GPU, needs 'emopipe[nvdec]'), opencv (on the CPU), or auto: "
                          "nvdec for video files on a CUDA device where it is available (default)")

    det = parser.add_argument_group("face detection")
    det.add_argument("--detector", help=f"{', '.join(DETECTOR_NAMES)} (S3FD; BlazeFace front and back camera "
                                        "models; default: sfd for files, blazeface live)")
    det.add_argument("--detect-size", type=int, metavar="PX",
                     help="working resolution, long side (default: the detector's own)")
    det.add_argument("--detect-batch", type=int, metavar="N",
                     help="frames per detector call (default for files on CUDA: 8 for sfd, 32 for blazeface; with "
                          "--detect-every K, that divided by K; live: 1, several cameras on CUDA up to 16; 1 on the "
                          "CPU)")
    det.add_argument("--detect-every", type=int, default=1, metavar="K",
                     help="run the detector on every K-th frame only; the frames in between get boxes "
                          "interpolated between the key frames (live: the last key frame's boxes). About K× "
                          "less detection work; boxes follow fast, unsteady motion less closely (default: 1)")
    det.add_argument("--threshold", type=float, default=0.5, help="minimum detector score")
    det.add_argument("--min-face", type=float, default=0, metavar="PX", help="minimum face size (shorter side)")
    det.add_argument("--max-faces", type=int, metavar="N", help="keep the N largest faces per frame")
    det.add_argument("--margin", type=float, default=0.0,
                     help="widen each box by this fraction of its size on every side before cropping")

    model = parser.add_argument_group("model and engine")
    model.add_argument("--classes", type=int, choices=[8, 5], default=None,
                       help="EmoNet variant: 8 or 5 expressions (default: 8; with --weights, read from the file, "
                            "and an error if it disagrees)")
    model.add_argument("--weights", metavar="PATH", help="your own EmoNet checkpoint (official format; hash not "
                                                         "checked)")
    model.add_argument("--models-dir", metavar="DIR", help="models directory (default: $EMOPIPE_HOME, the "
                                                           "checkout's models/, or $XDG_CACHE_HOME/emopipe, "
                                                           "~/.cache/emopipe)")
    model.add_argument("--backend", default="torch", help=" or ".join(BACKEND_NAMES))
    model.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N")
    model.add_argument("--precision", choices=PRECISION_NAMES, help="default: fp16 on CUDA, fp32 on CPU")
    model.add_argument("--batch-size", type=int, metavar="B",
                       help="static batch of faces (default: 64 on CUDA; live: 1, several cameras on CUDA up to "
                            "16; 1 on the CPU)")
    model.add_argument("--no-cudnn-benchmark", action="store_true",
                       help="turn cuDNN autotuning off: the first row came 1.5-2.5 s sooner on an H200, at the same "
                            "throughput (for many short commands; docs/benchmarks.md), and reruns of a command give "
                            "bit-identical rows (docs/outputs.md)")
    model.add_argument("--no-cudnn-epilogue", action="store_true",
                       help="EmoNet's convolutions without cuDNN's fused epilogue (comparison; the epilogue needs "
                            "nvidia-cudnn-frontend): fewer faces/s and more latency at batch 1 (docs/benchmarks.md)")
    model.add_argument("--no-warmup", action="store_true", help="skip warmup (comparison: first frame pays tuning)")
    model.add_argument("--no-cuda-graphs", action="store_true",
                       help="plain kernel launches instead of CUDA graphs (EmoNet and the detector)")
    model.add_argument("--compile", metavar="MODE",
                       help="torch.compile the network with this mode (e.g. 'default'; torch backend only): faster "
                            "steady state, a minute to start; compiled kernels are cached in the models directory")

    metrics = parser.add_argument_group("metrics (Prometheus)")
    metrics.add_argument("--metrics-port", type=int, default=None, metavar="PORT",
                         help=f"serve /metrics on this port during the run (live mode: {DEFAULT_METRICS_PORT} "
                              "unless given; 0 picks a free port)")
    metrics.add_argument("--metrics-host", default=DEFAULT_METRICS_HOST, metavar="HOST",
                         help="address the metrics server listens on (0.0.0.0: every interface, for a "
                              "Prometheus on another machine or outside a container)")
    metrics.add_argument("--metrics-linger", type=float, default=0.0, metavar="SECONDS",
                         help="after a run that finished or failed (a file's, or a live one's at --end, "
                              "--max-frames or a stream lost for good), keep serving /metrics this long so "
                              "Prometheus scrapes the final values (SIGTERM or Ctrl-C ends it early)")
    metrics.add_argument("--metrics-max-sources", type=int, default=RunConfig.metrics_max_sources, metavar="N",
                         help="per-source series (emopipe_source_*) carry a `source` label for the first N sources; "
                              "later ones are counted together as source=\"other\"")
    metrics.add_argument("--pushgateway", default=None, metavar="URL",
                         help=f"push the final metrics to this Pushgateway (job {PUSH_JOB}, grouped by "
                              "instance=host name: one group per host); a URL that is not one is refused at the "
                              "start, a push that fails is a warning")

    live = parser.add_argument_group(
        "live mode (a camera, or a network stream given as SOURCE: rtsp://, http(s)://…)",
        "Only the newest frame is processed; frames that arrive meanwhile are dropped (counted). Rows carry "
        "wall-clock capture times (Unix seconds). --end SECONDS runs that long, --max-frames N stops after N "
        "frames taken from the camera (those dropped while the pipeline was busy count too); otherwise until "
        "Ctrl-C or SIGTERM (exit code 130, files complete).")
    live.add_argument("--webcam", type=int, metavar="N", help="read camera N (0 is the first) instead of SOURCE")
    live.add_argument("--show", action="store_true", help="show the annotated stream in a window (q or Esc stops)")
    live.add_argument("--serve", metavar="HOST:PORT",
                      help="serve a page with the annotated stream and its numbers (e.g. 0.0.0.0:8080; "
                           "':8080' is this machine only)")
    live.add_argument("--record", metavar="VIDEO",
                      help="record the annotated stream (.mp4 with FFmpeg, .mkv or .avi) at the measured frame rate, "
                           "in real time")
    live.add_argument("--max-wait-ms", type=float, default=DEFAULT_MAX_WAIT_MS, metavar="MS",
                      help="run a face batch that is not full once its first face waited this long "
                           "(matters with --batch-size > 1)")
    live.add_argument("--open-timeout", type=float, default=RunConfig.open_timeout, metavar="SECONDS",
                      help="give up opening the camera or stream after this long ('inf': as long as OpenCV allows, "
                           "24.8 days)")
    live.add_argument("--read-timeout", type=float, default=RunConfig.read_timeout, metavar="SECONDS",
                      help="a stream that sends nothing for this long has stalled: reconnect ('inf': as long as "
                           "OpenCV allows)")
    live.add_argument("--reconnect-timeout", type=float, default=RunConfig.reconnect_timeout,
                      metavar="SECONDS", help="stop (exit code 7) after this long without a frame despite "
                                              "reconnecting; 'inf' keeps trying")
    return parser


def config_from_args(args: argparse.Namespace) -> RunConfig:
    """The RunConfig the parsed options describe (the only place the command line meets the library).

    One plain source is ``source``; several, or a collection (a folder of videos, a glob, --list), are
    ``sources`` (so is one file with ``--ray``).
    ``--webcam N`` beside other sources is one more camera of the run (``webcam:N``)."""
    values = {f.name: getattr(args, f.name) for f in fields(RunConfig)
              if f.name not in ("source", "sources", "sources_expanded")}
    values["list_files"] = tuple(args.list_files)
    items = list(args.sources)
    if args.webcam is not None and (items or args.list_files or args.ray):  # (--ray: cameras are a fleet's)
        items.append(f"webcam:{args.webcam}")
        values["webcam"] = None
    inputs = expand_inputs(items, args.list_files, recursive=args.recursive)
    if inputs.sources:  # the list files' sources are in ``sources`` now: not read (and expanded) a second time
        values["list_files"] = ()
    if inputs.collection or args.ray or args.processes or _output_folder_meant(args.output, inputs.sources):
        # (--ray, --processes, -o FOLDER/: the many-source command, for one file too: -o is its folder)
        return RunConfig(sources=inputs.sources, sources_expanded=True, **values)
    return RunConfig(source=inputs.sources[0] if inputs.sources else None, **values)


def _output_folder_meant(output: str | None, sources: list[str]) -> bool:
    """One file or image folder with ``-o`` naming a folder (an existing one, or a name ending in a separator): its
    files go in it as a many-source run's do, not in a file named as the folder."""
    if output is None or len(sources) != 1 or is_live(sources[0]) or output == "-":
        return False
    return output.endswith(("/", os.sep)) or os.path.isdir(output)


LIVE_ONLY_OPTIONS = ("open_timeout", "read_timeout", "reconnect_timeout")


def _say_live_options_unused(config: RunConfig) -> None:
    """A warning for the camera and stream timeouts given to a run of files only: taken, and used by nothing."""
    sources = [s for s in (*config.sources, config.source) if s is not None]
    if config.webcam is not None or any(is_live(source) for source in sources):
        return
    unused = [name for name in LIVE_ONLY_OPTIONS if getattr(config, name) != getattr(RunConfig, name)]
    if unused:
        logger.warning("%s: for cameras and streams; this run reads files, which do not use %s",
                       ", ".join("--" + name.replace("_", "-") for name in unused),
                       "it" if len(unused) == 1 else "them")


def run(args: argparse.Namespace) -> int:
    config = config_from_args(args)
    _say_live_options_unused(config)
    if config.ray:  # before PyTorch loads (this process loads none): the workers start meanwhile
        return run_on_cluster(config)
    if config.processes == AUTO_PROCESSES:
        config = auto_processes(config)
    if config.processes is not None:  # (as --ray: this process loads no PyTorch; its workers do)
        build_plans_ahead(config)
        return run_on_processes(config)
    logger.info("starting: loading PyTorch …")  # the first seconds of a run are imports: say so at once
    # (the context made on a thread while PyTorch imports; then the plans begin, whose builders' contexts would
    # otherwise be made beside it: on the H200 it took 1.6 s among them instead of 0.4, session 29)
    cuda_context.start(config.device, then=lambda: build_plans_ahead(config))

    with imports_uncollected():
        from emopipe.api import Analyzer, run_metrics
        from emopipe.pipeline.models import start_ahead

    if cuda_context.made:  # (a GPU run: what its warm-up needs begins before the source opens)
        start_ahead(config)

    if config.fleet:
        return run_fleet(config)
    if config.many:
        return run_many(config)
    analyzer = Analyzer(config)
    config = analyzer.source_config()
    metrics, exporter = run_metrics(config, batch_sizes=(int(config.batch_size or 1),),
                                    mode="live" if config.live else "file")
    try:  # (a truncated file, a stream lost for good: raised once every file is written; said as errors are)
        outcome = analyzer.run(metrics=metrics, exporter=exporter,
                               progress=not config.no_progress and sys.stderr.isatty())
    except Interrupted:  # every row computed is written
        return INTERRUPTED_EXIT_CODE
    finally:
        _let_go(analyzer)
    _suggest_parts(config, outcome.summary)
    return 0


def build_plans_ahead(config: RunConfig) -> None:
    """Begin building the cuDNN plans a GPU run of this configuration needs and the plan folder lacks, in a process
    of its own, while PyTorch imports (on a fresh machine they took 5.5–7.6 s after it: emopipe.model.early_plans; with
    every plan on disk that process ends at once). Not for a fleet of cameras, whose batches vary."""
    ordinal = cuda_context.device_ordinal(config.device)
    if ordinal is None or config.backend not in (None, "torch") or config.compile or config.fleet:
        return
    source = config.source or (config.sources[0] if config.sources else "source.mp4")
    try:
        resolved = replace(config, source=source, sources=()).resolved("cuda")
    except Exception:  # (the run itself says what is wrong with its options)
        return
    keys = early_plans.recipe_keys(batch_size=int(resolved.batch_size or 1), precision=str(resolved.precision),
                                   detector=str(resolved.detector), detect_batch=int(resolved.detect_batch or 1),
                                   epilogue=not resolved.no_cudnn_epilogue)
    early_plans.start(ordinal, cache_root(resolved.models_dir) / "cudnn", keys)


def _let_go(analyzer: Analyzer) -> None:
    """The run's engines let go of, unless the process ends now anyway (the command: nothing to gain but its end
    delayed)."""
    from emopipe.cli.app import process_ends_after_run

    if not process_ends_after_run():
        analyzer.close()


def _report(result: SourceResult) -> None:
    detail = f": {result.error}" if result.error else ""
    logger.info("%s %s — %d frames, %d faces%s", result.status, redact_uri(text_name(result.source)),
                result.frames, result.faces, detail)  # (a name that is not UTF-8 as the rows write it: zz\xe9)


def _exit_code(outcome: ManyOutcome) -> int:
    run, now = outcome.run, outcome.run["this_run"]
    before = f"; with those done before, {run['frames']} frames, {run['faces']} faces" if run["skipped"] else ""
    logger.info("%d source%s: %d ok, %d failed, %d interrupted, %d skipped (done before); %d frames, %d faces in "
                "%.1f s (%s frames/s)%s; manifest %s", run["sources"], "" if run["sources"] == 1 else "s", run["ok"],
                run["failed"], run["interrupted"],
                run["skipped"], now["frames"], now["faces"], run["wall_s"],
                f"{run['fps']:.0f}" if run["fps"] >= 10 else f"{run['fps']:.2g}", before,  # (CPU: not "0")
                run["manifest"])
    if outcome.interrupted:
        return INTERRUPTED_EXIT_CODE
    if outcome.failed:
        return SOME_SOURCES_FAILED_EXIT_CODE
    return 0


def run_on_cluster(config: RunConfig) -> int:
    """Several sources over a Ray cluster (emopipe.cluster), or cameras and streams (emopipe.cluster_cameras): the
    same files and exit codes as run_many and run_fleet."""
    try:
        import ray  # noqa: F401
    except ImportError:
        raise UsageError("--ray needs Ray: pip install 'emopipe[ray]'") from None
    from emopipe.cluster import RayOptions, run_on_ray

    options, progress = RayOptions.from_config(config), not config.no_progress and sys.stderr.isatty()
    if config.fleet:
        from emopipe.cluster_cameras import run_cameras_on_ray

        return _fleet_exit_code(run_cameras_on_ray(config, options, on_result=_report, progress=progress))
    # (run_on_ray plans the run, then says how many sources go to Ray; this process loads no PyTorch)
    return _exit_code(run_on_ray(config, options, on_result=_report, progress=progress))


def auto_processes(config: RunConfig) -> RunConfig:
    """``--processes auto``: the count chosen for this machine (:func:`emopipe.processes.workers_for`); one means
    this process runs the sources itself."""
    from emopipe.processes import auto_workers

    if config.fleet:  # (refused as --processes N is: files only)
        return config
    count, why = auto_workers(config.device, start_mps=config.mps)
    if count == 1:
        logger.info("--processes auto: the sources run in this process (%s)", why)
        return replace(config, processes=None, mps=False, split=True)  # (--mps, --no-split: no workers to use them)
    logger.info("--processes auto: %d worker processes (%s)", count, why)
    return replace(config, processes=count)


def run_on_processes(config: RunConfig) -> int:
    """Several files over worker processes of this machine (emopipe.processes): the same files and exit codes as
    run_many."""
    if config.fleet:
        raise UsageError("--processes: files only; cameras and streams run in one process (or over --ray)")
    from emopipe.processes import run_on_processes as run_over

    progress = not config.no_progress and sys.stderr.isatty()
    return _exit_code(run_over(config, int(config.processes or 1), on_result=_report, progress=progress))


def run_fleet(config: RunConfig) -> int:
    """Several cameras and streams in one process (emopipe.pipeline.fleet): exit 0 when every camera ended as
    asked (--end, --max-frames), 7 when every camera was lost (or none opened), 9 when some were, 130 when
    interrupted (Ctrl-C, SIGTERM) — the usual end of a live run."""
    from emopipe.api import Analyzer, run_metrics

    analyzer = Analyzer(config)
    resolved = analyzer.source_config(config.sources[0], output=None, summary=None)
    metrics, exporter = run_metrics(resolved, batch_sizes=(int(resolved.batch_size or 1),), mode="live")
    try:
        outcome = analyzer.run_fleet(metrics=metrics, exporter=exporter,
                                     progress=not config.no_progress and sys.stderr.isatty())
    except Interrupted as stop:  # Ctrl-C, SIGTERM: a live run's usual end (130)
        outcome = stop.outcome
    finally:
        _let_go(analyzer)
    return _fleet_exit_code(outcome)


def _fleet_exit_code(outcome: FleetOutcome) -> int:
    run = outcome.run
    statuses = [r.status for r in outcome.results]
    logger.info("%d camera%s: %d ok, %d lost, %d interrupted; %d frames, %d faces in %.1f s; manifest %s",
                len(statuses), "" if len(statuses) == 1 else "s", statuses.count("ok"), statuses.count("failed"),
                statuses.count("interrupted"), run["frames"], run["faces"], run["wall_s"], run["manifest"])
    for failed in outcome.failed:
        say(f"emopipe: error: {failed.error}")
    return outcome.exit_code


def run_many(config: RunConfig) -> int:
    """Several sources in one process: exit 0 when every source is ok (or was done before), 9 when some
    failed, 130 when interrupted."""
    from emopipe.api import Analyzer

    analyzer = Analyzer(config)
    try:  # (metrics_port / pushgateway: Analyzer.run_many makes the metrics they ask for)
        outcome = analyzer.run_many(on_result=_report,
                                    progress=not config.no_progress and sys.stderr.isatty())
    except Interrupted as stop:  # (130: every source's files and manifest line written)
        outcome = stop.outcome
    finally:
        _let_go(analyzer)
    code = _exit_code(outcome)
    _suggest_workers(outcome.run)
    return code


SUGGEST_WORKERS_AFTER_S = 10.0  # a shorter run gains little from workers that each start up first


def _suggest_parts(config: RunConfig, summary: RunSummary) -> None:
    """After one video file that this process ran on a GPU for a while: say that worker processes under MPS run it
    faster in parts, joined again into the rows this run wrote (only where the options let a video be cut)."""
    from emopipe.pipeline.parts import not_splittable

    if (config.live or not summary.complete or summary.seconds < SUGGEST_WORKERS_AFTER_S
            or not str(summary.engine.get("device", "")).startswith("cuda") or not_splittable(config) is not None
            or not os.path.isfile(config.source or "")):
        return
    logger.info("tip: one process ran this video on the GPU; with -o FOLDER --processes auto --mps it is cut into "
                "parts over 4 worker processes on it and joined again, the same rows (a 9-minute 720p video in 10.7 s "
                "against 16.9 s on an H200; docs/benchmarks.md, \"The command's own NVIDIA MPS\")")


def _suggest_workers(run: dict[str, Any]) -> None:
    """After a many-source run that one process ran on a GPU for a while: say that worker processes under MPS run
    such a run faster on one GPU (its sources spread over them, a long video cut into parts)."""
    engine = (run.get("pipeline") or {}).get("engine") or {}
    if (not str(engine.get("device", "")).startswith("cuda") or run.get("run_interrupted")
            or not run.get("processed") or run.get("wall_s", 0.0) < SUGGEST_WORKERS_AFTER_S):
        return
    logger.info("tip: one process ran this on the GPU; --processes auto --mps runs 4 worker processes on it, each "
                "warmed once (64 ten-second 720p clips in 11 s against 18 s, a 9-minute video in 10 s against 17 s "
                "on an H200; docs/benchmarks.md, \"The command's own NVIDIA MPS\")")
