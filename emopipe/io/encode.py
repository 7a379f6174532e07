"""Videos encoded by FFmpeg in a child process: H.264 in a fragmented MP4 or in Matroska, Motion JPEG in AVI.

Why a child process and not OpenCV's writer: OpenCV passes no muxer options, so its ``.mp4`` has its index
written at close and a killed run's plays nothing, and it encodes MPEG-4 Part 2, which browsers do not play.
Here the MP4 is fragmented (an index per one-second fragment, ``frag_keyframe+empty_moov``) and H.264 (where
the FFmpeg build has an H.264 encoder). The child runs in its own session: Ctrl-C in the terminal reaches
emopipe only, which closes the pipe when its run ends; killed (SIGKILL, out of memory), emopipe's end of the
pipe closes and FFmpeg finishes the file with every frame it was given (all but the few still queued for the pipe,
:data:`QUEUED_FRAMES`). Power lost, a fragmented MP4 or a Matroska file plays up to its
last fragment or cluster (about a second).

Which FFmpeg: ``EMOPIPE_FFMPEG`` (a path; ``none``: do not use FFmpeg), else the one of ``imageio-ffmpeg``
(``pip install "emopipe[video]"``) when installed, else ``ffmpeg`` on ``PATH``.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import queue
import shutil
import subprocess
import tempfile
import threading
from fractions import Fraction
from pathlib import Path
from typing import IO, Any

import numpy as np

from emopipe.errors import OutputError, UsageError

logger = logging.getLogger(__name__)

QUEUED_FRAMES = 3  # a file's frames waiting for the pipe (drawn ahead of FFmpeg's reading)
PIPE_BYTES = 1 << 20  # the pipe's buffer (Linux's default 64 KiB would take ~40 writes for one 720p frame)
# the containers FFmpeg writes for our suffixes, and their muxer options
MUXERS = {".mp4": "mp4", ".mkv": "matroska", ".avi": "avi"}
H264 = ("libx264", "libopenh264", "h264_v4l2m2m")  # FFmpeg's H.264 encoders, in the order we prefer them


WRITERS = ("auto", "ffmpeg", "opencv")  # --video-writer


def choose_ffmpeg(writer: str) -> str | None:
    """The FFmpeg program ``--video-writer`` asks for (``auto``: FFmpeg where found), or None for OpenCV's writer."""
    if writer not in WRITERS:
        raise UsageError(f"--video-writer {writer}: choose {', '.join(WRITERS[:-1])} or {WRITERS[-1]}")
    if writer == "opencv":
        return None
    ffmpeg = find_ffmpeg()
    if ffmpeg is None and writer == "ffmpeg":
        raise UsageError("--video-writer ffmpeg: no FFmpeg found (install it, or pip install \"emopipe[video]\", or "
                         "set EMOPIPE_FFMPEG to its path)")
    if ffmpeg is not None and not encoders(ffmpeg):  # found, but it does not run (a broken or foreign binary)
        if writer == "ffmpeg":
            raise UsageError(f"--video-writer ffmpeg: {ffmpeg} does not run (ffmpeg -encoders lists nothing)")
        logger.warning("%s does not run (ffmpeg -encoders lists nothing): OpenCV writes the video", ffmpeg)
        return None
    return ffmpeg


def find_ffmpeg() -> str | None:
    """The FFmpeg program to encode with, or None (see the module's text)."""
    chosen = os.environ.get("EMOPIPE_FFMPEG")
    if chosen is not None:
        if chosen.strip().lower() in ("", "none", "0", "off"):
            return None
        return shutil.which(chosen) or (chosen if os.access(chosen, os.X_OK) else None)
    try:
        import imageio_ffmpeg  # type: ignore[import-not-found, unused-ignore]

        found: str = imageio_ffmpeg.get_ffmpeg_exe()
        return found
    except (ImportError, RuntimeError):  # (not installed, or installed without its program)
        return shutil.which("ffmpeg")


