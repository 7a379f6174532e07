"""Per-face, per-frame results and the CSV / JSON Lines writers that stream them to disk.

One :class:`FaceRecord` per detected face per frame. Writers are context managers that are opened
before any work starts (so an unwritable path fails fast, with exit code 5), write every batch of
rows as soon as it arrives and hand it to the operating system at once (a crash loses nothing that
was written), and never leave half a row behind: a batch is formatted completely before the first
byte goes out, and a write that fails part-way is cut back to the last complete row.

Columns (CSV; JSON Lines objects carry the same fields): ``source, frame, timestamp_s, track_id,
x1, y1, x2, y2, score, label, p_<label>…, valence, arousal``; with ``--detect-every``, ``detected``
after ``score`` (1: the detector's box; 0: a box interpolated or carried from key frames, whose score
is interpolated too); when asked for, ``lm0_x, lm0_y … lm67_y``. In JSON Lines the probabilities are
one object ``{label: p}`` and the landmarks a list of ``[x, y]`` pairs. Pixel values are rounded to
0.01 px, everything else to 6 decimals (timestamps to the microsecond).
"""

from __future__ import annotations

import contextlib
import csv
import errno
import fcntl
import hashlib
import io
import itertools
import json
import os
import shutil
import stat
import sys
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any

import numpy as np

from emopipe.errors import OutputError, UsageError
from emopipe.types import INPUT_SIZE, NUM_LANDMARKS, FaceRecord

STDOUT = "-"
FOLDER_LOCK = ".emopipe.lock"  # in an output folder: locked by the run writing the folder (hold_folder)
MANIFEST = "manifest.jsonl"  # in a many-source run's output folder: a line per source (emopipe.pipeline.archive)
FORMATS = {".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl"}
PIXEL_DECIMALS = 2  # box corners and landmarks: sub-pixel detail beyond 0.01 px is noise
VALUE_DECIMALS = 6  # scores, probabilities, valence, arousal; timestamps (µs)


def landmarks_to_frame(landmarks: np.ndarray, boxes: np.ndarray, crop_size: int = INPUT_SIZE) -> np.ndarray:
    """Landmarks from crop pixels to frame pixels, for the boxes the crops were cut from.

    The crop is the box resized to ``crop_size``² without keeping its aspect ratio (the EmoNet input
    contract), so each axis scales on its own: ``x = x1 + x_crop * (x2 - x1) / crop_size``.
    ``landmarks`` is …×68×2 and ``boxes`` the matching …×4 (one face or k faces).
    """
    landmarks = np.asarray(landmarks, dtype=np.float64)
    boxes = np.asarray(boxes, dtype=np.float64)
    if landmarks.shape[-1] != 2 or boxes.shape[-1] != 4 or landmarks.shape[:-2] != boxes.shape[:-1]:
        raise ValueError(f"expected landmarks …×L×2 and boxes …×4 for the same faces, got {landmarks.shape} and "
                         f"{boxes.shape}")
    origin = boxes[..., None, 0:2]
    scale = (boxes[..., None, 2:4] - boxes[..., None, 0:2]) / crop_size
    return origin + landmarks * scale


def text_name(name: str | os.PathLike[str]) -> str:
    """A file name as text to show or write (valid UTF-8): the bytes of a name that are not UTF-8 (Latin-1 from an old
    camera or archive), which Python holds as lone surrogates, as ``\\xNN`` (``zz\\xe9.mp4``), as Python prints them."""
    text = os.fspath(name)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        try:
            return text.encode("utf-8", errors="surrogateescape").decode("utf-8", errors="backslashreplace")
        except UnicodeEncodeError:  # (a surrogate no file name's byte gives: as \\udNNN)
            return text.encode("utf-8", errors="backslashreplace").decode("utf-8")
    return text


def record_columns(labels: Sequence[str], landmarks: bool, detected: bool = False, files: bool = False) -> list[str]:
    """CSV header for a model with these class ``labels`` (``files``: a folder of images, each row's image file)."""
    columns = ["source", "frame", *(["file"] if files else []), "timestamp_s", "track_id", "x1", "y1", "x2", "y2",
               "score"]
    columns += ["detected"] if detected else []
    columns += ["label"]
    columns += [f"p_{label}" for label in labels]
    columns += ["valence", "arousal"]
    if landmarks:
        columns += [f"lm{i}_{axis}" for i in range(NUM_LANDMARKS) for axis in ("x", "y")]
    return columns


# -- where the bytes go ----------------------------------------------------------------------


MAX_NAME_BYTES = 255  # a file name's limit on every common file system


