"""Where emopipe keeps its files: the models directory and the cache of things it can rebuild.

The standard library only, so the command can find its cache before it imports anything heavy
(:mod:`emopipe.cli.bytecode` keeps Python's compiled modules there).
"""

from __future__ import annotations

import os
from pathlib import Path

CHECKOUT_MODELS = Path(__file__).resolve().parents[2] / "models"  # a source checkout's models/


def models_dir(override: str | os.PathLike[str] | None = None) -> Path:
    """The ``--models-dir`` flag, else ``$EMOPIPE_HOME``, else the checkout's ``models/`` when running from a
    source checkout, else ``$XDG_CACHE_HOME/emopipe`` (``~/.cache/emopipe``; a relative ``$XDG_CACHE_HOME`` is
    ignored, as the XDG spec says)."""
    if override:
        return Path(override).expanduser()
    if env := os.environ.get("EMOPIPE_HOME"):
        return Path(env).expanduser()
    if (CHECKOUT_MODELS / "manifest.json").is_file() and (CHECKOUT_MODELS.parent / "pyproject.toml").is_file():
        return CHECKOUT_MODELS
    # The XDG spec: a relative $XDG_CACHE_HOME is invalid and ignored (taken as it was, the weights went to a
    # folder under wherever the command was started, a new one, and a new download, for each working directory).
    cache = os.environ.get("XDG_CACHE_HOME", "")
    return (Path(cache) if os.path.isabs(cache) else Path.home() / ".cache") / "emopipe"


def cache_root(models: str | os.PathLike[str] | None = None) -> Path:
    """Where compiled code and exported models are kept: ``$EMOPIPE_CACHE``, else ``<models dir>/cache``.

    Everything in it can be rebuilt; the variable moves it off a models folder that is read-only."""
    if env := os.environ.get("EMOPIPE_CACHE"):
        return Path(env).expanduser()
    return models_dir(models) / "cache"
