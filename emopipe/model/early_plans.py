"""The cuDNN plans a command will need, built from its first seconds, while PyTorch imports.

On a machine without cuDNN plans (a fresh one) the warm-up's first pass finds EmoNet's and the detector's plans and
builder processes build them (33 plans, 5.5–7.6 s of a 12–15.5 s first command on the H200s of session 28), only after
PyTorch's import and the weights (4.8–6.1 s there). Which plans a configuration needs does not depend on the machine:
their shapes, strides and data types are recorded once as *recipes* (``plan_recipes.json`` beside this module, written
on a GPU by ``benchmarks/record_plan_recipes.py``), by configuration (``emonet b64 half``, ``blazeface_back b32
half``). So the command line starts ``python -m emopipe.model.early_plans`` while PyTorch imports, once its CUDA
context is made (begun with the command, the builders' contexts slowed the making of it from 0.4 to 1.6 s on an H200):
it works out where each recipe's plan is kept (the GPU's model asked of the driver, cuDNN's version from the frontend:
the names the warm-up computes), and has the missing ones built by builder processes
(:class:`~emopipe.model.cudnn_plans.PlanBuilders`) while the command imports. It holds the plan folder's early-build
lock while it works, and a process that finds one of those plans missing waits for it and reads the plan back instead
of building it again (:func:`~emopipe.model.cudnn_plans.wait_for_early_build`). Where every plan is on disk it ends
after a fraction of a second. A recipe gone stale (the networks changed) builds plans nobody reads: the warm-up finds
and builds its own, as it would without this. ``EMOPIPE_EARLY_PLANS=0`` turns it off. On the H200s of session 29 a
fresh machine's first row came at 8.6–12.6 s against 9.5–14.3 s without it (docs/benchmarks.md, "Start-up").

Nothing here imports PyTorch (an import contract says so).
"""

from __future__ import annotations

import functools
import glob
import importlib.util
import json
import logging
import os
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from emopipe.model import cuda_context, cudnn_plans
from emopipe.model.cudnn_plans import ConvSpec, PlanSpec

logger = logging.getLogger(__name__)

RECIPES = Path(__file__).with_name("plan_recipes.json")
OFF_VARIABLE = "EMOPIPE_EARLY_PLANS"  # "0": no build at the command's start
_DATA_TYPES = {"fp16": "half", "bf16": "bfloat16"}  # (fp32 runs no cuDNN plan of ours)


@dataclass(frozen=True)
class Recipe:
    """One plan as a configuration needs it: the text its file name is made from (the signature the warm-up
    computes from its tensors) and the graph to build."""

    signature: str
    spec: PlanSpec

    def to_json(self) -> dict[str, object]:
        kind = "conv" if isinstance(self.spec, ConvSpec) else "epilogue"
        return {"signature": self.signature, "kind": kind, "spec": asdict(self.spec)}

    @classmethod
    def from_json(cls, data: dict) -> Recipe:
        return cls(data["signature"], cudnn_plans.spec_of(data["kind"], data["spec"]))


def recipe_keys(*, batch_size: int, precision: str, detector: str, detect_batch: int,
                epilogue: bool = True) -> list[str]:
    """The recipes a run of this configuration needs: EmoNet's at its batch (where its convolutions finish in
    cuDNN's epilogue) and the detector's at its batch (BlazeFace's depthwise convolutions; S3FD has none)."""
    data_type = _DATA_TYPES.get(precision)
    if data_type is None:
        return []
    return ([f"emonet b{batch_size} {data_type}"] if epilogue else []) + [f"{detector} b{detect_batch} {data_type}"]


@functools.cache
def load_recipes(path: Path = RECIPES) -> dict[str, tuple[Recipe, ...]]:
    """The recipes kept in ``path`` by configuration; none where the file is missing or unreadable."""
    try:
        data = json.loads(path.read_text())
        return {key: tuple(Recipe.from_json(entry) for entry in entries) for key, entries in data["recipes"].items()}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        logger.debug("no cuDNN plan recipes read from %s (%s)", path, exc)
        return {}


@functools.cache
def _kept_configurations(path: Path = RECIPES) -> frozenset[str]:
    """The configurations ``path`` keeps plans for (their names only)."""
    try:
        return frozenset(key for key, entries in json.loads(path.read_text())["recipes"].items() if entries)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return frozenset()


def save_recipes(recipes: dict[str, Sequence[Recipe]], path: Path = RECIPES) -> None:
    data = {"about": "cuDNN plans by configuration, built from a command's start (emopipe/model/early_plans.py); "
                     "written by benchmarks/record_plan_recipes.py on a GPU",
            "recipes": {key: [recipe.to_json() for recipe in recipes[key]] for key in sorted(recipes)}}
    path.write_text(json.dumps(data, indent=1) + "\n")


