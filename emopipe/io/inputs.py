"""What a command line's inputs name: files, folders, quoted globs and list files, expanded into sources.

A folder holding video files gives one source per video; a folder holding images and no videos is one source, the images
in name order (an image sequence). Its subfolders are not read (a warning says how many hold videos or images);
``recursive``: each folder of its tree likewise, so that each folder of images is a sequence of its own (named after its
path, as a video is; links to folders followed, each folder walked once). Images beside videos in one folder are not
analysed (a warning says how many), whether the folder is named or a glob matches them. Hidden files (``.DS_Store``,
macOS's ``._clip.mp4`` metadata twins) and hidden folders are never a folder's sources. A glob takes what it matches as
a folder takes its contents: its videos (its images when it matches no video; other files are skipped with a warning),
and each folder it matches as if that folder were named, whose files it does not take again (``dir/**`` is each folder
of the tree, never one image twice). What a folder or a glob gives is spelled as pathlib spells a path (no ``./``,
repeated or trailing ``/``); a file named is a source as given. URLs and cameras pass through unchanged; a path that
does not exist also does (it fails as a source of its own, recorded, while the others run), as does a name with brackets
that matches nothing (``take[1].mp4``); a pattern with ``*`` or ``?`` that matches nothing is an error. A list file's
lines are expanded as the command line's items are (a folder, a quoted glob, a leading ``~``), relative to the current
folder. One file named twice (``v/a.mp4`` and ``./v/a.mp4``) is one source (:func:`source_key`); a link is a source of
its own, named after the link.
"""

from __future__ import annotations

import glob
import json
import logging
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from emopipe.errors import InputNotFoundError, InputUnreadableError
from emopipe.io.records import FOLDER_LOCK, MANIFEST
from emopipe.io.uris import IMAGE_SUFFIXES, is_url, redact_uri, webcam_index

logger = logging.getLogger(__name__)

# files a folder or a glob contributes as videos (what FFmpeg/OpenCV and NVDEC commonly open)
VIDEO_FILE_SUFFIXES = frozenset({".mp4", ".m4v", ".mov", ".mkv", ".webm", ".avi", ".mpg", ".mpeg", ".ts",
                                 ".mts", ".m2ts", ".wmv", ".flv", ".3gp", ".ogv"})
_GLOB_CHARACTERS = frozenset("*?[")
_WILDCARDS = frozenset("*?")  # (brackets alone are common in file names: take[1].mp4)
# --report writes its pictures in NAME.thumbnails/: emopipe's own output, never an image sequence to analyse
_THUMBNAILS = ".thumbnails"
# the videos a many-source run writes in its output folder, beside each source's rows (emopipe.pipeline.archive):
# NAME.annotated.mp4, under NAME.annotated.partial.mp4 until done; a camera's later parts NAME.annotated.2.mp4…
# Unlisted in a manifest, only the partial names and the parts are taken for emopipe's: a finished NAME.annotated.mp4
# is listed (its line is written before the renames), and one a manifest does not list may be a user's recording.
_ANNOTATED_UNLISTED = re.compile(r"\.annotated(\.\d+(\.partial)?|\.partial)\.(mp4|mkv|avi)$", re.IGNORECASE)


class _OwnOutputs:
    """Which files are emopipe's own outputs, never a source a folder or a glob gives (a run whose -o is in its input
    tree, or is its input folder, would otherwise analyse its own annotated videos when run again: ``--resume``, one
    level deeper each time). They are those in an output folder of a many-source run — a folder holding its lock file
    or its manifest (the folder this run writes, made by an earlier run, or any other's) — or in a folder of one:
    the files its manifest lists, and the annotated videos of a run cut off (:data:`_ANNOTATED_UNLISTED`), which are in
    no manifest line; never a file a manifest lists as a source (a user's ``talk.annotated.mp4`` beside ``talk.mp4``
    was left out, then written over by ``--resume --annotate mp4``: QA pass, session 39). A file named on the
    command line is a source all the same. One per expansion: what each folder is, read once."""

    def __init__(self) -> None:
        # an output folder's listed files, and the sources it lists; None: not an output folder
        self._folders: dict[Path, tuple[frozenset[str], frozenset[str]] | None] = {}
        self.left_out: list[str] = []

    def _listed(self, folder: Path) -> tuple[frozenset[str], frozenset[str]] | None:
        if folder not in self._folders:
            marked = any(os.path.lexists(folder / mark) for mark in (FOLDER_LOCK, MANIFEST))
            self._folders[folder] = _manifest_files(folder) if marked else None
        return self._folders[folder]

    def owns(self, path: Path) -> bool:
        """Whether ``path`` is an output of emopipe's in an output folder (said, once, in :meth:`say`)."""
        absolute = Path(os.path.abspath(path))
        for folder in absolute.parents:
            listed = self._listed(folder)
            if listed is None:
                continue
            files, sources = listed
            if str(absolute) not in sources and (str(absolute) in files or _ANNOTATED_UNLISTED.search(absolute.name)):
                if absolute.suffix.lower() in VIDEO_FILE_SUFFIXES | IMAGE_SUFFIXES:  # (no other file is a source)
                    self.left_out.append(str(path))
                return True
        return False

    def say(self) -> None:
        if self.left_out:
            names = sorted(set(self.left_out))
            logger.info("left out %d file(s) emopipe wrote in an output folder (annotated videos), which are no "
                        "sources; name such a file to analyse it anyway: %s", len(names), _examples(names))


