"""Shared fixtures: the ../shared assets, official-format random checkpoints, a seeded models dir."""

from __future__ import annotations

import os
import shutil
import signal
from pathlib import Path

import pytest

from tests.support.checkpoints import random_state

REPO = Path(__file__).resolve().parents[1]


def shared_assets() -> Path | None:
    candidate = Path(os.environ.get("EMOPIPE_TEST_ASSETS", REPO.parent / "shared"))
    return candidate if (candidate / "models" / "blazeface").is_dir() else None


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    found = shared_assets()
    if found is None:
        pytest.skip("needs ../shared (or $EMOPIPE_TEST_ASSETS) with the BlazeFace weights and face photos")
    return found


@pytest.fixture(scope="session")
def checkpoints(tmp_path_factory) -> dict[int, Path]:
    """Random checkpoints in the official format, for 8 and 5 classes."""
    import torch

    folder = tmp_path_factory.mktemp("checkpoints")
    paths = {}
    for classes in (8, 5):
        paths[classes] = folder / f"random_emonet_{classes}.pth"
        torch.save(random_state(classes, seed=classes), paths[classes])
    return paths


@pytest.fixture
def models_home(tmp_path, shared_dir, monkeypatch) -> Path:
    """A models directory seeded with the real BlazeFace files, as an offline user would seed it."""
    home = tmp_path / "models"
    home.mkdir()
    for f in (shared_dir / "models" / "blazeface").iterdir():
        if f.suffix in (".pth", ".npy"):
            shutil.copy(f, home / f.name)
    monkeypatch.setenv("EMOPIPE_HOME", str(home))
    return home


@pytest.fixture(scope="session")
def onnx_home(tmp_path_factory) -> Path:
    """A models directory whose cache/onnx the ONNX tests share: an export costs ~20 s on this CPU."""
    return tmp_path_factory.mktemp("onnx-models")


@pytest.fixture(scope="session")
def ort_fp32(checkpoints, onnx_home):
    """An OrtEngine (CPU provider, fp32, batch 1) over the random 8-class checkpoint.

    Its start exported the ONNX file into ``onnx_home`` and checked it against PyTorch.
    """
    from emopipe.engines.base import EngineOptions
    from emopipe.engines.onnxruntime_engine import OrtEngine
    from emopipe.model.emonet import build_emonet, read_checkpoint
    from emopipe.model.weights import sha256_of

    model = build_emonet(read_checkpoint(checkpoints[8]))
    return OrtEngine(model, EngineOptions(device="cpu", batch_size=1), checkpoint_sha256=sha256_of(checkpoints[8]),
                     models_dir=onnx_home)


@pytest.fixture
def short_parts(monkeypatch):
    """A long video's parts (emopipe.pipeline.parts) a second at least, 3 frames of overlap, as the driver plans them:
    a short clip stands for a long video (the CPU runs EmoNet on ~2 faces a second)."""
    from emopipe.pipeline import parts

    monkeypatch.setattr(parts, "MIN_PART_S", 1.0)
    monkeypatch.setattr(parts, "OVERLAP_S", 0.3)
    monkeypatch.setattr(parts, "OVERLAP_FRAMES", 3)


@pytest.fixture
def python_signal_handlers():
    """SIGINT and SIGTERM raise KeyboardInterrupt (Python's own handler) during the test, whatever an earlier
    test left installed, and the handlers before are put back after. For tests that send this process a real
    signal, and tests that check the handlers a call gives back."""
    before = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    for signum in before:
        signal.signal(signum, signal.default_int_handler)
    yield
    for signum, handler in before.items():
        signal.signal(signum, handler)
