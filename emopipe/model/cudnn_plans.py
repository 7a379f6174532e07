"""cuDNN plans described as plain data: built, stored and read back without PyTorch, here or in builder processes.

A plan is what :mod:`emopipe.model.cudnn_epilogue` runs: a cuDNN frontend graph (a 3×3 convolution with its
residual slice and activations, or a plain convolution) built for exact tensor shapes. Building one compiles its
kernel (NVRTC, then the driver): on a fresh H100, EmoNet's and BlazeFace's 33 plans took ~20 s of a 34 s first
command, one after the other — and the frontend's builds do not run side by side on threads (8 threads 4.4 s
against 3.5 s alone for 15 plans: session 24, docs/benchmarks.md). So a warm-up first finds the plans it lacks
(a pass that computes nothing, :func:`emopipe.model.cudnn_epilogue.plans_built_ahead`) and has them built in
several processes at once (:class:`PlanBuilders`, fed as the pass goes), each storing its plans in the plan folder,
from which the warm-up then reads them back (milliseconds a plan).

A builder process loads neither PyTorch (an import contract says so; ~3 s on the GPU hosts) nor anything of
emopipe's but this module and the CUDA context's: it is ``python -m emopipe.model.cudnn_plans GPU [LIBRARY…]``,
given its plans as JSON lines on standard input.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import logging
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Any

logger = logging.getLogger(__name__)

BUILDER_TIMEOUT_S = 600.0  # a builder still at work then is stopped; the warm-up builds what is missing itself


class Unsupported(Exception):
    """cuDNN has no engine for this convolution's graph (the caller runs the two-pass path)."""


@dataclass(frozen=True)
class TensorSpec:
    """A tensor as cuDNN's graph sees it: sizes, strides (in elements) and the data type's name."""

    dims: tuple[int, ...]
    strides: tuple[int, ...]
    dtype: str  # "half", "bfloat16" or "float"


@dataclass(frozen=True)
class EpilogueSpec:
    """y = conv3×3(x, weight) (padding 1), out = y + residual; with scale and shift also act = relu(y · scale +
    shift) (dense channels_last); with the next block's buffer, scale and shift also next_act = relu(out · scale +
    shift) into that buffer."""

    x: TensorSpec
    weight: TensorSpec
    residual: TensorSpec
    out: TensorSpec
    scale: TensorSpec | None = None
    shift: TensorSpec | None = None
    next_act: TensorSpec | None = None
    next_scale: TensorSpec | None = None
    next_shift: TensorSpec | None = None


@dataclass(frozen=True)
class ConvSpec:
    """A convolution (groups given by the weight's input channels), and what follows it as it writes:
    y = conv(x, weight) [+ bias] [+ residual], [relu]. The bias is 1×C×1×1; the residual is laid out as y."""

    x: TensorSpec
    weight: TensorSpec
    y: TensorSpec
    stride: tuple[int, int]
    padding: tuple[int, int]
    bias: TensorSpec | None = None
    residual: TensorSpec | None = None
    relu: bool = False


PlanSpec = EpilogueSpec | ConvSpec

# Tensors are bound by fixed UIDs (and carry names), so a plan read back from disk binds like a built one.
X, WEIGHT, RESIDUAL, SCALE, SHIFT, NEXT_SCALE, NEXT_SHIFT, BIAS = range(1, 9)
OUT, ACT, NEXT_ACT = 11, 12, 13
CONV_UIDS = [X, WEIGHT, OUT]  # a convolution's graph: image, weight, result


def conv_uids(bias: bool, residual: bool) -> list[int]:
    """A convolution graph's tensors in binding order: image, weight, [bias], [residual], result."""
    return [X, WEIGHT] + ([BIAS] if bias else []) + ([RESIDUAL] if residual else []) + [OUT]


def epilogue_uids(affine: bool, following: bool) -> list[int]:
    """An epilogue graph's tensors in binding order: inputs, then outputs."""
    inputs = [X, WEIGHT, RESIDUAL] + ([SCALE, SHIFT] if affine else [])
    inputs += [NEXT_SCALE, NEXT_SHIFT] if following else []
    return inputs + [OUT] + ([ACT] if affine else []) + ([NEXT_ACT] if following else [])


