"""Decoding on the GPU: NVDEC, the GPU's video decoder, through NVIDIA's PyNvVideoCodec.

OpenCV decodes on the CPU and converts every frame to BGR there (most of its ~0.6 ms for a 720p
frame), and the pipeline then uploads the frame. NVDEC writes each decoded frame into GPU memory
and converts it to RGB there, in a decoding thread of its own outside Python; the reader thread
only hands the frames on, and nothing is uploaded.

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

Setting a decoder up costs far more than a 10-second clip's decoding, so decoders are kept from one source to
the next in the process (:class:`_DecoderPool`), and a stream format is probed once.
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
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import cv2
import torch

from emopipe.errors import InputUnreadableError, UsageError
from emopipe.io.records import text_name
from emopipe.io.sources import Source, _quiet_ffmpeg_logs, open_source, source_kind
from emopipe.io.video import VideoSource, matroska, transport_stream, utf8_name
from emopipe.types import DeviceFrame

logger = logging.getLogger(__name__)

DECODERS = ("auto", "opencv", "nvdec")
_DECODE_AHEAD = 16  # frames NVDEC's thread decodes ahead of the reader
_SEEK_BACK_S = (0.0, 1.0, 5.0, 21.0)  # how far before its target a seek asks to land, each time the last landed past
# Below this much free GPU memory no NVDEC decoder is made: PyNvVideoCodec ends the process (exit 1, no exception,
# no line of ours) when one cannot get memory (H200 with 0.3 GiB free, session 41). The run would run out anyway.
NVDEC_MIN_FREE_BYTES = 1 << 30


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


def _gpu_free_bytes(gpu: int) -> int | None:
    return int(torch.cuda.mem_get_info(gpu)[0]) if torch.cuda.is_available() else None


def _refuse_a_full_gpu(path: Path, gpu: int) -> None:
    """InputUnreadableError (``auto`` then decodes on the CPU) where a new decoder could not get its memory."""
    free = _gpu_free_bytes(gpu)
    if free is not None and free < NVDEC_MIN_FREE_BYTES:
        raise InputUnreadableError(f"cannot read {text_name(path)} with NVDEC: the GPU has {free / 2**20:.0f} MiB "
                                   f"free, under the {NVDEC_MIN_FREE_BYTES >> 20} MiB it is tried with")


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


def _container_facts(path: Path) -> _ContainerFacts:
    _quiet_ffmpeg_logs()
    capture = cv2.VideoCapture(str(path), cv2.CAP_FFMPEG)
    try:
        opened = capture.isOpened()
        degrees = capture.get(cv2.CAP_PROP_ORIENTATION_META) if opened else 0.0
        code = capture.get(cv2.CAP_PROP_CODEC_PIXEL_FORMAT) if opened else -1.0
    finally:
        capture.release()
    return _ContainerFacts(quarter_turns=round(degrees / 90) % 4 if math.isfinite(degrees) else 0,
                           pixel_format=int(code) if math.isfinite(code) and code > 0 else None)


def _upright(frames: torch.Tensor, quarter_turns: int) -> torch.Tensor:
    """N×H×W×3 frames turned clockwise as OpenCV turns them (a copy only when they turn)."""
    return torch.rot90(frames, -quarter_turns, dims=(1, 2)).contiguous() if quarter_turns else frames


_copy_streams: dict[int, Any] = {}
_copy_streams_lock = threading.Lock()


def _copy_stream(gpu: int) -> Any:
    """The side stream every NVDEC reader of this GPU copies its frames out on. One for all: PyTorch keeps freed
    GPU memory cached per stream, so a stream per source kept each source's frame buffers apart (H100, 64-clip
    archive: 19 GB at the end against 6 GB for one long video; docs/benchmarks.md)."""
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
        """Without the pixel format a stream gets its own probe and its own decoder, as every stream once did."""
        return self.pixel_format is not None

    @property
    def decoder_kind(self) -> tuple[int, str, int | None]:
        """Streams one threaded decoder may move between: PyNvVideoCodec aborts the process when a reused decoder
        meets another bit depth or chroma format (seen on the H100 with 2.2.4), so a decoder keeps to one."""
        return self.gpu, self.codec, self.pixel_format


class _DecoderPool:
    """Threaded decoders kept from one source to the next. Setting one up costs ~290 ms and the probe before it as
    much (H100, 720p H.264); pointing a kept one at the next file (``reconfigure_decoder``) ~16 ms, with the same
    frames as a new one (docs/benchmarks.md). Each new decoder also starts a native thread, and thousands of them
    started and stopped is where PyNvVideoCodec crashed (docs/benchmarks.md, "NVDEC with several sources")."""

    keep_idle = 4  # per kind: more than a run's readers ever hand back at once (--parallel, 2 by default)

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: dict[tuple[int, str, int | None], list[Any]] = {}
        self._probed: set[_StreamFormat] = set()  # formats whose first frame a probe decoded in this process
        self._abandoned: list[Any] = []  # decoders a failed reconfiguration left hanging: never ended, never reused

    def vouched_for(self, stream: _StreamFormat) -> bool:
        with self._lock:
            return stream.known and stream in self._probed

    def vouch_for(self, stream: _StreamFormat) -> None:
        if stream.known:
            with self._lock:
                self._probed.add(stream)

    def take(self, path: Path, stream: _StreamFormat) -> Any:
        """A decoder reading ``path`` from its first frame: a kept one pointed at it, or a new one."""
        with self._lock:
            idle = self._idle.get(stream.decoder_kind) if stream.known else None
            decoder = idle.pop() if idle else None
        if decoder is None:
            _refuse_a_full_gpu(path, stream.gpu)
            nvc = _pynvvideocodec()
            return nvc.ThreadedDecoder(str(path), buffer_size=_DECODE_AHEAD, gpu_id=stream.gpu,
                                       use_device_memory=True, output_color_type=nvc.OutputColorType.RGB)
        self.point(decoder, path, 0)
        return decoder

    def point(self, decoder: Any, path: Path, start_frame: int) -> None:
        """Point ``decoder`` at ``path`` from frame ``start_frame`` on (PyNvVideoCodec seeks to the key frame before it
        and decodes from there)."""
        try:
            decoder.reconfigure_decoder(str(path), start_frame)
        except Exception:
            # After a failed reconfiguration the decoder's next call, end() included, never returns (seen on the
            # H100): it is set aside, not ended. The container opened a moment ago, so this is a file changed
            # or removed meanwhile.
            with self._lock:
                self._abandoned.append(decoder)
            raise

    def give_back(self, stream: _StreamFormat, decoder: Any) -> None:
        """``decoder``, done with its source (read to the end or not), for the next source of its kind."""
        with self._lock:
            idle = self._idle.setdefault(stream.decoder_kind, [])
            if stream.known and len(idle) < self.keep_idle:
                idle.append(decoder)
                return
        _end(decoder)

    def close(self) -> None:
        """End every kept decoder (at exit: their native threads are stopped before the interpreter goes)."""
        with self._lock:
            idle = [d for kept in self._idle.values() for d in kept]
            self._idle.clear()
        for decoder in idle:
            _end(decoder)


def _end(decoder: Any) -> None:
    try:
        decoder.end()
    except Exception as exc:  # ending a decoder that failed mid-stream: nothing left to save
        logger.debug("NVDEC end: %s", _reason(exc))


_pool = _DecoderPool()
atexit.register(lambda: _pool.close())  # (the pool that is current at exit: tests replace it)


@dataclass(frozen=True)
class _Container:
    """What opening a video file on NVDEC reads first, on the CPU: its stream's format, the time base of its
    timestamps (which the decoder does not give) and the rotation to apply."""

    stream: _StreamFormat
    seconds_per_tick: float
    quarter_turns: int


def _read_container(path: Path, gpu: int) -> _Container:
    if not utf8_name(path):  # (every NVDEC step after this one, and OpenCV's here, take the name this one took)
        # PyNvVideoCodec and OpenCV take names as UTF-8, and crash on one that is not: the file is left to OpenCV's
        # reader, which opens it by its bytes (emopipe.io.video.native_name)
        raise InputUnreadableError(f"cannot read {text_name(path)} with NVDEC: its name is not valid UTF-8")
    if transport_stream(path):
        # PyNvVideoCodec 2.2.4 (H200, session 40): its threaded decoder gives 50 of a 300-frame stream's frames, and
        # one pointed at a stream after an MP4 of the same format aborts the process in FFmpegDemuxer
        raise InputUnreadableError(f"cannot read {text_name(path)} with NVDEC: an MPEG transport stream, which "
                                   "PyNvVideoCodec does not read whole")
    demuxer = _pynvvideocodec().CreateDemuxer(str(path))
    seconds_per_tick = demuxer.GetTimebaseNum() / demuxer.GetTimebaseDen()
    codec, width, height = str(demuxer.GetNvCodecId()), int(demuxer.Width()), int(demuxer.Height())
    del demuxer
    facts = _container_facts(path)
    if codec.endswith("H264") and matroska(path):
        # PyNvVideoCodec 2.2.4's threaded decoder gave H.264 Matroska files with an audio track (as OBS records) from
        # 2 s on: the last 30 of 90 frames, taken for the first (H200, session 42: AAC, Opus, audio shorter, longer;
        # HEVC and VP9 with audio, H.264 without, and MP4/MOV/FLV with audio whole). The audio track cannot be told
        # from here, so every H.264 Matroska file goes to OpenCV
        raise InputUnreadableError(f"cannot read {text_name(path)} with NVDEC: H.264 in Matroska, which PyNvVideoCodec "
                                   "2.2.4 reads from the wrong frame where the file has audio (remux it to MP4 for "
                                   "NVDEC: ffmpeg -i IN.mkv -c copy OUT.mp4)")
    return _Container(_StreamFormat(gpu, codec, facts.pixel_format, width, height), seconds_per_tick,
                      facts.quarter_turns)


def _probe(path: Path, stream: _StreamFormat) -> None:
    """The threaded decoder reports an unsupported stream (H.264 4:4:4, a codec this GPU lacks) by throwing in its
    own thread, which aborts the process; a simple decoder throws here instead. So the first frame of a stream format
    is decoded by one first (in this thread, leaving none running), and streams it cannot decode stay with OpenCV. A
    format already decoded in this process needs no second probe."""
    if _pool.vouched_for(stream):
        return
    _refuse_a_full_gpu(path, stream.gpu)
    nvc = _pynvvideocodec()
    probe = nvc.SimpleDecoder(str(path), gpu_id=stream.gpu, use_device_memory=True,
                              output_color_type=nvc.OutputColorType.RGB)
    if not probe.get_batch_frames(1):
        raise InputUnreadableError(f"cannot read {path} with NVDEC: no frame decodes")
    # Deleting it holds Python's interpreter lock for 0.17-0.26 s (H200, docs/benchmarks.md), but probes kept instead
    # went with heap corruptions in Ray workers' NVDEC readers (4 of 18 `--ray local` runs; none in 8 runs without,
    # sessions 22 and 32), so it is deleted here, by the thread that made it, as it always was.
    del probe
    _pool.vouch_for(stream)


class _NvdecReader:
    """PyNvVideoCodec's threaded decoder behind VideoSource's decoder hooks."""

    def __init__(self, path: Path, gpu: int) -> None:
        self.decoder: Any = None
        try:
            container = _read_container(path, gpu)
            self.seconds_per_tick, self.quarter_turns = container.seconds_per_tick, container.quarter_turns
            self.stream = container.stream
            _probe(path, self.stream)
            self.decoder = _pool.take(path, self.stream)
            metadata = self.decoder.get_stream_metadata()
        except InputUnreadableError:
            raise
        except Exception as exc:
            if self.decoder is not None:
                _end(self.decoder)
            raise InputUnreadableError(f"cannot read {path} with NVDEC: {_reason(exc)}") from None
        self.fps = float(metadata.average_fps or 0.0)
        self.frame_count = float(metadata.num_frames or 0)
        # The frames are copied out on a side stream (the GPU's readers share it): on the pipeline's stream
        # the copies would queue behind detection and EmoNet, and those behind the copies.
        self._stream = _copy_stream(gpu) if torch.cuda.is_available() else None
        self._bgr: list[torch.Tensor] = []  # the last batch of decoded frames, each H×W×3 BGR
        self._pts: list[int] = []
        self._next = 0
        self._first_pts: int | None = None
        self._failed = False  # a decoding error: the decoder is ended, not kept

    def decode(self) -> float | None:
        """The next frame's time in ms from the first frame; None at the end or on a decoding error."""
        if self._next >= len(self._pts):
            try:
                decoded = self.decoder.get_batch_frames(_DECODE_AHEAD)
            except Exception as exc:
                logger.debug("NVDEC: %s", _reason(exc))
                self._failed = True
                return None
            if not decoded:
                return None
            self._pts = [int(frame.getPTS()) for frame in decoded]
            self._bgr = self._copy_out(decoded)
            self._next = 0
        pts = self._pts[self._next]
        self._next += 1
        if self._first_pts is None:
            self._first_pts = pts
        return (pts - self._first_pts) * self.seconds_per_tick * 1000.0

    def _copy_out(self, decoded: list[Any]) -> list[torch.Tensor]:
        """The batch in BGR tensors of ours (the decoder reuses its buffers), ready on every stream."""
        with torch.cuda.stream(self._stream) if self._stream is not None else contextlib.nullcontext():
            rgb = [torch.from_dlpack(frame) for frame in decoded]
            if all(t.shape == rgb[0].shape for t in rgb):
                bgr = list(_upright(torch.stack(rgb).flip(-1), self.quarter_turns).unbind(0))  # one copy
            else:  # the stream changed resolution within the batch
                bgr = [_upright(t[None].flip(-1), self.quarter_turns)[0] for t in rgb]
            if self._stream is not None:
                self._stream.synchronize()  # a few kernels a batch; the reader thread waits without the GIL
        return bgr

    def pixels(self) -> torch.Tensor:
        return self._bgr[self._next - 1]

    def restart_at(self, path: Path, index: int) -> bool:
        """Decode from frame ``index`` on (about, as PyNvVideoCodec lands: the caller checks the timestamps), with
        timestamps still counted from the first frame, which must have been decoded. False when the decoder could
        not be pointed there (then it is set aside and this reader holds none)."""
        if self._first_pts is None or self.decoder is None:
            return False
        try:
            _pool.point(self.decoder, path, index)
        except Exception as exc:
            logger.debug("NVDEC seek to frame %d: %s", index, _reason(exc))
            self.decoder = None
            return False
        self._bgr, self._pts, self._next = [], [], 0
        return True

    def release(self) -> None:
        self._bgr, self._pts = [], []
        decoder, self.decoder = self.decoder, None
        if decoder is None:
            return
        if self._failed:
            _end(decoder)
        else:
            _pool.give_back(self.stream, decoder)


