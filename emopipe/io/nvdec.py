"""Decoding on the GPU: NVDEC, the GPU's video decoder, through NVIDIA's PyNvVideoCodec.

OpenCV decodes on the CPU and converts every frame to BGR there (most of its ~0.6 ms for a 720p
frame), and the pipeline then uploads the frame. NVDEC writes each decoded frame into GPU memory
and converts it to RGB there; the reader thread hands the frames on, and nothing is uploaded.

:class:`NvdecVideoSource` is a :class:`~emopipe.source.VideoSource` with another decoder: frame
indexes, start and end times, timestamps (the frames' own presentation times, here PTS × the
stream's time base, counted from the first frame as OpenCV counts them) and the reports of
truncated or damaged files are VideoSource's. Its frames are :class:`DeviceFrame`\\ s, whose pixels
stay on the GPU; ``bgr`` copies them to the host for the few consumers that draw on the CPU
(the annotated video). NVDEC's YUV→RGB conversion differs from FFmpeg's by about 1.5 levels of 255
on average, so results differ from OpenCV-decoded runs by that much input noise.

Optional: ``pip install 'emopipe[nvdec]'`` (PyNvVideoCodec) and an NVIDIA driver with its video
decoding library (``libnvcuvid``; in a container, ``video`` among ``NVIDIA_DRIVER_CAPABILITIES``).
``--decoder auto`` (the default) uses it for video files on a CUDA device where it is installed and
the codec is one NVDEC decodes, and OpenCV otherwise.

Every call into PyNvVideoCodec is made in the reader's thread (its core decoder: no native thread decoding ahead, and
a stream NVDEC cannot decode raises where it can be caught); decoders are kept from one source to the next in the
process (:class:`_DecoderPool`).
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import functools
import logging
import math
import os
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cv2
import torch

from emopipe.errors import InputUnreadableError, UsageError
from emopipe.io.sources import Source, _quiet_ffmpeg_logs, open_source, source_kind
from emopipe.io.video import VideoSource
from emopipe.types import DeviceFrame

logger = logging.getLogger(__name__)

DECODERS = ("auto", "opencv", "nvdec")
_DECODE_AHEAD = 16  # frames decoded and copied out at a time (one wait for the copies a batch)


def _pynvvideocodec() -> Any:
    # Its native logger prints warnings on *stdout* ("[WARN ] Input codec is MPEG-4 ..."), where rows may
    # be going (-o -); read once, when the library loads. Its errors reach us as exceptions anyway.
    os.environ.setdefault("LOGGER_LEVEL", "FATAL")
    import PyNvVideoCodec

    return PyNvVideoCodec


def nvdec_unavailable(device: torch.device) -> str | None:
    """Why NVDEC cannot decode for a run on ``device``; None when it can."""
    if device.type != "cuda":
        return f"NVDEC decodes on an NVIDIA GPU, and this run's device is {device}"
    try:
        _pynvvideocodec()
    except ImportError:
        return "PyNvVideoCodec is not installed (pip install 'emopipe[nvdec]')"
    except Exception as exc:  # a broken install raises anything from its native module
        return f"PyNvVideoCodec does not load: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL("libnvcuvid.so.1")
        except OSError:
            return ("the NVIDIA driver's video decoding library (libnvcuvid.so.1) is missing; in a container, "
                    "add 'video' to NVIDIA_DRIVER_CAPABILITIES")
    return None


def _reason(exc: BaseException) -> str:
    """PyNvVideoCodec's exceptions carry a multi-line report; the FFmpeg or NVDEC message is what helps."""
    text = str(exc)
    if 'returned error "' in text:
        return text.split('returned error "', 1)[1].split('"', 1)[0].strip()
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    kind = next((line.split(":", 1)[1].strip() for line in lines if line.startswith("Error Type :")), None)
    return kind or (lines[0] if lines else type(exc).__name__)


@dataclass(frozen=True)
class _ContainerFacts:
    """What OpenCV (FFmpeg) reads from the container that PyNvVideoCodec does not give right."""

    quarter_turns: int  # the rotation the container asks for (phones record it), which OpenCV applies and NVDEC not
    pixel_format: int | None  # FFmpeg's tag for the decoded pixels ("I420": 8-bit 4:2:0, "444P", "Y3\x0b\n":
    # 10-bit 4:2:0); None when unknown. PyNvVideoCodec's demuxer says 4:2:0 8-bit of every stream (seen on the H100).
    fps: float = 0.0  # the rate and frame count the container declares, as OpenCV's source reports them
    frame_count: float = 0.0