def channels_last_strides(shape: tuple[int, ...]) -> tuple[int, int, int, int]:
    _, c, h, w = shape
    return h * w * c, 1, w * c, c


def _data_type(name: str) -> Any:
    import cudnn

    return {"half": cudnn.data_type.HALF, "bfloat16": cudnn.data_type.BFLOAT16,
            "float": cudnn.data_type.FLOAT}[name]


def build(handle: Any, spec: PlanSpec) -> Any:
    """``spec``'s graph with cuDNN's plan built (NVRTC compiles a runtime-fused kernel here), or
    :class:`Unsupported`."""
    import cudnn

    io = _data_type(spec.x.dtype)
    graph = cudnn.pygraph(io_data_type=io, intermediate_data_type=cudnn.data_type.FLOAT,
                          compute_data_type=cudnn.data_type.FLOAT, handle=handle)

    def operand(t: TensorSpec, name: str, uid: int) -> Any:
        tensor = graph.tensor(name=name, dim=list(t.dims), stride=list(t.strides), data_type=_data_type(t.dtype))
        tensor.set_uid(uid)
        return tensor

    def result(t: Any, name: str, uid: int, strides: tuple[int, ...]) -> None:
        t.set_output(True).set_data_type(io).set_stride(list(strides))
        t.set_name(name)
        t.set_uid(uid)

    if isinstance(spec, ConvSpec):
        y = graph.conv_fprop(image=operand(spec.x, "x", X), weight=operand(spec.weight, "weight", WEIGHT),
                             padding=list(spec.padding), stride=list(spec.stride), dilation=[1, 1])
        if spec.bias is not None:
            y = graph.bias(input=y, bias=operand(spec.bias, "bias", BIAS))
        if spec.residual is not None:
            y = graph.add(a=y, b=operand(spec.residual, "residual", RESIDUAL))
        if spec.relu:
            y = graph.relu(input=y)
        result(y, "y", OUT, spec.y.strides)
        return _built(graph)
    y = graph.conv_fprop(image=operand(spec.x, "x", X), weight=operand(spec.weight, "weight", WEIGHT),
                         padding=[1, 1], stride=[1, 1], dilation=[1, 1])
    summed = graph.add(a=y, b=operand(spec.residual, "residual", RESIDUAL))
    result(summed, "out", OUT, spec.out.strides)
    if spec.scale is not None and spec.shift is not None:  # the next convolution's input, dense channels_last
        scale, shift = operand(spec.scale, "scale", SCALE), operand(spec.shift, "shift", SHIFT)
        act = graph.relu(input=graph.bias(input=graph.scale(input=y, scale=scale), bias=shift))
        y_shape = (spec.x.dims[0], spec.weight.dims[0], spec.x.dims[2], spec.x.dims[3])
        result(act, "act", ACT, channels_last_strides(y_shape))
    if spec.next_act is not None and spec.next_scale is not None and spec.next_shift is not None:
        scale = operand(spec.next_scale, "next_scale", NEXT_SCALE)
        shift = operand(spec.next_shift, "next_shift", NEXT_SHIFT)
        nxt = graph.relu(input=graph.bias(input=graph.scale(input=summed, scale=scale), bias=shift))
        result(nxt, "next_act", NEXT_ACT, spec.next_act.strides)
    return _built(graph)


def _built(graph: Any) -> Any:
    import cudnn

    try:
        graph.validate()
        graph.build_operation_graph()
        graph.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.B, cudnn.heur_mode.FALLBACK])
        graph.check_support()
        graph.build_plans()
    except Exception as exc:  # cudnnGraphNotSupportedError and kin: no engine for this graph here
        raise Unsupported(str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__) from exc
    return graph


# -- plans on disk -------------------------------------------------------------------------------

