"""What a source string names (a file, a folder, a camera, a network stream), and how to show it safely.

Pure string and path checks: nothing here opens anything or imports OpenCV, so the command line and
the run configuration can classify sources cheaply.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from emopipe.registry import Registry

STREAM_SCHEMES = frozenset({"rtsp", "rtsps", "rtmp", "rtmps", "http", "https", "udp", "tcp", "srt", "rtp", "mmsh"})
WEBCAM_PREFIX = "webcam:"
IMAGE_SUFFIXES = frozenset({
    ".bmp", ".dib", ".jpg", ".jpeg", ".jpe", ".jp2", ".png", ".webp", ".avif", ".tif", ".tiff",
    ".pbm", ".pgm", ".ppm", ".pxm", ".pnm", ".sr", ".ras", ".exr", ".hdr", ".pic",
})
# query parameters whose values are secrets (access tokens in camera and signed URLs)
_SECRET_PARAMETERS = re.compile(r"(token|key|pass|pwd|secret|auth|sig|signature|credential)", re.IGNORECASE)

# Live readers by URI scheme beyond OpenCV's own (e.g. an in-process paced source for benchmarks and tests):
# a factory (uri, LiveOptions) -> Capture that raises SourceUnavailableError when it cannot open.
CAPTURES: Registry[object] = Registry("capture scheme", {})


def webcam_index(uri: str) -> int | None:
    """N for ``webcam:N``, else None."""
    match = re.fullmatch(r"webcam:(\d+)", uri.strip())
    return int(match.group(1)) if match else None


def scheme(uri: str) -> str | None:
    match = re.match(r"^([A-Za-z][A-Za-z0-9+.-]*)://", uri)
    return match.group(1).lower() if match else None


def is_url(uri: str) -> bool:
    return scheme(uri) is not None


def is_live(uri: str) -> bool:
    """Is ``uri`` a camera or network stream (rather than a file, image or folder)?"""
    if webcam_index(uri) is not None:
        return True
    found = scheme(uri)
    return found is not None and (found in STREAM_SCHEMES or found in CAPTURES)


def redact_uri(uri: str) -> str:
    """``uri`` without its secrets, for rows, logs, messages and metric labels.

    A password becomes ``***`` (the user name is kept: it tells cameras apart), and so does the value of
    any query parameter named like a secret (token, key, password, signature…). The host is kept as
    written, so IPv6 literals keep their brackets. Paths and anything that is not a URL are unchanged.
    """
    if scheme(uri) is None:
        return uri
    parts = urlsplit(uri)
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, host = netloc.rsplit("@", 1)
        user, has_password, _ = userinfo.partition(":")
        netloc = f"{user}:***@{host}" if has_password else netloc
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        if any(_SECRET_PARAMETERS.search(k) for k, _ in pairs):
            query = urlencode([(k, "***" if _SECRET_PARAMETERS.search(k) else v) for k, v in pairs], safe="*")
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
