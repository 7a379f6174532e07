"""EmoNet on ONNX Runtime: TorchEngine's contract, with ONNX Runtime's own tuning story.

For deployments that standardise on ONNX Runtime or TensorRT. What maps to what:

* ``cudnn.benchmark`` ↔ the CUDA provider's ``cudnn_conv_algo_search``: EXHAUSTIVE (the default,
  ``EngineOptions.cudnn_benchmark=True``) times every cuDNN algorithm per convolution shape on the
  first run, HEURISTIC (``cudnn_benchmark=False``) asks cuDNN's heuristics, DEFAULT takes the
  fixed default algorithm. Like cuDNN autotuning it happens per input shape, so batches keep one
  static shape and every shape is warmed up before the first real frame.
* Crops already on the GPU (torch CUDA tensors) go in through IO binding: their device pointer is
  bound as the input and the outputs are bound to device buffers, so nothing crosses to the host
  but the small results. ``io_binding=False`` gives the plain host-array path for comparison.
* CUDA graphs: with IO binding, fixed input/output buffers and ``enable_cuda_graph``, ONNX Runtime
  captures the whole run once per static shape and replays it. If the provider refuses (a node
  not on the CUDA provider), the session is reopened without graphs and the reason is logged.
* TensorRT: used first when its library (libnvinfer) loads, with its engine and timing caches under
  ``<cache>/tensorrt``; the CUDA provider takes what TensorRT does not.
* CPU: the provider on a CPU device, and the stated fallback when ``--device auto`` finds a GPU but
  the installed onnxruntime has no CUDA provider (the CPU-only package shadowing onnxruntime-gpu).

One ONNX file and session per static batch shape; files are exported on first use into
``<cache>/onnx`` (``<cache>``: ``$EMOPIPE_CACHE``, else ``<models_dir>/cache``; see :mod:`emopipe.export`) and
checked against PyTorch then, under a temporary name (without TensorRT) before the file takes its own; a cached file
that is damaged or from another emopipe format is exported again.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import logging
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from emopipe.engines import export, parity
from emopipe.engines.base import EngineOptions
from emopipe.errors import OnnxModelError, OutputError, UsageError
from emopipe.model.devices import resolve_device
from emopipe.model.emonet import EmoNet
from emopipe.types import INPUT_SIZE, EngineOutput, WarmupReport

logger = logging.getLogger(__name__)

CONV_ALGO_SEARCH = ("EXHAUSTIVE", "HEURISTIC", "DEFAULT")
CUDA_PROVIDER = "CUDAExecutionProvider"
TENSORRT_PROVIDER = "TensorrtExecutionProvider"
CPU_PROVIDER = "CPUExecutionProvider"
_TENSORRT_LIBRARIES = ("libnvinfer.so.10", "libnvinfer.so", "nvinfer_10.dll")
_NUMPY_DTYPES = {"fp32": np.float32, "fp16": np.float16}
_ORT_TYPES = {"tensor(float)": "fp32", "tensor(float16)": "fp16"}
ONNX_PATH_HINT = "export it again with `emopipe export-onnx --force`"  # (a file given with onnx_path that is unusable)
CACHE_HINT = "set EMOPIPE_CACHE to a writable folder, or fill this cache ahead with `emopipe export-onnx`"
_NO_GRAPHS = {CUDA_PROVIDER: {"enable_cuda_graph": "0"}, TENSORRT_PROVIDER: {"trt_cuda_graph_enable": "0"}}


def import_onnxruntime():
    try:
        import onnxruntime
    except ImportError:
        raise UsageError("the onnxruntime backend needs ONNX Runtime: pip install onnxruntime-gpu "
                         "(or onnxruntime for the CPU only)") from None
    return onnxruntime


def tensorrt_library() -> str | None:
    """The TensorRT library that loads here, if any (the provider is compiled in, the library often absent)."""
    for name in _TENSORRT_LIBRARIES:
        try:
            ctypes.CDLL(name)
        except OSError:
            continue
        return name
    return None


def plan_providers(device: torch.device, available: Sequence[str], *, conv_algo_search: str, cuda_graphs: bool,
                   tensorrt: bool, precision: str, tensorrt_cache: Path,
                   prefer_nhwc: bool = False) -> list[tuple[str, dict[str, str]]]:
    """The execution providers to ask for, in priority order, with their options."""
    if device.type != "cuda":
        return [(CPU_PROVIDER, {})]
    if CUDA_PROVIDER not in available:
        raise UsageError(f"device {device} asked for, but this onnxruntime has no CUDA provider (it has "
                         f"{', '.join(available)}); install onnxruntime-gpu, or use --device cpu")
    index = str(device.index or 0)
    plan: list[tuple[str, dict[str, str]]] = []
    if tensorrt:
        if TENSORRT_PROVIDER not in available:
            raise UsageError(f"TensorRT asked for, but this onnxruntime has no TensorRT provider "
                             f"({', '.join(available)})")
        plan.append((TENSORRT_PROVIDER, {
            "device_id": index,
            "trt_fp16_enable": "1" if precision == "fp16" else "0",
            "trt_engine_cache_enable": "1",
            "trt_engine_cache_path": str(tensorrt_cache),
            "trt_timing_cache_enable": "1",
            "trt_timing_cache_path": str(tensorrt_cache),
            "trt_cuda_graph_enable": "1" if cuda_graphs else "0",
        }))
    cuda = {
        "device_id": index,
        "cudnn_conv_algo_search": conv_algo_search,
        "cudnn_conv_use_max_workspace": "1",  # let cuDNN pick algorithms that need workspace, as PyTorch does
        "do_copy_in_default_stream": "1",
        # With TensorRT in front, the CUDA provider only gets leftovers and cannot capture the whole run.
        "enable_cuda_graph": "1" if cuda_graphs and not tensorrt else "0",
    }
    if prefer_nhwc:
        cuda["prefer_nhwc"] = "1"
    plan.append((CUDA_PROVIDER, cuda))
    plan.append((CPU_PROVIDER, {}))
    return plan


@dataclass
class _Session:
    """One ONNX file at one static batch shape, opened with the engine's providers."""

    spec: export.OnnxSpec
    path: Path
    session: object
    providers: list[str]
    cuda_graphs: bool
    device: torch.device
    io_binding: bool
    binding: object = None
    fixed_input: torch.Tensor | None = None
    outputs: dict[str, torch.Tensor] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.io_binding:
            self._bind_fixed_buffers()

    def _bind_fixed_buffers(self) -> None:
        """Device buffers for the outputs (and, with CUDA graphs, the input) bound once, reused every run."""
        index = self.device.index or 0
        self.binding = self.session.io_binding()
        for name, shape in self.spec.outputs.items():
            buffer = torch.empty(shape, dtype=torch.float32, device=self.device)
            self.binding.bind_output(name, "cuda", index, np.float32, shape, buffer.data_ptr())
            self.outputs[name] = buffer
        if self.cuda_graphs:  # the captured graph reads its input from one fixed address
            self.fixed_input = torch.empty(self.spec.input_shape, dtype=self.spec.torch_dtype, device=self.device)
            self._bind_input(self.fixed_input)

    def _bind_input(self, x: torch.Tensor) -> None:
        self.binding.bind_input(export.INPUT_NAME, "cuda", self.device.index or 0,
                                _NUMPY_DTYPES[self.spec.precision], tuple(x.shape), x.data_ptr())

    def run(self, crops: torch.Tensor) -> list[torch.Tensor]:
        """Outputs on the CPU, float32, in the order of ``spec.outputs``."""
        dtype = self.spec.torch_dtype
        if self.binding is None:  # host arrays in and out; ONNX Runtime does the copies
            x = _model_input(crops.to("cpu"), dtype).contiguous().numpy()
            results = self.session.run(list(self.spec.outputs), {export.INPUT_NAME: x})
            return [torch.from_numpy(r) for r in results]
        x = _model_input(crops.to(self.device, non_blocking=True), dtype)
        if self.fixed_input is not None:
            self.fixed_input.copy_(x)
        else:
            x = x.contiguous()
            self._bind_input(x)  # zero-copy when the caller's crops already are contiguous, in this dtype
        # ONNX Runtime runs on its own stream: the input written on PyTorch's stream must be complete.
        torch.cuda.current_stream(self.device).synchronize()
        self.session.run_with_iobinding(self.binding)  # returns once the outputs are written
        return [buffer.to("cpu") for buffer in self.outputs.values()]


