"""The models a run needs, built and warmed once: EmoNet's engine, the face detector and the cropper.

An :class:`~emopipe.Analyzer` keeps one :class:`Models` for its whole life, so every source after the
first starts with tuned, warmed engines; the detector is warmed again only for a frame size it has
not seen (its letterbox shapes depend on the frame size).
"""

from __future__ import annotations

import contextlib
import gc
import logging
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from emopipe.config import RunConfig
from emopipe.engines.base import PRECISIONS, Engine, EngineOptions
from emopipe.engines.registry import create_engine
from emopipe.errors import CheckpointError
from emopipe.model import cudnn_epilogue, early_plans, weights
from emopipe.model.devices import resolve_device
from emopipe.model.emonet import build_emonet, classes_in_checkpoint, naming, read_checkpoint
from emopipe.vision.crop import FaceCropper
from emopipe.vision.detectors import FaceDetector, create_detector

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunStart:
    """Where a run on models an earlier run used counts its start-up from (:meth:`Models.begin_run`): when it began,
    and the warm-ups done by then."""

    at: float  # time.perf_counter() when the run began
    warmup_s: float
    detector_warmup_s: float
    engine_warmups: int
    detector_warmups: int


@dataclass
class Models:
    """Engines of one configuration, on one device, with what building and warming them cost."""

    engine: Engine
    detector: FaceDetector
    cropper: FaceCropper
    model_name: str
    load_s: float
    load_started: float = 0.0  # time.perf_counter() when loading began
    warmup_s: float = 0.0
    detector_warmup_s: float = 0.0
    engine_warmups: int = 0  # how many times EmoNet's static shapes were warmed (once per Analyzer)
    detector_warmups: int = 0
    warmed_frame_sizes: set[tuple[int, int]] = field(default_factory=set)
    runs: int = 0  # runs begun on these models (begin_run)
    # where their first run's start-up counts from: None, the import (emopipe._clock: the process's first engines, a
    # command's); later engines in the process (another Analyzer, one opened again after close()), their first run's
    # start or their load's, whichever came first (from the import, an hour-old service's said it waited an hour)
    counted_from: float | None = None

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(self.engine.labels)

    def warm_engine(self, frame_size: tuple[int, int] | None = None) -> float:
        """Warm EmoNet's static shapes. ``frame_size``: the first source's (height, width) where it is known by now —
        the cuDNN plans that the detector's warm-up would look for at that size are then found with EmoNet's, and
        on a machine that has none, built in the same wave of builder processes (H100: the detector's 8 took a
        wave of 2.3 s of their own after EmoNet's, docs/benchmarks.md "Start-up")."""
        logger.info("warming up EmoNet's static shapes%s …",
                    " (cuDNN autotuning, CUDA graphs)" if self.engine.device.type == "cuda" else "")
        t = time.perf_counter()
        with quick_handoff(), few_cpu_threads(self.engine.device):
            compile_ahead = getattr(self.engine, "compile_ahead", None)
            if frame_size is not None and compile_ahead is not None:
                with cudnn_epilogue.plans_built_ahead(self.engine.device) as ahead:
                    if ahead:
                        compile_ahead(beside=lambda: self.detector.find_plans(*frame_size))
            self.engine.warmup()
        self.engine_warmups += 1
        settle_heap()
        seconds = time.perf_counter() - t
        self.warmup_s += seconds
        return seconds

    def warm_detector(self, height: int, width: int) -> float:
        """Warm the detector for frames of this size, once per size; the seconds it took (0 when known). A size
        whose CUDA graph the detector has let go of since (it keeps the sizes used last) is warmed again."""
        if (height, width) in self.warmed_frame_sizes and self.detector.warmed_for(height, width):
            return 0.0
        t = time.perf_counter()
        with quick_handoff(), few_cpu_threads(self.engine.device):
            self.detector.warmup(height, width)
            self._warm_cropper(height, width)
        self.warmed_frame_sizes.add((height, width))
        self.detector_warmups += 1
        settle_heap()
        seconds = time.perf_counter() - t
        self.warmup_s += seconds
        self.detector_warmup_s += seconds
        return seconds

    def _warm_cropper(self, height: int, width: int) -> None:
        """One face cut from a blank frame of this size: CUDA loads the crops' kernels on their first launch, which
        would otherwise land on the first real frame (a live fleet's first batch took 30 ms more than the rest)."""
        import numpy as np
        import torch

        frame = torch.zeros((1, height, width, 3), dtype=torch.uint8, device=self.cropper.device)
        box = np.array([[width / 4, height / 4, width * 3 / 4, height * 3 / 4]], dtype=np.float32)
        self.cropper.crop(frame, [box])
        if frame.device.type == "cuda":
            torch.cuda.synchronize(frame.device)

    def begin_run(self, began: float) -> RunStart | None:
        """A run that began at ``began`` (a ``time.perf_counter()``) uses these models from now: where its start-up
        is counted from (:meth:`startup`). None for the first run on them, whose start-up is theirs — the load and the
        first warm-ups, from the process's start —; for a later one, what they had done by now: its start-up is what
        it waited for itself (an Analyzer's ninth source repeated the load and counted its first row from the import).
        """
        self.runs += 1
        if self.runs == 1:
            if self.counted_from is not None:
                self.counted_from = min(self.counted_from, began)
            return None
        return RunStart(began, self.warmup_s, self.detector_warmup_s, self.engine_warmups, self.detector_warmups)

    def load_and_warmup_s(self, since: RunStart | None = None) -> tuple[float, float]:
        """The seconds a run spent loading and warming the models (``since``: :meth:`begin_run`'s; None: all of it)."""
        if since is None:
            return self.load_s, self.warmup_s
        return 0.0, self.warmup_s - since.warmup_s

    def startup(self, first_row_at: float | None = None,
                since: RunStart | None = None) -> dict[str, float | int | None]:
        """The summary's ``startup`` section: each phase in seconds, from the command's start (``emopipe._clock``)
        to the first row written (``first_row_at``, a ``time.perf_counter()``). ``since``: a later run's start
        (:meth:`begin_run`): its own phases only — no load (``before_load_s`` None), the warm-ups it waited for, the
        first row from its start."""
        from emopipe._clock import STARTED

        if since is not None:
            return {
                "before_load_s": None,  # (the models were there: nothing loaded)
                "load_s": 0.0,
                "warmup_s": round(self.warmup_s - since.warmup_s, 4),
                "engine_warmup_s": round(max(0.0, self.warmup_s - self.detector_warmup_s  # (never -0.0)
                                             - (since.warmup_s - since.detector_warmup_s)), 4),
                "detector_warmup_s": round(self.detector_warmup_s - since.detector_warmup_s, 4),
                "first_row_s": round(first_row_at - since.at, 4) if first_row_at else None,
                "engine_warmups": self.engine_warmups - since.engine_warmups,
                "detector_warmups": self.detector_warmups - since.detector_warmups,
            }
        origin = STARTED if self.counted_from is None else self.counted_from
        return {
            "before_load_s": round(self.load_started - origin, 4) if self.load_started >= origin else None,
            "load_s": round(self.load_s, 4),  # weights read, engine and detector built
            "warmup_s": round(self.warmup_s, 4),
            "engine_warmup_s": round(self.warmup_s - self.detector_warmup_s, 4),
            "detector_warmup_s": round(self.detector_warmup_s, 4),
            "first_row_s": round(first_row_at - origin, 4) if first_row_at else None,
            "engine_warmups": self.engine_warmups,
            "detector_warmups": self.detector_warmups,
        }

    def close(self) -> None:
        """Let go of the engines; their GPU memory returns to the device."""
        for name in ("engine", "detector", "cropper"):
            setattr(self, name, None)
        gc.unfreeze()  # (what settle_heap froze: the engines' reference cycles are collected now, not never)
        gc.collect()
        import torch

        if torch.cuda.is_available():
            torch.cuda.empty_cache()


