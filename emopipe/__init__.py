"""emopipe: per-face emotion (EmoNet expressions, valence, arousal) from video, fast on NVIDIA GPUs.

Importing the package has no side effects: nothing is downloaded, no backend flag is set.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("emopipe")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+unknown"

__all__ = ["__version__", "load_emonet"]


def __getattr__(name: str):
    # torch is imported on first use, so `emopipe --help` and `import emopipe` stay fast.
    if name == "load_emonet":
        from .emonet import load_emonet

        return load_emonet
    raise AttributeError(f"module 'emopipe' has no attribute {name!r}")