def ensure_writable(path: Path, what: str = "output") -> None:
    """Raise :class:`OutputError` now if ``path`` cannot be created, rather than after the work.

    The folder is probed by creating (and removing) a temporary file in it, so read-only file systems,
    pseudo file systems (``/proc``) and permissions are all found, each with its own reason.
    """
    if path.is_dir():
        raise OutputError(f"cannot write {what} {path}: it is a directory; give a file name")
    if len(path.name.encode()) > MAX_NAME_BYTES:
        raise OutputError(f"cannot write {what} {path}: the file name is longer than {MAX_NAME_BYTES} bytes")
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.exists():
        raise OutputError(f"cannot write {what} {path}: directory {parent} does not exist")
    if not parent.is_dir():
        raise OutputError(f"cannot write {what} {path}: {parent} is not a directory")
    if path.exists() and not os.access(path, os.W_OK):
        raise OutputError(f"cannot write {what} {path}: permission denied")
    try:
        with tempfile.NamedTemporaryFile(dir=parent, prefix=".emopipe-probe-"):
            pass
    except OSError as exc:
        raise OutputError(f"cannot write {what} {path}: {describe_os_error(exc)}") from None


LOCK_TRIES = 8  # a folder's lock file removed under a run about to lock it: that run tries again (hold_folder)
# the FOLDER_LOCK files this process holds (hold_folder), by (device, inode): its own outputs in such a folder (a
# many-source run's --report page) take no shared lock of the folder (hold_outputs), which its own would refuse
_FOLDERS_HELD_HERE: set[tuple[int, int]] = set()


@contextlib.contextmanager
def hold_folder(directory: Path) -> Iterator[None]:
    """``directory`` is this run's alone while the block runs: an exclusive ``flock`` on its FOLDER_LOCK file, so a
    second run started into the same folder at the same time is refused (OutputError, exit 5) instead of writing
    its files between this one's. Take it before looking for an earlier run's files: the run that waited finds
    them. The folder is made if missing. The kernel drops the lock when the process ends, even killed.

    The empty lock file stays in a folder that holds anything else. A folder this call made that holds nothing but
    the lock when the block ends (the run was refused, or cut off, before it wrote a file) is removed with the lock
    and any parent this call made: a refused run leaves nothing behind. The lock file is removed while still
    locked, and a run that locks it checks that the folder still has the file it locked (else it tries again), so
    two runs never each hold a lock file of their own."""
    for _ in range(LOCK_TRIES):
        made = _make_folder(directory)
        try:
            fd = _lock_folder(directory)
        except BaseException:
            _remove_empty(made)
            raise
        if fd is not None:
            break
    else:  # (each time, the run that held the folder removed it as this one came to lock it)
        raise OutputError(f"{directory} is in use by other emopipe runs, which keep removing it; wait for them to "
                          "end, or choose another output folder")
    locked = os.fstat(fd)
    held_here = (locked.st_dev, locked.st_ino)
    _FOLDERS_HELD_HERE.add(held_here)
    try:
        yield
    finally:
        _FOLDERS_HELD_HERE.discard(held_here)
        try:
            if made and [p.name for p in directory.iterdir()] == [FOLDER_LOCK]:
                (directory / FOLDER_LOCK).unlink()  # (still locked: a run that locks it now sees it gone)
        except OSError:
            made = []  # (left as it is)
        finally:
            os.close(fd)  # (releases the lock)
        _remove_empty(made)


def _make_folder(directory: Path) -> list[Path]:
    """Make ``directory`` and its missing parents; those this call made (not another process), deepest first."""
    missing = list(itertools.takewhile(lambda folder: not folder.is_dir(), [directory, *directory.parents]))
    made: list[Path] = []
    try:
        for folder in reversed(missing):
            try:
                folder.mkdir()
            except FileExistsError:
                if not folder.is_dir():
                    raise
                continue  # (made by another process meanwhile: not this run's to remove)
            made.insert(0, folder)
    except OSError as exc:
        _remove_empty(made)
        raise OutputError(f"cannot create the output folder {directory}: {describe_os_error(exc)}") from None
    return made


def _lock_folder(directory: Path) -> int | None:
    """The open, locked FOLDER_LOCK of ``directory``; None when the folder or its lock file was removed by the run
    that held it before this one could lock it (the caller tries again)."""
    path = directory / FOLDER_LOCK
    try:
        return _lock(path, f"{directory} is in use by another emopipe run (it holds {FOLDER_LOCK}); wait for that "
                           "run to end, or choose another output folder")
    except FileNotFoundError:  # the folder removed since it was made
        return None
    except _NoLocks as exc:
        raise OutputError(f"cannot lock {path}: {exc}") from None