def _container_facts(path: Path) -> _ContainerFacts:
    _quiet_ffmpeg_logs()
    capture = cv2.VideoCapture(str(path), cv2.CAP_FFMPEG)
    try:
        opened = capture.isOpened()
        degrees = capture.get(cv2.CAP_PROP_ORIENTATION_META) if opened else 0.0
        code = capture.get(cv2.CAP_PROP_CODEC_PIXEL_FORMAT) if opened else -1.0
        fps, count = (capture.get(cv2.CAP_PROP_FPS), capture.get(cv2.CAP_PROP_FRAME_COUNT)) if opened else (0.0, 0.0)
    finally:
        capture.release()
    return _ContainerFacts(quarter_turns=round(degrees / 90) % 4 if math.isfinite(degrees) else 0,
                           pixel_format=int(code) if math.isfinite(code) and code > 0 else None,
                           fps=fps if math.isfinite(fps) else 0.0, frame_count=count if math.isfinite(count) else 0.0)


def _upright(frames: torch.Tensor, quarter_turns: int) -> torch.Tensor:
    """N×H×W×3 frames turned clockwise as OpenCV turns them (a copy only when they turn)."""
    return torch.rot90(frames, -quarter_turns, dims=(1, 2)).contiguous() if quarter_turns else frames


_copy_streams: dict[int, Any] = {}
_copy_streams_lock = threading.Lock()


def _copy_stream(gpu: int) -> Any:
    """The side stream every NVDEC decoder of this GPU converts its frames on and every reader copies them out on.
    One for all: PyTorch keeps freed GPU memory cached per stream, so a stream per source kept each source's frame
    buffers apart (H100, 64-clip archive: 19 GB at the end against 6 GB for one long video; docs/benchmarks.md)."""
    with _copy_streams_lock:
        if gpu not in _copy_streams:
            _copy_streams[gpu] = torch.cuda.Stream(torch.device("cuda", gpu))
        return _copy_streams[gpu]


@dataclass(frozen=True)
class _StreamFormat:
    """What NVDEC must know of a video stream before decoding it: the codec and size from PyNvVideoCodec's
    demuxer (under a millisecond), the pixel format from OpenCV's look at the container."""

    gpu: int
    codec: str
    pixel_format: int | None
    width: int
    height: int

    @property
    def known(self) -> bool:
        """Without the pixel format a stream gets a decoder of its own, never kept for another."""
        return self.pixel_format is not None


class _DecoderPool:
    """Decoders kept from one source to the next, by stream format: a new one's first frame took ~50 ms, a kept one's
    ~2 ms (H200, 720p H.264, session 34). PyNvVideoCodec aborted the process when a reused decoder met another bit
    depth or chroma format (H100, 2.2.4), so a decoder keeps to one format, size included. Only a decoder that read
    its source to the end (its last frames flushed out) comes back: one left mid-stream still holds frames of its
    source, and goes."""

    keep_idle = 4  # per format: more than a run's readers ever hand back at once (--parallel, 2 by default)

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: dict[_StreamFormat, list[Any]] = {}

    def take(self, stream: _StreamFormat, codec: Any) -> Any:
        """A decoder for a new source of ``stream``'s format (``codec``: the demuxer's codec id): a kept one, or new."""
        with self._lock:
            idle = self._idle.get(stream) if stream.known else None
            decoder = idle.pop() if idle else None
        if decoder is not None:
            try:
                decoder.setReconfigParams(stream.width, stream.height)
                return decoder
            except Exception as exc:  # (never seen) a new decoder instead
                logger.debug("NVDEC: a kept decoder refused the next source: %s", _reason(exc))
        nvc = _pynvvideocodec()
        handle = _copy_stream(stream.gpu).cuda_stream if torch.cuda.is_available() else 0
        return nvc.CreateDecoder(gpuid=stream.gpu, codec=codec, cudastream=handle, usedevicememory=True,
                                 outputColorType=nvc.OutputColorType.RGB)

    def give_back(self, stream: _StreamFormat, decoder: Any) -> None:
        """``decoder``, which read its source to the end, for the next source of its format."""
        with self._lock:
            idle = self._idle.setdefault(stream, [])
            if stream.known and len(idle) < self.keep_idle:
                idle.append(decoder)

    def close(self) -> None:
        """Let every kept decoder go (at exit, before the interpreter's teardown)."""
        with self._lock:
            self._idle.clear()


_pool = _DecoderPool()
atexit.register(lambda: _pool.close())  # (the pool that is current at exit: tests replace it)