def _model_input(crops: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """uint8 0–255 or float 0–1 → the model's float dtype in [0, 1] (as TorchEngine prepares crops)."""
    return crops.to(dtype) / 255 if not crops.is_floating_point() else crops.to(dtype)


class OrtEngine:
    """EmoNet on ONNX Runtime with the :class:`~emopipe.engines.base.Engine` contract.

    Backend-specific keyword arguments (``create_engine("onnxruntime", model, options, **kwargs)``):

    * ``checkpoint_sha256`` — sha256 of the checkpoint file the model was loaded from; names and
      checks the cached export (default: a digest of the model's tensors, computed here);
    * ``models_dir`` — the models directory whose ``cache/onnx`` holds exports (default as weights;
      ``$EMOPIPE_CACHE`` moves the cache);
    * ``onnx_path`` — use this exported file instead of the cache (its static batch must be the run's);
    * ``conv_algo_search`` — EXHAUSTIVE, HEURISTIC or DEFAULT (default: EXHAUSTIVE when
      ``options.cudnn_benchmark`` else HEURISTIC);
    * ``io_binding`` — device-resident inputs/outputs (default: on for CUDA);
    * ``tensorrt`` — None: when libnvinfer loads; True: required; False: never;
    * ``prefer_nhwc`` — the CUDA provider's NHWC convolution layout (off by default);
    * ``verify_exports`` — check a fresh export against PyTorch before using it (default on).

    ``options.cuda_graphs`` (on for CUDA) asks for ONNX Runtime's CUDA graphs, which need IO binding.
    """

    backend = "onnxruntime"

    def __init__(self, model: EmoNet, options: EngineOptions = EngineOptions(), *,
                 checkpoint_sha256: str | None = None, models_dir: str | Path | None = None,
                 onnx_path: str | Path | None = None, conv_algo_search: str | None = None,
                 io_binding: bool | None = None, tensorrt: bool | None = None, prefer_nhwc: bool = False,
                 verify_exports: bool = True) -> None:
        from emopipe.model.weights import cache_root
        from emopipe.model.weights import models_dir as resolve_models_dir

        self._ort = import_onnxruntime()
        available = self._ort.get_available_providers()
        device = resolve_device(options.device)
        if device.type == "cuda" and options.device == "auto" and CUDA_PROVIDER not in available:
            logger.warning("onnxruntime at %s has no CUDA provider (only %s): falling back to the CPU provider; "
                           "install onnxruntime-gpu for the GPU", self._ort.__file__, ", ".join(available))
            device = torch.device("cpu")
        self.device = device
        self.options = options.resolved(device)
        if self.options.compile is not None:
            raise UsageError("--compile (torch.compile) is for the torch backend; the onnxruntime backend runs an "
                             "exported graph that ONNX Runtime optimises itself")
        if self.options.precision not in export.ONNX_PRECISIONS:
            raise UsageError(f"the onnxruntime backend runs {' or '.join(export.ONNX_PRECISIONS)}, "
                             f"not {self.options.precision}")
        cuda = device.type == "cuda"
        self.batch_size = self.options.batch_size
        self.labels = model.labels
        self.num_classes = model.num_classes
        self.model = model
        self.checkpoint_sha256 = checkpoint_sha256 or export.state_digest(model)
        self.models_dir = resolve_models_dir(models_dir)
        self.onnx_path = Path(onnx_path) if onnx_path is not None else None
        search = (conv_algo_search or ("EXHAUSTIVE" if self.options.cudnn_benchmark else "HEURISTIC")).upper()
        if search not in CONV_ALGO_SEARCH:
            raise UsageError(f"unknown cuDNN algorithm search {conv_algo_search!r}; choose from "
                             f"{', '.join(CONV_ALGO_SEARCH).lower()}")
        self.conv_algo_search = search
        self.io_binding = cuda if io_binding is None else io_binding
        if self.io_binding and not cuda:
            raise UsageError("IO binding keeps crops on the GPU: it needs a CUDA device")
        if self.options.cuda_graphs and not self.io_binding:
            raise UsageError("ONNX Runtime's CUDA graphs need IO binding (fixed device buffers); turn one on or "
                             "graphs off")
        if tensorrt and not cuda:
            raise UsageError("TensorRT runs on a CUDA device; use --device cuda or leave TensorRT off")
        found = tensorrt_library() if cuda and tensorrt is not False else None
        if tensorrt and found is None:
            raise UsageError("TensorRT asked for, but its library (libnvinfer) does not load here")
        self.tensorrt = found is not None
        tensorrt_cache = cache_root(self.models_dir) / "tensorrt"
        if self.tensorrt:
            try:
                tensorrt_cache.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise OutputError(f"cannot create {tensorrt_cache}: {exc.strerror or exc}; {CACHE_HINT}") from None
        self.prefer_nhwc = prefer_nhwc
        self.verify_exports = verify_exports
        self.exported: list[Path] = []  # files this engine had to export (cache misses)
        self.warmup_report: WarmupReport | None = None
        self._sessions: dict[int, _Session] = {}
        plan = functools.partial(
            plan_providers, device, available, conv_algo_search=search, cuda_graphs=bool(self.options.cuda_graphs),
            precision=str(self.options.precision), tensorrt_cache=tensorrt_cache, prefer_nhwc=prefer_nhwc)
        self._providers = plan(tensorrt=self.tensorrt)
        # a new export is checked under its temporary name, without TensorRT: TensorRT keys its engine cache by the
        # model's path, so it would build its engine twice (for the temporary name, then for the final one)
        self._check_providers = plan(tensorrt=False) if self.tensorrt else self._providers
        self._session(self.batch_size)  # open (or export) the static shape now: a bad file fails at start

    # -- sessions ------------------------------------------------------------------------------

    @property
    def active_providers(self) -> list[str]:
        return self._sessions[self.batch_size].providers

    @property
    def model_file(self) -> Path:
        """The ONNX file the static batch shape runs."""
        return self._sessions[self.batch_size].path

    def _spec(self, batch: int) -> export.OnnxSpec:
        return export.OnnxSpec(self.checkpoint_sha256, self.num_classes, batch, str(self.options.precision),
                               self.options.landmarks)

    def _session(self, batch: int) -> _Session:
        if batch in self._sessions:
            return self._sessions[batch]
        spec = self._spec(batch)
        if self.onnx_path is not None:
            session = self._open(self.onnx_path, spec, ONNX_PATH_HINT)
        else:
            session = self._cached_session(spec)
        self._sessions[batch] = session
        return session

    def _cached_session(self, spec: export.OnnxSpec) -> _Session:
        """The cache's file for ``spec``, exported when it is missing, damaged or from another emopipe format."""
        path = export.cache_dir(self.models_dir) / spec.file_name
        if path.is_dir():  # said now, not after the export it cannot take the name of (~20-40 s on a CPU)
            raise OutputError(f"cannot write {path}: a folder has its name in the ONNX cache; move it away")
        if path.is_file():
            try:
                return self._open(path, spec, "exporting it again")
            except OnnxModelError as exc:  # everything in the cache can be rebuilt: say why, then rebuild it
                logger.warning("%s", exc)
        else:
            logger.info("exporting EmoNet to ONNX (%s, batch %d, once per checkpoint/shape/precision) …",
                        spec.precision, spec.batch_size)
        checked: list[_Session] = []

        def check(candidate: Path) -> None:
            # opened and compared with PyTorch under its temporary name: only a file that passes takes the cache's
            # name, so a failed check (or a process killed during it) leaves nothing there for the next run to reuse
            session = self._open(candidate, spec, "the new export was not kept", checking=True)
            if self.verify_exports:
                self._verify(session)
            checked.append(session)

        try:
            export.export_emonet(self.model, spec, path, check=check)
        except OutputError as exc:
            raise OutputError(f"{exc}; {CACHE_HINT}") from None
        self.exported.append(path)
        if self.tensorrt:  # TensorRT builds its engine for the final name, and is checked as it runs
            session = self._open(path, spec, "exporting it again")
            if self.verify_exports:  # (the file passed without TensorRT: it is kept; TensorRT's results are not)
                self._verify(session, "TensorRT's engine; the ONNX file passed without TensorRT and is kept")
            return session
        session = checked[0]  # the checked session is this one: ONNX Runtime read the whole file when it opened it
        session.path = path
        return session

    def _open(self, path: Path, spec: export.OnnxSpec, hint: str, checking: bool = False) -> _Session:
        """A session of the file at ``path`` (``checking``: a new export, opened without TensorRT)."""
        ort = self._ort
        providers, tensorrt = (self._check_providers, False) if checking else (self._providers, self.tensorrt)
        if path.is_dir():  # (was "ONNX model not found", of a folder that is there)
            raise OnnxModelError(f"{path} is a directory, not an ONNX model file: give the .onnx file itself")
        if not path.is_file():
            raise OnnxModelError(f"ONNX model not found: {path}")
        options = ort.SessionOptions()
        options.log_severity_level = 2 if logger.isEnabledFor(logging.DEBUG) else 3
        # Idle ONNX Runtime threads spin by default, taking CPU from the decode and detect threads beside them.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        graphs = bool(self.options.cuda_graphs)
        t0 = time.perf_counter()

        def create(providers: list[tuple[str, dict[str, str]]]):
            # onnxruntime's Python layer may print an "EP Error" and retry with default provider options:
            # keep that off stdout (data goes there) and read the options the session really has below.
            try:
                with contextlib.redirect_stdout(sys.stderr):
                    return ort.InferenceSession(str(path), options, providers=providers)
            except Exception as exc:
                if _is_model_error(exc):
                    raise OnnxModelError(f"{path} is not a usable ONNX model ({_first_line(exc)}); {hint}") from None
                raise

        refused = None
        try:
            session = create(providers)
        except OnnxModelError:
            raise
        except Exception as exc:
            if not graphs:
                raise
            refused = _first_line(exc)
        else:
            if graphs and not _graphs_enabled(session, tensorrt):
                refused = "the session came up without them"
        if refused is not None:
            # CUDA graphs need every node on the CUDA provider; run without them rather than not at all.
            logger.warning("onnxruntime refused CUDA graphs (%s): running without them", refused)
            graphs = False
            session = create([(name, {**opts, **_NO_GRAPHS.get(name, {})}) for name, opts in providers])
        active = list(session.get_providers())
        if self.device.type == "cuda" and CUDA_PROVIDER not in active:
            raise UsageError(f"onnxruntime could not start its CUDA provider (active: {', '.join(active)}); "
                             "check that the CUDA 13 and cuDNN 9 libraries load, or use --device cpu")
        if self.device.type == "cuda":
            reported = session.get_provider_options().get(CUDA_PROVIDER, {})
            wanted = {"device_id": str(self.device.index or 0), "cudnn_conv_algo_search": self.conv_algo_search}
            if self.prefer_nhwc:
                wanted["prefer_nhwc"] = "1"
            found = {k: reported[k] for k in wanted if k in reported}
            if found != {k: wanted[k] for k in found}:  # the Python layer's silent retry with default options
                raise UsageError(f"onnxruntime's CUDA provider came up with {found}, not {wanted} "
                                 "(its 'EP Error' above says why)")
        _validate(session, path, spec, hint)
        logger.info("onnxruntime %s: %s, batch %d, %s, providers %s (conv algo search %s, IO binding %s, "
                    "CUDA graphs %s), opened in %.2f s", ort.__version__, path.name, spec.batch_size,
                    spec.precision, ", ".join(active), self.conv_algo_search if self.device.type == "cuda" else "n/a",
                    "on" if self.io_binding else "off", "on" if graphs else "off", time.perf_counter() - t0)
        return _Session(spec=spec, path=path, session=session, providers=active, cuda_graphs=graphs,
                        device=self.device, io_binding=self.io_binding)

    def _verify(self, session: _Session, outcome: str = "the export was not kept") -> None:
        """A fresh export runs here first on random and real-face crops and must match PyTorch fp32."""
        crops = parity.verification_crops(random_count=2)
        reports = parity.check_parity(lambda c: self._output(session.run(c)), self.model, session.spec, crops)
        for report in reports:
            logger.info("parity of the new export: %s", report.describe())
        bad = [r for r in reports if not r.ok]
        if bad:
            raise OnnxModelError(f"the new ONNX export differs from PyTorch on {bad[0].crops}: "
                                 f"{'; '.join(bad[0].failures())} ({outcome})")

    # -- the engine contract ---------------------------------------------------------------------

    def _output(self, tensors: Sequence[torch.Tensor]) -> EngineOutput:
        landmarks = tensors[3] if self.options.landmarks else None
        return EngineOutput(probabilities=tensors[0], valence=tensors[1], arousal=tensors[2], landmarks=landmarks)

    def infer(self, crops: torch.Tensor) -> EngineOutput:
        crops = torch.as_tensor(crops)
        n = int(crops.shape[0])
        if tuple(crops.shape[1:]) != (3, INPUT_SIZE, INPUT_SIZE):
            raise ValueError(f"crops must be N×3×{INPUT_SIZE}×{INPUT_SIZE}, got {tuple(crops.shape)}")
        if n not in self._sessions:
            logger.warning("batch of %d crops was not warmed up: opening its ONNX session now (slow); "
                           "keep batches at the static shape", n)
        with torch.inference_mode():
            return self._output(self._session(n).run(crops))

    def warmup(self, batch_sizes: Sequence[int] | None = None) -> WarmupReport:
        """Open every static shape's session and run it until ONNX Runtime has tuned (and captured) it."""
        sizes = list(dict.fromkeys(batch_sizes or [self.batch_size]))
        report = WarmupReport(settings=self._settings())
        start = time.perf_counter()
        generator = torch.Generator(device="cpu").manual_seed(0)
        with torch.inference_mode():
            for n in sizes:
                t0 = time.perf_counter()
                session = self._session(n)
                example = torch.rand((n, 3, INPUT_SIZE, INPUT_SIZE), generator=generator).to(self.device)
                # First run: cuDNN algorithm search. With graphs ONNX Runtime runs twice more before capturing.
                for _ in range(3 if session.cuda_graphs else 2):
                    session.run(example)
                report.shapes.append((n, 3, INPUT_SIZE, INPUT_SIZE))
                report.seconds_per_shape.append(time.perf_counter() - t0)
        report.seconds = time.perf_counter() - start
        report.settings = self._settings()  # graphs may have been refused while opening a shape
        self.warmup_report = report
        logger.info("%s", report.describe())
        return report

    def _settings(self) -> dict[str, object]:
        main = self._sessions[self.batch_size]
        return {
            "precision": self.options.precision,
            "batch_size": self.batch_size,
            "providers": "+".join(p.replace("ExecutionProvider", "") for p in main.providers),
            "conv_algo_search": self.conv_algo_search if self.device.type == "cuda" else "n/a",
            "io_binding": self.io_binding,
            "cuda_graphs": main.cuda_graphs,
            "tensorrt": self.tensorrt,
        }

    def info(self) -> dict[str, str]:
        main = self._sessions[self.batch_size]
        return {
            "backend": self.backend,
            "device": str(self.device),
            "precision": str(self.options.precision),
            "batch_size": str(self.batch_size),
            "onnxruntime": str(self._ort.__version__),
            "providers": ",".join(main.providers),
            "conv_algo_search": self.conv_algo_search if self.device.type == "cuda" else "n/a",
            "io_binding": str(self.io_binding).lower(),
            "cuda_graphs": str(main.cuda_graphs).lower(),
            "tensorrt": str(self.tensorrt).lower(),
            "prefer_nhwc": str(self.prefer_nhwc).lower(),
            "onnx": main.path.name,  # the name carries checkpoint hash, batch and precision; info ends up in labels
            "classes": str(self.num_classes),
        }


def _graphs_enabled(session, tensorrt: bool) -> bool:
    """Whether the session really has CUDA graphs on (the provider options it reports, not the ones asked)."""
    provider, key = (TENSORRT_PROVIDER, "trt_cuda_graph_enable") if tensorrt else (CUDA_PROVIDER, "enable_cuda_graph")
    value = session.get_provider_options().get(provider, {}).get(key)
    return value is None or value.lower() in ("1", "true")  # a build that does not report it: as asked


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:300]


