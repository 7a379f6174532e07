"""emopipe: per-face emotion (EmoNet expressions, valence, arousal) from video, fast on NVIDIA GPUs.

The public API (docs/api.md)::

    import emopipe

    for record in emopipe.analyze("interview.mp4", detector="blazeface_back"):
        print(record.timestamp_s, record.track_id, record.label, record.valence, record.arousal)

    with emopipe.Analyzer(device="cuda") as analyzer:   # engines built and warmed once
        for path in videos:
            rows = list(analyzer.analyze(path))

    for track in emopipe.summarize(emopipe.read_records("interview.emotions.csv")):   # per person
        print(track.track_id, track.dominant, track.valence_median, track.shares["happy"])

Importing the package has no side effects and loads neither torch nor OpenCV: each name below is
imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from emopipe import _clock  # noqa: F401  (the start-up report's zero: this first import)
from emopipe._version import __version__

if TYPE_CHECKING:
    from emopipe.api import Analyzer, analyze
    from emopipe.config import RunConfig
    from emopipe.errors import (
        CheckpointError,
        EmopipeError,
        InputNotFoundError,
        InputTruncatedError,
        InputUnreadableError,
        OutputError,
        SourceUnavailableError,
        UsageError,
        WeightsError,
    )
    from emopipe.model.emonet import load_emonet
    from emopipe.report.rows import read_records
    from emopipe.report.tracks import TrackSummary, summarize
    from emopipe.types import FaceRecord

_PUBLIC = {
    "analyze": "emopipe.api",
    "Analyzer": "emopipe.api",
    "RunConfig": "emopipe.config",
    "FaceRecord": "emopipe.types",
    "load_emonet": "emopipe.model.emonet",
    "summarize": "emopipe.report.tracks",
    "TrackSummary": "emopipe.report.tracks",
    "read_records": "emopipe.report.rows",
    "EmopipeError": "emopipe.errors",
    "UsageError": "emopipe.errors",
    "InputNotFoundError": "emopipe.errors",
    "Interrupted": "emopipe.errors",
    "InputUnreadableError": "emopipe.errors",
    "InputTruncatedError": "emopipe.errors",
    "OutputError": "emopipe.errors",
    "WeightsError": "emopipe.errors",
    "CheckpointError": "emopipe.errors",
    "SourceUnavailableError": "emopipe.errors",
}

__all__ = [  # noqa: RUF022 (grouped: the API, then the errors)
    "__version__", "analyze", "Analyzer", "RunConfig", "FaceRecord", "load_emonet", "summarize", "TrackSummary",
    "read_records",
    "EmopipeError", "UsageError", "InputNotFoundError", "InputUnreadableError", "InputTruncatedError", "OutputError",
    "WeightsError", "CheckpointError", "SourceUnavailableError", "Interrupted",
]


def __getattr__(name: str) -> Any:
    if name in _PUBLIC:
        import importlib

        return getattr(importlib.import_module(_PUBLIC[name]), name)
    raise AttributeError(f"module 'emopipe' has no attribute {name!r}")