QUICK_HANDOFF_S = 0.0005  # the GIL switch interval while the GPU thread works (Python's default: 5 ms)


@contextlib.contextmanager
def quick_handoff() -> Iterator[None]:
    """A short GIL switch interval while this thread runs PyTorch beside threads that run Python. Every PyTorch call
    gives the GIL up and must win it back; beside a thread running Python (importing a library ahead, hashing
    Triton's files, reading a source) each win waited up to Python's 5 ms: on an H100 copying EmoNet's weights took
    2.9 s instead of 0.07 s, and the warm-ups seconds more (benchmark-log, session 19). The pipeline keeps the same
    interval while it runs (``PipelineSettings.gil_switch_interval_s``)."""
    previous = sys.getswitchinterval()
    sys.setswitchinterval(min(previous, QUICK_HANDOFF_S))
    try:
        yield
    finally:
        sys.setswitchinterval(previous)


GPU_RUN_CPU_THREADS = 2  # PyTorch's CPU threads while a GPU run loads and warms its engines (as while it runs)


@contextlib.contextmanager
def few_cpu_threads(device: Any) -> Iterator[None]:
    """PyTorch's CPU thread pool cut to :data:`GPU_RUN_CPU_THREADS` while a run on a CUDA device loads and warms its
    engines: the work is the GPU's then, and a pool as large as the machine's cores spins its OpenMP threads between
    the loading's many small CPU operations, starving every other process's — four emopipe commands started together
    on a 16-core H200 host each took 5.5-6.2 s to load EmoNet instead of 0.5 s, eight 12-13.6 s (docs/benchmarks.md,
    "What limits us now"). Worker processes get one thread for the same reason (OMP_NUM_THREADS)."""
    import torch

    threads = torch.get_num_threads()
    if getattr(device, "type", device) != "cuda" or threads <= GPU_RUN_CPU_THREADS:
        yield
        return
    torch.set_num_threads(GPU_RUN_CPU_THREADS)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def settle_heap() -> None:
    """Take what loading and warming made (PyTorch's modules, the engines and their graphs: ~180 000 objects) out of
    the cycle collector's sight. A full collection walks every object it tracks with the interpreter lock held —
    about 0.1 s for these on the CPU machine — and every thread of the run waits for it: a live camera's frame took
    such a pause into its latency. Frozen, a collection walks only what the run has made since; garbage is collected
    first, so none is kept. :meth:`Models.close` unfreezes them."""
    gc.collect()
    gc.freeze()


