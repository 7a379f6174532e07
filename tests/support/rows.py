"""The rows files of a many-source run, read and compared (one process's against workers')."""

from __future__ import annotations

import csv
from pathlib import Path


def rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as file:
        return list(csv.DictReader(file))


def all_rows(out: Path) -> dict[str, list[dict[str, str]]]:
    return {p.name: rows(p) for p in sorted(out.glob("*.emotions.csv"))}


NETWORK_OUTPUTS = ("valence", "arousal")  # and every p_<label>


def same_rows(a: dict[str, list[dict[str, str]]], b: dict[str, list[dict[str, str]]]) -> bool:
    """The same files, rows, boxes, tracks and labels; the network's outputs equal to 1e-5 (a worker runs
    PyTorch with one thread, this process with two: float sums in another order change the 6th decimal)."""
    if a.keys() != b.keys():
        return False
    for name in a:
        if len(a[name]) != len(b[name]):
            return False
        for x, y in zip(a[name], b[name]):
            numeric = [k for k in x if k in NETWORK_OUTPUTS or k.startswith("p_")]
            if {k: v for k, v in x.items() if k not in numeric} != {k: v for k, v in y.items() if k not in numeric}:
                return False
            if any(abs(float(x[k]) - float(y[k])) > 1e-5 for k in numeric):
                return False
    return True


def same_as_whole(out: Path, whole: Path, stem: str = "talk") -> None:
    """A video run in parts (``out``) left the files its run whole left (``whole``): the rows and segments byte for byte
    (the tracks are made from the rows' six decimals), and no part's file."""
    for name in (f"{stem}.emotions.csv", f"{stem}.emotions.segments.csv"):
        assert (out / name).read_bytes() == (whole / name).read_bytes(), name
    names = {run: sorted(p.name for p in run.iterdir()) for run in (out, whole)}
    assert names[out] == names[whole]  # no part's file left
