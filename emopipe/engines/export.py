"""EmoNet → ONNX: ``emopipe export-onnx``, the exported files' metadata and cache (parity: :mod:`.parity`).

**Exporter.** ``torch.onnx.export(..., dynamo=True)``, the torch.export-based exporter with onnxscript.
It is the default and the maintained path since PyTorch 2.9. The TorchScript exporter still runs
with torch 2.13 but warns that it will be removed, and its EmoNet graph carries ~420 Identity nodes
and an unfolded BatchNorm1d that the new exporter's optimiser removes. EmoNet has no data-dependent
control flow, so torch.export traces it whole at one static shape. It is slower (~20 s on a laptop
CPU against ~6 s), which the cache makes a one-off.

**The graph** (one file per static batch shape N and precision):

=================  =======================================================================
``crops``          input, N×3×256×256 RGB in [0, 1]; float32 in fp32 files, float16 in fp16
``probabilities``  N×C float32: softmax of the expression logits, computed in float32
``valence``        N float32
``arousal``        N float32
``landmarks``      N×68×2 float32, (x, y) in crop pixels — only in files exported with landmarks
=================  =======================================================================

The outputs are exactly :class:`~emopipe.types.EngineOutput`'s, computed the way TorchEngine
computes them, so the ONNX Runtime engine only copies them out. The 68 heatmaps (1.1 MB per face
in float32) are reduced to positions inside the graph instead of being copied to the host.

The input is float in the model's precision, not uint8: the crop stage produces float crops
(bilinear resizing makes values between integers, which uint8 would round away), float16 crops
halve the host→device bytes of fp16 files, and no Cast runs in front of the first convolution.
Callers holding uint8 crops get them converted on the device by the engine (``x.to(dtype) / 255``,
as TorchEngine does).
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import io
import logging
import os
import time
import warnings
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import nn

from emopipe.engines.base import landmarks_from_heatmaps
from emopipe.errors import OnnxModelError, OutputError, UsageError
from emopipe.io.records import written_whole
from emopipe.model.devices import PRECISIONS
from emopipe.model.emonet import EmoNet
from emopipe.types import INPUT_SIZE, LABELS, MAX_BATCH_SIZE, NUM_LANDMARKS

if TYPE_CHECKING:
    import onnx

logger = logging.getLogger(__name__)

INPUT_NAME = "crops"
OUTPUT_NAMES = ("probabilities", "valence", "arousal")
LANDMARKS_OUTPUT = "landmarks"
ONNX_PRECISIONS = ("fp32", "fp16")  # ORT's CUDA EP lacks bf16 kernels for EmoNet
# The largest static batch of a file (the export and its check run whole batches; types.MAX_BATCH_SIZE says why)
MAX_BATCH = MAX_BATCH_SIZE
FORMAT_VERSION = "1"
_META = "emopipe."


@dataclass(frozen=True)
class OnnxSpec:
    """What one exported file is: whose weights, which classes, static batch, precision, outputs.

    ``checkpoint_sha256`` is the checkpoint file's sha256, or ``state-dict:<sha256>`` of the
    model's tensors when no file is known (see :func:`state_digest`).
    """

    checkpoint_sha256: str
    classes: int
    batch_size: int
    precision: str
    landmarks: bool = False

    def __post_init__(self) -> None:
        if not self.checkpoint_sha256:
            raise ValueError("OnnxSpec needs the checkpoint's sha256")
        if self.classes not in LABELS:
            raise UsageError(f"EmoNet has 8 or 5 expression classes, got {self.classes}")
        if not 1 <= self.batch_size <= MAX_BATCH:
            raise UsageError(f"batch size must be 1 to {MAX_BATCH}, got {self.batch_size}")
        if self.precision not in ONNX_PRECISIONS:
            raise UsageError(f"ONNX files are exported in {' or '.join(ONNX_PRECISIONS)}, not {self.precision!r}")

    @property
    def labels(self) -> tuple[str, ...]:
        return LABELS[self.classes]

    @property
    def torch_dtype(self) -> torch.dtype:
        return PRECISIONS[self.precision]

    @property
    def input_shape(self) -> tuple[int, int, int, int]:
        return (self.batch_size, 3, INPUT_SIZE, INPUT_SIZE)

    @property
    def outputs(self) -> dict[str, tuple[int, ...]]:
        """Output names and shapes, in graph order (all float32)."""
        n = self.batch_size
        shapes = {"probabilities": (n, self.classes), "valence": (n,), "arousal": (n,)}
        if self.landmarks:
            shapes[LANDMARKS_OUTPUT] = (n, NUM_LANDMARKS, 2)
        return shapes

    @property
    def file_name(self) -> str:
        tag = self.checkpoint_sha256.split(":")[-1][:16]
        source = "sd-" if self.checkpoint_sha256.startswith("state-dict:") else ""
        suffix = "-landmarks" if self.landmarks else ""
        return f"emonet{self.classes}-{source}{tag}-b{self.batch_size}-{self.precision}{suffix}.onnx"

    def metadata(self) -> dict[str, str]:
        from emopipe._version import __version__

        dtype = "float32" if self.precision == "fp32" else "float16"
        return {
            f"{_META}format": FORMAT_VERSION,
            f"{_META}checkpoint_sha256": self.checkpoint_sha256,
            f"{_META}classes": str(self.classes),
            f"{_META}labels": ",".join(self.labels),
            f"{_META}precision": self.precision,
            f"{_META}batch_size": str(self.batch_size),
            f"{_META}landmarks": str(self.landmarks).lower(),
            f"{_META}version": __version__,
            f"{_META}input": f"{INPUT_NAME}: {self.batch_size}×3×{INPUT_SIZE}×{INPUT_SIZE} RGB in [0, 1], {dtype}",
            f"{_META}outputs": ",".join(self.outputs),
        }

    @classmethod
    def from_metadata(cls, props: Mapping[str, str], source: Path | str) -> OnnxSpec:
        """The spec an emopipe-exported file declares; OnnxModelError when it declares none or nonsense."""
        if f"{_META}checkpoint_sha256" not in props:
            raise OnnxModelError(f"{source} was not exported by emopipe (it has no emopipe metadata)")
        found = props.get(f"{_META}format")
        if found != FORMAT_VERSION:  # another layout of graph or metadata: nothing below can be trusted
            from emopipe._version import __version__

            raise OnnxModelError(f"{source} is in emopipe's ONNX format {found or '(none)'} (exported by emopipe "
                                 f"{props.get(f'{_META}version', '?')}); emopipe {__version__} reads format "
                                 f"{FORMAT_VERSION}")
        try:
            spec = cls(
                checkpoint_sha256=props[f"{_META}checkpoint_sha256"],
                classes=int(props[f"{_META}classes"]),
                batch_size=int(props[f"{_META}batch_size"]),
                precision=props[f"{_META}precision"],
                landmarks=props.get(f"{_META}landmarks", "false") == "true",
            )
        except (KeyError, ValueError) as exc:  # UsageError is a ValueError too
            raise OnnxModelError(f"{source} has unusable emopipe metadata ({exc})") from None
        labels = props.get(f"{_META}labels")
        if labels is not None and tuple(labels.split(",")) != spec.labels:
            raise OnnxModelError(f"{source} declares labels {labels!r}, expected {','.join(spec.labels)!r} "
                                 f"for {spec.classes} classes")
        return spec

    def differences(self, other: OnnxSpec) -> list[str]:
        """How a file's spec (``other``) differs from this one, in words."""
        found = []
        if other.checkpoint_sha256 != self.checkpoint_sha256:
            found.append(f"checkpoint sha256 {other.checkpoint_sha256} (expected {self.checkpoint_sha256})")
        if other.classes != self.classes:
            found.append(f"{other.classes} expression classes (the checkpoint has {self.classes})")
        if other.batch_size != self.batch_size:
            found.append(f"static batch {other.batch_size} (this run uses {self.batch_size})")
        if other.precision != self.precision:
            found.append(f"precision {other.precision} (this run uses {self.precision})")
        if other.landmarks != self.landmarks:
            found.append("landmarks output" + (" present (not asked for)" if other.landmarks else " missing"))
        return found


