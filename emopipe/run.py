"""``emopipe SOURCE``: a video, an image or a folder of images → one row per face per frame."""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import threading
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from .errors import INTERRUPTED_EXIT_CODE, InputTruncatedError, OutputError, SourceUnavailableError, UsageError

logger = logging.getLogger(__name__)


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be ≥ 1, got {value}")
    return value


def _compile_mode(text: str) -> str:
    from .engine import check_compile_mode
    from .errors import UsageError

    try:
        check_compile_mode(text)
    except UsageError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return text


def _non_negative(text: str) -> float:
    value = float(text)
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be ≥ 0, got {text}")
    return value


def _fraction(text: str) -> float:
    value = float(text)
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1, got {text}")
    return value


def build_parser() -> argparse.ArgumentParser:
    from .cli import new_parser

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
    out.add_argument("--landmarks", action="store_true", help="add the 68 landmarks (frame pixels) to each row")
    out.add_argument("--smooth", type=_fraction, default=None, metavar="ALPHA",
                     help="per-track exponential smoothing; weight of the newest value (off by default)")
    out.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")

    src = parser.add_argument_group("input range")
    src.add_argument("--start", type=_non_negative, metavar="SECONDS", help="start at this time")
    src.add_argument("--end", type=_non_negative, metavar="SECONDS", help="stop at this time")
    src.add_argument("--max-frames", type=_positive_int, metavar="N", help="stop after N frames")
    src.add_argument("--decoder", choices=["auto", "nvdec", "opencv"], default="auto",
                     help="video decoding: nvdec (on the GPU, needs 'emopipe[nvdec]'), opencv (on the CPU), or auto: "
                          "nvdec for video files on a CUDA device where it is available (default)")

    det = parser.add_argument_group("face detection")
    det.add_argument("--detector", help="sfd (S3FD), blazeface (front camera) or blazeface_back "
                                        "(default: sfd for files, blazeface live)")
    det.add_argument("--detect-size", type=_positive_int, metavar="PX",
                     help="working resolution, long side (default: the detector's own)")
    det.add_argument("--detect-batch", type=_positive_int, metavar="N",
                     help="frames per detector call (default: 8 on CUDA, 1 on CPU; with --detect-every K, 8/K)")
    det.add_argument("--detect-every", type=_positive_int, default=1, metavar="K",
                     help="run the detector on every K-th frame only; the frames in between get boxes "
                          "interpolated between the key frames (live: the last key frame's boxes). About K× "
                          "less detection work; boxes follow fast, unsteady motion less closely (default: 1)")
    det.add_argument("--threshold", type=_fraction, default=0.5, help="minimum detector score")
    det.add_argument("--min-face", type=_non_negative, default=0, metavar="PX", help="minimum face size (shorter side)")
    det.add_argument("--max-faces", type=_positive_int, metavar="N", help="keep the N largest faces per frame")
    det.add_argument("--margin", type=_non_negative, default=0.0,
                     help="widen each box by this fraction of its size on every side before cropping")

    model = parser.add_argument_group("model and engine")
    model.add_argument("--classes", type=int, choices=[8, 5], default=8, help="EmoNet variant (published weights)")
    model.add_argument("--weights", metavar="PATH", help="your own EmoNet checkpoint (official format; hash not "
                                                         "checked)")
    model.add_argument("--models-dir", metavar="DIR", help="models directory (default: $EMOPIPE_HOME, the "
                                                           "checkout's models/, or ~/.cache/emopipe)")
    model.add_argument("--backend", default="torch", help="torch or onnxruntime")
    model.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N")
    model.add_argument("--precision", choices=["fp32", "fp16", "bf16"], help="default: fp16 on CUDA, fp32 on CPU")
    model.add_argument("--batch-size", type=_positive_int, metavar="B",
                       help="static batch of faces (default: 64 on CUDA, 1 on CPU)")
    model.add_argument("--no-cudnn-benchmark", action="store_true", help="turn cuDNN autotuning off (comparison)")
    model.add_argument("--no-cudnn-epilogue", action="store_true",
                       help="EmoNet's convolutions without cuDNN's fused epilogue (comparison; the epilogue needs "
                            "nvidia-cudnn-frontend): ~9 %% fewer faces/s, 0.2 ms more at batch 1")
    model.add_argument("--no-warmup", action="store_true", help="skip warmup (comparison: first frame pays tuning)")
    model.add_argument("--no-cuda-graphs", action="store_true",
                       help="plain kernel launches instead of CUDA graphs (EmoNet and the detector)")
    model.add_argument("--compile", metavar="MODE", type=_compile_mode,
                       help="torch.compile the network with this mode (e.g. 'default'): faster steady state, a "
                            "minute to start; compiled kernels are cached in the models directory")

    from .metrics import add_arguments as add_metrics_arguments

    add_metrics_arguments(parser)
    from .liverun import add_arguments as add_live_arguments

    add_live_arguments(parser)
    return parser