@functools.cache
def encoders(ffmpeg: str) -> frozenset[str]:
    """The video encoders this FFmpeg build has (``ffmpeg -encoders``), asked once a process."""
    try:
        listed = subprocess.run([ffmpeg, "-hide_banner", "-encoders"], capture_output=True, text=True, timeout=30,
                                check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return frozenset()
    names = set()
    for line in listed.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0].startswith("V") and len(parts[0]) == 6:  # "V....D libx264 ..."
            names.add(parts[1])
    return frozenset(names)


def codec_for(suffix: str, ffmpeg: str) -> str:
    """The encoder for a container: Motion JPEG in AVI; H.264 elsewhere, MPEG-4 Part 2 when the build has none."""
    if suffix == ".avi":
        return "mjpeg"
    have = encoders(ffmpeg)
    return next((name for name in H264 if name in have), "mpeg4")


def encoder_arguments(suffix: str, codec: str, fps: float, size: tuple[int, int], *, live: bool) -> list[str]:
    """FFmpeg's arguments after its input: the codec's, the container's (fragments of about a second), the file's."""
    keyframe_every = str(max(1, round(fps)))  # a fragment (MP4) or a cluster (Matroska) starts at each
    width, height = size
    args: list[str] = []
    if width % 2 or height % 2:  # 4:2:0 needs even sides: one black column or row is added
        args += ["-vf", "pad=ceil(iw/2)*2:ceil(ih/2)*2"]
    if codec == "libx264":
        # a file: veryfast (a 720p video at ~600 frames/s on 16 cores, half OpenCV's mp4v's size); live: ultrafast
        # (one encoder per camera, in real time beside the pipeline) with no look-ahead, so each frame leaves the
        # encoder as it comes and a kill loses at most the fragment being written
        args += ["-preset", "ultrafast" if live else "veryfast", "-crf", "20", "-g", keyframe_every]
        if live:
            args += ["-tune", "zerolatency"]
    elif codec == "mjpeg":
        args += ["-q:v", "3"]
    else:
        args += ["-q:v", "3", "-g", keyframe_every]
    args += ["-c:v", codec, "-pix_fmt", "yuvj420p" if codec == "mjpeg" else "yuv420p"]
    if suffix == ".mp4":
        args += ["-movflags", "+frag_keyframe+empty_moov+default_base_moof"]
    elif suffix == ".mkv":
        args += ["-cluster_time_limit", "1000"]
    return [*args, "-flush_packets", "1", "-f", MUXERS[suffix]]


