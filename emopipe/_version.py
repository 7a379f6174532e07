"""The installed version (a leaf: everything that reports the version imports it from here)."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("emopipe")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+unknown"