def _manifest_files(folder: Path) -> tuple[frozenset[str], frozenset[str]]:
    """The absolute names of the files a many-source run's manifest in ``folder`` lists (its lines' ``files``,
    relative to the folder), and of the sources it lists (their ``path``); none where it has no readable manifest."""
    try:
        text = (folder / MANIFEST).read_bytes().decode("utf-8", errors="replace")
    except OSError:
        return frozenset(), frozenset()
    names: set[str] = set()
    sources: set[str] = set()
    for line in text.splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if not isinstance(entry, dict):
            continue
        files = entry.get("files")
        if isinstance(files, dict):
            names.update(os.path.abspath(folder / name) for name in files.values() if isinstance(name, str))
        if isinstance(entry.get("path"), str):
            sources.add(os.path.abspath(entry["path"]))
    return frozenset(names), frozenset(sources)


@dataclass(frozen=True)
class Inputs:
    """The sources a command names, in order, and whether it named a collection (then outputs go per source)."""

    sources: tuple[str, ...]
    collection: bool  # a folder of videos, a glob or a list file: even one source is written per source


def _skipped(path: Path, root: Path) -> bool:
    """A file under ``root`` that is no source: hidden, or in a hidden folder or a report's thumbnails."""
    parts = path.relative_to(root).parts
    return any(p.startswith(".") for p in parts) or any(p.endswith(_THUMBNAILS) for p in parts[:-1])


def _listed(path: Path) -> bool:
    """A file to consider: anything but a folder, so that a link to nothing, a FIFO or a socket named as a video
    fails as a source ("is not a regular file") rather than vanish unsaid."""
    return not path.is_dir()


def _tree(folder: str) -> Iterator[str]:
    """Everything in ``folder``'s tree (``""``: the current folder's) but hidden names, folders before their
    contents, spelled as ``folder`` is. A link to a folder is followed (its contents named through the link), each
    folder walked once: a link back up the tree (a loop) is not walked again. (Path.glob's ``**`` left a linked folder
    out unsaid; glob's followed a loop at every depth, for ever with two.)"""
    walked = {os.path.realpath(folder or os.curdir)}
    for top, folders, files in os.walk(folder or os.curdir, followlinks=True):
        folders[:] = sorted(name for name in folders if not name.startswith(".")
                            and os.path.realpath(os.path.join(top, name)) not in walked)
        walked.update(os.path.realpath(os.path.join(top, name)) for name in folders)
        here = top if folder else os.path.relpath(top)
        yield from (os.path.join(here, name) if here != os.curdir else name
                    for name in [*folders, *files] if not name.startswith("."))


def _glob(pattern: str) -> list[str]:
    """``glob.glob(pattern, recursive=True)``, each ``**`` walked as :func:`_tree` walks (links to folders followed,
    each folder once)."""
    parts = pattern.split(os.sep)
    if "**" not in parts:
        return sorted(glob.glob(pattern))
    at = parts.index("**")
    head, rest = os.sep.join(parts[:at]) or os.sep * (at > 0), os.sep.join(parts[at + 1:])
    found: set[str] = set()
    for top in glob.glob(head) if head else [""]:
        if top and not os.path.isdir(top):
            continue
        if at + 1 < len(parts):  # (something after the **, if only a /)
            folders = [top, *(path for path in _tree(top) if os.path.isdir(path))]
            found.update(m for folder in folders for m in _glob(os.path.join(glob.escape(folder), rest)))
        else:  # (as glob's: the folder itself, spelled with its trailing /, and everything in its tree)
            found.update([os.path.join(top, "")] if top else [], _tree(top))
    return sorted(found)


def _files(folder: Path, recursive: bool, own: _OwnOutputs) -> Iterator[Path]:
    """The files that may be ``folder``'s sources (its own, or ``recursive`` its tree's), found as they are read;
    never emopipe's own outputs (``own``)."""
    return (p for p in (map(Path, _tree(str(folder))) if recursive else folder.glob("*"))
            if not _skipped(p, folder) and _listed(p) and not own.owns(p))