def _lock(path: Path, in_use: str) -> int | None:
    """The lock file ``path``, opened (made if missing) and locked with an exclusive ``flock``; None when the run that
    held it removed it before this one could lock it (the caller tries again). OutputError ``in_use`` while another
    process holds it; FileNotFoundError where its folder is gone; _NoLocks where the file system has no locks."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise OutputError(f"cannot write {path}: {describe_os_error(exc)}") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise OutputError(in_use) from None
        except OSError as exc:
            if exc.errno in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EINVAL):
                raise _NoLocks(describe_os_error(exc)) from None
            raise OutputError(f"cannot lock {path}: {describe_os_error(exc)}") from None
        try:
            named = os.stat(path)
        except FileNotFoundError:
            named = None
        locked = os.fstat(fd)
        if named is not None and (named.st_ino, named.st_dev) == (locked.st_ino, locked.st_dev):
            return fd
    except BaseException:
        os.close(fd)
        raise
    os.close(fd)  # (the file locked is no longer the one named)
    return None


def lock_path(path: Path) -> Path:
    """The hidden lock file a one-source run holds for its output ``path`` (:func:`hold_outputs`): ``.NAME.lock``
    beside it, as its temporary names (``.NAME.0.part``…) are."""
    return path.with_name(f"{_temporary_prefix(path)}lock")


@contextlib.contextmanager
def hold_outputs(paths: Iterable[str | os.PathLike[str]]) -> Iterator[None]:
    """The output names ``paths`` are this run's alone while the block runs: an exclusive ``flock`` on each one's
    hidden lock file beside it (:func:`lock_path`), so a second run started at the same time that would write any of
    them is refused (OutputError, exit 5) instead of writing the same partial files and renaming over this one's.
    Take it before looking for an earlier run's files. :func:`hold_folder` does the same for a whole folder.

    Each lock file is removed when the block ends, while still locked (a run that locks it then sees it gone and
    tries again, as with hold_folder): a run leaves none behind. The kernel drops the locks when the process ends,
    even killed: the next run takes over the lock file a killed one left, and removes it. Where the file system has
    no locks, a name goes unlocked, as written_whole's temporary names do.

    A name in a many-source run's output folder (one with a FOLDER_LOCK) is also held against that run: the folder's
    lock is taken shared (refused, exit 5, while a many-source run holds it, exclusively: :func:`hold_folder`), and a
    many-source run that takes the folder meanwhile finds the name's own lock held (:func:`refuse_outputs_in_use`)."""
    wanted: dict[Path, Path] = {}
    for path in map(Path, paths):  # (one lock a file, however spelled: two opens of it would refuse each other)
        wanted.setdefault(Path(os.path.realpath(path.parent)) / lock_path(path).name, path)
    held: list[tuple[Path | None, int]] = []
    try:
        for lock in sorted(wanted):  # (one order for every run: of two wanting the same names, one gets them all)
            fd = _lock_output(lock, wanted[lock])
            if fd is not None:
                held.append((lock, fd))
        for folder in sorted({lock.parent for lock in wanted}):  # (after the names: see refuse_outputs_in_use)
            fd = _share_folder(folder)
            if fd is not None:
                held.append((None, fd))
        yield
    finally:
        for held_lock, fd in reversed(held):
            if held_lock is not None:
                with contextlib.suppress(OSError):
                    held_lock.unlink()  # (still locked: a run that locks it now sees it gone)
            os.close(fd)  # (releases the lock)


