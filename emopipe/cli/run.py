"""``emopipe SOURCE``: parse the options into a :class:`~emopipe.config.RunConfig` and run it.

All the run's logic is in :class:`emopipe.Analyzer`; this module only knows argparse.
"""

from __future__ import annotations

import argparse
import logging
import sys
from dataclasses import fields

from emopipe.cli.parsing import new_parser
from emopipe.config import (
    BACKEND_NAMES,
    DEFAULT_MAX_WAIT_MS,
    DEFAULT_METRICS_HOST,
    DEFAULT_METRICS_PORT,
    DETECTOR_NAMES,
    RunConfig,
)
from emopipe.errors import INTERRUPTED_EXIT_CODE, InputTruncatedError

logger = logging.getLogger(__name__)

PUSH_JOB = "emopipe-batch"  # (emopipe.observe.metrics.PUSH_JOB, named in the help without importing prometheus)


def build_parser() -> argparse.ArgumentParser:
    parser = new_parser(
        "emopipe",
        "Per-face emotion (EmoNet expressions, valence, arousal) for every frame of a video, an image or a "
        "folder of images. Exit codes: 0 ok, 2 bad options, 3 input not found, 4 input unreadable, 5 output "
        "not writable, 6 weights problem, 7 camera/stream unavailable, 8 input ended early, 130 interrupted "
        "(Ctrl-C or SIGTERM).",
    )
    parser.add_argument("source", nargs="?", help="video file, image file or folder of images; or a network stream "
                                                 "(rtsp://, http(s)://…) read live")
    out = parser.add_argument_group("outputs")
    out.add_argument("-o", "--output", help="per-face rows, .csv or .jsonl ('-' for stdout; "
                                            "default: SOURCE_NAME.emotions.csv in the current folder)")
    out.add_argument("--format", choices=["csv", "jsonl"], help="row format (default: from the output's extension)")
    out.add_argument("--annotate", metavar="VIDEO", help="also write an annotated video (.mp4 or .avi)")
    out.add_argument("--summary", metavar="JSON", help="run summary as JSON ('-' for stdout; default: next to the "
                                                       "output as OUTPUT.summary.json)")
    out.add_argument("--report", metavar="HTML",
                     help="also write a self-contained HTML report of every face track: thumbnail, valence/arousal "
                          "over time, expressions, circumplex (docs/report.md); OUTPUT.tracks.csv and "
                          "OUTPUT.segments.csv are written beside the rows in any case")
    out.add_argument("--landmarks", action="store_true", help="add the 68 landmarks (frame pixels) to each row")
    out.add_argument("--smooth", type=float, default=None, metavar="ALPHA",
                     help="per-track exponential smoothing; weight of the newest value (off by default)")
    out.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")

    src = parser.add_argument_group("input range")
    src.add_argument("--start", type=float, metavar="SECONDS", help="start at this time")
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
                     help="frames per detector call (default: 8 on CUDA, 1 on CPU; with --detect-every K, 8/K)")
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
                                                           "checkout's models/, or ~/.cache/emopipe)")
    model.add_argument("--backend", default="torch", help=" or ".join(BACKEND_NAMES))
    model.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N")
    model.add_argument("--precision", choices=["fp32", "fp16", "bf16"], help="default: fp16 on CUDA, fp32 on CPU")
    model.add_argument("--batch-size", type=int, metavar="B",
                       help="static batch of faces (default: 64 on CUDA, 1 on CPU and live)")
    model.add_argument("--no-cudnn-benchmark", action="store_true", help="turn cuDNN autotuning off (comparison)")
    model.add_argument("--no-cudnn-epilogue", action="store_true",
                       help="EmoNet's convolutions without cuDNN's fused epilogue (comparison; the epilogue needs "
                            "nvidia-cudnn-frontend): fewer faces/s and more latency at batch 1 (docs/benchmarks.md)")
    model.add_argument("--no-warmup", action="store_true", help="skip warmup (comparison: first frame pays tuning)")
    model.add_argument("--no-cuda-graphs", action="store_true",
                       help="plain kernel launches instead of CUDA graphs (EmoNet and the detector)")
    model.add_argument("--compile", metavar="MODE",
                       help="torch.compile the network with this mode (e.g. 'default'): faster steady state, a "
                            "minute to start; compiled kernels are cached in the models directory")

    metrics = parser.add_argument_group("metrics (Prometheus)")
    metrics.add_argument("--metrics-port", type=int, default=None, metavar="PORT",
                         help=f"serve /metrics on this port during the run (live mode: {DEFAULT_METRICS_PORT} "
                              "unless given; 0 picks a free port)")
    metrics.add_argument("--metrics-host", default=DEFAULT_METRICS_HOST, metavar="HOST",
                         help="address the metrics server listens on (0.0.0.0: every interface, for a "
                              "Prometheus on another machine or outside a container)")
    metrics.add_argument("--metrics-linger", type=float, default=0.0, metavar="SECONDS",
                         help="after a file run, keep serving /metrics this long so Prometheus scrapes the "
                              "final values (SIGTERM or Ctrl-C ends it early)")
    metrics.add_argument("--pushgateway", default=None, metavar="URL",
                         help=f"push the final metrics to this Pushgateway (job {PUSH_JOB}, grouped by "
                              "instance=host name and source)")

    live = parser.add_argument_group(
        "live mode (a camera, or a network stream given as SOURCE: rtsp://, http(s)://…)",
        "Only the newest frame is processed; frames that arrive meanwhile are dropped (counted). Rows carry "
        "wall-clock capture times (Unix seconds). --end SECONDS runs that long, --max-frames N processes N "
        "frames; otherwise until Ctrl-C or SIGTERM (exit code 130, files complete).")
    live.add_argument("--webcam", type=int, metavar="N", help="read camera N (0 is the first) instead of SOURCE")
    live.add_argument("--show", action="store_true", help="show the annotated stream in a window (q or Esc stops)")
    live.add_argument("--serve", metavar="HOST:PORT",
                      help="serve a page with the annotated stream and its numbers (e.g. 0.0.0.0:8080; "
                           "':8080' is this machine only)")
    live.add_argument("--record", metavar="VIDEO",
                      help="record the annotated stream (.mp4 or .avi) at the measured frame rate, in real time")
    live.add_argument("--max-wait-ms", type=float, default=DEFAULT_MAX_WAIT_MS, metavar="MS",
                      help="run a face batch that is not full once its first face waited this long "
                           "(matters with --batch-size > 1)")
    live.add_argument("--open-timeout", type=float, default=RunConfig.open_timeout, metavar="SECONDS",
                      help="give up opening the camera or stream after this long")
    live.add_argument("--read-timeout", type=float, default=RunConfig.read_timeout, metavar="SECONDS",
                      help="a stream that sends nothing for this long has stalled: reconnect")
    live.add_argument("--reconnect-timeout", type=float, default=RunConfig.reconnect_timeout,
                      metavar="SECONDS", help="stop (exit code 7) after this long without a frame despite "
                                              "reconnecting; 'inf' keeps trying")
    return parser