_builds: list[subprocess.Popen[bytes]] = []  # (kept, so that a finished one is reaped)


def frontend_installed() -> bool:
    """Whether the cuDNN frontend (the ``[cudnn]`` extra) is there to build with, asked without importing it."""
    try:
        return importlib.util.find_spec("cudnn") is not None
    except (ImportError, ValueError):
        return False


def start(ordinal: int, folder: Path, keys: Sequence[str], recipes: Path = RECIPES) -> bool:
    """Begin building, in a process of its own, the plans of ``keys``'s recipes that ``folder`` lacks, on GPU
    ``ordinal``; whether it was begun (not where it is turned off, the cuDNN frontend is not installed, no key has a
    recipe, the folder cannot be written, or another process is already building into it)."""
    if os.environ.get(OFF_VARIABLE, "").strip() == "0" or not frontend_installed():
        return False
    known = _kept_configurations(recipes)  # (the build reads the recipes themselves: not this thread's work)
    wanted = [key for key in dict.fromkeys(keys) if key in known]
    if not wanted:
        return False
    lock = cudnn_plans.lock_early_build(folder)
    if lock is None:
        return False
    try:  # (the lock goes with the process: it holds it for as long as it lives)
        environment = {**os.environ, "PYTHONPATH": os.pathsep.join(entry for entry in sys.path if entry)}
        verbosity = "info" if logger.isEnabledFor(logging.INFO) else "quiet"
        _builds.append(subprocess.Popen(
            [sys.executable, "-m", __name__, str(ordinal), str(folder), str(recipes), verbosity, *wanted],
            env=environment, pass_fds=(lock,), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL))
    except OSError as exc:
        logger.debug("cuDNN plans not built ahead (%s)", exc)
        return False
    finally:
        os.close(lock)
    return True


def wanted_plans(folder: Path, environment: str, keys: Sequence[str],
                 recipes: Mapping[str, Sequence[Recipe]]) -> dict[Path, PlanSpec]:
    """Where ``keys``'s plans are kept in ``folder`` on this environment (:func:`cudnn_plans.environment`), and
    their graphs."""
    return {cudnn_plans.plan_file(folder, environment, recipe.signature): recipe.spec
            for key in keys for recipe in recipes.get(key, ())}


def _load_wheel_libraries() -> None:
    """What the warm-up's builders are handed (``cudnn_plans._HANDED_OVER``: cuDNN opens NVRTC by name), found where
    the command would import PyTorch's wheels from: this process loads no PyTorch."""
    import ctypes

    for prefix in cudnn_plans._HANDED_OVER:
        for entry in sys.path:
            for library in sorted(glob.glob(os.path.join(entry or ".", "nvidia", "*", "lib", prefix + "*"))):
                try:
                    ctypes.CDLL(library, mode=ctypes.RTLD_GLOBAL)
                except OSError:
                    continue


def _build(ordinal: int, folder: Path, recipes: Path, keys: Sequence[str]) -> int:
    """The process's work: the missing plans of ``keys`` built and stored; 0, or 1 where it could not begin."""
    started = time.perf_counter()
    model = cuda_context.device_model(ordinal)
    if model is None:
        logger.debug("no GPU %d: no cuDNN plans built ahead", ordinal)
        return 1
    _load_wheel_libraries()
    sys.modules.setdefault("torch", None)  # type: ignore[arg-type]  # (the frontend would import it: ~3 s)
    try:
        import cudnn  # noqa: F401
    except Exception as exc:
        logger.debug("the cuDNN frontend does not load here (%s): no cuDNN plans built ahead", exc)
        return 1
    plans = wanted_plans(folder, cudnn_plans.environment(*model), keys, load_recipes(recipes))
    missing = {path: spec for path, spec in plans.items() if not path.exists()}
    if not missing:
        return 0
    builders = cudnn_plans.PlanBuilders(ordinal, min(cudnn_plans.builders_for(), len(missing)),
                                        await_early_build=False)
    for path, spec in missing.items():
        builders.add(path, spec)
    builders.finish()
    made = sum(path.exists() for path in missing)
    logger.info("cuDNN plans: %d of %d built from the command's start in %.1f s", made, len(missing),
                time.perf_counter() - started)
    return 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO if sys.argv[4] == "info" else logging.WARNING, stream=sys.stderr,
                        format="emopipe: %(message)s")
    sys.exit(_build(int(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]), sys.argv[5:]))