def _media_in(folder: Path, recursive: bool, own: _OwnOutputs) -> dict[Path, tuple[list[Path], list[Path]]]:
    """Each folder's own videos and images, by folder, in name order: ``folder``'s alone, or (``recursive``)
    those of every folder in its tree; a folder holding neither is left out."""
    files = sorted(_files(folder, recursive, own), key=lambda p: str(p).lower())
    found: dict[Path, tuple[list[Path], list[Path]]] = {}
    for file in files:
        suffix = file.suffix.lower()
        if suffix in VIDEO_FILE_SUFFIXES or suffix in IMAGE_SUFFIXES:
            videos, images = found.setdefault(file.parent, ([], []))
            (videos if suffix in VIDEO_FILE_SUFFIXES else images).append(file)
    return found


def _folder(item: str, recursive: bool, own: _OwnOutputs) -> list[str] | None:
    """A folder's sources: its videos, or the folder itself when it holds images and no video (an image
    sequence: FolderSource reads a folder's own images); ``recursive``: the same for each folder of its tree.
    None when it holds neither."""
    sources: list[tuple[str, str]] = []  # (sort key, source)
    for place, (videos, images) in _media_in(Path(item), recursive, own).items():
        if videos:
            if images:
                logger.warning("%s: %d video(s) analysed; its %d image(s) are not (give the images a folder of "
                               "their own to analyse them as an image sequence)", place, len(videos), len(images))
            sources += [(str(v).lower(), str(v)) for v in videos]
        else:
            sources.append((str(place).lower(), str(place)))
    return [source for _, source in sorted(sources)] or None


def _holds_videos(folder: Path, own: _OwnOutputs) -> bool:
    """Whether ``folder`` has videos of its own: then its images are none of its sources (see :func:`_folder`),
    nor a glob's that matches them."""
    return bool(_media_in(folder, False, own).get(folder, ([], []))[0])


def _say_left_out(item: str, found: bool, outputs: _OwnOutputs,
                  taken: set[Path] | frozenset[Path] = frozenset()) -> bool:
    """Without --recursive, say how many of the folder ``item``'s subfolders (but those in ``taken``) hold a video
    or image in their tree, left out; whether any does. (Each subfolder is read up to its first one only.)"""
    media = VIDEO_FILE_SUFFIXES | IMAGE_SUFFIXES
    subfolders = (p for p in Path(item).glob("*") if p.is_dir() and p not in taken and not p.name.startswith(".")
                  and not p.name.endswith(_THUMBNAILS))
    left = sum(1 for sub in subfolders if any(p.suffix.lower() in media for p in _files(sub, True, outputs)))
    if left:
        logger.warning("%s: %sits %d subfolder(s) holding videos or images are left out (--recursive takes them)",
                       item, "" if found else "no video or image of its own; ", left)
    return bool(left)


def _inside(path: Path, folders: set[Path], recursive: bool) -> bool:
    """Whether ``path`` is a file that taking one of ``folders`` as if named already took (or said it left out)."""
    return path.parent in folders or (recursive and any(p in folders for p in path.parents))


def _globbed(pattern: str, recursive: bool, own: _OwnOutputs) -> list[str] | None:
    """A glob's sources, taken as a folder takes its contents (the folders it matches as if named; a file in one
    of them is not taken again: ``dir/**`` is ``dir`` and each of its folders, never one image twice; an image
    beside videos in its folder is not taken, as that folder named does not take it); what it matches but does
    not take is said in a warning, and a glob that gives nothing is an error. None when a pattern with no
    wildcard but brackets (``take[1].mp4``) matches nothing: a file name, not found."""
    matches = _glob(pattern)
    if not matches and not _WILDCARDS & set(pattern):
        return None
    if not matches:
        raise InputNotFoundError(f"no file matches {pattern}")
    skipped = [m for m in matches if any(p.endswith(_THUMBNAILS) for p in Path(m).parts)]  # a report's pictures
    matches = [m for m in matches if m not in skipped]
    matches = [m for m in matches if Path(m).is_dir() or not own.owns(Path(m))]  # (emopipe's outputs: said apart)
    folders = {Path(m) for m in matches if Path(m).is_dir()}
    taken = {m for m in matches if _inside(Path(m), folders, recursive)}
    files = [m for m in matches if not Path(m).is_dir() and _listed(Path(m)) and m not in taken]
    videos = {m for m in files if Path(m).suffix.lower() in VIDEO_FILE_SUFFIXES}
    images = {m for m in files if Path(m).suffix.lower() in IMAGE_SUFFIXES}
    with_videos = {p for p in {Path(m).parent for m in images} if _holds_videos(p, own)}
    beside = sorted(m for m in images if Path(m).parent in with_videos)
    images -= set(beside)
    sources: list[str] = []
    leaving: list[str] = []  # folders with nothing of their own whose subfolders are left out (said)
    for match in matches:
        if Path(match).is_dir() and recursive and match in taken:
            continue  # (a folder in a folder taken with its tree: taken, and said, once)
        if Path(match).is_dir():
            found = _folder(match, recursive, own)
            said = not recursive and _say_left_out(str(Path(match)), found is not None, own, folders)
            if found is None:  # (its trailing / says it is a folder)
                (leaving if said else skipped).append(os.path.join(match, ""))
            sources += found or []
        elif match in videos or (match in images and not videos):
            sources.append(match)
        elif match not in images and match not in beside and match not in taken:
            skipped.append(match)
    # a folder with nothing of its own but sources in its subfolders (dir/ of dir/**) is taken through them
    holding = {p for source in sources for p in Path(source).parents}
    skipped = [m for m in skipped if not (m.endswith(os.sep) and Path(m) in holding)]
    if videos and images:
        logger.warning("%s: %d video(s) analysed; the %d image(s) it matches are not (match them with a glob of "
                       "their own)", pattern, len(videos), len(images))
    if beside:
        logger.warning("%s: %d image(s) it matches sit beside videos, and a folder's images beside its videos are "
                       "not analysed (give the images a folder of their own to analyse them as an image sequence): "
                       "%s", pattern, len(beside), _examples(beside))
    if not sources:
        besides = ", but images beside videos, which are not analysed" if beside else ""
        raise InputNotFoundError(f"{pattern} matches no video or image, nor a folder holding them{besides} "
                                 f"({_examples(skipped + beside + leaving)}); name a file directly or in a --list "
                                 "file to analyse it anyway")
    if skipped:
        logger.warning("%s: skipped %d match(es) that are no video or image, nor a folder holding them: %s",
                       pattern, len(skipped), _examples(skipped))
    return sources


