"""Video files decoded frame by frame on the CPU with OpenCV's FFmpeg backend (see emopipe.io.sources for
how damaged files are read and reported; emopipe.io.nvdec decodes on the GPU instead)."""

from __future__ import annotations

import logging
import math
import os
import subprocess
import threading
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from emopipe.errors import InputUnreadableError, UsageError
from emopipe.io.encode import find_ffmpeg
from emopipe.io.records import text_name
from emopipe.io.sources import (
    Source,
    _as_bgr,
    _check_arguments,
    _check_file,
    _quiet_ffmpeg_logs,
    _SourceBase,
    format_time,
)
from emopipe.types import Frame, HostFrame, SourceInfo

logger = logging.getLogger(__name__)


_MAX_FPS = 1000.0  # above this a container's rate is a time base, not a frame rate


_READ_RETRIES = 8  # consecutive failed reads before the declared end that end the stream (at least)
_SKIP_LIMIT_S = 10.0  # a damaged stretch up to this long (at the declared rate) is skipped, not the end


_ESTIMATED_COUNT_SLACK_S = 1.0  # tolerated shortfall where the frame count is estimated from the duration


def _container(path: Path) -> str:
    """The container family from the file's first bytes: "mp4", "avi", "matroska" or "other"."""
    with open(path, "rb") as f:
        head = f.read(2 * _M2TS_PACKET)
    if head[4:8] in (b"ftyp", b"moov", b"mdat", b"wide", b"free", b"skip"):
        return "mp4"
    if head[:4] == b"RIFF" and head[8:12] == b"AVI ":
        return "avi"
    if head[:4] == b"\x1a\x45\xdf\xa3":
        return "matroska"
    for name, size, sync in (("mpegts", _TS_PACKET, 0), ("m2ts", _M2TS_PACKET, 4)):
        if len(head) >= size + sync + 1 and head[sync] == head[size + sync] == 0x47:
            return name
    return "other"


# An MPEG transport stream is a run of fixed-size packets, each opening with the sync byte 0x47 (M2TS, Blu-ray and
# AVCHD's: 4 bytes of timestamp first). Its duration, hence the frame count FFmpeg gives, is estimated from the bytes
# there are, so a cut-off download reads as a complete, shorter video; but a cut at any byte but a packet's end
# leaves a part of a packet — the one sign a truncated stream gives.
_TS_PACKET, _M2TS_PACKET = 188, 192


def transport_stream(path: Path) -> bool:
    """Whether ``path`` is an MPEG transport stream (``.ts``, ``.m2ts``…), told by its sync bytes, not its name."""
    return _container(path) in ("mpegts", "m2ts")


def matroska(path: Path) -> bool:
    """Whether ``path`` is a Matroska file (``.mkv``, ``.webm``…), told by its first bytes, not its name."""
    return _container(path) == "matroska"


def _cut_packet(path: Path, container: str) -> str | None:
    """For a transport stream that ends inside a packet: how it ends (else None)."""
    size = {"mpegts": _TS_PACKET, "m2ts": _M2TS_PACKET}.get(container)
    if size is None:
        return None
    extra = path.stat().st_size % size
    return None if extra == 0 else (f"it ends {extra} bytes into a {size}-byte transport-stream packet: "
                                    "the file is truncated (an incomplete download or copy)")


def _mp4_tracks(path: Path) -> set[str] | None:
    """The handler types of an MP4/MOV file's tracks ({"vide", "soun", …}); None when it has no index
    ('moov' atom), as a cut-off download or an interrupted recording has not."""
    body = _mp4_moov(path)
    if body is None:
        return None
    kinds, at = set(), body.find(b"hdlr")
    while at >= 0:  # hdlr: version+flags (4), pre_defined (4), then the handler type
        kinds.add(body[at + 12:at + 16].decode("latin-1"))
        at = body.find(b"hdlr", at + 4)
    return kinds


def _boxes(data: bytes) -> Iterator[tuple[bytes, bytes]]:
    """The (type, body) of each MP4 box laid end to end in ``data``."""
    at = 0
    while at + 8 <= len(data):
        size, kind, start = int.from_bytes(data[at:at + 4], "big"), data[at + 4:at + 8], at + 8
        if size == 1:
            size, start = int.from_bytes(data[at + 8:at + 16], "big"), at + 16
        elif size == 0:
            size = len(data) - at
        if size < start - at:
            return
        yield kind, data[start:at + size]
        at += size