def _is_model_error(exc: BaseException) -> bool:
    """A file ONNX Runtime cannot parse or load, as opposed to a provider that fails to start."""
    name = type(exc).__name__
    text = str(exc)
    return name in ("InvalidProtobuf", "InvalidGraph", "NoSuchFile") or any(
        marker in text for marker in ("Protobuf parsing failed", "Load model from", "ModelProto does not have",
                                      "Invalid model", "No graph was found"))


def _validate(session, path: Path, expected: export.OnnxSpec, hint: str) -> None:
    """The file must be an emopipe export whose graph matches its metadata, and the metadata this run."""
    props = session.get_modelmeta().custom_metadata_map
    try:
        found = export.OnnxSpec.from_metadata(props, path)
    except OnnxModelError as exc:
        raise OnnxModelError(f"{exc}; {hint}") from None
    inputs = session.get_inputs()
    names = [i.name for i in inputs]
    if names != [export.INPUT_NAME]:
        raise OnnxModelError(f"{path} has inputs {names}, expected ['{export.INPUT_NAME}']; {hint}")
    shape, dtype = tuple(inputs[0].shape), _ORT_TYPES.get(inputs[0].type, inputs[0].type)
    if shape != found.input_shape or dtype != found.precision:
        raise OnnxModelError(f"{path} has input {export.INPUT_NAME} {dtype} {shape}, expected {found.precision} "
                             f"{found.input_shape}; {hint}")
    outputs = {o.name: (tuple(o.shape), o.type) for o in session.get_outputs()}
    for name, out_shape in found.outputs.items():
        if outputs.get(name) != (out_shape, "tensor(float)"):
            got = outputs.get(name)
            raise OnnxModelError(f"{path} has output {name} {got[1] + ' ' + str(got[0]) if got else 'missing'}, "
                                 f"expected float32 {out_shape}; {hint}")
    differences = expected.differences(found)
    if differences:
        raise OnnxModelError(f"{path} does not fit this run: it has {'; '.join(differences)}; {hint}")


def create(model: EmoNet, options: EngineOptions, *, owns_model: bool = False, **kwargs: Any) -> OrtEngine:
    """The registry's factory (onnxruntime itself is imported when the engine starts; the export never changes
    ``model``, so ``owns_model`` changes nothing here)."""
    return OrtEngine(model, options, **kwargs)