def config_from_args(args: argparse.Namespace) -> RunConfig:
    """The RunConfig the parsed options describe (the only place the command line meets the library)."""
    return RunConfig(**{f.name: getattr(args, f.name) for f in fields(RunConfig)})


def run(args: argparse.Namespace) -> int:
    from prometheus_client import CollectorRegistry

    from emopipe.api import Analyzer
    from emopipe.observe.metrics import MetricsExporter, PipelineMetrics, grouping_key

    analyzer = Analyzer(config_from_args(args))
    config = analyzer.source_config()
    registry = CollectorRegistry()
    metrics = PipelineMetrics(registry, queues=("frames", "results"), batch_sizes=(int(config.batch_size or 1),))
    exporter = MetricsExporter(registry, port=config.metrics_port, host=config.metrics_host,
                               linger_s=config.metrics_linger, pushgateway=config.pushgateway,
                               grouping_key=grouping_key(config.uri))
    try:
        outcome = analyzer.run(metrics=metrics, exporter=exporter,
                               progress=not config.no_progress and sys.stderr.isatty())
    finally:
        analyzer.close()
    if outcome.lost is not None:
        raise outcome.lost
    if outcome.interrupted:
        return INTERRUPTED_EXIT_CODE
    if outcome.summary.ended_early:
        print(f"emopipe: error: {InputTruncatedError(outcome.summary.ended_early)}", file=sys.stderr)
        return InputTruncatedError.exit_code
    return 0