class FfmpegVideo:
    """Raw BGR frames piped to FFmpeg, which encodes them into ``path`` (the container from its suffix)."""

    def __init__(self, path: Path, fps: float, size: tuple[int, int], ffmpeg: str, *, live: bool = False) -> None:
        self.path = path
        self.size = size
        suffix = path.suffix.lower()
        self.codec = codec_for(suffix, ffmpeg)
        rate = Fraction(fps).limit_denominator(1001)  # 29.97 → 2997/100, 30000/1001 stays so
        self._log: IO[bytes] = tempfile.TemporaryFile(prefix="emopipe-ffmpeg-")  # noqa: SIM115 (closed with FFmpeg)
        command = [ffmpeg, "-hide_banner", "-loglevel", "error", "-y",
                   "-f", "rawvideo", "-pix_fmt", "bgr24", "-video_size", f"{size[0]}x{size[1]}",
                   "-framerate", f"{rate.numerator}/{rate.denominator}", "-i", "pipe:0",
                   *encoder_arguments(suffix, self.codec, fps, size, live=live), str(path)]
        try:
            # its own session: the terminal's Ctrl-C goes to emopipe, which ends the file itself
            self._process: subprocess.Popen[bytes] | None = subprocess.Popen(
                command, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=self._log, start_new_session=True)
        except OSError as exc:
            self._log.close()
            raise OutputError(f"cannot write video {path}: cannot start {ffmpeg}: {exc.strerror or exc}") from None
        assert self._process.stdin is not None
        self._stdin = self._process.stdin
        with contextlib.suppress(ImportError, OSError, AttributeError):  # (Linux only; a smaller buffer works too)
            import fcntl

            fcntl.fcntl(self._stdin.fileno(), fcntl.F_SETPIPE_SZ, PIPE_BYTES)

        # the frames go to FFmpeg from a thread of their own, so the next frame is drawn while this one is piped (the
        # pipe holds less than a 720p frame) and a camera fleet's writer thread never waits for an encoder; a kill
        # loses the few frames queued (QUEUED_FRAMES)
        # (the thread holds the queue and the pipe, not this writer: one dropped unclosed is collected, its __del__
        # ends the thread and FFmpeg finishes the file)
        self._queue: queue.Queue[np.ndarray | None] | None = queue.Queue(maxsize=QUEUED_FRAMES)
        self._failures: list[BaseException] = []
        self._feeder = threading.Thread(target=_feed, args=(self._queue, self._stdin, self._failures),
                                        name="emopipe-video-feed", daemon=True)
        self._feeder.start()

    @property
    def _failure(self) -> BaseException | None:
        return self._failures[0] if self._failures else None

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def write(self, image: np.ndarray, owned: bool = False) -> None:
        """Encode ``image`` (BGR, of the video's size); ``owned``: nobody else changes it afterwards (else a queued
        frame is copied first)."""
        if self._process is None:
            raise ValueError(f"video {self.path} is closed")
        if self._queue is not None and self._failure is None:
            self._queue.put(np.ascontiguousarray(image) if owned else np.array(image, order="C"))
        if self._failure is not None:
            self._stop_feeding()
            self._fail("stopped")

    def _stop_feeding(self) -> None:
        if self._queue is not None:
            self._queue.put(None)
            self._feeder.join()
            self._queue = None

    def close(self) -> None:
        """Close the pipe and wait for FFmpeg to finish the file; an FFmpeg that failed is an :class:`OutputError`."""
        if self._process is None:
            return
        self._stop_feeding()
        with contextlib.suppress(BrokenPipeError, ValueError, OSError):
            self._stdin.close()
        code = self._process.wait()
        if code != 0 or self._failure is not None:
            self._fail(f"ended with code {code}" if code else "stopped")
        self._process = None
        self._log.close()

    def _fail(self, how: str) -> None:
        process, self._process = self._process, None
        if process is not None:
            with contextlib.suppress(OSError, ValueError):
                self._stdin.close()
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=30)
        self._log.seek(0)
        said = [line.strip() for line in self._log.read().decode(errors="replace").splitlines() if line.strip()]
        self._log.close()
        raise OutputError(f"cannot write video {self.path}: FFmpeg {how}" + (f": {said[-1]}" if said else ""))

    def __del__(self) -> None:  # a writer dropped unclosed: its feeding thread ends, FFmpeg finishes the file
        process: Any = getattr(self, "_process", None)
        if process is not None:
            with contextlib.suppress(Exception):
                if self._queue is not None:
                    # (its thread pipes what is queued, then closes the pipe; a full queue drains as FFmpeg reads)
                    self._queue.put(None, timeout=30)


def _feed(frames: queue.Queue[np.ndarray | None], pipe: IO[bytes], failures: list[BaseException]) -> None:
    """A writer's feeding thread: each queued frame into FFmpeg's pipe, until None; after a failed write (FFmpeg
    ended: its writer's close says how) the rest are taken and dropped; then the pipe is closed."""
    while (image := frames.get()) is not None:
        if failures:
            continue
        try:
            pipe.write(image.data.cast("B"))
        except (BrokenPipeError, ValueError, OSError) as exc:
            failures.append(exc)
    with contextlib.suppress(OSError, ValueError):
        pipe.close()  # FFmpeg finishes the file (its writer's close waits for that)