def environment(gpu_name: str, major: int, minor: int) -> str:
    """What a serialized plan depends on besides its shapes: the GPU model and the cuDNN versions (the frontend
    imported: the cuDNN it loaded)."""
    import cudnn

    return f"{gpu_name} sm{major}{minor} cudnn {cudnn.backend_version()} frontend {cudnn.__version__}"


def plan_file(folder: Path, environment_text: str, signature: str) -> Path:
    """Where the plan for ``signature`` (the text of its shapes, strides and data types) is kept in ``folder``."""
    digest = hashlib.sha256(f"{environment_text} {signature}".encode()).hexdigest()[:32]
    return folder / f"{digest}.plan"


def read(handle: Any, path: Path) -> Any | None:
    """The plan stored at ``path``, or None where there is none or it does not load (it is then rebuilt)."""
    import cudnn

    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        logger.info("cannot read the cuDNN plan %s (%s); building it", path, exc)
        return None
    try:
        graph = cudnn.pygraph(handle=handle)
        graph.deserialize(handle, list(data))  # (its binding takes a sequence of byte values, not bytes)
        return graph
    except Exception as exc:  # truncated, or from another cuDNN build: build it again and overwrite
        logger.info("the cuDNN plan %s does not load (%s); building it again", path,
                    str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__)
        return None


def write(graph: Any, path: Path) -> None:
    try:
        data = bytes(graph.serialize())
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path.parent, prefix=path.name, suffix=".tmp", delete=False) as tmp:
            tmp.write(data)
        os.replace(tmp.name, path)  # whole files only: another process may be reading this plan
    except Exception as exc:  # a read-only models folder, a full disk: only the next start is slower
        logger.info("cannot store the cuDNN plan %s (%s)", path, exc)


# -- a build begun at the command's start ---------------------------------------------------------
# emopipe.model.early_plans builds the plans a configuration needs from the command's first moment; while it works
# it holds this file of the plan folder locked, and a process that finds one of those plans missing waits for it
# instead of building the plan a second time.

EARLY_LOCK = ".early-build.lock"


def lock_early_build(folder: Path) -> int | None:
    """The plan folder's early-build lock taken (a file descriptor to hand to the process that builds), or None
    where another process holds it (a build is already under way) or the folder cannot be written."""
    import fcntl

    try:
        folder.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(folder / EARLY_LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        return None
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(descriptor)
        return None
    return descriptor


def early_build_underway(folder: Path) -> bool:
    """Whether a process is building plans into ``folder`` from its command's start (it holds the lock)."""
    return not _wait_for_lock(folder, 0.0)[0]


def wait_for_early_build(folder: Path, timeout: float = BUILDER_TIMEOUT_S) -> bool:
    """Wait until no process builds plans into ``folder`` from its command's start (at most ``timeout`` seconds);
    whether one was (then the plans it built are on disk now)."""
    free, waited = _wait_for_lock(folder, timeout)
    if waited > 0:
        logger.info("waited %.2f s for the cuDNN plans built since the command started%s", waited,
                    "" if free else " (still building: going on without them)")
    return waited > 0


def _wait_for_lock(folder: Path, timeout: float) -> tuple[bool, float]:
    """(whether the early-build lock is free now, how long it was waited for)."""
    import fcntl

    try:
        descriptor = os.open(folder / EARLY_LOCK, os.O_RDONLY)
    except OSError:  # (no lock file: no build was ever begun here)
        return True, 0.0
    started, tries = time.perf_counter(), 0
    try:
        while True:
            try:
                fcntl.flock(descriptor, fcntl.LOCK_SH | fcntl.LOCK_NB)
                return True, time.perf_counter() - started if tries else 0.0
            except OSError:
                waited = time.perf_counter() - started
                if waited >= timeout:
                    return False, waited
                tries += 1
                time.sleep(0.01)
    finally:
        os.close(descriptor)  # (and the shared lock with it)


# -- builder processes ---------------------------------------------------------------------------

def _job(path: Path, spec: PlanSpec) -> dict[str, Any]:
    return {"path": str(path), "kind": "conv" if isinstance(spec, ConvSpec) else "epilogue", "spec": asdict(spec)}


def spec_of(kind: str, fields: dict[str, Any]) -> PlanSpec:
    tensors = {name: TensorSpec(tuple(value["dims"]), tuple(value["strides"]), value["dtype"])
               for name, value in fields.items() if isinstance(value, dict)}
    if kind == "conv":
        return ConvSpec(stride=tuple(fields["stride"]), padding=tuple(fields["padding"]),  # type: ignore[arg-type]
                        relu=bool(fields.get("relu", False)), **tensors)
    return EpilogueSpec(**tensors)  # type: ignore[arg-type]


BUILDERS_VARIABLE = "EMOPIPE_PLAN_BUILDERS"  # how many builders a process may start (a Ray worker: its cores)


def builders_for(cpus: int | None = None) -> int:
    """How many builder processes: ``$EMOPIPE_PLAN_BUILDERS`` where it is set, else all of the cores this process
    may run on but two (the run's own threads go on meanwhile), at most 12 (each holds a CUDA context while it lives,
    ~0.5 GB of the GPU's memory; NVIDIA MPS serves 48 at most)."""
    if cpus is None:
        given = os.environ.get(BUILDERS_VARIABLE, "").strip()
        if given.isdigit():
            return max(1, int(given))
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(cpus - 2, 12))