def start_ahead(config: RunConfig) -> None:
    """Begin on a thread what EmoNet's warm-up would otherwise wait for, for a run on a CUDA device: Triton's import
    and cache key (~1.4 s on the GPU hosts) where the engine runs Triton's kernels (the torch backend, fused: no
    ``--compile``). Called as soon as PyTorch is imported (the command line: before the source opens), and by
    :func:`load_models` before the weights are read; once a process."""
    if config.backend not in (None, "torch") or config.compile:
        return
    from emopipe.model.kernels import start_triton_key

    start_triton_key()


_loads = 0  # engines loaded in this process: the first count their start-up from the import (Models.counted_from)


def load_models(config: RunConfig) -> Models:
    """Weights (downloaded and verified when needed), EmoNet's engine, the detector and the cropper.

    ``config`` is resolved (:meth:`RunConfig.resolved`). Nothing is warmed here.
    """
    device = resolve_device(config.device)
    with few_cpu_threads(device):
        return _load_models(config, device)


def _load_models(config: RunConfig, device: Any) -> Models:
    import torch

    cuda = device.type == "cuda"
    if cuda:
        start_ahead(config)
    t_load = time.perf_counter()
    # start-up takes seconds (weights, engine build, warmup): say each step as it starts, not only once done
    logger.info("loading EmoNet (%s backend) on %s …", config.backend or "torch", device)
    if config.weights:
        checkpoint = weights.user_file(config.weights)
    else:
        checkpoint = weights.ensure(f"emonet_{config.classes or 8}", config.models_dir)
    state = read_checkpoint(checkpoint)
    with naming(checkpoint):
        if config.weights and config.classes is not None:
            found = classes_in_checkpoint(state)
            if found != config.classes:
                raise CheckpointError(f"--classes {config.classes} does not match the weights {config.weights}, "
                                      f"which have {found} expression classes (leave --classes out: it is read from "
                                      "the file)")
        model = build_emonet(state)
    cuda_graphs = False if (config.no_cuda_graphs or config.no_warmup) else None  # graphs are captured at warmup
    options = EngineOptions(
        device=str(device), precision=config.precision, batch_size=int(config.batch_size or 1),
        cudnn_benchmark=not config.no_cudnn_benchmark, warmup=not config.no_warmup,
        cuda_graphs=cuda_graphs, landmarks=config.landmarks,
        compile=config.compile, cudnn_epilogue=not config.no_cudnn_epilogue,
    )
    engine = create_engine(config.backend, model, options, checkpoint_sha256=weights.sha256_of(checkpoint),
                           models_dir=weights.models_dir(config.models_dir), owns_model=True)
    precision = engine.options.precision or ("fp16" if cuda else "fp32")
    detector = create_detector(config.detector or "sfd", device=str(device), models_dir=config.models_dir,
                               score_threshold=config.threshold, min_face=config.min_face,
                               max_faces=config.max_faces, working_size=config.detect_size,
                               batch_size=int(config.detect_batch or 1),
                               precision="fp16" if cuda and precision != "fp32" else "fp32", cuda_graphs=cuda_graphs)
    cropper = FaceCropper(margin=config.margin, device=device, dtype=PRECISIONS[precision] if cuda else torch.float32)
    name = f"emonet_{engine.num_classes}" if not config.weights else Path(config.weights).name
    global _loads
    _loads += 1
    return Models(engine=engine, detector=detector, cropper=cropper, model_name=name,
                  load_s=time.perf_counter() - t_load, load_started=t_load,
                  counted_from=None if _loads == 1 else t_load)