def _share_folder(folder: Path) -> int | None:
    """The FOLDER_LOCK of ``folder``, opened and locked shared; None where it has none (no many-source run writes
    there), where this process holds it, or where the file system has no locks. OutputError while a many-source run
    holds it."""
    try:
        fd = os.open(folder / FOLDER_LOCK, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:  # (none; or one that cannot be read: no lock taken, as where there are none)
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or (info.st_dev, info.st_ino) in _FOLDERS_HELD_HERE:
            os.close(fd)
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            raise OutputError(f"{folder} is in use by another emopipe run writing several sources there (it holds "
                              f"{FOLDER_LOCK}); wait for that run to end, or choose another name") from None
        except OSError:  # (no locks on this file system)
            os.close(fd)
            return None
    except BaseException:
        with contextlib.suppress(OSError):
            os.close(fd)
        raise
    return fd


def refuse_outputs_in_use(paths: Iterable[Path]) -> None:
    """OutputError (exit 5) when another run holds one of ``paths`` (:func:`hold_outputs`: a one-source run writing
    it). For a many-source run once it holds its folder (:func:`hold_folder`): a one-source run that looked for the
    folder's lock before it was made holds its names by then. A lock file nobody holds (a killed run's) is no one's."""
    for path in paths:
        lock = lock_path(path)
        try:
            fd = os.open(lock, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            raise OutputError(f"{path} is in use by another emopipe run (it holds {lock.name}); wait for that run "
                              "to end, or choose another output folder") from None
        except OSError:  # (no locks on this file system)
            pass
        finally:
            os.close(fd)


def _lock_output(lock: Path, path: Path) -> int | None:
    """The open, locked ``lock`` of output ``path``; None where the file system has no locks."""
    for _ in range(LOCK_TRIES):
        try:
            fd = _lock(lock, f"{path} is in use by another emopipe run (it holds {lock.name}); wait for that run to "
                             "end, or choose another name")
        except FileNotFoundError:
            raise OutputError(f"cannot write output {path}: directory {lock.parent} does not exist") from None
        except _NoLocks:
            with contextlib.suppress(OSError):
                if os.stat(lock).st_size == 0:
                    lock.unlink()  # (made just now, or a stale one: no run locks on this file system)
            return None
        if fd is None:
            continue
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size:  # not a lock file: somebody's, never removed
            os.close(fd)
            raise OutputError(f"{lock} is in the way of the lock file of {path} (it is not an empty file): move it, "
                              "or choose another name")
        return fd
    raise OutputError(f"{path} is in use by other emopipe runs, which keep removing its lock file {lock.name}; wait "
                      "for them to end, or choose another name")


def _remove_empty(folders: Iterable[Path]) -> None:
    """Remove each of ``folders`` (deepest first) while it is empty; stop at the first that is not."""
    for folder in folders:
        try:
            folder.rmdir()
        except OSError:
            return


def describe_os_error(exc: OSError) -> str:
    """The reason as a user would put it (a read-only file system is not a permission problem)."""
    reasons = {errno.EROFS: "read-only file system", errno.ENOSPC: "no space left on the device",
               errno.EACCES: "permission denied", errno.EPERM: "permission denied",
               errno.ENAMETOOLONG: "the name is too long", errno.ENOENT: "the folder does not exist"}
    return reasons.get(exc.errno or 0, exc.strerror or str(exc))


def _umask_from_proc() -> int | None:
    """The process's umask as Linux (4.7 and later) states it, read without changing it; None elsewhere."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return None


def _umask_by_setting() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


# Elsewhere, read once at import: os.umask reads only by setting, and a thread creating a file in between
# would get the wrong mask.
_UMASK_AT_IMPORT = None if _umask_from_proc() is not None else _umask_by_setting()


def created_mode(folder: bool = False) -> int:
    """The permissions a file (``folder``: a folder) created now gets: 0o666 (0o777) less the umask. Files and
    folders made by :mod:`tempfile` are private (0o600, 0o700) whatever the umask; an output written under a
    temporary name takes these before it is renamed into place, as its neighbours have."""
    mask = _umask_from_proc()
    if mask is None:
        mask = _UMASK_AT_IMPORT if _UMASK_AT_IMPORT is not None else 0o022
    return (0o777 if folder else 0o666) & ~mask


def same_file(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> bool:
    """Do ``a`` and ``b`` name one file (other spellings, symbolic and hard links included)?"""
    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError):  # one does not exist (yet), or is no path at all (a NUL in a stream URI)
        try:
            return Path(a).resolve() == Path(b).resolve()
        except (OSError, ValueError, RuntimeError):
            return False


class InputFiles:
    """A run's input files, to tell which one a name the run may write would overwrite: the same file, as
    :func:`same_file` tells (other spellings, symbolic and hard links), with one ``stat`` a name however many inputs
    there are (a many-source run checks several names a source). An input that is not there is matched by its
    absolute name only (nothing of it can be overwritten)."""

    def __init__(self, paths: Iterable[str | os.PathLike[str]]) -> None:
        self.paths = [os.fspath(path) for path in paths]
        self._by_id: dict[tuple[int, int], str] = {}
        self._missing: dict[str, str] = {}  # by absolute name
        # Whether one may be at a temporary name (temporary_names: .NAME.0.part…): named as one, itself or what it
        # links to, or a file known by other names too (a hard link). Where none is, those names (some thirty a
        # source of a many-source run) need no look.
        self.at_temporary_names = False
        for path in self.paths:
            try:
                info = os.stat(path)
            except (OSError, ValueError):  # (ValueError: a NUL in the name)
                self._missing.setdefault(os.path.abspath(path), path)
                continue
            self._by_id.setdefault((info.st_dev, info.st_ino), path)
            name = os.path.basename(os.path.realpath(path) if os.path.islink(path) else path)
            if (name.startswith(".") and name.endswith(".part")) or (stat.S_ISREG(info.st_mode)
                                                                    and info.st_nlink > 1):
                self.at_temporary_names = True

    def named_by(self, path: str | os.PathLike[str]) -> str | None:
        """The input ``path`` is, or None."""
        try:
            info = os.stat(path)
        except (OSError, ValueError):
            return self._missing.get(os.path.abspath(path)) if self._missing else None
        return self._by_id.get((info.st_dev, info.st_ino))


def partial_path(path: Path, keep_suffix: bool = False) -> Path:
    """Where an output is written until it is complete: ``name.partial`` beside it (hashed if too long);
    ``keep_suffix``: ``stem.partial.suffix``, for a file opened by its suffix (a web page)."""
    suffix = path.suffix if keep_suffix else ""
    name = f"{path.name.removesuffix(suffix)}.partial{suffix}"
    if len(name.encode()) > MAX_NAME_BYTES:
        name = f".emopipe-{hashlib.sha1(path.name.encode()).hexdigest()[:16]}.partial{suffix}"
    return path.with_name(name)


TEMPORARY_SLOTS = 16  # writers of one file at once, each under a temporary name of its own


@contextlib.contextmanager
def written_whole(path: Path, *, sync: bool = False) -> Iterator[IO[bytes]]:
    """A file to write ``path``'s bytes into, under a temporary name beside it, that takes ``path``'s name when the
    block ends (``sync``: on disk first) and is removed if it raises: the final name only ever holds a whole file,
    and the last writer to finish wins. Raises OSError.

    The temporary names are ``.NAME.0.part``, ``.NAME.1.part``…: a writer takes the first one that no live process
    holds (an ``flock`` lock, which the kernel drops when its process ends, however it ends — across containers
    and reused pids too, unlike a pid in the name), and removes any other that none holds. So the file a killed
    writer left (SIGKILL, out of memory) is taken over or removed by the next write of ``path``, and one that
    another process is writing is never touched. Where the file system has no locks, a unique name is used
    instead (removed on failure; not after a kill)."""
    try:
        handle, temporary = _temporary_for(path)
    except _NoLocks:
        handle, name = tempfile.mkstemp(dir=path.parent if str(path.parent) else Path("."),
                                        prefix=_temporary_prefix(path), suffix=".part")
        temporary = Path(name)
    with open(temporary, "wb", opener=lambda *_: handle) as file:  # (named as the file: onnx.save reads the name)
        try:
            yield file
            file.flush()
            if sync:
                os.fsync(file.fileno())
            os.chmod(temporary, created_mode())  # (as its neighbours; mkstemp's file is private: 0o600)
            os.replace(temporary, path)
        except BaseException:
            with contextlib.suppress(OSError):
                temporary.unlink()  # (while still locked: no other writer has taken the name meanwhile)
            raise


@contextlib.contextmanager
def staging_folder(path: Path) -> Iterator[Path]:
    """An empty folder beside ``path`` to build a new ``path`` in, this process's alone while the block runs and
    removed when it ends, with whatever is left in it. Raises OSError.

    Its name is one of :func:`written_whole`'s temporary names, ``.NAME.0.part``…, held the same way (an ``flock``
    lock, on the folder), and any other that no live process holds (a killed writer's) is removed: so what a killed
    write left goes with the next write of ``path``, and a folder another process is filling is never touched.
    Where the file system has no locks, a unique name is used instead (removed at the end; not after a kill)."""
    try:
        handle: int | None
        handle, folder = _folder_for(path)
    except _NoLocks:
        handle, folder = None, Path(tempfile.mkdtemp(dir=path.parent if str(path.parent) else Path("."),
                                                     prefix=_temporary_prefix(path), suffix=".part"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)  # (while still locked: no other writer has taken the name)
        if handle is not None:
            os.close(handle)


class _NoLocks(Exception):
    """This file system has no ``flock`` locks."""


def _temporary_prefix(path: Path) -> str:
    return f".{path.name}." if len(path.name.encode()) <= 200 else \
        f".emopipe-{hashlib.sha1(path.name.encode()).hexdigest()[:16]}."  # (a name's limit: 255 bytes)


def temporary_names(path: Path) -> list[Path]:
    """The temporary names :func:`written_whole` and :func:`staging_folder` write ``path`` under: ``.NAME.0.part``…
    (where locks work; elsewhere a unique name, made new)."""
    return [path.with_name(f"{_temporary_prefix(path)}{slot}.part") for slot in range(TEMPORARY_SLOTS)]


def _temporary_for(path: Path) -> tuple[int, Path]:
    """The first temporary name of ``path`` no live process holds, opened, locked and emptied; the others no one
    holds (a killed writer's) removed."""
    names = temporary_names(path)
    taken: tuple[int, Path] | None = None
    for temporary in names:
        handle = _claim(temporary, create=taken is None)
        if handle is None:
            continue
        if taken is None:
            taken = handle, temporary
        else:  # a killed writer's
            with contextlib.suppress(OSError):
                temporary.unlink()
            os.close(handle)
    if taken is None:
        raise OSError(errno.EBUSY, f"{TEMPORARY_SLOTS} processes are writing {path.name} at once")
    os.ftruncate(taken[0], 0)
    return taken


def _folder_for(path: Path) -> tuple[int, Path]:
    """:func:`_temporary_for` for a folder: the first temporary name of ``path`` no live process holds, made and
    locked; the others no one holds (a killed writer's) removed."""
    names = temporary_names(path)
    for name in names:  # a killed writer's
        handle = _claim(name, create=False, folder=True)
        if handle is not None:
            shutil.rmtree(name, ignore_errors=True)
            os.close(handle)
    for name in names:
        try:
            os.mkdir(name)
        except FileExistsError:  # a live writer's (or a file of that name: not ours)
            continue
        try:
            handle = _claim(name, create=False, folder=True)
        except _NoLocks:
            os.rmdir(name)  # (no writer uses these names on this file system: only this empty folder, made just now)
            raise
        if handle is not None:  # (None: another writer removed it, as a killed writer's, before it was locked)
            return handle, name
    raise OSError(errno.EBUSY, f"{TEMPORARY_SLOTS} processes are writing {path.name} at once")


def _claim(temporary: Path, create: bool, folder: bool = False) -> int | None:
    """``temporary`` opened and locked by this process (``create``: made if missing; ``folder``: a folder, never
    made here), or None when it is missing, or held by a live process. Only then is it this process's: it might have
    been renamed into place (or removed) by its holder between the open and the lock."""
    kind = os.O_RDONLY | os.O_DIRECTORY if folder else os.O_RDWR | (os.O_CREAT if create else 0)
    try:
        handle = os.open(temporary, kind | getattr(os, "O_NOFOLLOW", 0), 0o666)
    except FileNotFoundError:
        if create:
            raise
        return None
    except OSError as exc:  # a folder (a file, for a folder), a link or another user's file under that name: not ours
        if exc.errno in (errno.EISDIR, errno.ELOOP) or (exc.errno == errno.ENOTDIR and folder) or (
                exc.errno in (errno.EACCES, errno.EPERM) and os.path.lexists(temporary)):
            return None
        raise
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        if os.stat(temporary, follow_symlinks=False).st_ino == os.fstat(handle).st_ino:
            return handle
    except (BlockingIOError, FileNotFoundError):  # held by a live writer; renamed or removed since it was opened
        pass
    except OSError as exc:
        os.close(handle)
        if exc.errno in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EINVAL):
            if create:  # (no writer uses these names on this file system: only this empty file, made just now)
                with contextlib.suppress(OSError):
                    temporary.unlink()
            raise _NoLocks from None
        raise
    except BaseException:
        os.close(handle)
        raise
    os.close(handle)
    return None


def remove_earlier(paths: Iterable[str | os.PathLike[str]]) -> None:
    """Remove an earlier run's files that this run's outputs replace, before its rows take their final name: left
    beside the new rows, each complete, they would describe another run. OutputError when one cannot be removed."""
    for path in paths:
        try:
            Path(path).unlink(missing_ok=True)
        except OSError as exc:
            raise OutputError(f"cannot replace {path}: {describe_os_error(exc)}") from None


class _FileSink:
    """Unbuffered file: every write reaches the OS at once; a failed write is cut back to the last one.

    A regular file is written under :func:`partial_path` and renamed to its name by :meth:`commit`, so
    a run that fails or is interrupted never leaves a previous good file truncated.
    """

    def __init__(self, path: Path, in_place: bool = False, append: bool = False) -> None:
        ensure_writable(path)
        self.path = path
        self.had_previous = path.exists()
        special = self.had_previous and not path.is_file()  # /dev/null, a FIFO: written in place
        self.partial = None if special or in_place or append else partial_path(path)
        try:
            # append: in place, after the whole rows an earlier writer left (a killed one's cut last row removed)
            kept = cut_to_whole_lines(path) if append and self.had_previous and not special else 0
            self._file = open(self.partial or path, "ab" if kept else "wb", buffering=0)  # noqa: SIM115 — closed by close()
        except OSError as error:
            raise OutputError(f"cannot write output {path}: {describe_os_error(error)}") from error
        self.kept = kept  # bytes of an earlier writer's rows it goes on after (append)
        self._committed = kept  # bytes that form complete rows

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        try:
            while view:
                written = self._file.write(view)
                view = view[written or 0:]
        except BaseException as error:  # includes KeyboardInterrupt: leave no partial row behind
            with contextlib.suppress(OSError):  # best effort: devices and pipes cannot be truncated
                self._file.truncate(self._committed)
                self._file.seek(self._committed)
            if isinstance(error, OSError):
                raise OutputError(f"cannot write output {self.path}: {describe_os_error(error)}") from error
            raise
        self._committed += len(data)

    def close(self) -> None:
        self._file.close()

    def takes_name(self, complete: bool | None) -> bool:
        """Whether :meth:`commit` with ``complete`` renames the rows to their final name."""
        return self.partial is not None and self.partial.exists() and bool(
            complete or (complete is None and not self.had_previous))

    def commit(self, complete: bool | None = True) -> Path:
        """Give the rows their final name when ``complete`` — or when there is no earlier file there to
        lose (``complete=None``); otherwise they stay under the partial name. Returns where they are."""
        self.close()
        if self.partial is None or not self.partial.exists():
            return self.path
        if self.takes_name(complete):
            try:
                os.replace(self.partial, self.path)
            except OSError as error:
                raise OutputError(f"cannot write output {self.path}: {describe_os_error(error)}") from error
            return self.path
        return self.partial


class _StreamSink:
    """Standard output (``-``): written and flushed per batch, never closed."""

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream
        self.path = STDOUT

    def write(self, data: bytes) -> None:
        try:
            buffer = getattr(self._stream, "buffer", None)
            if buffer is not None:
                self._stream.flush()
                buffer.write(data)
                buffer.flush()
            else:
                self._stream.write(data.decode("utf-8"))
                self._stream.flush()
        except BrokenPipeError:  # its reader has gone (`| head`): the command ends quietly, as other tools do
            raise
        except OSError as error:
            raise OutputError(f"cannot write results to standard output: {error.strerror or error}") from error

    def close(self) -> None:
        pass

    def takes_name(self, complete: bool | None) -> bool:
        return False

    def commit(self, complete: bool | None = True) -> str:
        return self.path


# -- writers ---------------------------------------------------------------------------------


class RecordWriter:
    """Streams :class:`FaceRecord` rows to one output; use as a context manager."""

    format = ""

    def __init__(self, path: str | os.PathLike[str], labels: Sequence[str], landmarks: bool = False,
                 detected: bool = False, files: bool = False, in_place: bool = False,
                 append: bool = False) -> None:
        labels = tuple(labels)
        if len(labels) < 2 or len(set(labels)) != len(labels) or not all(isinstance(x, str) and x for x in labels):
            raise ValueError(f"labels must be 2 or more distinct class names, got {labels}")
        self.labels = labels
        self.landmarks = landmarks
        self.detected = detected  # write the `detected` column
        self.files = files  # write the `file` column (a folder of images: the image each row is from)
        self.rows_written = 0
        # close() also commits (the rows get the final name); a runner that knows better sets this False
        # and calls commit() itself once it knows whether the run completed
        self.commit_on_close = True
        self._sink: _FileSink | _StreamSink = (_StreamSink(sys.stdout) if str(path) == STDOUT
                                               else _FileSink(Path(path), in_place, append))
        self.path = self._sink.path
        self._closed = False
        try:
            if not (isinstance(self._sink, _FileSink) and self._sink.kept):  # (appended to: it has its header)
                self._sink.write(self._header())
        except BaseException:
            self._sink.close()
            raise

    def _header(self) -> bytes:
        return b""

    def _rows(self, records: Sequence[FaceRecord]) -> bytes:
        raise NotImplementedError

    def write(self, records: Sequence[FaceRecord]) -> None:
        """Write one batch of rows and hand it to the OS before returning."""
        if self._closed:
            raise ValueError(f"writer for {self.path} is closed")
        if not records:
            return
        for record in records:
            if record.probabilities.shape[0] != len(self.labels) or record.label not in self.labels:
                raise ValueError(f"record has {record.probabilities.shape[0]} probabilities and label "
                                 f"{record.label!r}; this writer expects {len(self.labels)}: {', '.join(self.labels)}")
        self._sink.write(self._rows(records))
        self.rows_written += len(records)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._sink.close()
            if self.commit_on_close:
                self.commit()

    def takes_name(self, complete: bool | None) -> bool:
        """Whether :meth:`commit` with ``complete`` renames the rows from their partial name to the final one."""
        return self._sink.takes_name(complete)

    def commit(self, complete: bool | None = True) -> str:
        """Close, and put the rows under the final name if ``complete`` (None: if nothing is there yet);
        returns where the rows are (the final name, or the partial one beside it)."""
        self._closed = True
        return str(self._sink.commit(complete))

    def __enter__(self) -> RecordWriter:
        return self

    def __exit__(self, exc_type: object, *exc_info: object) -> None:
        self.commit_on_close = False
        self.close()
        self.commit(complete=exc_type is None or None)


def _rounded(values: np.ndarray, decimals: int) -> np.ndarray:
    """``values.round(decimals)``, but huge finite values (a checkpoint's outputs may be near ±1e308) stay
    themselves: rounding scales by 10**decimals first, which overflows to ±inf (they are whole numbers anyway)."""
    with np.errstate(over="ignore", invalid="ignore"):
        return np.where(np.abs(values) < 1e300, values.round(decimals), values)


def written_timestamp(seconds: float) -> float:
    """A timestamp as the rows files write it (rounded as :func:`_columns_of` rounds it): the API's records carry
    what reading the rows back gives (0.3, not 0.30000000000000004)."""
    return float(_rounded(np.array([seconds], dtype=np.float64), VALUE_DECIMALS)[0])


def _columns_of(records: Sequence[FaceRecord], landmarks: bool) -> dict[str, Any]:
    """The batch's numbers, rounded once for all its rows (vectorised: rounding per value is slow); one
    rounding call per precision, as the writer thread does this every frame."""
    values = _rounded(np.array([(r.timestamp_s, r.score, r.valence, r.arousal) for r in records],
                               dtype=np.float64), VALUE_DECIMALS).T.tolist()
    columns: dict[str, Any] = {
        "timestamp": values[0],
        "box": _rounded(np.array([r.box for r in records], dtype=np.float64), PIXEL_DECIMALS).tolist(),
        "score": values[1],
        "probabilities": np.stack([r.probabilities for r in records]).round(VALUE_DECIMALS).tolist(),
        "valence": values[2],
        "arousal": values[3],
    }
    if landmarks:
        columns["landmarks"] = [None if r.landmarks is None else np.round(r.landmarks, PIXEL_DECIMALS).tolist()
                                for r in records]
    return columns


class CsvRecordWriter(RecordWriter):
    format = "csv"

    def _header(self) -> bytes:
        return self._encode([record_columns(self.labels, self.landmarks, self.detected, self.files)])

    @staticmethod
    def _encode(rows: list[list[Any]]) -> bytes:
        text = io.StringIO()
        csv.writer(text, lineterminator="\n").writerows(rows)
        return text.getvalue().encode("utf-8")

    def _rows(self, records: Sequence[FaceRecord]) -> bytes:
        c = _columns_of(records, self.landmarks)
        rows = []
        for i, r in enumerate(records):
            # (names as valid UTF-8: a file name's bytes that are not, as \\xNN)
            row = [text_name(r.source), r.frame, *([text_name(r.file or "")] if self.files else []),
                   c["timestamp"][i], r.track_id,
                   *c["box"][i], c["score"][i],
                   *([int(r.detected)] if self.detected else []), r.label,
                   *c["probabilities"][i], c["valence"][i], c["arousal"][i]]
            if self.landmarks:
                points = c["landmarks"][i]
                row += [v for point in points for v in point] if points is not None else [""] * (2 * NUM_LANDMARKS)
            rows.append(row)
        return self._encode(rows)


class JsonlRecordWriter(RecordWriter):
    format = "jsonl"

    def _rows(self, records: Sequence[FaceRecord]) -> bytes:
        c = _columns_of(records, self.landmarks)
        lines = []
        for i, r in enumerate(records):
            x1, y1, x2, y2 = c["box"][i]
            row: dict[str, Any] = {
                "source": text_name(r.source), "frame": r.frame,
                **({"file": r.file if r.file is None else text_name(r.file)} if self.files else {}),
                "timestamp_s": c["timestamp"][i], "track_id": r.track_id,
                "x1": x1, "y1": y1, "x2": x2, "y2": y2, "score": c["score"][i],
                **({"detected": r.detected} if self.detected else {}), "label": r.label,
                "probabilities": dict(zip(self.labels, c["probabilities"][i], strict=True)),
                "valence": c["valence"][i], "arousal": c["arousal"][i],
            }
            if self.landmarks:
                row["landmarks"] = c["landmarks"][i]
            lines.append(json.dumps(row, ensure_ascii=False))
        return ("\n".join(lines) + "\n").encode("utf-8")


WRITERS: dict[str, type[RecordWriter]] = {"csv": CsvRecordWriter, "jsonl": JsonlRecordWriter}


def output_format(path: str | os.PathLike[str], fmt: str | None = None) -> str:
    """``csv`` or ``jsonl``: ``fmt`` if given, else from the extension (``-`` and no extension: csv).
    A format the extension contradicts (``jsonl`` into ``.csv``) is refused: the file would not read back."""
    suffix = Path(str(path)).suffix.lower() if str(path) != STDOUT else ""
    if fmt is not None:
        if fmt not in WRITERS:
            raise UsageError(f"unknown output format {fmt!r}; choose from {', '.join(WRITERS)}")
        if FORMATS.get(suffix, fmt) != fmt:
            raise UsageError(f"--format {fmt} does not fit {str(path)!r}, a {FORMATS[suffix]} name: "
                             "name the file for its format, or leave --format out")
        return fmt
    if not suffix:
        return "csv"
    if suffix not in FORMATS:
        raise UsageError(f"cannot tell the output format from {str(path)!r}; use a name ending in "
                         f"{', '.join(FORMATS)} or give the format explicitly")
    return FORMATS[suffix]


def open_writer(path: str | os.PathLike[str], *, fmt: str | None = None, labels: Sequence[str],
                landmarks: bool = False, detected: bool = False, files: bool = False,
                in_place: bool = False, append: bool = False) -> RecordWriter:
    """Open ``path`` for records now; ``-`` writes to standard output.

    The rows go under :func:`partial_path` until :meth:`RecordWriter.commit`; ``in_place`` writes the file
    itself from the start (live runs: a file that grows while the camera runs, for tools that follow it);
    ``append`` (in place too) goes on after the rows already there (a camera moved to another Ray worker).

    Raises :class:`OutputError` at once when the path cannot be written, so no work is wasted.
    """
    return WRITERS[output_format(path, fmt)](path, labels, landmarks, detected, files, in_place, append)


def cut_to_whole_lines(path: Path) -> int:
    """Cut ``path`` back to its last complete line (a writer killed mid-write may leave part of a row); its size."""
    with open(path, "r+b") as file:
        size = end = file.seek(0, os.SEEK_END)
        while end > 0:
            start = max(0, end - 65536)
            file.seek(start)
            newline = file.read(end - start).rfind(b"\n")
            if newline >= 0:
                end = start + newline + 1
                break
            end = start
        if end < size:
            file.truncate(end)
        return end


def rows_so_far(path: Path) -> tuple[int, int | None]:
    """(rows, the last row's frame) of the complete rows in a rows file an earlier writer left; (0, None) without
    one. Read through once: the rows are counted."""
    lines, whole = 0, b""
    try:
        with open(path, "rb") as file:
            for line in file:
                if line.endswith(b"\n"):
                    lines, whole = lines + 1, line
    except FileNotFoundError:
        return 0, None
    except OSError as exc:
        raise OutputError(f"cannot read {path} to go on after its rows: {describe_os_error(exc)}") from None
    csv_file = path.suffix.lower() == ".csv"
    rows = max(0, lines - 1) if csv_file else lines  # (a CSV's header)
    last = None
    if rows:
        text = whole.decode("utf-8", errors="replace")
        with contextlib.suppress(ValueError, KeyError, IndexError, TypeError):
            # (the frame is a CSV row's second column: record_columns)
            last = int(next(csv.reader([text]))[1]) if csv_file else int(json.loads(text)["frame"])
    return rows, last