class PlanBuilders:
    """Builder processes, started as plans are noted (one a plan, up to ``processes``; then each plan goes to the
    next in turn) and fed each plan at once, so that they compile while the pass that finds the plans goes on
    (Triton compiles its own kernels there on a fresh machine). :meth:`finish` waits for them. A plan a builder
    could not make (cuDNN has no engine for it, a builder that failed or found no GPU) is simply missing: the
    warm-up then builds it itself, or learns that cuDNN has none, as it would without builders."""

    def __init__(self, ordinal: int, processes: int | None = None, *, await_early_build: bool = True) -> None:
        self.ordinal, self.processes = ordinal, processes or builders_for()
        self.await_early_build = await_early_build  # (False: this process is the early build)
        self.noted: dict[Path, PlanSpec] = {}
        self.awaited: dict[Path, PlanSpec] = {}  # plans a build begun at the command's start may be making
        self._builders: list[tuple[subprocess.Popen[str], IO[str]]] = []
        self._fed = 0
        self._started = 0.0

    def add(self, path: Path, spec: PlanSpec) -> None:
        if path in self.noted:  # (the same shapes in another block)
            return
        self.noted[path] = spec
        if self.await_early_build and early_build_underway(path.parent):  # (finish waits, builds what it did not)
            self.awaited[path] = spec
            return
        self._feed(path, spec)

    def _feed(self, path: Path, spec: PlanSpec) -> None:
        self._fed += 1
        if len(self._builders) < min(self._fed, self.processes):  # a builder a plan, up to the limit
            self._start(1)
        builder, _ = self._builders[(self._fed - 1) % len(self._builders)]
        try:
            assert builder.stdin is not None
            builder.stdin.write(json.dumps(_job(path, spec)) + "\n")
            builder.stdin.flush()
        except OSError:  # a builder that has ended (no GPU, no cuDNN): the warm-up builds its plans
            pass

    def start(self) -> None:
        """Start every builder now (else one as each plan is noted): where every plan is missing (a fresh machine),
        their start (~1 s: an interpreter, cuDNN, a CUDA context) then overlaps what comes before the first plan."""
        self._start(self.processes - len(self._builders))

    def _start(self, count: int) -> None:
        if not self._builders:
            self._started = time.perf_counter()
        # (a builder imports emopipe and the frontend from where this process found them)
        environment = {**os.environ, "PYTHONPATH": os.pathsep.join(entry for entry in sys.path if entry)}
        for _ in range(count):
            # (a file, not a pipe: nothing it says can block it; closed by finish or abandon)
            errors = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115
            builder = subprocess.Popen([sys.executable, "-m", __name__, str(self.ordinal), *_libraries_loaded()],
                                       env=environment,
                                       stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=errors, text=True)
            self._builders.append((builder, errors))

    def _close_inputs(self) -> None:
        for builder, _ in self._builders:
            with contextlib.suppress(OSError):
                assert builder.stdin is not None
                builder.stdin.close()

    def finish(self) -> int:
        """Wait for the builders to store every plan they were given; how many of the noted plans are on disk."""
        if self.awaited:
            wait_for_early_build(next(iter(self.awaited)).parent)
            for path, spec in self.awaited.items():
                if not path.exists():
                    self._feed(path, spec)
            self.awaited.clear()
        self._close_inputs()
        for builder, errors in self._builders:
            try:
                builder.wait(timeout=max(1.0, BUILDER_TIMEOUT_S - (time.perf_counter() - self._started)))
            except subprocess.TimeoutExpired:
                builder.kill()
                builder.wait()
            if builder.returncode != 0:
                errors.seek(0)
                lines = errors.read().strip().splitlines()
                logger.info("a cuDNN plan builder ended with status %s (%s); the warm-up builds its plans itself",
                            builder.returncode, lines[-1] if lines else "no message")
            errors.close()
        made = sum(path.exists() for path in self.noted)
        if self._builders:
            logger.info("cuDNN plans: %d of %d built in %d processes at once in %.1f s", made, len(self.noted),
                        len(self._builders), time.perf_counter() - self._started)
        return made

    def abandon(self) -> None:
        """Stop the builders now (the pass failed, or was interrupted): what they stored stays."""
        self._close_inputs()
        for builder, errors in self._builders:
            builder.kill()
            builder.wait()
            errors.close()