def _examples(names: list[str]) -> str:
    return ", ".join(names[:3]) + (", …" if len(names) > 3 else "")


def read_list(path: str) -> list[str]:
    """The sources in a list file: one per line; blank lines and lines starting with # are skipped."""
    file = Path(path).expanduser()
    if not file.exists():  # (a pipe is read too: --list <(find …))
        raise InputNotFoundError(f"list file not found: {path}")
    if file.is_dir():
        raise InputUnreadableError(f"--list {path} is a folder, not a list file: name the folder itself to take its "
                                   "videos")
    try:  # (utf-8-sig: a byte-order mark, as Windows editors write, is not part of the first line's name)
        lines = file.read_text(encoding="utf-8-sig").splitlines()
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
    (Called where a run of several sources is planned.)"""
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
    named: set[int] = set()  # positions in found of sources named as they are (not found in a folder or by a glob)
    collection = False
    entries: list[str] = []
    own = _OwnOutputs()
    for list_file in list_files:
        entries += read_list(list_file)
        collection = True
    for item in [*entries, *items]:
        if is_url(item) or webcam_index(item) is not None:
            named.add(len(found))
            found.append(item)
            continue
        if item.startswith("~") and not Path(item).exists():  # a list's line, or a quoted glob: no shell expanded it
            item = os.path.expanduser(item)
        expanded = _globbed(item, recursive, own) if _GLOB_CHARACTERS & set(item) and not Path(item).exists() \
            else None
        if expanded is not None:
            collection = True
        elif Path(item).is_dir():
            given = _folder(item, recursive, own)
            if not recursive:
                _say_left_out(item, given is not None, own)
            expanded = given or [item]  # (a folder with nothing to read fails as a source)
            if [Path(s) for s in expanded] == [Path(item)]:  # one image sequence, as named
                named.add(len(found))
            else:  # its videos
                collection = True
        else:
            named.add(len(found))
            found.append(item)  # (a file, or a missing path, named: as given)
            continue
        # what a folder or a glob gives is spelled one way, whatever the spelling of the folder or of what the glob
        # matched (./s/** gave ./s/d1 for a folder of images but s/v/a.mp4 for a video in s/v)
        found += [str(Path(source)) for source in expanded]
    own.say()
    first: dict[str, str] = {}
    first_named: dict[str, bool] = {}
    for position, uri in enumerate(found):
        key = source_key(uri)
        if key not in first:
            first[key], first_named[key] = uri, position in named
        elif first_named[key] and position in named:  # (a folder and a glob over it overlap as a matter of course;
            # a list's line or an argument named twice, such as one camera twice, is a mistake worth a word)
            logger.warning("%s is named more than once%s: it runs once", redact_uri(first[key]),
                           f" (also as {redact_uri(uri)})" if uri != first[key] else "")
    unique = tuple(first.values())
    # several named, the same one among them, are still several: the outputs go per source into the -o folder, as
    # the command line's form says (was: "a.mp4 a.mp4 -o out" wrote one rows file named "out")
    return Inputs(unique, collection or len(found) > 1)