class NvdecVideoSource(VideoSource):
    """A video file decoded by NVDEC into GPU memory; frames are :class:`DeviceFrame`\\ s.

    ``start_s`` seeks as VideoSource does: the decoder is pointed at the frame the frame rate puts at the start
    (PyNvVideoCodec decodes from the key frame before it), and the frames landed on must sit on the frame rate's
    grid of timestamps counted from the first frame, not past the start (a landing past it — open GOPs, HEVC — is
    asked for again further back); otherwise — a variable frame rate there — the video is decoded from its
    beginning up to the start (over 1 000 frames/s at 720p, so an hour in costs about a minute).
    """

    decoder = "nvdec"  # reported in the run summary

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

    def _seek(self, start_s: float) -> bool:
        assert self._fps is not None
        interval = 1.0 / self._fps
        target = max(0, math.ceil(start_s * self._fps - 1e-6))  # the first frame at or after the start
        with self._lock:
            # the first frame's timestamp, which the others count from: decoded here, where the reader stands
            if self._cap is None or self._cap.decode() is None:
                return False
        for back_s in _SEEK_BACK_S:
            asked = max(0, target - math.ceil(back_s * self._fps))
            with self._lock:
                if self._cap is None or not self._cap.restart_at(self.path, asked):
                    return False
            self._next_index, self._last_timestamp = asked, None  # (a landing before is not an earlier frame)
            a = self._read()
            if a is None:
                return False
            # The frame landed on gives its index by its timestamp (the key frame before the frame asked for, or
            # that frame): on the frame rate's grid, or the index would not be a true position.
            landed = round(a.timestamp_s * self._fps)
            if abs(a.timestamp_s - landed * interval) > interval / 4:
                logger.debug("NVDEC seek to frame %d landed off the frame rate's grid (%.4f s)", asked, a.timestamp_s)
                return False
            if landed <= target:
                break
            # Past the target: in an open GOP the frames shown just before a key frame are decoded after it, from
            # the GOP before, and a seek to them lands on the key frame. Ask for a frame further back.
            logger.debug("NVDEC seek to frame %d landed on frame %d", asked, landed)
        else:
            return False
        a = replace(a, index=landed)
        self._next_index = landed + 1
        return self._landed(a, self._read(), start_s)


