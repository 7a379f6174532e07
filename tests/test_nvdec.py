"""GPU decoding (emopipe.nvdec) on the CPU: PyNvVideoCodec replaced at its boundary by a stand-in.

The stand-in decodes with OpenCV and answers as PyNvVideoCodec does (RGB frames through DLPack,
presentation timestamps in the container's time base, a report string on files it cannot open), so
everything of ours — timestamps, indexes, start/end, truncation reports, the choice of decoder and
the pipeline with frames already on the device — is checked against the OpenCV source. NVDEC
itself is checked on the GPU host by tests/test_gpu.py (history: docs/benchmark-log.md).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import types
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import ClassVar

import cv2
import numpy as np
import pytest
import torch

from emopipe.errors import InputNotFoundError, InputUnreadableError, UsageError
from emopipe.io import nvdec
from emopipe.io.images import FolderSource, ImageSource
from emopipe.io.nvdec import _DECODE_AHEAD, NvdecVideoSource, nvdec_unavailable, open_input
from emopipe.io.sources import format_time
from emopipe.io.video import VideoSource
from emopipe.pipeline.runner import Pipeline, PipelineSettings
from emopipe.types import DeviceFrame
from emopipe.vision.crop import FaceCropper
from emopipe.vision.detectors import create_detector
from tests.support import synth
from tests.support.fakes import PixelEngine
from tests.support.synth import moving_face_video

FPS = 25.0
COUNT = 60
TICKS_PER_SECOND = 12800  # a time base as MP4 muxers write them (1/12800 s)


class _Frame:
    """A decoded frame as PyNvVideoCodec hands it out: DLPack-able RGB, with its PTS."""

    def __init__(self, rgb: torch.Tensor, pts: int) -> None:
        self._rgb, self._pts = rgb, pts

    def getPTS(self) -> int:
        return self._pts

    def __dlpack__(self, stream=None, **kwargs):
        return self._rgb.__dlpack__()

    def __dlpack_device__(self):
        return self._rgb.__dlpack_device__()


def _open_or_raise(path: str) -> cv2.VideoCapture:
    capture = cv2.VideoCapture(path, cv2.CAP_FFMPEG)
    if not capture.isOpened():  # PyNvVideoCodec's report, as it reads for a text file
        raise RuntimeError('CreateFormatContext : \nError code : -1094995529\nError Type : avformat_open_input(&ctx, '
                           'szFilePath, NULL, NULL) returned error " Invalid data found when processing input"\n')
    return capture


class _Demuxer:
    def __init__(self, path: str) -> None:
        capture = _open_or_raise(path)
        self.width = int(capture.get(cv2.CAP_PROP_FRAME_WIDTH))
        self.height = int(capture.get(cv2.CAP_PROP_FRAME_HEIGHT))
        capture.release()

    def GetTimebaseNum(self) -> int:
        return 1

    def GetTimebaseDen(self) -> int:
        return TICKS_PER_SECOND

    def GetNvCodecId(self) -> str:
        return "cudaVideoCodec.MJPEG"

    def Width(self) -> int:
        return self.width

    def Height(self) -> int:
        return self.height


class _ThreadedDecoder:
    instances: ClassVar[list[_ThreadedDecoder]] = []
    lands: ClassVar[Callable[[int], int]] = staticmethod(lambda frame: frame)  # where a seek to a frame lands
    decoded: ClassVar[int] = 0  # frames decoded by every decoder

    def __init__(self, path: str, buffer_size: int, gpu_id: int = 0, use_device_memory: bool = True,
                 output_color_type: object = None, start_frame: int = 0) -> None:
        assert use_device_memory and output_color_type == "RGB"
        self.capture = _open_or_raise(path)
        self.capture.set(cv2.CAP_PROP_ORIENTATION_AUTO, 0)  # NVDEC hands frames out as stored
        self._start_at(start_frame)
        self.buffer_size, self.gpu_id, self.ended = buffer_size, gpu_id, False
        self.reconfigured: list[str] = []
        self.starts: list[int] = [start_frame]
        _ThreadedDecoder.instances.append(self)

    def _start_at(self, frame: int) -> None:
        if frame:  # (MJPG in AVI: OpenCV sets the exact frame)
            self.capture.set(cv2.CAP_PROP_POS_FRAMES, self.lands(frame))

    def get_stream_metadata(self) -> types.SimpleNamespace:
        return types.SimpleNamespace(average_fps=self.capture.get(cv2.CAP_PROP_FPS),
                                     num_frames=int(self.capture.get(cv2.CAP_PROP_FRAME_COUNT)))

    def get_batch_frames(self, n: int) -> list[_Frame]:
        assert n <= self.buffer_size
        frames = []
        while len(frames) < n:
            ok, bgr = self.capture.read()
            if not ok:
                break
            pts = round(self.capture.get(cv2.CAP_PROP_POS_MSEC) / 1000 * TICKS_PER_SECOND) + 1024  # MP4 edit offset
            frames.append(_Frame(torch.from_numpy(np.ascontiguousarray(bgr[..., ::-1])), pts))
        _ThreadedDecoder.decoded += len(frames)
        return frames

    def reconfigure_decoder(self, path: str, start_frame: int = 0) -> None:
        assert not self.ended
        self.capture.release()
        self.capture = _open_or_raise(path)
        self.capture.set(cv2.CAP_PROP_ORIENTATION_AUTO, 0)
        self._start_at(start_frame)
        self.reconfigured.append(path)
        self.starts.append(start_frame)

    def end(self) -> None:
        self.ended = True
        self.capture.release()


class _SimpleDecoder(_ThreadedDecoder):
    """Decodes in the caller's thread (where its exceptions can be caught)."""

    made: ClassVar[int] = 0

    def __init__(self, path: str, gpu_id: int = 0, use_device_memory: bool = True,
                 output_color_type: object = None) -> None:
        super().__init__(path, _DECODE_AHEAD, gpu_id, use_device_memory, output_color_type)
        _ThreadedDecoder.instances.remove(self)
        _SimpleDecoder.made += 1