def _batch_size(args: argparse.Namespace) -> int:
    from .devices import resolve_device

    return args.batch_size or (64 if resolve_device(args.device).type == "cuda" else 1)


def _detect_batch(args: argparse.Namespace, cuda: bool) -> int:
    """Frames per detector call. With --detect-every K a batch of frames holds detect_batch × K frames,
    of which detect_batch are detected: the default keeps about 8 frames per batch."""
    if args.detect_batch:
        return int(args.detect_batch)
    return -(-8 // args.detect_every) if cuda else 1


def _default_output(source: str) -> Path:
    name = Path(source.rstrip("/")).name or "emopipe"
    stem = name.rsplit(".", 1)[0] if "." in name else name
    return Path(f"{stem}.emotions.csv")


def _summary_path(args: argparse.Namespace, output: str) -> str | None:
    if args.summary:
        return args.summary
    if output == "-":
        return None  # the rows are on stdout; the summary goes to stderr only
    return str(Path(output).with_suffix("")) + ".summary.json"


def run(args: argparse.Namespace) -> int:
    from prometheus_client import CollectorRegistry

    from .liverun import prepare as prepare_live
    from .metrics import PipelineMetrics, exporter_from_args
    from .pipeline import Pipeline, PipelineSettings

    live = prepare_live(args)  # None for files; a camera or stream: its defaults are applied to args
    output = args.output or str(_default_output(args.source))
    summary_path = _summary_path(args, output)
    with ExitStack() as stack:
        if threading.current_thread() is threading.main_thread():  # `docker stop`, systemd, kill: as Ctrl-C
            stack.callback(signal.signal, signal.SIGTERM, signal.signal(signal.SIGTERM, _interrupt))
        registry = CollectorRegistry()
        metrics = PipelineMetrics(registry, queues=("frames", "results"), batch_sizes=(_batch_size(args),))
        exporter = exporter_from_args(args, registry, source=args.source, live=live is not None)
        parts = _assemble(args, output, summary_path, stack, metrics, exporter, live)
        frames_per_batch = parts["detector"].batch_size * args.detect_every
        settings = live.settings() if live is not None else \
            PipelineSettings(detect_batch=parts["detector"].batch_size, queue_frames=max(4, 2 * frames_per_batch),
                             detect_every=args.detect_every)
        pipeline = Pipeline(parts["source"], parts["detector"], parts["cropper"], parts["engine"],
                            sinks=[parts["sink"]], observers=parts["observers"], settings=settings)
        interrupted = False
        lost: SourceUnavailableError | None = None
        try:
            pipeline.run()
        except KeyboardInterrupt:
            interrupted = True
        except SourceUnavailableError as exc:  # a stream lost for good: its rows are written; so is the summary
            lost = exc
        summary = pipeline.summary(load_s=parts["load_s"], warmup_s=parts["warmup_s"],
                                   interrupted=interrupted, outputs=parts["outputs"],
                                   live=live.summary(pipeline) if live is not None else None)
        _report(summary, summary_path)
        for finish in parts["finishers"]:
            finish(summary)
        exporter.finish()
    if lost is not None:
        raise lost
    if interrupted:
        return INTERRUPTED_EXIT_CODE
    if summary.ended_early:
        print(f"emopipe: error: {InputTruncatedError(summary.ended_early)}", file=sys.stderr)
        return InputTruncatedError.exit_code
    return 0


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt  # SIGTERM ends a run as Ctrl-C does: results written, files closed, exit 130


def _report(summary: Any, path: str | None) -> None:
    for line in summary.describe().splitlines():
        logger.info("%s", line)
    if path is None:
        return
    text = json.dumps(summary.as_dict(), indent=2) + "\n"
    if path == "-":
        sys.stdout.write(text)
        return
    try:
        Path(path).write_text(text)
    except OSError as exc:
        raise OutputError(f"cannot write the summary {path}: {exc.strerror or exc}") from None


def _assemble(args: argparse.Namespace, output: str, summary_path: str | None, stack: ExitStack,
              metrics: Any, exporter: Any, live: Any = None) -> dict[str, Any]:
    """Check the outputs (fail fast), open the source, serve metrics, then load and warm up the models."""
    import torch

    from . import weights
    from .annotate import AnnotatedVideoWriter
    from .crop import FaceCropper
    from .detect import create_detector
    from .devices import resolve_device
    from .emonet import build_emonet, read_checkpoint
    from .engine import PRECISIONS, EngineOptions, create_engine
    from .metrics import build_info
    from .nvdec import open_input
    from .records import ensure_writable, open_writer
    from .sinks import FaceRecorder, RecordSink

    _check_options(args)
    device = resolve_device(args.device)
    cuda = device.type == "cuda"
    if output != "-":
        ensure_writable(Path(output), "output")
    if summary_path and summary_path != "-":
        ensure_writable(Path(summary_path), "summary")
    if args.annotate:
        ensure_writable(Path(args.annotate), "annotated video")

    if live is not None:
        if args.decoder == "nvdec":
            raise UsageError("--decoder nvdec decodes video files; cameras and network streams are decoded on the CPU")
        source = live.open(stack, metrics.registry)
    else:
        source = stack.enter_context(open_input(args.source, decoder=args.decoder, device=device, start_s=args.start,
                                                end_s=args.end, max_frames=args.max_frames))
    info = source.info
    stack.enter_context(exporter)  # /metrics is up before the models load, so scrapes see start-up

    t_load = time.perf_counter()
    if args.weights:
        checkpoint = weights.user_file(args.weights)
    else:
        checkpoint = weights.ensure(f"emonet_{args.classes}", args.models_dir)
    model = build_emonet(read_checkpoint(checkpoint))
    cuda_graphs = False if (args.no_cuda_graphs or args.no_warmup) else None  # graphs are captured at warmup
    options = EngineOptions(
        device=str(device), precision=args.precision, batch_size=_batch_size(args),
        cudnn_benchmark=not args.no_cudnn_benchmark, warmup=not args.no_warmup,
        cuda_graphs=cuda_graphs, landmarks=args.landmarks,
        compile=args.compile, cudnn_epilogue=not args.no_cudnn_epilogue,
    )
    engine = create_engine(args.backend, model, options, checkpoint_sha256=weights.sha256_of(checkpoint),
                           models_dir=weights.models_dir(args.models_dir))
    precision = getattr(engine, "options", options).precision or ("fp16" if cuda else "fp32")
    detector = create_detector(args.detector or "sfd", device=str(device), models_dir=args.models_dir,
                               score_threshold=args.threshold, min_face=args.min_face, max_faces=args.max_faces,
                               working_size=args.detect_size, batch_size=_detect_batch(args, cuda),
                               precision="fp16" if cuda and precision != "fp32" else "fp32", cuda_graphs=cuda_graphs)
    cropper = FaceCropper(margin=args.margin, device=device, dtype=PRECISIONS[precision] if cuda else torch.float32)
    load_s = time.perf_counter() - t_load

    t_warm = time.perf_counter()
    if not args.no_warmup:
        engine.warmup()
        detector.warmup(info.height, info.width)
    warmup_s = time.perf_counter() - t_warm
    metrics.observe_startup(load_s, warmup_s)
    model_name = f"emonet_{engine.num_classes}" if not args.weights else Path(args.weights).name
    metrics.set_info(build_info(engine.info(), model=model_name))

    writer = stack.enter_context(open_writer(output, fmt=args.format, labels=engine.labels, landmarks=args.landmarks,
                                             detected=args.detect_every > 1))
    video = None
    if args.annotate:
        video = AnnotatedVideoWriter(args.annotate, info.fps or 1.0, (info.width, info.height))
    sink = RecordSink(FaceRecorder(info.uri, engine.labels, smoothing=args.smooth), writer, video)
    if live is not None:
        sink = live.sink(sink)  # the annotated stream for --record, --show, --serve
    outputs = {"rows": output}
    if args.annotate:
        outputs["annotated_video"] = args.annotate
    if summary_path:
        outputs["summary"] = summary_path

    observers, finishers = [], []
    if not args.no_progress and sys.stderr.isatty():
        progress = _Progress(info.frame_count)
        observers.append(progress)
        finishers.append(lambda summary: progress.close())
    observers.append(MetricsObserver(metrics))
    if live is not None:
        observers += live.observers(metrics)
    return {"source": source, "detector": detector, "cropper": cropper, "engine": engine, "sink": sink,
            "observers": observers, "finishers": finishers, "load_s": load_s, "warmup_s": warmup_s,
            "outputs": outputs}


def _check_options(args: argparse.Namespace) -> None:
    """Option errors before any file is opened or weights are fetched."""
    from .detect import DETECTORS
    from .engine import BACKENDS

    if args.end is not None and args.start is not None and args.end <= args.start:
        raise UsageError(f"--end ({args.end}) must be after --start ({args.start})")
    args.detector = args.detector or "sfd"  # the file default (live mode chose its own already)
    if args.detector not in DETECTORS:
        raise UsageError(f"unknown detector {args.detector!r}; choose from {', '.join(DETECTORS)}")
    if args.backend not in BACKENDS:
        raise UsageError(f"unknown backend {args.backend!r}; choose from {', '.join(BACKENDS)}")


class _Progress:
    """tqdm on stderr: frames, frames/s and faces so far."""

    def __init__(self, total: int | None) -> None:
        from tqdm import tqdm

        from .pipeline import Observer

        self._observer = Observer()
        self.bar = tqdm(total=total, unit="frame", file=sys.stderr, dynamic_ncols=True, leave=False)
        self.faces = 0

    def __getattr__(self, name: str) -> Any:  # the hooks the progress bar does not need
        return getattr(self._observer, name)

    def frame(self, result: Any, latency_s: float) -> None:
        self.faces += len(result.faces)
        self.bar.update(1)
        if self.bar.n % 10 == 0:
            self.bar.set_postfix(faces=self.faces, refresh=False)

    def close(self) -> None:
        self.bar.close()


class MetricsObserver:
    """Feeds the pipeline's observations into the Prometheus metrics."""

    def __init__(self, metrics: Any) -> None:
        self.metrics = metrics

    def stage(self, stage: str, seconds: float) -> None:
        self.metrics.observe_stage(stage, seconds)

    def batch(self, size: int, real: int, seconds: float) -> None:
        self.metrics.observe_batch(size, real, seconds)  # also the "infer" stage

    def frame(self, result: Any, latency_s: float) -> None:
        self.metrics.observe_frame(latency_s, len(result.faces), detected=result.detected)

    def queue_depth(self, name: str, depth: int) -> None:
        self.metrics.set_queue_depth(name, depth)

    def dropped(self, n: int) -> None:
        self.metrics.frames_dropped(n)
