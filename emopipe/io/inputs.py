"""What a command line's inputs name: files, folders, quoted globs and list files, expanded into sources.

A folder holding video files gives one source per video (``recursive``: in its subfolders too); a folder
holding images and no videos stays one source, the images in name order (an image sequence), as for a
single folder. Images beside videos in one folder are not analysed (a warning says how many). URLs and
cameras pass through unchanged; a path that does not exist also does (it fails as a source of its own,
recorded, while the others run). A list file's lines are expanded as the command line's items are (a folder,
a quoted glob), relative to the current folder. One file named twice (``v/a.mp4`` and ``./v/a.mp4``) is one
source (:func:`source_key`); a link is a source of its own, named after the link.
"""

from __future__ import annotations

import glob
import logging
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from emopipe.errors import InputNotFoundError, InputUnreadableError
from emopipe.io.uris import IMAGE_SUFFIXES, is_url, webcam_index

logger = logging.getLogger(__name__)

# files a folder or a glob contributes as videos (what FFmpeg/OpenCV and NVDEC commonly open)
VIDEO_FILE_SUFFIXES = frozenset({".mp4", ".m4v", ".mov", ".mkv", ".webm", ".avi", ".mpg", ".mpeg", ".ts",
                                 ".mts", ".m2ts", ".wmv", ".flv", ".3gp", ".ogv"})
_GLOB_CHARACTERS = frozenset("*?[")


@dataclass(frozen=True)
class Inputs:
    """The sources a command names, in order, and whether it named a collection (then outputs go per source)."""

    sources: tuple[str, ...]
    collection: bool  # a folder of videos, a glob or a list file: even one source is written per source


def _videos_in(folder: Path, recursive: bool) -> tuple[list[Path], int]:
    pattern = "**/*" if recursive else "*"
    files = sorted((p for p in folder.glob(pattern) if p.is_file()), key=lambda p: str(p).lower())
    videos = [p for p in files if p.suffix.lower() in VIDEO_FILE_SUFFIXES]
    images = sum(1 for p in files if p.suffix.lower() in IMAGE_SUFFIXES)
    return videos, images


def read_list(path: str) -> list[str]:
    """The sources in a list file: one per line; blank lines and lines starting with # are skipped."""
    file = Path(path)
    if not file.is_file():
        raise InputNotFoundError(f"list file not found: {path}")
    try:
        lines = file.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise InputUnreadableError(f"cannot read the list file {path}: {exc}") from None
    # a "#" at a line's start, or after a space, begins a comment ("rtsp://cam/1  # door"); one inside a name or
    # a URL (clip#2.mp4, http://host/page#part) does not
    sources = (re.split(r"\s#", line, maxsplit=1)[0].strip() for line in lines)
    return [source for source in sources if source and not source.startswith("#")]


def source_key(uri: str) -> str:
    """What names a source from run to run: a local path made absolute with its folders resolved (``v/a.mp4``,
    ``./v/a.mp4``, its absolute path and a path through a linked folder are one file, whichever folder the
    command runs in) but not its own name (a link to a file is a source of its own, as its outputs are named
    after the link); a URL or camera as given."""
    if is_url(uri) or webcam_index(uri) is not None:
        return uri
    path = Path(os.path.abspath(uri))
    return str(path.parent.resolve() / path.name)


def warn_linked(sources: Sequence[str]) -> None:
    """Say when two sources are one file (links to it, or it and a link): each is analysed, under its own name.
    (Called where a run is planned: the command line expands its inputs once more before that.)"""
    names: dict[str, list[str]] = {}
    for uri in sources:
        if not (is_url(uri) or webcam_index(uri) is not None):
            names.setdefault(os.path.realpath(uri), []).append(uri)
    for target, given in names.items():
        if len(given) > 1:
            logger.warning("%s are one file (%s): analysed once for each name", ", ".join(given), target)


def expand_inputs(items: Sequence[str], list_files: Iterable[str] = (), recursive: bool = False) -> Inputs:
    """The sources named by the list files' lines and ``items`` (in that order), duplicates removed (the first
    spelling kept)."""
    found: list[str] = []
    collection = False
    entries: list[str] = []
    for list_file in list_files:
        entries += read_list(list_file)
        collection = True
    for item in [*entries, *items]:
        if is_url(item) or webcam_index(item) is not None:
            found.append(item)
        elif _GLOB_CHARACTERS & set(item) and not Path(item).exists():
            matches = sorted(glob.glob(item, recursive=True))
            if not matches:
                raise InputNotFoundError(f"no file matches {item}")
            found += [m for m in matches if Path(m).is_file()]
            collection = True
        elif Path(item).is_dir():
            videos, images = _videos_in(Path(item), recursive)
            if videos:
                if images:
                    logger.warning("%s: %d video(s) analysed; its %d image(s) are not (give the images a folder "
                                   "of their own to analyse them as an image sequence)", item, len(videos), images)
                found += [str(v) for v in videos]
                collection = True
            else:
                found.append(item)  # an image sequence
        else:
            found.append(item)
    first: dict[str, str] = {}
    for uri in found:
        first.setdefault(source_key(uri), uri)
    unique = tuple(first.values())
    return Inputs(unique, collection or len(unique) > 1)