@dataclass(frozen=True)
class _Container:
    """What opening a video file on NVDEC reads first, on the CPU: its stream's format and codec id, the time base of
    its timestamps (which decoded frames do not carry), the rotation to apply, and the rate and frame count the
    container declares (as OpenCV reads them, so that both decoders report the same)."""

    stream: _StreamFormat
    codec: Any
    seconds_per_tick: float
    quarter_turns: int
    fps: float
    frame_count: float


def _read_container(path: Path, gpu: int, demuxer: Any = None) -> _Container:
    demuxer = demuxer or _pynvvideocodec().CreateDemuxer(str(path))
    seconds_per_tick = demuxer.GetTimebaseNum() / demuxer.GetTimebaseDen()
    codec, width, height = demuxer.GetNvCodecId(), int(demuxer.Width()), int(demuxer.Height())
    facts = _container_facts(path)
    return _Container(_StreamFormat(gpu, str(codec), facts.pixel_format, width, height), codec, seconds_per_tick,
                      facts.quarter_turns, facts.fps, facts.frame_count)


class _NvdecReader:
    """PyNvVideoCodec's demuxer and decoder behind VideoSource's decoder hooks, every call in the reader's thread.

    Its threaded decoder decoded ahead in a native thread of its own, which is where PyNvVideoCodec crashed (heap
    corruptions and segmentation faults, most often with several decoders starting at once) and where a stream it
    cannot decode aborted the process; the decoder here raises in the caller's thread instead, decodes as fast
    (1 407 against 1 401 frames/s, the same frames bit for bit; H200, session 34) and gives a new source's first
    frame sooner (docs/benchmarks.md, "NVDEC with several sources")."""

    def __init__(self, path: Path, gpu: int) -> None:
        self.decoder: Any = None
        self._bgr: list[torch.Tensor] = []  # the decoded frames not read yet, each H×W×3 BGR
        self._pts: list[int] = []
        self._next = 0
        self._first_pts: int | None = None
        self._ended = False  # every packet given to the decoder, its last frames flushed out
        self._failed = False  # a decoding error: the decoder is let go, not kept
        # The frames are converted and copied out on a side stream (the GPU's decoders and readers share it): on the
        # pipeline's stream they would queue behind detection and EmoNet, and those behind them.
        self._stream = _copy_stream(gpu) if torch.cuda.is_available() else None
        try:
            demuxer = _pynvvideocodec().CreateDemuxer(str(path))
            container = _read_container(path, gpu, demuxer)
            self.seconds_per_tick, self.quarter_turns = container.seconds_per_tick, container.quarter_turns
            self.fps, self.frame_count, self.stream = container.fps, container.frame_count, container.stream
            self._packets = iter(demuxer)
            self.decoder = _pool.take(self.stream, container.codec)
            self._decode_batch(raise_errors=True)  # a stream NVDEC cannot decode says so here, where auto falls back
        except Exception as exc:
            self.decoder = None
            raise InputUnreadableError(f"cannot read {path} with NVDEC: {_reason(exc)}") from None
        if not self._pts:
            self.decoder = None
            raise InputUnreadableError(f"cannot read {path} with NVDEC: no frame decodes")

    def _decode_batch(self, raise_errors: bool = False) -> None:
        """Up to _DECODE_AHEAD more frames, copied out as BGR and ready on every stream; at the end, none."""
        pts: list[int] = []
        bgr: list[torch.Tensor] = []
        try:
            with torch.cuda.stream(self._stream) if self._stream is not None else contextlib.nullcontext():
                while len(pts) < _DECODE_AHEAD and not self._ended:
                    packet = next(self._packets, None)
                    if packet is None:
                        self._ended = True
                        break
                    for frame in self.decoder.Decode(packet):
                        pts.append(int(frame.getPTS()))
                        # a copy of ours, queued on the stream the decoder converts on, so before it writes again
                        bgr.append(_upright(torch.from_dlpack(frame)[None].flip(-1), self.quarter_turns)[0])
                if self._stream is not None:
                    self._stream.synchronize()  # once a batch; the reader thread waits without the GIL
        except Exception as exc:
            if raise_errors:
                raise
            logger.debug("NVDEC: %s", _reason(exc))
            self._failed = True
        self._pts, self._bgr, self._next = pts, bgr, 0

    def decode(self) -> float | None:
        """The next frame's time in ms from the first frame; None at the end or on a decoding error."""
        if self._next >= len(self._pts):
            if self._failed or self._ended:
                self._pts, self._bgr = [], []
                return None
            self._decode_batch()
            if not self._pts:
                return None
        pts = self._pts[self._next]
        self._next += 1
        if self._first_pts is None:
            self._first_pts = pts
        return (pts - self._first_pts) * self.seconds_per_tick * 1000.0

    def pixels(self) -> torch.Tensor:
        return self._bgr[self._next - 1]

    def release(self) -> None:
        self._bgr, self._pts = [], []
        decoder, self.decoder = self.decoder, None
        if decoder is not None and self._ended and not self._failed:
            _pool.give_back(self.stream, decoder)


