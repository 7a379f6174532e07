"""Whether an emopipe run holds an output folder (emopipe.io.records.hold_folder) or an output name
(emopipe.io.records.hold_outputs), asked as another process would."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from emopipe.io.records import FOLDER_LOCK, lock_path


def held(folder: Path) -> bool:
    """Whether a run holds ``folder`` (its lock file is locked); this takes the lock for an instant if free."""
    return locked(folder / FOLDER_LOCK)


def held_output(path: Path) -> bool:
    """Whether a run holds the output name ``path`` (its hidden ``.NAME.lock`` is locked)."""
    return locked(lock_path(path))


def locked(lock: Path) -> bool:
    """Whether the lock file ``lock`` is locked by a run; this takes the lock for an instant if free."""
    try:
        fd = os.open(lock, os.O_RDWR)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # (releases it if this took it)
    return False