def _mp4_video_seconds(path: Path) -> float | None:
    """How long an MP4/MOV file's video track plays (its 'tkhd' duration, which its edit list sets), or None.
    A clip trimmed without re-encoding (``ffmpeg -ss 0.5 -c copy``, a phone's or QuickTime's trim) keeps the
    frames before its cut, which the edit list leaves out: its frame count counts them, the playing does not."""
    moov = _mp4_moov(path)
    if moov is None:
        return None
    children = list(_boxes(moov))
    mvhd = next((body for kind, body in children if kind == b"mvhd"), b"")
    timescale = int.from_bytes(mvhd[20:24] if mvhd[:1] == b"\1" else mvhd[12:16], "big") if mvhd else 0
    for kind, trak in children:
        parts = dict(_boxes(trak)) if kind == b"trak" else {}
        handler = next((body[8:12] for k, body in _boxes(parts.get(b"mdia", b"")) if k == b"hdlr"), b"")
        tkhd = parts.get(b"tkhd", b"")
        if handler == b"vide" and tkhd and timescale:
            duration = int.from_bytes(tkhd[28:36] if tkhd[:1] == b"\1" else tkhd[20:24], "big")
            return duration / timescale if 0 < duration < (1 << 32) - 1 else None
    return None


def _mp4_moov(path: Path) -> bytes | None:
    """An MP4/MOV file's index, the body of its 'moov' box (its first 64 MiB); None when it has none."""
    with open(path, "rb") as f:
        while True:
            header = f.read(8)
            if len(header) < 8:
                return None
            size, kind = int.from_bytes(header[:4], "big"), header[4:8]
            if size == 1:  # a 64-bit size follows
                size = int.from_bytes(f.read(8), "big") - 8
            if kind == b"moov":
                return f.read(min(max(0, size - 8), 64 << 20))
            if size < 8:
                return None
            f.seek(size - 8, os.SEEK_CUR)