class NvdecVideoSource(VideoSource):
    """A video file decoded by NVDEC into GPU memory; frames are :class:`DeviceFrame`\\ s.

    ``start_s`` decodes from the beginning up to the start (NVDEC decodes 720p at over 1 000 frames/s
    on an H100, so an hour in costs about a minute).
    """

    decoder = "nvdec"  # reported in the run summary
    seeks = False  # decode from the start: VideoSource's fallback, exact for any frame rate

    def __init__(self, path: str | os.PathLike[str], *, device: torch.device | str = "cuda",
                 start_s: float | None = None, end_s: float | None = None, max_frames: int | None = None) -> None:
        device = torch.device(device)
        self._gpu = device.index if device.index is not None else 0
        super().__init__(path, start_s=start_s, end_s=end_s, max_frames=max_frames)

    def _open_reader(self) -> _NvdecReader:
        return _NvdecReader(self.path, self._gpu)

    def _rate_and_count(self) -> tuple[float, float]:
        return self._cap.fps, self._cap.frame_count

    def _decode(self) -> float | None:
        return self._cap.decode()

    def _pixels(self) -> torch.Tensor:
        return self._cap.pixels()

    def _new_frame(self, index: int, timestamp: float, pixels: Any) -> DeviceFrame:
        return DeviceFrame(index=index, timestamp_s=timestamp, pixels=pixels, read_time=time.perf_counter())


def decoded_frame_size(uri: str | os.PathLike[str], *, decoder: str = "auto",
                       device: torch.device | str = "cpu") -> tuple[int, int] | None:
    """(height, width) of the frames :func:`open_input` would give from NVDEC for ``uri``, turned upright — read
    from its container on the CPU, nothing decoded — or None where NVDEC would not read it (another decoder, not a
    video file, no NVDEC here) or the container does not say. A cluster worker warms its detector for that size
    before the source's decoder starts (docs/benchmarks.md, "NVDEC with several sources")."""
    device = torch.device(device)
    if decoder == "opencv" or source_kind(str(uri)) != "video" or nvdec_unavailable(device) is not None:
        return None
    try:
        container = _read_container(Path(uri), device.index or 0)
    except Exception as exc:  # unreadable: the reader will say so when it opens the file
        logger.debug("%s: %s", uri, _reason(exc))
        return None
    height, width = container.stream.height, container.stream.width
    return (width, height) if container.quarter_turns % 2 else (height, width)


def open_input(uri: str | os.PathLike[str], *, decoder: str = "auto", device: torch.device | str = "cpu",
               start_s: float | None = None, end_s: float | None = None, max_frames: int | None = None) -> Source:
    """:func:`~emopipe.source.open_source`, with video files decoded by NVDEC where ``decoder`` asks for it.

    ``auto``: NVDEC for a video file on a CUDA device when it is available and opens the file, else OpenCV;
    ``nvdec``: NVDEC or a one-line error; ``opencv``: OpenCV.
    """
    if decoder not in DECODERS:
        raise UsageError(f"--decoder must be one of {', '.join(DECODERS)}, got {decoder!r}")
    on_cpu = functools.partial(open_source, uri, start_s=start_s, end_s=end_s, max_frames=max_frames)
    if decoder == "opencv":
        return on_cpu()
    if source_kind(uri) != "video":
        if decoder == "nvdec":
            raise UsageError("--decoder nvdec decodes video files; give a video file or leave --decoder at auto")
        return on_cpu()
    device = torch.device(device)
    why_not = nvdec_unavailable(device)
    if why_not is not None:
        if decoder == "nvdec":
            raise UsageError(f"--decoder nvdec: {why_not}")
        logger.debug("decoding on the CPU: %s", why_not)
        return on_cpu()
    try:
        return NvdecVideoSource(uri, device=device, start_s=start_s, end_s=end_s, max_frames=max_frames)
    except InputUnreadableError as exc:
        if decoder == "nvdec":
            raise
        logger.info("%s; decoding on the CPU instead", exc)  # a codec NVDEC lacks, or a damaged file
        return on_cpu()
