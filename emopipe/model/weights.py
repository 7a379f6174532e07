"""Model weights: a manifest of published files, one models directory, verified downloads.

Files are kept under their upstream names in one directory, so an offline machine can be seeded by
copying them in. The directory is, in order: the ``--models-dir`` flag, ``$EMOPIPE_HOME``, the
checkout's ``models/`` when running from a source checkout, else ``$XDG_CACHE_HOME/emopipe``
(``~/.cache/emopipe``). Every file is checked against its sha256 before first use; a verified
file records its size, mtime and hash in a small sidecar so later starts need not hash it again.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import json
import logging
import os
import re
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from emopipe.errors import WeightsError
from emopipe.io.records import written_whole
from emopipe.model.places import CHECKOUT_MODELS as _CHECKOUT_MODELS
from emopipe.model.places import cache_root as cache_root  # (re-exported: where callers have always found it)
from emopipe.model.places import models_dir as models_dir

logger = logging.getLogger(__name__)
# Where "using your weights file" is said: once a run. A worker of a run over several processes leaves it to its driver
# (every worker saying it repeated it N times); their other warnings stay theirs.
YOURS_LOGGER = f"{__name__}.yours"

_PACKAGE = Path(__file__).resolve().parents[1]  # emopipe/
_PACKAGED_MANIFEST = _PACKAGE / "manifest.json"  # placed there in wheels
_CHUNK = 1 << 20
_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class WeightSpec:
    """One published file: where it comes from and how to recognise it."""

    name: str
    file: str
    url: str
    licence: str
    description: str = ""
    sha256: str | None = None
    sha256_prefix: str | None = None  # when upstream publishes only a prefix (torch.hub file names)
    size: int | None = None
    classes: int | None = None

    def __post_init__(self) -> None:
        # A mirror's own manifest (EMOPIPE_MANIFEST) is written by hand: a size given as "56087163" was an internal
        # error (TypeError) mid-download, and a hash in capitals (as some tools print it) refused every download as
        # "expected A59…, found a59…" — the same hash.
        for field in ("file", "url", "licence", "description"):
            if not isinstance(getattr(self, field), str):
                raise ValueError(f"manifest entry {self.name!r}: {field} must be a string")
        for field in ("size", "classes"):
            value = getattr(self, field)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
                raise ValueError(f"manifest entry {self.name!r}: {field} must be a whole number ≥ 1, not {value!r}")
        for field in ("sha256", "sha256_prefix"):
            value = getattr(self, field)
            if value is not None:
                if not isinstance(value, str) or not re.fullmatch(r"[0-9a-fA-F]+", value.strip()):
                    raise ValueError(f"manifest entry {self.name!r}: {field} must be hexadecimal digits, not {value!r}")
                object.__setattr__(self, field, value.strip().lower())
        if self.sha256 is not None and len(self.sha256) != 64:
            raise ValueError(f"manifest entry {self.name!r}: sha256 must have 64 hexadecimal digits, "
                             f"not {len(self.sha256)}")
        if not (self.sha256 or self.sha256_prefix):
            raise ValueError(f"manifest entry {self.name!r} needs sha256 or sha256_prefix")
        # The file is a name in the models directory: '../x' or '/x' downloaded, and was told verified, outside it.
        if self.file in ("", ".", "..") or Path(self.file).name != self.file or "\\" in self.file:
            raise ValueError(f"manifest entry {self.name!r}: file must be a plain file name (it goes in the models "
                             f"directory), not {self.file!r}")

    @property
    def expected_hash(self) -> str:
        return self.sha256 or f"{self.sha256_prefix}…"

    def hash_matches(self, digest: str) -> bool:
        return digest == self.sha256 if self.sha256 else digest.startswith(self.sha256_prefix or "\0")


def manifest_path() -> Path:
    """``$EMOPIPE_MANIFEST`` (a mirror's own manifest), else the checkout's, else the packaged copy."""
    if env := os.environ.get("EMOPIPE_MANIFEST"):
        return Path(env)
    checkout = _CHECKOUT_MODELS / "manifest.json"
    return checkout if checkout.is_file() else _PACKAGED_MANIFEST


def load_manifest(path: Path | None = None) -> dict[str, WeightSpec]:
    path = path or manifest_path()
    try:
        entries = json.loads(path.read_text())
        if not isinstance(entries, dict):
            raise ValueError(f"a JSON object of model name → entry is expected, not a {type(entries).__name__}")
        return {name: _entry(name, fields) for name, fields in entries.items()}
    except (OSError, ValueError, TypeError) as exc:
        raise WeightsError(f"cannot read the weights manifest {path}: {exc}") from None


_FIELDS = {f for f in WeightSpec.__dataclass_fields__ if f != "name"}
_REQUIRED = ("file", "url", "licence")


def _entry(name: str, fields: object) -> WeightSpec:
    """One manifest entry, its missing or unknown fields said by name (not as the dataclass's TypeError)."""
    if not isinstance(fields, dict):
        raise ValueError(f"manifest entry {name!r} must be a JSON object, not {type(fields).__name__}")
    if missing := [f for f in _REQUIRED if f not in fields]:
        raise ValueError(f"manifest entry {name!r} lacks {', '.join(missing)}")
    if unknown := sorted(set(fields) - _FIELDS):
        raise ValueError(f"manifest entry {name!r} has unknown field(s) {', '.join(unknown)}; "
                         f"known: {', '.join(sorted(_FIELDS))}")
    return WeightSpec(name=name, **fields)


def spec(name: str) -> WeightSpec:
    entries = load_manifest()
    if name not in entries:
        raise WeightsError(f"unknown model {name!r}; known: {', '.join(entries)}")
    return entries[name]


_digests: dict[tuple[str, str], str] = {}  # (file, its size and modification time) → sha256, in this process


def sha256_of(path: Path) -> str:
    """The file's SHA-256, hashed once a process while the file is unchanged: a run with ``--weights`` reports it
    and keys its caches by it, and EmoNet's ~60 MB took 0.15 s to hash on the GPU hosts (at each start-up)."""
    key = (str(Path(path).resolve()), _stamp(path))
    if key not in _digests:
        digest = hashlib.sha256()
        with open(path, "rb") as f:
            while chunk := f.read(_CHUNK):
                digest.update(chunk)
        _digests[key] = digest.hexdigest()
    return _digests[key]


def _sidecar(path: Path) -> Path:
    return path.with_name(f".{path.name}.verified")


def _stamp(path: Path) -> str:
    st = path.stat()
    return f"{st.st_size} {st.st_mtime_ns}"


def check_file(spec: WeightSpec, path: Path) -> tuple[bool, str]:
    """(matches, digest); a sidecar written after the last successful check spares re-hashing."""
    sidecar = _sidecar(path)
    try:
        stamp, digest = sidecar.read_text().split("\n")[:2]
        if stamp == _stamp(path) and spec.hash_matches(digest):
            _digests[(str(path.resolve()), stamp)] = digest  # (the run's sha256_of takes it from here)
            return True, digest
    except (OSError, ValueError):
        pass
    digest = sha256_of(path)
    ok = spec.hash_matches(digest) and (spec.size is None or path.stat().st_size == spec.size)
    if ok:
        with contextlib.suppress(OSError):  # a read-only models dir still works: it just hashes again next time
            sidecar.write_text(f"{_stamp(path)}\n{digest}\n")
    return ok, digest


@dataclass(frozen=True)
class WeightStatus:
    spec: WeightSpec
    path: Path
    state: str  # "verified", "missing" or "mismatch"
    digest: str | None = None


def status(spec: WeightSpec, directory: Path) -> WeightStatus:
    path = directory / spec.file
    if not path.is_file():
        return WeightStatus(spec, path, "missing")
    ok, digest = check_file(spec, path)
    return WeightStatus(spec, path, "verified" if ok else "mismatch", digest)


def _manual_hint(spec: WeightSpec, target: Path) -> str:
    return f"download {spec.url} yourself and put it at {target} (sha256 {spec.expected_hash})"


def download(spec: WeightSpec, directory: Path, *, progress: bool = True) -> Path:
    """Fetch ``spec`` into ``directory``: temporary file, sha256 checked, then an atomic rename. The temporary file
    is :func:`~emopipe.io.records.written_whole`'s: one a killed download left goes with the next download."""
    target = directory / spec.file
    if target.is_dir():  # said now, not after the whole download
        raise WeightsError(f"{target} is a directory, where the {spec.name} weights file must go: move it away")
    for folder in (directory, *directory.parents):  # the first that is there must be a folder (mkdir: "File exists")
        if folder.exists():
            if not folder.is_dir():
                where = f" ({folder} is)" if folder != directory else ""
                raise WeightsError(f"the models directory {directory} is not a directory: a file is in its place"
                                   f"{where}; give a folder with --models-dir or $EMOPIPE_HOME")
            break
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise WeightsError(f"cannot write to the models directory {directory}: {exc.strerror or exc}") from None
    logger.warning("downloading %s (%s) — licence: %s", spec.name, spec.url, spec.licence)
    try:
        with written_whole(target, sync=True) as out:
            digest, received, expected = _stream(spec, out, progress, target)
            if expected is not None and received != expected:
                raise WeightsError(f"download of {spec.file} stopped after {received} of {expected} bytes; "
                                   f"{_manual_hint(spec, target)}")
            if spec.size is not None and received != spec.size:
                raise WeightsError(f"downloaded {spec.file} has {received} bytes, expected {spec.size}; "
                                   f"{_manual_hint(spec, target)}")
            if not spec.hash_matches(digest):
                raise WeightsError(f"sha256 mismatch for {spec.file} from {spec.url}: expected {spec.expected_hash}, "
                                   f"found {digest}; the download was discarded")
    except (OSError, _WriteFailed) as exc:  # (the download's own errors are WeightsErrors: these are the directory's)
        cause = exc.error if isinstance(exc, _WriteFailed) else exc
        raise WeightsError(f"cannot write to the models directory {directory}: {cause.strerror or cause}; "
                           "nothing was saved") from None
    with contextlib.suppress(OSError):  # (as check_file's: without it, the next start hashes the file again)
        _sidecar(target).write_text(f"{_stamp(target)}\n{digest}\n")
    logger.info("saved %s (sha256 %s verified)", target, digest)
    return target


class _WriteFailed(Exception):
    """Writing the download to the models directory failed (``error``): said as that, not as a failed download."""

    def __init__(self, error: OSError) -> None:
        super().__init__(str(error))
        self.error = error


def _stream(spec: WeightSpec, out: IO[bytes], progress: bool, target: Path) -> tuple[str, int, int | None]:
    digest = hashlib.sha256()
    received = 0
    request = urllib.request.Request(spec.url, headers={"User-Agent": "emopipe"})
    try:
        with urllib.request.urlopen(request, timeout=_TIMEOUT_S) as response:
            length = response.headers.get("Content-Length")
            expected = int(length) if length and length.isdigit() else spec.size
            limit = min(n for n in (expected, spec.size, sys.maxsize) if n is not None)
            for chunk in _progress(_chunks(response), expected, spec.file, progress):
                received += len(chunk)
                if received > limit:  # stopped now: without a Content-Length, a wrong URL could send anything
                    raise WeightsError(f"download of {spec.file} from {spec.url} sent more than the {limit} bytes "
                                       f"expected and was discarded; {_manual_hint(spec, target)}")
                try:
                    out.write(chunk)
                except OSError as exc:  # the models directory's (disk full, quota), not the download's
                    raise _WriteFailed(exc) from None
                digest.update(chunk)
    except (WeightsError, _WriteFailed):
        raise
    except urllib.error.HTTPError as exc:
        hint = _manual_hint(spec, target)
        raise WeightsError(f"cannot download {spec.name}: HTTP {exc.code} from {spec.url}; {hint}") from None
    except (TimeoutError, urllib.error.URLError, http.client.HTTPException, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", None) or exc
        hint = _manual_hint(spec, target)
        raise WeightsError(f"cannot download {spec.name} from {spec.url} ({reason}); {hint}") from None
    return digest.hexdigest(), received, expected


def _chunks(response) -> Iterator[bytes]:
    while chunk := response.read(_CHUNK):
        yield chunk


def _progress(chunks: Iterator[bytes], total: int | None, label: str, enabled: bool) -> Iterator[bytes]:
    if not enabled:
        yield from chunks
        return
    from tqdm import tqdm

    # (disable=None: none where stderr is no terminal — a log would get a line per redraw)
    with tqdm(total=total, unit="B", unit_scale=True, unit_divisor=1024, desc=label, file=sys.stderr,
              leave=False, disable=None) as bar:
        for chunk in chunks:
            bar.update(len(chunk))
            yield chunk


def ensure(name: str, directory: str | os.PathLike[str] | None = None, *, allow_download: bool = True,
           progress: bool = True) -> Path:
    """Path to a verified copy of ``name``, downloading it on first use."""
    entry = spec(name)
    where = models_dir(directory)
    found = status(entry, where)
    if found.state == "verified":
        return found.path
    if found.state == "mismatch":
        other = next((e.name for e in load_manifest().values() if found.digest and e.hash_matches(found.digest)), None)
        which = f", the {other} file" if other else ""  # (the 5-class weights copied in under the 8-class name)
        raise WeightsError(
            f"{found.path} does not match the manifest (expected sha256 {entry.expected_hash}, found {found.digest}"
            f"{which}): delete it to download it again, or replace it with {entry.url}"
        )
    if not allow_download:
        raise WeightsError(f"{entry.name} is not in {where}; {_manual_hint(entry, found.path)}")
    return download(entry, where, progress=progress)


def user_file(path: str | os.PathLike[str]) -> Path:
    """A user's own weights file (``--weights``): used as given, its hash reported but not required."""
    p = Path(path).expanduser()
    if p.is_dir():
        raise WeightsError(f"weights file {p} is a directory: give the checkpoint file (.pth) itself")
    if not p.is_file():
        raise WeightsError(f"weights file not found: {p}")
    logging.getLogger(YOURS_LOGGER).warning("using your weights file %s (sha256 %s) — not checked against the manifest",
                                            p, sha256_of(p))
    return p
