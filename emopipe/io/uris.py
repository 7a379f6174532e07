"""What a source string names (a file, a folder, a camera, a network stream), and how to show it safely.

Pure string and path checks: nothing here opens anything or imports OpenCV, so the command line and
the run configuration can classify sources cheaply.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit

from emopipe.errors import UsageError
from emopipe.registry import Registry

STREAM_SCHEMES = frozenset({"rtsp", "rtsps", "rtmp", "rtmps", "http", "https", "udp", "tcp", "srt", "rtp", "mmsh"})
WEBCAM_PREFIX = "webcam:"
IMAGE_SUFFIXES = frozenset({
    ".bmp", ".dib", ".jpg", ".jpeg", ".jpe", ".jp2", ".png", ".webp", ".avif", ".tif", ".tiff",
    ".pbm", ".pgm", ".ppm", ".pxm", ".pnm", ".sr", ".ras", ".exr", ".hdr", ".pic",
})
# query parameters whose values are secrets (access tokens in camera and signed URLs)
_SECRET_PARAMETERS = re.compile(r"(token|key|pass|pwd|secret|auth|sig|signature|credential)", re.IGNORECASE)
# name=value where the name is a secret's: in a query the value runs to the next & or ;, in a path (cameras that
# take credentials there: .../user=admin_password=secret_channel=1.sdp) also to the next _ or /
_SECRET_NAME = r"[\w.-]*(?:token|key|pass|pwd|secret|auth|sig|signature|credential)[\w.-]*="
_SECRET_IN_QUERY = re.compile(rf"((?:^|(?<=[&;])){_SECRET_NAME})[^&;]*", re.IGNORECASE)
_SECRET_IN_PATH = re.compile(rf"((?<=[_/;&]){_SECRET_NAME})[^_/;&]*", re.IGNORECASE)
# a password holding an unencoded "/", "?" or "#" (user:pa/ss@host) ends the URL's host part early, for urlsplit as for
# FFmpeg (which then cannot connect, and says so with the URL): user, password, the rest. (Not a port: host:554/a@b)
_LOOSE_PASSWORD = re.compile(r"^([^:/?#]+://[^:/?#@]*):(?!\d*[/?#])([^@]*[/?#][^@]*)@(.*)$", re.DOTALL)

# Live readers by URI scheme beyond OpenCV's own: a factory (uri, LiveOptions) -> Capture that raises
# SourceUnavailableError when it cannot open. Installed packages add theirs under the entry-point group
# "emopipe.captures" (a camera maker's SDK: docs/live.md, "Cameras of your own"); tests register in-process ones.
# A plug-in cannot take a scheme OpenCV's streams or webcams already answer to.
CAPTURES: Registry[object] = Registry(
    "capture scheme", {}, plugins="emopipe.captures",
    valid_name=lambda name: re.fullmatch(r"[a-z][a-z0-9+.-]*", name) is not None and name not in STREAM_SCHEMES
    and name != WEBCAM_PREFIX.rstrip(":"))


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
    """Is ``uri`` a camera or network stream (rather than a file, image or folder)? Anything written
    ``webcam:…`` is meant as a camera: :func:`check_url` refuses one that is not ``webcam:N``."""
    if uri.strip().startswith(WEBCAM_PREFIX):
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
    loose = _LOOSE_PASSWORD.match(uri)
    if loose is not None:
        uri = f"{loose.group(1)}:***@{loose.group(3)}"
    try:
        parts = urlsplit(uri)
    except ValueError:  # not a well-formed URL (an unclosed IPv6 bracket): no password after "user:" all the same
        return re.sub(r"^([^:/]+://[^:@/]*):[^@/]*@", r"\1:***@", uri)
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, host = netloc.rsplit("@", 1)
        user, has_password, _ = userinfo.partition(":")
        netloc = f"{user}:***@{host}" if has_password else netloc
    query = parts.query
    if query and _SECRET_PARAMETERS.search(query):  # (cameras separate parameters with ";" as often as "&")
        query = _SECRET_IN_QUERY.sub(lambda m: f"{m.group(1)}***", query)
    # some cameras take credentials in the path (.../user=admin_password=secret_channel=1.sdp)
    path = _SECRET_IN_PATH.sub(lambda m: f"{m.group(1)}***", parts.path) if "=" in parts.path else parts.path
    return urlunsplit((parts.scheme, netloc, path, query, parts.fragment))


def check_url(uri: str) -> None:
    """UsageError for a stream URL that cannot be parsed (an unclosed IPv6 bracket, a port out of range), or a
    camera not written webcam:N."""
    if uri.strip().startswith(WEBCAM_PREFIX):
        if webcam_index(uri) is None:  # (not "input not found", exit 3: the form is wrong, not a file missing)
            raise UsageError(f"a camera is written webcam:N (N = 0, 1, …: its index), got {uri!r}; a file of "
                             f"that name: ./{uri.strip()}")
        return
    if _LOOSE_PASSWORD.match(uri) is not None:  # (urlsplit's own error would quote a piece of the password)
        raise UsageError(f"{redact_uri(uri)}: its password holds a '/', '?' or '#', which end the host part of a "
                         "URL; write them percent-encoded (%2F, %3F, %23)")
    try:
        parts = urlsplit(uri)
        parts.port  # noqa: B018 - parsing the port is the check
    except ValueError as exc:
        raise UsageError(f"{redact_uri(uri)}: not a valid URL ({exc})") from None