def cache_dir(models_dir: str | os.PathLike[str] | None = None) -> Path:
    """Where exported files are kept: ``<cache>/onnx``, the cache being ``$EMOPIPE_CACHE`` or ``<models_dir>/cache``."""
    from emopipe.model.weights import cache_root

    return cache_root(models_dir) / "onnx"


def state_digest(model: nn.Module) -> str:
    """``state-dict:<sha256>`` over the model's tensors: its identity when no checkpoint file is known."""
    digest = hashlib.sha256()
    for name, tensor in model.state_dict().items():
        t = tensor.detach().to("cpu").contiguous()
        digest.update(f"{name}:{t.dtype}:{tuple(t.shape)};".encode())
        digest.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    return f"state-dict:{digest.hexdigest()}"


class _InFloat32(nn.Module):
    """A float32 layer inside a half-precision network: its input is cast up, its output stays float32."""

    def __init__(self, layer: nn.Module) -> None:
        super().__init__()
        self.layer = layer

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layer(x.float())


class ExportGraph(nn.Module):
    """EmoNet plus the engine's post-processing, so the graph's outputs are EngineOutput's tensors."""

    def __init__(self, model: EmoNet, landmarks: bool) -> None:
        super().__init__()
        self.model = model
        self.landmarks = landmarks

    def forward(self, crops: torch.Tensor) -> tuple[torch.Tensor, ...]:
        out = self.model(crops)
        results = (F.softmax(out.expression.float(), dim=1), out.valence.float(), out.arousal.float())
        if self.landmarks:
            results += (landmarks_from_heatmaps(out.heatmap),)
        return results