def plan_recipes(config: RunConfig, frame_size: tuple[int, int] = (720, 1280)) -> dict[str, list[early_plans.Recipe]]:
    """The cuDNN plans a GPU run of ``config`` (resolved) needs, recorded from EmoNet's and the detector's first passes
    as :mod:`emopipe.model.early_plans` keeps them (``benchmarks/record_plan_recipes.py`` writes them; a GPU test
    checks the kept ones against these): the plans cuDNN has an engine for, each once."""
    keys = early_plans.recipe_keys(batch_size=int(config.batch_size or 1), precision=str(config.precision),
                                   detector=str(config.detector), detect_batch=int(config.detect_batch or 1))
    if len(keys) != 2 or config.no_cudnn_epilogue:
        raise ValueError("plan recipes are of fp16 or bf16 runs with cuDNN's epilogue")
    models = load_models(config)
    passes = {keys[0]: models.engine.compile_ahead,  # type: ignore[attr-defined]
              keys[1]: lambda: models.detector.find_plans(*frame_size)}
    found: dict[str, list[early_plans.Recipe]] = {}
    for key, first_pass in passes.items():
        with cudnn_epilogue.recorded_plans() as recorded:
            first_pass()
        # (each once: a plan noted to be built is asked for again when read back)
        found[key] = [recipe for recipe in dict.fromkeys(recorded)
                      if cudnn_epilogue.plan_on_disk(recipe.signature, models.engine.device)]
    models.close()
    return found


# What a per-source run may change once the models are built, and what it may not (engine and detector settings).
MODEL_OPTIONS = frozenset({
    "detector", "detect_size", "detect_batch", "threshold", "min_face", "max_faces", "margin", "classes", "weights",
    "models_dir", "backend", "device", "precision", "batch_size", "no_cudnn_benchmark", "no_cudnn_epilogue",
    "no_warmup", "no_cuda_graphs", "compile", "landmarks",
})


def model_options(config: RunConfig) -> dict[str, Any]:
    return {name: getattr(config, name) for name in sorted(MODEL_OPTIONS)}