# What cuDNN needs that this process found through PyTorch's wheels (cuDNN itself; NVRTC and nvJitLink, which
# cuDNN opens by name to compile its fused kernels): a builder loads the same files first, so that it finds them
# by name as this process did, wherever the wheels put them. Dependencies first.
_HANDED_OVER = ("libnvJitLink.so", "libnvrtc.so", "libnvrtc-builtins.so", "libcudnn.so")


@functools.cache  # (the same files for every builder of the process; the map is long: ~0.2 s to read)
def _libraries_loaded(maps: Path = Path("/proc/self/maps")) -> tuple[str, ...]:
    """The files of :data:`_HANDED_OVER` this process has loaded, in that order (none where it cannot tell)."""
    try:
        paths = {line.split(maxsplit=5)[5].strip() for line in maps.read_text().splitlines()
                 if line.count(" ") >= 5 and "/" in line}
    except OSError:
        return ()
    return tuple(path for prefix in _HANDED_OVER for path in sorted(paths) if Path(path).name.startswith(prefix + "."))


def _serve(ordinal: int, jobs: Iterable[str], libraries: Iterable[str] = ()) -> int:
    """A builder process's work: each job (a JSON line) built on GPU ``ordinal`` and stored; 0, or 1 where there
    is no GPU to build on. ``libraries``: the files to load first (:func:`_libraries_loaded` of the warm-up's
    process)."""
    import ctypes

    from emopipe.model import cuda_context

    for library in libraries:
        with contextlib.suppress(OSError):  # (one that does not load: cuDNN looks for it by name as usual)
            ctypes.CDLL(library, mode=ctypes.RTLD_GLOBAL)

    if not cuda_context.make_current(ordinal):
        print("no CUDA context on this GPU", file=sys.stderr)
        return 1
    # The frontend imports PyTorch where it can, only to read PyTorch tensors (which a builder has none of):
    # refused, it starts in a fraction of a second instead of ~3.
    sys.modules.setdefault("torch", None)  # type: ignore[arg-type]
    import cudnn

    handle = cudnn.create_handle()
    for line in jobs:
        job = json.loads(line)
        path = Path(job["path"])
        if path.exists():  # (another process built it meanwhile)
            continue
        try:
            write(build(handle, spec_of(job["kind"], job["spec"])), path)
        except Unsupported as exc:
            print(f"{path.name}: {exc}", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    sys.exit(_serve(int(sys.argv[1]), sys.stdin, sys.argv[2:]))