@contextlib.contextmanager
def _quiet_exporter() -> Iterator[io.StringIO]:
    """torch.onnx prints progress to stdout and warns about optional torchvision ops: keep stdout for data."""
    captured = io.StringIO()
    noisy = [logging.getLogger(name) for name in ("torch.onnx", "torch.export", "onnxscript")]
    levels = [lg.level for lg in noisy]
    try:
        for lg in noisy:
            lg.setLevel(logging.ERROR)
        with contextlib.redirect_stdout(captured), warnings.catch_warnings():
            warnings.simplefilter("ignore", (FutureWarning, DeprecationWarning, UserWarning))
            yield captured
    finally:
        for lg, level in zip(noisy, levels, strict=True):
            lg.setLevel(level)
        logger.debug("torch.onnx said: %s", captured.getvalue().strip())


def export_emonet(model: EmoNet, spec: OnnxSpec, path: Path, check: Callable[[Path], None] | None = None) -> Path:
    """Export ``model`` as ``spec`` says, run the ONNX checker, write ``path`` atomically.

    ``check`` (``emopipe export-onnx``'s comparison with PyTorch) sees the complete file under its temporary name
    before it takes ``path``'s: if it raises, the file is removed and ``path`` stays as it was (an earlier good export
    is never lost to one that fails), and a process killed during the check leaves nothing under the final name.
    The caller's model is left as it is (a CPU copy in the target precision is traced).
    """
    if model.num_classes != spec.classes:
        raise UsageError(f"the model has {model.num_classes} classes but the export asks for {spec.classes}")
    _need_exporter()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"cannot create {path.parent}: {exc.strerror or exc}") from None
    t0 = time.perf_counter()
    # traced once its temporary file is open: a folder it cannot write (a read-only models volume) is said at once,
    # not after the export (~20-40 s on a CPU)
    save_onnx(lambda: emonet_proto(model, spec), path, check)
    # (with ``check``, the time is the export and the comparison with PyTorch: export-onnx prints the export's alone)
    logger.info("exported%s %s in %.1f s (ONNX checker passed)", " and checked" if check else "", path,
                time.perf_counter() - t0)
    return path


def _need_exporter() -> None:
    """UsageError, in a line, where the exporter's packages are missing (they are emopipe's dependencies, but an
    environment may lack them: it was an internal error, a ModuleNotFoundError, once the export began)."""
    missing = []
    for package in ("onnx", "onnxscript"):
        try:
            __import__(package)
        except ImportError:
            missing.append(package)
    if missing:
        raise UsageError(f"exporting EmoNet to ONNX needs {' and '.join(missing)}: pip install {' '.join(missing)}")