@pytest.fixture
def fake_nvdec(monkeypatch):
    module = types.ModuleType("PyNvVideoCodec")
    module.CreateDemuxer = _Demuxer
    module.ThreadedDecoder = _ThreadedDecoder
    module.SimpleDecoder = _SimpleDecoder
    module.OutputColorType = types.SimpleNamespace(RGB="RGB")
    monkeypatch.setitem(sys.modules, "PyNvVideoCodec", module)
    monkeypatch.setattr(nvdec, "_pool", nvdec._DecoderPool())  # no decoder or probe carried over from a test
    _ThreadedDecoder.instances.clear()
    _ThreadedDecoder.decoded = 0
    _SimpleDecoder.made = 0
    return module


@pytest.fixture(scope="module")
def clip(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("nvdec") / "clip.avi"  # MJPG/AVI: the header declares the frame count
    synth.write_video(path, synth.numbered_frames(COUNT), FPS, fourcc="MJPG")
    return path


def test_frames_timestamps_and_pixels_match_the_opencv_source(monkeypatch, fake_nvdec, clip):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # (a GPU host may have no second GPU)
    with VideoSource(clip) as cpu, NvdecVideoSource(clip, device="cuda:1") as gpu:
        assert gpu.info == cpu.info and gpu.expected_frames == COUNT
        expected, got = list(cpu), list(gpu)
    decoder = _ThreadedDecoder.instances[-1]
    assert decoder.gpu_id == 1 and not decoder.ended  # kept for the next source
    nvdec._pool.close()  # (as at exit)
    assert decoder.ended
    assert len(got) == len(expected) == COUNT
    for a, b in zip(expected, got):
        assert isinstance(b, DeviceFrame) and b.pixels.dtype == torch.uint8
        assert (b.index, b.height, b.width) == (a.index, a.height, a.width)
        assert b.timestamp_s == pytest.approx(a.timestamp_s, abs=1e-4)  # PTS counted from the first frame
        np.testing.assert_array_equal(b.bgr, a.bgr)  # RGB from the decoder, BGR out


def test_start_end_and_max_frames_as_for_the_opencv_source(fake_nvdec, clip):
    ranges = ({"start_s": 1.0}, {"start_s": 0.5, "end_s": 1.5}, {"max_frames": 7}, {"start_s": 2.0, "max_frames": 3})
    for options in ranges:
        with VideoSource(clip, **options) as cpu, NvdecVideoSource(clip, **options) as gpu:
            expected, got = list(cpu), list(gpu)
        assert [f.index for f in got] == [f.index for f in expected], options
        assert [f.timestamp_s for f in got] == pytest.approx([f.timestamp_s for f in expected], abs=1e-4)
    with pytest.raises(UsageError, match="start time"):
        NvdecVideoSource(clip, start_s=COUNT / FPS + 1)


SEEK_LANDINGS = {  # where PyNvVideoCodec's seek to frame f lands, and the frames a start at frame 47 asks for
    "on the frame": (lambda f: f, [47]),
    "on the key frame before": (lambda f: f - f % 16, [47]),
    # an open GOP: the frames shown just before a key frame (here 46 and 47) are decoded after it, from the GOP
    # before; a seek to them lands on the key frame. Asked again 1 s (25 frames) before.
    "open GOP": (lambda f: f - f % 16 + (16 if f % 16 >= 14 else 0), [47, 22]),
    "past unless from the start": (lambda f: max(f, 50), [47, 22, 0]),  # 5 s back: frame 0, the start
}


def _frames_47_to_54_as_opencv_reads_them(clip: Path) -> None:
    """From 1.88 s to 2.2 s NVDEC gives frames 47 to 54, each as the OpenCV source gives it."""
    with VideoSource(clip, start_s=1.88, end_s=2.2) as cpu:
        expected = list(cpu)
    with NvdecVideoSource(clip, start_s=1.88, end_s=2.2) as gpu:
        got = list(gpu)
    assert [f.index for f in got] == [f.index for f in expected] == list(range(47, 55))
    assert [f.timestamp_s for f in got] == pytest.approx([f.timestamp_s for f in expected], abs=1e-4)
    for a, b in zip(expected, got):
        np.testing.assert_array_equal(b.bgr, a.bgr)


@pytest.mark.parametrize("landing", list(SEEK_LANDINGS))
def test_a_start_time_seeks_and_checks_where_the_seek_landed(monkeypatch, fake_nvdec, clip, landing):
    lands, asks = SEEK_LANDINGS[landing]
    monkeypatch.setattr(_ThreadedDecoder, "lands", staticmethod(lands))
    _frames_47_to_54_as_opencv_reads_them(clip)
    assert _ThreadedDecoder.instances[-1].starts == [0, *asks]  # (0: the first frame, read before the seek)


@pytest.mark.parametrize("failure", ["cannot seek", "lands off the frame rate's grid"])
def test_a_seek_that_fails_or_lands_off_the_grid_decodes_from_the_beginning(monkeypatch, fake_nvdec, clip, failure):
    class Failing(_ThreadedDecoder):
        seeked = False

        def reconfigure_decoder(self, path: str, start_frame: int = 0) -> None:
            if start_frame and failure == "cannot seek":
                raise RuntimeError("Seek : \nError Type : seeking failed")
            super().reconfigure_decoder(path, start_frame)
            self.seeked = start_frame > 0

        def get_batch_frames(self, n: int) -> list[_Frame]:
            frames = super().get_batch_frames(n)
            if self.seeked:  # half a frame's interval late: a variable frame rate's times, not this rate's grid
                frames = [_Frame(f._rgb, f.getPTS() + TICKS_PER_SECOND // round(2 * FPS)) for f in frames]
            return frames

    monkeypatch.setattr(fake_nvdec, "ThreadedDecoder", Failing)
    _frames_47_to_54_as_opencv_reads_them(clip)
    first = _ThreadedDecoder.instances[0]
    if failure == "cannot seek":  # set aside unended (its next call might never return), a new one from the start
        assert nvdec._pool._abandoned == [first] and not first.ended and len(_ThreadedDecoder.instances) == 2
        assert _ThreadedDecoder.instances[1].starts == [0]
    else:  # the same decoder, pointed at the beginning again
        assert first.starts == [0, 47, 0] and len(_ThreadedDecoder.instances) == 1


def test_truncated_video_is_reported_like_the_opencv_source(fake_nvdec, clip, tmp_path):
    cut = synth.truncate(clip, tmp_path / "cut.avi", keep=0.5)
    with NvdecVideoSource(cut) as source:
        frames = list(source)
        message = source.ended_early
    assert 10 < len(frames) < COUNT and [f.index for f in frames] == list(range(len(frames)))
    assert message is not None and "truncated" in message
    assert f"decoding stopped at frame {len(frames)} of {COUNT} ({format_time(len(frames) / FPS)})" in message


def test_unreadable_and_missing_files(fake_nvdec, tmp_path):
    text = tmp_path / "notes.mp4"
    text.write_text("not a video " * 100)
    with pytest.raises(InputUnreadableError, match=r"cannot read .*notes\.mp4 with NVDEC: Invalid data found"):
        NvdecVideoSource(text)
    with pytest.raises(InputNotFoundError):
        NvdecVideoSource(tmp_path / "missing.mp4")


def test_device_frames_are_validated():
    with pytest.raises(ValueError, match="H×W×3 uint8"):
        DeviceFrame(index=0, timestamp_s=0.0, pixels=torch.zeros(4, 4, dtype=torch.uint8), read_time=0.0)


# -- choosing the decoder ------------------------------------------------------------------------

def test_why_nvdec_is_unavailable(monkeypatch, fake_nvdec):
    assert "device is cpu" in nvdec_unavailable(torch.device("cpu"))
    monkeypatch.setitem(sys.modules, "PyNvVideoCodec", None)  # not installed
    assert "pip install 'emopipe[nvdec]'" in nvdec_unavailable(torch.device("cuda"))


def test_auto_uses_nvdec_for_videos_where_available_and_opencv_otherwise(monkeypatch, fake_nvdec, clip, tmp_path):
    image = tmp_path / "face.png"
    cv2.imwrite(str(image), synth.astronaut_bgr())
    # On a CPU run (and wherever NVDEC is missing) auto decodes with OpenCV; nvdec is an error.
    with open_input(clip, decoder="auto", device="cpu") as source:
        assert type(source) is VideoSource and source.decoder == "opencv"
    with pytest.raises(UsageError, match="--decoder nvdec: NVDEC decodes on an NVIDIA GPU"):
        open_input(clip, decoder="nvdec", device="cpu")
    # Where NVDEC is available, auto takes it for video files only.
    monkeypatch.setattr(nvdec, "nvdec_unavailable", lambda device: None)
    with open_input(clip, decoder="auto", device="cuda") as source:
        assert type(source) is NvdecVideoSource and source.decoder == "nvdec"
    with open_input(clip, decoder="opencv", device="cuda") as source:
        assert type(source) is VideoSource
    with open_input(image, decoder="auto", device="cuda") as source:
        assert type(source) is ImageSource
    with open_input(tmp_path, decoder="auto", device="cuda") as source:
        assert type(source) is FolderSource
    with pytest.raises(UsageError, match="decodes video files"):
        open_input(image, decoder="nvdec", device="cuda")
    with pytest.raises(UsageError, match="--decoder must be one of"):
        open_input(clip, decoder="gpu", device="cuda")


def test_auto_falls_back_to_opencv_when_nvdec_cannot_open_a_file(monkeypatch, fake_nvdec, clip):
    monkeypatch.setattr(nvdec, "nvdec_unavailable", lambda device: None)

    def refuse(path: str) -> None:
        raise RuntimeError("cuvidCreateDecoder : codec not supported\n at NvDecoder.cpp:1")

    monkeypatch.setattr(fake_nvdec, "CreateDemuxer", refuse)
    with open_input(clip, decoder="auto", device="cuda") as source:
        assert type(source) is VideoSource and len(list(source)) == COUNT
    with pytest.raises(InputUnreadableError, match=r"with NVDEC: cuvidCreateDecoder : codec not supported$"):
        open_input(clip, decoder="nvdec", device="cuda")


def test_h264_in_matroska_is_read_by_opencv(monkeypatch, fake_nvdec, clip, tmp_path):
    """PyNvVideoCodec 2.2.4's threaded decoder gave an H.264 Matroska file with audio (as OBS records) from 2 s on: its
    last 30 of 90 frames, taken for frames 0-29 and reported truncated (H200, session 42). H.264 in Matroska goes to
    OpenCV; other codecs in Matroska and H.264 in other containers stay on NVDEC."""
    video = tmp_path / "recording.mkv"
    synth.write_video(video, synth.numbered_frames(COUNT), FPS, fourcc="MJPG")
    monkeypatch.setattr(nvdec, "nvdec_unavailable", lambda device: None)
    with open_input(video, decoder="auto", device="cuda") as source:  # (MJPEG in Matroska)
        assert type(source) is NvdecVideoSource
    monkeypatch.setattr(_Demuxer, "GetNvCodecId", lambda self: "cudaVideoCodec.H264")
    with open_input(clip, decoder="auto", device="cuda") as source:  # (H.264 in AVI, as the demuxer says)
        assert type(source) is NvdecVideoSource
    with open_input(video, decoder="auto", device="cuda") as source:
        frames = list(source)
        assert type(source) is VideoSource and source.ended_early is None
    assert [f.index for f in frames] == list(range(COUNT))
    with pytest.raises(InputUnreadableError, match=r"recording\.mkv with NVDEC: H\.264 in Matroska, which "
                                                   r"PyNvVideoCodec 2\.2\.4 reads from the wrong frame .*ffmpeg -i "
                                                   r"IN\.mkv -c copy OUT\.mp4\)$"):
        open_input(video, decoder="nvdec", device="cuda")


# -- the pipeline with frames already on the device ---------------------------------------------

def _run_pipeline(source, detect_batch: int = 1) -> tuple[list, object]:
    """The rows a CPU pipeline (BlazeFace, a pixel-statistics engine) writes for ``source``, and its summary."""
    results = []
    sink = types.SimpleNamespace(write=results.append, close=lambda: None)
    pipeline = Pipeline(source, create_detector("blazeface", device="cpu", batch_size=detect_batch),
                        FaceCropper(device=torch.device("cpu")), PixelEngine(batch_size=3), [sink],
                        settings=PipelineSettings(detect_batch=detect_batch))
    pipeline.run()
    return results, pipeline.summary()


def test_pipeline_results_from_device_frames_equal_those_from_host_frames(fake_nvdec, models_home, tmp_path):
    path = tmp_path / "two.mp4"
    moving_face_video(path, frames=12, size=(400, 240), two_faces=True)

    with VideoSource(path) as cpu, NvdecVideoSource(path) as gpu:
        (expected, cpu_summary), (got, gpu_summary) = _run_pipeline(cpu), _run_pipeline(gpu)
    assert (cpu_summary.decoder, gpu_summary.decoder) == ("opencv", "nvdec")
    assert [r.frame.index for r in got] == list(range(12))
    assert sum(len(r.faces) for r in got) == sum(len(r.faces) for r in expected) == 24
    for a, b in zip(expected, got):
        assert isinstance(b.frame, DeviceFrame)
        np.testing.assert_allclose([f.valence for f in b.faces], [f.valence for f in a.faces], atol=1e-6)
        np.testing.assert_allclose(b.crop_boxes, a.crop_boxes, atol=1e-4)


def test_a_batch_of_frames_from_nvdec_and_opencv_together(fake_nvdec, models_home, tmp_path):
    # An archive where NVDEC decodes one source and not the next (H.264 4:4:4, AV1 on an H100) puts frames of both
    # into one batch; the device frames were once stacked alone and the run ended in an internal error (H100).
    path = tmp_path / "two.mp4"
    moving_face_video(path, frames=12, size=(400, 240), two_faces=True)

    class Alternating:  # the NVDEC source, with every odd frame as OpenCV decodes it
        def __init__(self, gpu: NvdecVideoSource, cpu: VideoSource) -> None:
            self._gpu, self._cpu = gpu, cpu

        def __getattr__(self, name: str):
            return getattr(self._gpu, name)

        def __iter__(self):
            for on_gpu, on_cpu in zip(self._gpu, self._cpu):
                yield on_gpu if on_gpu.index % 2 == 0 else on_cpu

    with VideoSource(path) as cpu:
        expected, _ = _run_pipeline(cpu, detect_batch=4)  # four frames, of both kinds, a detector call
    with VideoSource(path) as cpu, NvdecVideoSource(path) as gpu:
        got, _ = _run_pipeline(Alternating(gpu, cpu), detect_batch=4)
    assert [type(r.frame) is DeviceFrame for r in got] == [i % 2 == 0 for i in range(12)]
    assert sum(len(r.faces) for r in got) == sum(len(r.faces) for r in expected) == 24
    for a, b in zip(expected, got):
        np.testing.assert_allclose([f.valence for f in b.faces], [f.valence for f in a.faces], atol=1e-6)
        np.testing.assert_allclose(b.crop_boxes, a.crop_boxes, atol=1e-4)
    # Which frames share a batch above depends on the reader's pace; here one batch holds both kinds for sure.
    with VideoSource(path) as cpu, NvdecVideoSource(path) as gpu:
        host, device = list(cpu)[:3], list(gpu)[:3]
        pipeline = Pipeline(cpu, create_detector("blazeface", device="cpu"), FaceCropper(device=torch.device("cpu")),
                            PixelEngine(batch_size=3), [], settings=PipelineSettings())
        pixels = pipeline._upload([device[0], host[1], device[2]])
    assert pixels.shape == (3, 240, 400, 3)
    for row, frame in zip(pixels, host):
        np.testing.assert_array_equal(row.numpy(), frame.bgr)


def test_a_resolution_change_within_a_decoded_batch(monkeypatch, fake_nvdec, clip):
    read = _ThreadedDecoder.get_batch_frames

    def smaller_from_frame_30(self, n: int) -> list[_Frame]:
        frames = read(self, n)
        first = round(self.capture.get(cv2.CAP_PROP_POS_FRAMES)) - len(frames)
        for i, frame in enumerate(frames):
            if first + i >= 30:
                frame._rgb = frame._rgb[:60, :80].contiguous()
        return frames

    monkeypatch.setattr(_ThreadedDecoder, "get_batch_frames", smaller_from_frame_30)
    with VideoSource(clip) as cpu, NvdecVideoSource(clip) as gpu:
        expected, got = list(cpu), list(gpu)
    assert [(f.height, f.width) for f in got] == [(120, 160)] * 30 + [(60, 80)] * 30
    for a, b in zip(expected, got):
        np.testing.assert_array_equal(b.bgr, a.bgr[: b.height, : b.width])


@pytest.mark.parametrize("degrees", [90, 270])
def test_rotation_metadata_is_applied_as_opencv_applies_it(fake_nvdec, clip, tmp_path, degrees):
    if shutil.which("ffmpeg") is None:
        pytest.skip("needs the ffmpeg command line tool")
    plain, rotated = tmp_path / "plain.mp4", tmp_path / f"phone_{degrees}.mp4"
    subprocess.run(["ffmpeg", "-loglevel", "error", "-y", "-i", str(clip), "-c:v", "mpeg4", "-q:v", "2", str(plain)],
                   check=True)
    # a phone's portrait recording: landscape frames and the rotation as metadata
    subprocess.run(["ffmpeg", "-loglevel", "error", "-y", "-i", str(plain), "-c", "copy",
                    "-metadata:s:v:0", f"rotate={degrees}", str(rotated)], check=True)
    with VideoSource(rotated) as cpu, NvdecVideoSource(rotated) as gpu:
        assert (gpu.info.width, gpu.info.height) == (cpu.info.width, cpu.info.height) == (120, 160)
        expected, got = list(cpu), list(gpu)
    assert len(got) == len(expected) == COUNT
    for a, b in zip(expected, got):
        np.testing.assert_array_equal(b.bgr, a.bgr)


@pytest.mark.skipif(shutil.which("ffmpeg") is None, reason="needs Debian's ffmpeg to write a transport stream")
def test_a_transport_stream_is_left_to_opencv(monkeypatch, fake_nvdec, clip, tmp_path):
    # (was: NVDEC's threaded decoder gave 50 of a 300-frame .ts file's frames, and one pointed at a .ts after an MP4 of
    # the same format — a folder holding both — aborted the process; H200, session 40)
    monkeypatch.setattr(nvdec, "nvdec_unavailable", lambda device: None)
    stream = tmp_path / "camera.mts"  # (told by its bytes, whatever its name)
    subprocess.run(["ffmpeg", "-loglevel", "error", "-i", str(clip), "-c:v", "libx264", "-f", "mpegts", str(stream)],
                   check=True, timeout=60)
    with open_input(clip, decoder="nvdec", device="cuda") as source:  # an MP4-like file first: a decoder is kept
        assert len(list(source)) == COUNT
    made = len(_ThreadedDecoder.instances)
    with open_input(stream, decoder="auto", device="cuda") as source:
        assert type(source) is VideoSource and len(list(source)) == COUNT and source.ended_early is None
    with pytest.raises(InputUnreadableError, match=r"camera\.mts with NVDEC: an MPEG transport stream"):
        open_input(stream, decoder="nvdec", device="cuda")
    assert nvdec.decoded_frame_size(stream, device="cuda") is None  # (a worker warms for it as OpenCV decodes it)
    assert len(_ThreadedDecoder.instances) == made and all(not d.reconfigured for d in _ThreadedDecoder.instances)


def test_a_stream_nvdec_cannot_decode_is_refused_before_the_threaded_decoder_starts(monkeypatch, fake_nvdec, clip):
    # PyNvVideoCodec's threaded decoder throws in its own thread on such a stream, which aborts the process.
    monkeypatch.setattr(nvdec, "nvdec_unavailable", lambda device: None)

    class Unsupported(_SimpleDecoder):
        def get_batch_frames(self, n: int) -> list[_Frame]:
            raise RuntimeError("HandleVideoSequence : \nError code : 801\nError Type : Codec not supported on this "
                               "GPU\nat NvDecoder.cpp:274\n")

    monkeypatch.setattr(fake_nvdec, "SimpleDecoder", Unsupported)
    with pytest.raises(InputUnreadableError, match=r"with NVDEC: Codec not supported on this GPU$"):
        NvdecVideoSource(clip)
    with open_input(clip, decoder="auto", device="cuda") as source:  # auto: OpenCV instead
        assert type(source) is VideoSource and len(list(source)) == COUNT
    assert _ThreadedDecoder.instances == []

    class NoFrames(_SimpleDecoder):  # a stream NVDEC opens but decodes nothing from
        def get_batch_frames(self, n: int) -> list[_Frame]:
            return []

    monkeypatch.setattr(fake_nvdec, "SimpleDecoder", NoFrames)
    with pytest.raises(InputUnreadableError, match="with NVDEC: no frame decodes"):
        NvdecVideoSource(clip)
    assert _ThreadedDecoder.instances == []


def test_no_decoder_is_made_on_a_gpu_almost_out_of_memory(monkeypatch, fake_nvdec, clip):
    # PyNvVideoCodec ends the process (exit 1, no exception) when a decoder cannot get GPU memory: a run on a GPU
    # that other programs filled ended without a line of emopipe's (H200, 0.3 GiB free, session 41)
    monkeypatch.setattr(nvdec, "nvdec_unavailable", lambda device: None)
    monkeypatch.setattr(nvdec, "_gpu_free_bytes", lambda gpu: 300 << 20)
    with pytest.raises(InputUnreadableError, match=r"with NVDEC: the GPU has 300 MiB free, under the 1024 MiB"):
        NvdecVideoSource(clip)
    with open_input(clip, decoder="auto", device="cuda") as source:  # auto: OpenCV instead
        assert type(source) is VideoSource and len(list(source)) == COUNT
    assert _SimpleDecoder.made == 0 and _ThreadedDecoder.instances == []
    monkeypatch.setattr(nvdec, "_gpu_free_bytes", lambda gpu: nvdec.NVDEC_MIN_FREE_BYTES)
    with NvdecVideoSource(clip) as first:  # enough: NVDEC
        monkeypatch.setattr(nvdec, "_gpu_free_bytes", lambda gpu: 300 << 20)
        with pytest.raises(InputUnreadableError, match="300 MiB free"):
            NvdecVideoSource(clip)  # a format probed before, but a second decoder: refused too
        assert len(list(first)) == COUNT
    with NvdecVideoSource(clip) as source:  # the first's decoder, kept: no new memory asked
        assert len(list(source)) == COUNT


def test_a_source_probed_ahead_opens_without_a_second_probe(monkeypatch, fake_nvdec, clip):
    # (a worker probes its first source while its engines load: its reader then starts its decoder at once)
    monkeypatch.setattr(nvdec, "nvdec_unavailable", lambda device: None)
    capture = cv2.VideoCapture(str(clip))
    size = int(capture.get(cv2.CAP_PROP_FRAME_HEIGHT)), int(capture.get(cv2.CAP_PROP_FRAME_WIDTH))
    capture.release()
    assert nvdec.probe_ahead(clip, device="cuda") == size
    assert _SimpleDecoder.made == 1 and _ThreadedDecoder.instances == []  # probed; no decoding thread started
    assert nvdec.decoded_frame_size(clip, device="cuda") == size and _SimpleDecoder.made == 1
    with NvdecVideoSource(clip) as source:
        assert len(list(source)) == COUNT
    assert _SimpleDecoder.made == 1 and len(_ThreadedDecoder.instances) == 1
    assert nvdec.probe_ahead(clip, decoder="opencv", device="cuda") is None and _SimpleDecoder.made == 1

    class Unsupported(_SimpleDecoder):
        def get_batch_frames(self, n: int) -> list[_Frame]:
            raise RuntimeError("HandleVideoSequence : \nError code : 801\nError Type : Codec not supported\n")

    monkeypatch.setattr(fake_nvdec, "SimpleDecoder", Unsupported)
    monkeypatch.setattr(nvdec, "_pool", nvdec._DecoderPool())
    assert nvdec.probe_ahead(clip, device="cuda") is None  # left to its reader, which says why
    with pytest.raises(InputUnreadableError, match=r"with NVDEC: Codec not supported$"):
        NvdecVideoSource(clip)


def test_the_native_logger_is_kept_off_stdout_unless_the_user_asks(monkeypatch, fake_nvdec):
    # PyNvVideoCodec's native warnings go to stdout, where `-o -` writes rows (seen on the GPU host).
    monkeypatch.delenv("LOGGER_LEVEL", raising=False)
    nvdec_unavailable(torch.device("cuda"))
    assert os.environ["LOGGER_LEVEL"] == "FATAL"
    monkeypatch.setenv("LOGGER_LEVEL", "WARN")
    nvdec_unavailable(torch.device("cuda"))
    assert os.environ["LOGGER_LEVEL"] == "WARN"


def test_every_reader_on_a_gpu_copies_on_one_stream(monkeypatch, fake_nvdec, clip):
    # PyTorch caches freed GPU memory per stream: a stream per source let an archive's readers hold the
    # buffers of every earlier one (19 GB after 64 clips on an H100). All readers of a GPU share one.
    made = []

    class CountedStream:
        def __init__(self, device):
            made.append(device)

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(nvdec, "_gpu_free_bytes", lambda gpu: None)  # (no GPU to ask)
    monkeypatch.setattr(torch.cuda, "Stream", CountedStream)
    monkeypatch.setattr(nvdec, "_copy_streams", {})
    readers = [nvdec._NvdecReader(clip, 0) for _ in range(3)]
    other_gpu = nvdec._NvdecReader(clip, 1)
    assert readers[0]._stream is readers[1]._stream is readers[2]._stream
    assert other_gpu._stream is not readers[0]._stream
    assert made == [torch.device("cuda", 0), torch.device("cuda", 1)]
    for reader in (*readers, other_gpu):
        reader.release()


def _read_all(path: Path) -> list[tuple[int, float, np.ndarray]]:
    with NvdecVideoSource(path) as source:
        return [(f.index, f.timestamp_s, f.bgr) for f in source]


def _same_frames(a: list[tuple[int, float, np.ndarray]], b: list[tuple[int, float, np.ndarray]]) -> bool:
    return len(a) == len(b) and all(x[0] == y[0] and x[1] == y[1] and np.array_equal(x[2], y[2]) for x, y in zip(a, b))


@pytest.fixture
def small_clip(tmp_path) -> Path:
    path = tmp_path / "small.avi"  # another resolution and frame count than `clip`
    synth.write_video(path, synth.numbered_frames(12, size=(160, 96)), 10.0, fourcc="MJPG")
    return path


def test_one_decoder_reads_source_after_source(fake_nvdec, clip, small_clip):
    # Setting a decoder up cost ~290 ms on the H100 and its probe as much; reusing one, ~16 ms.
    first = _read_all(clip)
    assert len(_ThreadedDecoder.instances) == 1 and _SimpleDecoder.made == 1
    assert _same_frames(_read_all(clip), first)  # the kept decoder reads from the first frame again
    small = _read_all(small_clip)
    assert len(small) == 12 and small[0][2].shape == (96, 160, 3)
    decoder = _ThreadedDecoder.instances[0]
    assert len(_ThreadedDecoder.instances) == 1 and decoder.reconfigured == [str(clip), str(small_clip)]
    assert _SimpleDecoder.made == 2  # a new stream format (another size) is probed; a known one is not


def test_a_source_left_mid_stream_hands_back_a_decoder_that_starts_the_next_from_its_beginning(fake_nvdec, clip):
    expected = _read_all(clip)
    with NvdecVideoSource(clip) as source:
        for frame in source:
            if frame.index == 20:  # past the first batch of decoded frames
                break
    assert _same_frames(_read_all(clip), expected)
    assert len(_ThreadedDecoder.instances) == 1


def test_a_decoder_keeps_to_one_pixel_format(monkeypatch, fake_nvdec, clip):
    # PyNvVideoCodec aborts the process when a reused decoder meets another bit depth or chroma format, and its
    # demuxer calls every stream 8-bit 4:2:0; OpenCV's pixel format tells them apart.
    real = nvdec._container_facts
    facts = {"format": real(clip)}
    assert facts["format"].pixel_format is not None  # (FFmpeg's tag for this MJPG clip's pixels)
    monkeypatch.setattr(nvdec, "_container_facts", lambda path: facts["format"])
    _read_all(clip)
    facts["format"] = replace(facts["format"], pixel_format=int.from_bytes(b"Y3\x0b\n", "little"))  # 10-bit 4:2:0
    _read_all(clip)
    assert len(_ThreadedDecoder.instances) == 2 and _ThreadedDecoder.instances[0].reconfigured == []
    assert _SimpleDecoder.made == 2  # and probed: another format
    facts["format"] = real(clip)
    _read_all(clip)  # 8-bit again: the first decoder
    assert len(_ThreadedDecoder.instances) == 2 and _ThreadedDecoder.instances[0].reconfigured == [str(clip)]


def test_a_stream_of_unknown_pixel_format_gets_its_own_probe_and_decoder(monkeypatch, fake_nvdec, clip):
    monkeypatch.setattr(nvdec, "_container_facts", lambda path: nvdec._ContainerFacts(0, None))
    first = _read_all(clip)
    assert _same_frames(_read_all(clip), first)
    assert _SimpleDecoder.made == 2 and len(_ThreadedDecoder.instances) == 2
    assert all(d.ended and d.reconfigured == [] for d in _ThreadedDecoder.instances)


def test_sources_open_at_once_each_get_their_own_decoder_and_only_a_few_are_kept(fake_nvdec, clip):
    sources = [NvdecVideoSource(clip) for _ in range(nvdec._DecoderPool.keep_idle + 2)]
    assert len({id(s._cap.decoder) for s in sources}) == len(sources)
    for source in sources:
        source.close()
    ended = [d.ended for d in _ThreadedDecoder.instances]
    assert ended.count(False) == nvdec._DecoderPool.keep_idle and ended.count(True) == 2


def test_a_decoder_that_failed_mid_stream_is_ended_not_kept(monkeypatch, fake_nvdec, clip):
    class FailsAt30(_ThreadedDecoder):
        def get_batch_frames(self, n: int) -> list[_Frame]:
            if self.capture.get(cv2.CAP_PROP_POS_FRAMES) >= 30:
                raise RuntimeError("DecodeFrame : \nError code : 1\nError Type : CUDA_ERROR_INVALID_VALUE\n")
            return super().get_batch_frames(n)

    monkeypatch.setattr(fake_nvdec, "ThreadedDecoder", FailsAt30)
    with NvdecVideoSource(clip) as source:
        assert len(list(source)) == 32  # two batches of 16
    assert _ThreadedDecoder.instances[0].ended
    _read_all(clip)
    assert len(_ThreadedDecoder.instances) == 2  # a new one for the next source


def test_a_failed_reconfiguration_sets_the_decoder_aside_unended(monkeypatch, fake_nvdec, clip, tmp_path):
    # On the H100 a decoder whose reconfiguration failed never returned from its next call, end() included.
    monkeypatch.setattr(nvdec, "nvdec_unavailable", lambda device: None)
    _read_all(clip)
    kept = _ThreadedDecoder.instances[0]

    def fails(path: str, start_frame: int = 0) -> None:
        raise RuntimeError('CreateFormatContext : \nError Type : avformat_open_input returned error " No such file"')

    monkeypatch.setattr(kept, "reconfigure_decoder", fails)
    with pytest.raises(InputUnreadableError, match=r"with NVDEC: No such file$"):
        NvdecVideoSource(clip)
    assert not kept.ended and nvdec._pool._abandoned == [kept]
    with open_input(clip, decoder="auto", device="cuda") as source:  # the next source: a new decoder
        assert type(source) is NvdecVideoSource and len(list(source)) == COUNT
    assert len(_ThreadedDecoder.instances) == 2 and not kept.ended