def decoded_frame_size(uri: str | os.PathLike[str], *, decoder: str = "auto",
                       device: torch.device | str = "cpu") -> tuple[int, int] | None:
    """(height, width) of the frames :func:`open_input` would give from NVDEC for ``uri``, turned upright — read
    from its container on the CPU, nothing decoded — or None where NVDEC would not read it (another decoder, not a
    video file, no NVDEC here) or the container does not say. A cluster worker warms its detector for that size
    before the source's decoder starts (docs/benchmarks.md, "NVDEC with several sources")."""
    return _frame_size(uri, decoder, torch.device(device), probe=False)


def probe_ahead(uri: str | os.PathLike[str], *, decoder: str = "auto",
                device: torch.device | str = "cpu") -> tuple[int, int] | None:
    """:func:`decoded_frame_size`, and the first step of opening ``uri`` on NVDEC done now: its stream format probed
    (its first frame decoded by a simple decoder, which leaves no thread running; ~0.3 s), so that its reader opens
    without the probe. For a worker that knows its first source while its engines load, before their warm-up (no
    decoding may run while the warm-up captures CUDA graphs). A file NVDEC cannot read is left to its reader to
    report."""
    return _frame_size(uri, decoder, torch.device(device), probe=True)


def _frame_size(uri: str | os.PathLike[str], decoder: str, device: torch.device, probe: bool) -> tuple[int, int] | None:
    if decoder == "opencv" or source_kind(str(uri)) != "video" or nvdec_unavailable(device) is not None:
        return None
    path = Path(uri)
    try:
        container = _read_container(path, device.index or 0)
        if probe:
            _probe(path, container.stream)
    except Exception as exc:  # unreadable: the reader will say so when it opens the file
        logger.debug("%s: %s", uri, exc if isinstance(exc, InputUnreadableError) else _reason(exc))
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