def emonet_proto(model: EmoNet, spec: OnnxSpec) -> onnx.ModelProto:
    """The graph of ``model`` as ``spec`` says, with its metadata, through the ONNX checker (OnnxModelError)."""
    import onnx

    traced = copy.deepcopy(model).to("cpu", dtype=spec.torch_dtype).eval()
    if spec.torch_dtype != torch.float32:
        # As the torch engine does: the two final linear layers stay float32. In half precision they would round
        # the logits, valence and arousal to steps that grow with their magnitude (0.008 at 8; a checkpoint whose
        # valence is near -10 loses a hundredth), and they cost nothing next to the convolutions.
        traced.emo_fc_2 = _InFloat32(traced.emo_fc_2.float())
    graph = ExportGraph(traced, spec.landmarks)
    example = torch.zeros(spec.input_shape, dtype=spec.torch_dtype)
    with _quiet_exporter(), torch.no_grad():
        program = torch.onnx.export(graph, (example,), dynamo=True, input_names=[INPUT_NAME],
                                    output_names=list(spec.outputs), external_data=False, optimize=True)
    proto = program.model_proto
    proto.doc_string = "EmoNet (Toisoul et al. 2021), exported by emopipe"
    metadata = {**spec.metadata(), f"{_META}exporter": f"torch.onnx dynamo (torch {torch.__version__}), "
                                                       f"opset {_opset(proto)}"}
    for key, value in metadata.items():
        entry = proto.metadata_props.add()
        entry.key, entry.value = key, value
    try:
        onnx.checker.check_model(proto, full_check=True)
    except onnx.checker.ValidationError as exc:
        raise OnnxModelError(f"the exported graph fails the ONNX checker: {str(exc).splitlines()[0]}") from None
    return proto


def save_onnx(proto: onnx.ModelProto | Callable[[], onnx.ModelProto], path: Path,
              check: Callable[[Path], None] | None = None) -> None:
    """``proto`` at ``path``, written whole (``check``: see :func:`export_emonet`). OutputError when it cannot be.
    ``proto`` may be a function that makes it: called once the temporary file is open (its errors are its own)."""
    import onnx

    # Written under a temporary name of its own (other processes and threads may export the same file at the same
    # time), removed if the write or the check fails, then renamed: the final name only ever holds a whole file,
    # and the last complete export wins; the ~56 MB file a killed export left goes with the next export of that name.
    checking: OSError | None = None
    try:
        with written_whole(path, sync=True) as f:
            if callable(proto):
                try:
                    proto = proto()
                except OSError as exc:
                    checking = exc
                    raise
            onnx.save(proto, f)
            if check is not None:
                f.flush()  # (read by name)
                try:
                    check(Path(f.name))
                except OSError as exc:
                    checking = exc
                    raise
    except OSError as exc:
        if exc is checking:  # (the check's or the export's own error, not the write's)
            raise
        raise OutputError(f"cannot write {path}: {exc.strerror or exc}") from None


def _opset(proto) -> int:
    return next((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), 0)


def read_spec(path: Path) -> OnnxSpec:
    """The spec a file's metadata declares (graph unchecked); OnnxModelError for a file that is not such a model."""
    import onnx
    from google.protobuf.message import DecodeError

    try:
        proto = onnx.load(str(path), load_external_data=False)
    except (DecodeError, ValueError, OSError) as exc:
        raise OnnxModelError(f"{path} is not a usable ONNX model ({str(exc).strip() or type(exc).__name__})") from None
    if not proto.graph.node:  # an empty file parses as an empty model
        raise OnnxModelError(f"{path} is not a usable ONNX model (it has no graph)")
    return OnnxSpec.from_metadata({p.key: p.value for p in proto.metadata_props}, path)


def unusable(path: Path, spec: OnnxSpec) -> str | None:
    """Why the file at ``path`` cannot serve ``spec`` (damaged, not ONNX, another emopipe format, other metadata), in
    one line; None when it can."""
    try:
        differences = spec.differences(read_spec(path))
    except OnnxModelError as exc:
        return str(exc)
    return f"{path} has {'; '.join(differences)}" if differences else None


def ensure_onnx(model: EmoNet, spec: OnnxSpec, directory: Path) -> tuple[Path, bool]:
    """(path, exported now): the cached file for ``spec`` in ``directory``, exported on first use — and again, with
    a warning that says why, when the file there is damaged, from another emopipe format or does not fit its name
    (as the engine treats its cache; the engine also checks the graph when it opens it)."""
    path = directory / spec.file_name
    if path.is_file():
        problem = unusable(path, spec)
        if problem is None:
            return path, False
        logger.warning("%s; exporting it again", problem)
    else:
        logger.info("exporting EmoNet to ONNX (%s, batch %d, once per checkpoint/shape/precision) …",
                    spec.precision, spec.batch_size)
    return export_emonet(model, spec, path), True


# -- parity with PyTorch -------------------------------------------------------------------------


# -- emopipe export-onnx -------------------------------------------------------------------------


