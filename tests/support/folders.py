"""Whether an emopipe run holds an output folder (emopipe.io.records.hold_folder), asked as another process would."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from emopipe.io.records import FOLDER_LOCK


def held(folder: Path) -> bool:
    """Whether a run holds ``folder`` (its lock file is locked); this takes the lock for an instant if free."""
    try:
        fd = os.open(folder / FOLDER_LOCK, os.O_RDWR)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # (releases it if this took it)
    return False