def utf8_name(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is valid UTF-8 text, as native code (OpenCV, FFmpeg, PyNvVideoCodec) takes a name. A file
    name whose bytes are not (Latin-1 from an old camera or archive: ``zz\\xe9.mp4``) reaches Python with those
    bytes as lone surrogates, which OpenCV does not refuse but crashes on (a segmentation fault)."""
    try:
        os.fspath(path).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


@contextmanager
def native_name(path: Path) -> Iterator[str]:
    """A name of ``path`` that native code may be given, good while the block runs: its own where it is valid
    UTF-8; else ``/proc/self/fd/N`` of the file opened by its bytes (it opens the file itself, not a name); where
    there is no /proc, InputUnreadableError (the file fails alone, never a crash)."""
    if utf8_name(path):
        yield str(path)
        return
    if not os.path.isdir("/proc/self/fd"):
        raise InputUnreadableError(f"cannot read {text_name(path)}: its name is not valid UTF-8, which OpenCV "
                                   "cannot open here; rename the file")
    try:
        fd = os.open(os.fsencode(path), os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise InputUnreadableError(f"cannot read {text_name(path)}: {exc.strerror or exc}") from None
    try:
        yield f"/proc/self/fd/{fd}"
    finally:
        os.close(fd)


def _open_capture(path: Path) -> cv2.VideoCapture:
    _quiet_ffmpeg_logs()
    quiet_opencv = "OPENCV_LOG_LEVEL" not in os.environ
    if quiet_opencv:  # OpenCV warns "can't be used to capture by name" on failure; we raise our own error
        previous = cv2.utils.logging.getLogLevel()
        cv2.utils.logging.setLogLevel(cv2.utils.logging.LOG_LEVEL_ERROR)
    try:
        with native_name(path) as name:  # (FFmpeg opens the file while the capture is made, and keeps it open)
            cap = cv2.VideoCapture(name, cv2.CAP_FFMPEG)
    finally:
        if quiet_opencv:
            cv2.utils.logging.setLogLevel(previous)
    if cap.isOpened():
        return cap
    cap.release()
    if _container(path) == "mp4":
        tracks = _mp4_tracks(path)
        if tracks is None:
            raise InputUnreadableError(
                f"cannot read {path}: it looks like an MP4/MOV file but its index (the 'moov' atom) is missing — "
                "the file is probably truncated (an incomplete download or an interrupted recording)"
            )
        if "vide" not in tracks:
            media = {"soun": "audio", "text": "text", "sbtl": "subtitles", "subt": "subtitles", "tmcd": "timecode"}
            found = ", ".join(sorted({media[t] for t in tracks if t in media})) or "no media tracks"
            raise InputUnreadableError(f"cannot read {path}: the file has no video stream (only {found})")
        raise InputUnreadableError(f"cannot read {path}: its video stream cannot be decoded by this OpenCV/FFmpeg")
    raise InputUnreadableError(f"cannot read {path}: not a video or image file OpenCV/FFmpeg can decode")


def _video_ends_first(path: Path, decoded: int, declared_end_s: float) -> bool:
    """Whether a file whose video was decoded to its last packet (``decoded`` frames) has packets (of any audio or
    video stream) up to ``declared_end_s`` after its start: a complete file whose audio outlasts its video, not a cut
    one (cut, every stream ends at the cut). Asked of FFmpeg, which lists the packets without decoding them (its
    framecrc lines, the same in FFmpeg 5 and 7, where ``-progress`` differs); False where there is no FFmpeg, or it
    fails."""
    ffmpeg = find_ffmpeg()
    if ffmpeg is None:
        return False
    command = [os.fsencode(ffmpeg), b"-nostdin", b"-v", b"error", b"-i", b"file:" + os.fsencode(path.absolute()),
               b"-map", b"0:v:0", b"-map", b"0:a?", b"-c", b"copy", b"-f", b"framecrc", b"-"]
    try:
        done = subprocess.run(command, capture_output=True, timeout=600, check=False)
    except (OSError, subprocess.SubprocessError):
        return False
    if done.returncode != 0 or done.stderr.strip():
        return False
    seconds_per_tick: dict[int, float] = {}  # by output stream (0: the video)
    packets: dict[int, int] = {}
    end_s = 0.0
    try:
        for line in done.stdout.decode("ascii", "replace").splitlines():
            if line.startswith("#tb "):  # "#tb 0: 1/1000"
                stream, _, fraction = line[4:].partition(":")
                numerator, _, denominator = fraction.strip().partition("/")
                seconds_per_tick[int(stream)] = int(numerator) / int(denominator)
            elif line.strip() and not line.startswith("#"):  # stream, dts, pts, duration, size, hash
                stream, _, pts, duration, *_ = (field.strip() for field in line.split(","))
                packets[int(stream)] = packets.get(int(stream), 0) + 1
                end_s = max(end_s, (int(pts) + int(duration)) * seconds_per_tick[int(stream)])
    except (KeyError, ValueError, ZeroDivisionError):
        return False
    return packets.get(0) == decoded and end_s >= declared_end_s


class VideoSource(_SourceBase):
    """A video file decoded frame by frame.

    ``start_s`` seeks (by timestamp, then verified: the frame landed on must not be past the start
    and the frames there must be spaced as the declared frame rate says; otherwise the video is
    decoded from its beginning up to the start). Indexes are positions in the whole video either
    way. ``end_s`` is exclusive. The first frame is decoded when the source opens, so an
    undecodable file fails here rather than in the middle of a pipeline.
    Iterate in one thread; :meth:`close` may be called from another.
    """

    def __init__(self, path: str | os.PathLike[str], *, start_s: float | None = None, end_s: float | None = None,
                 max_frames: int | None = None) -> None:
        super().__init__()
        _check_arguments(start_s, end_s, max_frames)
        self.path = Path(path)
        _check_file(self.path)
        self.start_s, self.end_s, self.max_frames = start_s, end_s, max_frames
        self._lock = threading.Lock()
        self._cap: Any = self._open_reader()
        fps, count = self._rate_and_count()
        self._fps = fps if math.isfinite(fps) and 0 < fps <= _MAX_FPS else None
        self._declared = round(count) if math.isfinite(count) and count > 0 else None
        self._container = _container(self.path)
        self._pending: deque[Frame] = deque()
        self._next_index = 0  # position of the next frame to decode
        self._last_timestamp: float | None = None
        self._decoded_any = False
        self._gap_frames = 0  # frames the timestamps say are missing
        self._gaps = 0  # places where the timestamps jump
        self._first_gap: float | None = None
        self._start_index = 0
        try:
            self._position(start_s)
        except BaseException:
            self.close()
            raise
        first = self._pending[0]
        self._start_index = first.index
        self.info = SourceInfo(uri=text_name(path), kind="video", fps=self._fps, frame_count=self._declared,
                               width=first.width, height=first.height)

    # -- the decoder: OpenCV here; emopipe.io.nvdec overrides these to decode on the GPU ----------------

    seeks = True  # False: a start time is reached by decoding from the beginning

    def _open_reader(self) -> Any:
        return _open_capture(self.path)

    def _rate_and_count(self) -> tuple[float, float]:
        """The container's frame rate and frame count (NaN or 0 where it gives none)."""
        return self._cap.get(cv2.CAP_PROP_FPS), self._cap.get(cv2.CAP_PROP_FRAME_COUNT)

    def _decode(self) -> float | None:
        """Decode the next frame without converting it; its timestamp in ms (NaN if none), None on failure.
        Called with the lock held and a reader open."""
        if not self._cap.grab():
            return None
        return self._cap.get(cv2.CAP_PROP_POS_MSEC)

    def _pixels(self) -> np.ndarray | None:
        """The frame last decoded, as pixels (lock held, reader open)."""
        ok, image = self._cap.retrieve()
        return _as_bgr(image) if ok and image is not None else None

    def _undecodable(self) -> str:
        """The message for a video none of whose frames decodes: with its codec, where OpenCV names it (an AV1 file
        that OpenCV's own FFmpeg has no decoder for fails so, as a damaged file does)."""
        fourcc = round(self._cap.get(cv2.CAP_PROP_FOURCC)) if isinstance(self._cap, cv2.VideoCapture) else 0
        codec = fourcc.to_bytes(4, "little").decode("latin-1").strip("\0 ") if 0 < fourcc < 1 << 32 else ""
        if not codec.isprintable() or not codec:
            return f"cannot read {self.path}: the video has no decodable frame"
        return (f"cannot read {self.path}: none of its video's frames decodes (codec {codec}): this OpenCV/FFmpeg "
                "may have no decoder for it (convert the file, e.g. ffmpeg -i IN -c:v libx264 OUT.mp4), or the "
                "file is damaged")

    def _new_frame(self, index: int, timestamp: float, pixels: Any) -> Frame:
        return HostFrame(index=index, timestamp_s=timestamp, bgr=pixels, read_time=time.perf_counter())

    # -- reading ---------------------------------------------------------------------------------

    def _timestamp(self, msec: float, index: int) -> float:
        t = msec / 1000.0 if math.isfinite(msec) and msec >= 0 else None
        previous = self._last_timestamp
        if t is None or (previous is not None and t <= previous):
            # the container gave no usable time (OpenCV reports 0 then): derive it from the frame rate
            step = 1.0 / self._fps if self._fps else 1.0
            t = index * step
            if previous is not None and t <= previous:
                t = previous + step
        elif self._fps and previous is not None and t - previous > 1.5 / self._fps:
            # a jump in the container's clock: frames lost to damage, or a variable frame rate
            self._gap_frames += round((t - previous) * self._fps) - 1
            self._gaps += 1
            if self._first_gap is None:
                self._first_gap = previous
        self._last_timestamp = t
        return t

    def _grab_next(self) -> tuple[int, float] | None:
        """Decode the next frame (no colour conversion yet): its (index, timestamp), or None at the end.

        Before the declared end a failed read is retried: FFmpeg often resumes after a damaged stretch.
        """
        failures = 0
        while True:
            with self._lock:
                msec = self._decode() if self._cap is not None else None
            if msec is not None:
                index = self._next_index
                self._next_index += 1
                self._decoded_any = True
                return index, self._timestamp(msec, index)
            failures += 1
            more_declared = self._declared is not None and self._next_index < self._declared
            limit = max(_READ_RETRIES, round(_SKIP_LIMIT_S * (self._fps or 0)))
            if not more_declared or failures >= limit or self._cap is None:
                return None

    def _retrieve(self, index: int, timestamp: float) -> Frame | None:
        with self._lock:
            pixels = self._pixels() if self._cap is not None else None
        return None if pixels is None else self._new_frame(index, timestamp, pixels)

    def _read(self) -> Frame | None:
        """The next decodable frame, or None at the end."""
        while (grabbed := self._grab_next()) is not None:
            frame = self._retrieve(*grabbed)
            if frame is not None:
                return frame
        return None

    # -- positioning -----------------------------------------------------------------------------

    def _position(self, start_s: float | None) -> None:
        """Leave the first frame to yield (at or after ``start_s``) in ``_pending``."""
        if not start_s:
            frame = self._read()
            if frame is None:
                raise InputUnreadableError(self._undecodable())
            self._pending.append(frame)
            return
        duration = self._declared / self._fps if self._declared and self._fps else None
        if duration is not None and start_s >= duration:
            raise UsageError(f"start time {start_s:g} s is at or after the end of {self.path.name} "
                             f"({format_time(duration)})")
        seekable = self._fps is not None and self.seeks
        if not (seekable and self._seek(start_s)):
            if seekable:
                self._reopen()  # the seek that did not check out moved the reader: decode from the start
            self._skip_to(start_s)
        if not self._pending:
            if not self._decoded_any:
                raise InputUnreadableError(self._undecodable())
            raise UsageError(f"start time {start_s:g} s is after the last frame of {self.path.name} "
                             f"({format_time(self._last_timestamp or 0.0)})")

    def _seek(self, start_s: float) -> bool:
        """Seek by timestamp; True (frames queued) when the landing point checks out."""
        assert self._fps is not None
        interval = 1.0 / self._fps
        with self._lock:
            assert self._cap is not None
            self._cap.set(cv2.CAP_PROP_POS_MSEC, start_s * 1000.0)
            position = self._cap.get(cv2.CAP_PROP_POS_FRAMES)
        if not math.isfinite(position) or position < 0 or position > 1e12:
            return False
        first_index = round(position)
        # the timestamps of the frames landed on must not be past the start, and spaced by the
        # declared frame rate: that is what makes their frame numbers (derived by OpenCV from
        # timestamp × rate) true indexes; variable-frame-rate files fail it and are decoded instead
        a = self._read_at(first_index)
        b = self._read_at(first_index + 1) if a is not None else None
        if a is None or b is None:
            return False
        if a.timestamp_s > start_s + interval / 2 or not self._landed(a, b, start_s):
            logger.debug("seek to %.3f s landed at %.3f s / %.3f s: decoding from the start instead",
                         start_s, a.timestamp_s, b.timestamp_s)
            return False
        return True

    def _landed(self, a: Frame, b: Frame | None, start_s: float) -> bool:
        """Whether the two frames a seek landed on are one interval of the declared rate apart — what makes a frame
        number derived from time × rate a true position —, then queued, those before the start dropped."""
        assert self._fps is not None
        interval = 1.0 / self._fps
        if b is None or abs((b.timestamp_s - a.timestamp_s) - interval) > interval / 4:
            return False
        self._pending.extend((a, b))
        self._drop_before(start_s)
        return True

    def _read_at(self, index: int) -> Frame | None:
        self._next_index = index
        return self._read()

    def _drop_before(self, start_s: float) -> None:
        eps = 1e-6
        while True:
            while self._pending and self._pending[0].timestamp_s < start_s - eps:
                self._pending.popleft()
            if self._pending:
                return
            frame = self._read()
            if frame is None:
                return
            self._pending.append(frame)

    def _reopen(self) -> None:
        with self._lock:
            if self._cap is not None:
                self._cap.release()
            self._cap = self._open_reader()
        self._next_index = 0
        self._last_timestamp = None
        self._pending.clear()

    def _skip_to(self, start_s: float) -> None:
        """Decode from the start, converting no colours, up to the first frame at or after ``start_s``."""
        while (grabbed := self._grab_next()) is not None:
            index, timestamp = grabbed
            if timestamp >= start_s - 1e-6:
                frame = self._retrieve(index, timestamp)
                if frame is not None:
                    self._pending.append(frame)
                    return

    # -- iteration -------------------------------------------------------------------------------

    @property
    def expected_frames(self) -> int | None:
        """How many frames iteration should yield, when the container says enough to tell."""
        if self._declared is None:
            return self.max_frames
        stop = self._declared
        if self.end_s is not None and self._fps:
            stop = min(stop, math.ceil(self.end_s * self._fps - 1e-9))
        n = max(0, stop - self._start_index)
        return min(n, self.max_frames) if self.max_frames is not None else n

    def _frames(self) -> Iterator[Frame]:
        yielded = 0
        while self.max_frames is None or yielded < self.max_frames:
            frame = self._pending.popleft() if self._pending else self._read()
            if frame is None:
                self._check_complete()
                return
            if self.end_s is not None and frame.timestamp_s >= self.end_s:
                return
            yielded += 1
            yield frame

    def _check_complete(self) -> None:
        """After the last decodable frame: did the video end where its container said it would?"""
        if self._cap is None:
            return
        cut = _cut_packet(self.path, self._container)
        if cut is not None:
            self.ended_early = f"decoding stopped at frame {self._next_index}: {cut}"
            logger.debug("%s: %s", self.path.name, self.ended_early)
            return
        if self._declared is None:
            return
        missing = self._declared - self._next_index
        slack = 0
        if self._container not in ("mp4", "avi") and self._fps:
            slack = round(_ESTIMATED_COUNT_SLACK_S * self._fps)  # the count is an estimate from the duration
        if missing <= 0 or (missing <= slack and self._gap_frames == 0):
            return
        about = "" if slack == 0 else "about "
        last = self._last_timestamp or 0.0
        interval = 1.0 / self._fps if self._fps else 0.0
        expected_end = (self._declared - 1) * interval
        reached_the_end = bool(self._fps) and last >= expected_end - 1.5 * interval
        if self._container == "mp4" and interval and self._gap_frames == 0:
            plays_s = _mp4_video_seconds(self.path)
            if plays_s is not None and last + 2 * interval >= plays_s:  # its edit list leaves the rest out
                logger.debug("%s: %d of its %d frames play (a trimmed clip's edit list leaves the others out)",
                             self.path.name, self._next_index, self._declared)
                return
        if reached_the_end and (slack or self._container == "avi") and self._gaps > max(3, self._next_index // 10):
            # Jumps all over a file whose count is only an estimate (duration × nominal rate): a variable frame rate
            # (screen recorders' MKV), not damage, which leaves a few jumps where it hit. An AVI's count is exact
            # but counts empty frame slots too: FFmpeg stores H.264 with B-frames at twice the rate, every other
            # slot empty (header: 600 frames at 60/s for 300 at 30/s)
            logger.debug("%s: variable frame rate or empty frame slots (%d timestamp jumps); decoded to the end",
                         self.path.name, self._gaps)
            return
        if slack and not reached_the_end and self._gap_frames == 0 and _video_ends_first(
                self.path, self._next_index, expected_end - slack * interval):
            # The count is the file's duration × the rate, and the file's duration is its longest stream's: audio
            # that goes on after the video (a recorder stopped its video first, a clip cut from a broadcast)
            logger.debug("%s: its video ends at frame %d, before the file's other streams: not truncated",
                         self.path.name, self._next_index)
            return
        if reached_the_end:  # damage skipped, the end reached: reported, not an early end (exit 0)
            where = f" around {format_time(self._first_gap)}" if self._first_gap is not None else ""
            self.frames_skipped = missing
            self.damaged = (f"{missing} of {about}{self._declared} frames could not be decoded (corrupt data"
                            f"{where}); decoding went on to the end ({format_time(last)}), and frame indexes "
                            "after the damage count only the frames decoded")
            logger.warning("%s: %s", self.path.name, self.damaged)
            return
        else:
            self.ended_early = (f"decoding stopped at frame {self._next_index} of {about}{self._declared} "
                                f"({format_time(last + interval)}): the file is truncated or corrupt")
        logger.debug("%s: %s", self.path.name, self.ended_early)

    def close(self) -> None:
        lock = getattr(self, "_lock", None)
        if lock is None:
            return
        with lock:
            if self._cap is not None:
                self._cap.release()
                self._cap = None


def open_video(uri: str, *, start_s: float | None, end_s: float | None, max_frames: int | None) -> Source:
    return VideoSource(uri, start_s=start_s, end_s=end_s, max_frames=max_frames)
