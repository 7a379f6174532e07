"""Frame sources: videos (complete, seeked, truncated, corrupt, variable frame rate), images, folders."""

from __future__ import annotations

import itertools
import math
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import cv2
import numpy as np
import pytest

from emopipe.errors import InputNotFoundError, InputUnreadableError, UsageError
from emopipe.io.images import FolderSource, ImageSource, natural_key
from emopipe.io.sources import SOURCES, Source, format_time, open_source, source_kind
from emopipe.io.video import VideoSource
from emopipe.types import Frame, HostFrame, SourceInfo
from tests.support import synth

REPO = Path(__file__).resolve().parents[1]
FPS = 25.0
COUNT = 60
needs_ffmpeg = pytest.mark.skipif(shutil.which("ffmpeg") is None, reason="needs the ffmpeg command line tool")


@pytest.fixture(scope="module")
def videos(tmp_path_factory) -> dict[str, Path]:
    """The same 60 numbered frames as MJPG/AVI (count in the header) and mp4v/MP4 (index at the end)."""
    folder = tmp_path_factory.mktemp("videos")
    frames = synth.numbered_frames(COUNT)
    paths = {"avi": folder / "clip.avi", "mp4": folder / "clip.mp4"}
    synth.write_video(paths["avi"], frames, FPS, fourcc="MJPG")
    synth.write_video(paths["mp4"], frames, FPS, fourcc="mp4v")
    return paths


@pytest.fixture(scope="module")
def faststart_mp4(videos, tmp_path_factory) -> Path:
    """An MP4 with its index first (as streamed files are), so a cut copy still opens."""
    if shutil.which("ffmpeg") is None:
        pytest.skip("needs the ffmpeg command line tool")
    target = tmp_path_factory.mktemp("faststart") / "clip_faststart.mp4"
    subprocess.run(["ffmpeg", "-loglevel", "error", "-y", "-i", str(videos["mp4"]), "-c", "copy",
                    "-movflags", "+faststart", str(target)], check=True)
    return target


def read_all(source: Source) -> list[Frame]:
    with source:
        return list(source)


# -- complete videos ---------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["avi", "mp4"])
def test_video_yields_every_frame_with_index_timestamp_and_pixels(videos, kind):
    original = synth.numbered_frames(COUNT)
    with VideoSource(videos[kind]) as source:
        info = source.info
        frames = list(source)
        assert source.ended_early is None
    assert (info.kind, info.fps, info.frame_count, info.width, info.height) == ("video", FPS, COUNT, 160, 120)
    assert info.duration_s == pytest.approx(COUNT / FPS)
    assert [f.index for f in frames] == list(range(COUNT))
    assert [f.timestamp_s for f in frames] == pytest.approx([i / FPS for i in range(COUNT)])
    assert all(b.read_time >= a.read_time for a, b in itertools.pairwise(frames))
    for frame, truth in zip(frames, original, strict=True):
        assert frame.bgr.shape == (120, 160, 3) and frame.bgr.dtype == np.uint8
        assert np.abs(frame.bgr.astype(int) - truth).mean() < 6  # lossy codecs, but the same picture
    # frames are told apart: each is closer to its own original than to its neighbour's
    assert np.abs(frames[10].bgr.astype(int) - original[10]).mean() < np.abs(frames[10].bgr.astype(int)
                                                                             - original[11]).mean()


def test_video_of_a_moving_face_reads_as_a_stream(tmp_path):
    video = synth.moving_face_video(tmp_path / "face.mp4", frames=20, size=(320, 240))
    with open_source(video.path) as source:
        assert isinstance(source, VideoSource)
        assert (source.info.width, source.info.height, source.info.frame_count) == (320, 240, 20)
        assert source.expected_frames == 20
        count = sum(1 for _ in source)
    assert count == 20


@pytest.mark.parametrize("kind", ["avi", "mp4"])
@pytest.mark.parametrize(("start", "first_index"), [(1.0, 25), (1.01, 26), (0.98, 25), (2.36, 59)])
def test_start_seeks_to_the_true_frame_index(videos, kind, start, first_index):
    sequential = read_all(VideoSource(videos[kind]))
    with VideoSource(videos[kind], start_s=start) as source:
        frames = list(source)
        assert source.ended_early is None
    assert frames[0].index == first_index
    assert frames[0].timestamp_s == pytest.approx(first_index / FPS)
    assert [f.index for f in frames] == list(range(first_index, COUNT))
    for frame in frames[:3]:  # decoded from the keyframe before: the same pixels as reading from the start
        assert np.array_equal(frame.bgr, sequential[frame.index].bgr)


def test_end_is_exclusive_and_max_frames_caps(videos):
    with VideoSource(videos["avi"], start_s=0.4, end_s=1.0) as source:
        assert source.expected_frames == 15
        frames = list(source)
    assert [f.index for f in frames] == list(range(10, 25))
    with VideoSource(videos["avi"], max_frames=7) as source:
        assert source.expected_frames == 7
        assert [f.index for f in source] == list(range(7))
        assert source.ended_early is None


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"start_s": -1.0}, "start time"),
    ({"start_s": 2.0, "end_s": 1.5}, "end time"),
    ({"end_s": 0.0}, "end time"),
    ({"max_frames": 0}, "maximum frame count"),
    ({"start_s": 2.4}, "at or after the end"),
    ({"start_s": 99.0}, "at or after the end"),
])
def test_bad_ranges_are_usage_errors(videos, kwargs, message):
    with pytest.raises(UsageError, match=message):
        VideoSource(videos["avi"], **kwargs)


def test_iterating_twice_is_refused_and_close_stops_reading(videos):
    source = VideoSource(videos["avi"])
    iterator = iter(source)
    assert [next(iterator).index for _ in range(3)] == [0, 1, 2]
    with pytest.raises(RuntimeError, match="once"):
        iter(source)
    source.close()
    source.close()  # idempotent
    assert list(iterator) == []
    assert source.ended_early is None  # stopping early on purpose is not a damaged file


def test_close_from_another_thread_while_reading(videos):
    source = VideoSource(videos["avi"])
    seen = []
    for frame in source:
        seen.append(frame.index)
        if frame.index == 5:
            closer = threading.Thread(target=source.close)
            closer.start()
            closer.join()
    assert seen == list(range(6))


# -- variable frame rate -----------------------------------------------------------------------

@pytest.fixture(scope="module")
def vfr_video(tmp_path_factory) -> tuple[Path, list[float]]:
    """60 frames: the first 30 at 40 ms, the rest at 80 ms (what phones record in low light)."""
    if shutil.which("ffmpeg") is None:
        pytest.skip("needs the ffmpeg command line tool")
    path = tmp_path_factory.mktemp("vfr") / "vfr.mp4"
    subprocess.run(["ffmpeg", "-loglevel", "error", "-y", "-f", "lavfi", "-i", "testsrc=size=160x120:rate=25",
                    "-frames:v", "60", "-vf", "setpts='if(lt(N,30),N,30+(N-30)*2)/25/TB'", "-fps_mode", "vfr",
                    "-c:v", "mpeg4", "-q:v", "5", str(path)], check=True)
    # the truth is what FFmpeg's own probe reads back (the encoder rounds a time or two to its time base)
    probe = subprocess.run(["ffprobe", "-v", "error", "-select_streams", "v", "-show_entries", "frame=pts_time",
                            "-of", "csv=p=0", str(path)], capture_output=True, text=True, check=True)
    truth = [float(t) for t in probe.stdout.split()]
    assert len(truth) == 60 and truth[1] - truth[0] == pytest.approx(0.04) and truth[59] > 3.5
    return path, truth


def test_variable_frame_rate_keeps_the_containers_timestamps(vfr_video):
    path, truth = vfr_video
    frames = read_all(VideoSource(path))
    assert [f.index for f in frames] == list(range(60))
    assert [f.timestamp_s for f in frames] == pytest.approx(truth, abs=1e-6)
    fps = VideoSource(path).info.fps
    assert abs(frames[30].timestamp_s - 30 / fps) > 0.5  # index / (average rate) would be wrong here


def test_a_variable_frame_rate_matroska_file_is_not_reported_as_damaged(vfr_video, tmp_path):
    # Matroska stores no frame count: OpenCV estimates 90 from the duration and the nominal 25 fps,
    # and the 30 slow frames' timestamps jump as lost frames would (screen recorders write such files).
    _, truth = vfr_video
    mkv = tmp_path / "vfr.mkv"
    subprocess.run(["ffmpeg", "-loglevel", "error", "-y", "-f", "lavfi", "-i", "testsrc=size=160x120:rate=25",
                    "-frames:v", "60", "-vf", "setpts='if(lt(N,30),N,30+(N-30)*2)/25/TB'", "-fps_mode", "vfr",
                    "-c:v", "mpeg4", "-q:v", "5", str(mkv)], check=True)
    with VideoSource(mkv) as source:
        assert source.info.frame_count > 80 and source.info.fps == 25
        frames = list(source)
        assert source.ended_early is None
    assert [f.index for f in frames] == list(range(60))
    assert [f.timestamp_s for f in frames] == pytest.approx(truth, abs=2e-3)  # Matroska keeps milliseconds


@pytest.mark.parametrize("start", [0.5, 1.7, 3.0])
def test_seeking_a_variable_frame_rate_video_keeps_true_indexes(vfr_video, start):
    path, truth = vfr_video
    expected = next(i for i, t in enumerate(truth) if t >= start - 1e-9)
    frames = read_all(VideoSource(path, start_s=start))
    assert frames[0].index == expected
    assert frames[0].timestamp_s == pytest.approx(truth[expected], abs=1e-6)
    assert [f.index for f in frames] == list(range(expected, 60))


@needs_ffmpeg
@pytest.mark.parametrize("name", list(synth.SEEK_STREAMS))
def test_a_seek_gives_the_frames_decoding_from_the_start_gives(tmp_path, name):
    # The frame at each start, and those after it, as reading the video from its beginning gives them (index,
    # timestamp, pixels): start times on and around key frames, in open GOPs, HEVC, Matroska, at 29.97 frames/s.
    if name.startswith("hevc") and "libx265" not in subprocess.run(["ffmpeg", "-hide_banner", "-encoders"],
                                                                   capture_output=True, text=True).stdout:
        pytest.skip("this ffmpeg has no HEVC encoder")
    path = synth.seek_stream("ffmpeg", tmp_path / name, (192, 108), seconds=9.5)

    class FromTheStart(VideoSource):
        seeks = False

    whole = read_all(FromTheStart(path))
    interval = whole[1].timestamp_s - whole[0].timestamp_s
    for target in synth.SEEK_STARTS:
        with VideoSource(path, start_s=whole[target].timestamp_s - 0.1 * interval, max_frames=4) as source:
            got = list(source)
        expected = whole[target:target + 4]
        assert [f.index for f in got] == [f.index for f in expected], target
        assert [f.timestamp_s for f in got] == pytest.approx([f.timestamp_s for f in expected], abs=1e-9), target
        assert all(np.array_equal(a.bgr, b.bgr) for a, b in zip(got, expected)), target


# -- damaged videos ----------------------------------------------------------------------------

def test_truncated_avi_yields_what_decodes_then_says_where_it_stopped(videos, tmp_path):
    cut = synth.truncate(videos["avi"], tmp_path / "cut.avi", keep=0.5)
    with VideoSource(cut) as source:
        assert source.info.frame_count == COUNT  # the header still declares every frame
        frames = list(source)
        message = source.ended_early
    assert 10 < len(frames) < COUNT
    assert [f.index for f in frames] == list(range(len(frames)))
    assert message is not None
    assert f"decoding stopped at frame {len(frames)} of {COUNT} ({format_time(len(frames) / FPS)})" in message
    assert "truncated" in message


def test_truncated_faststart_mp4_is_reported(faststart_mp4, tmp_path):
    cut = synth.truncate(faststart_mp4, tmp_path / "cut.mp4", keep=0.6)
    with VideoSource(cut) as source:
        frames = list(source)
        assert 10 < len(frames) < COUNT
        assert source.ended_early is not None and f"of {COUNT}" in source.ended_early


@pytest.mark.skipif(shutil.which("ffmpeg") is None, reason="needs Debian's ffmpeg to write H.264 into AVI")
def test_an_avi_of_h264_with_b_frames_is_read_whole_and_not_reported_damaged(tmp_path, caplog):
    # (was: "30 of 60 frames could not be decoded (corrupt data …)" — FFmpeg's AVI muxer stores H.264 with B-frames
    # at twice the rate, every other frame slot empty, and the header counts the empty slots; seen on the H200 with
    # the benchmark clip remuxed, session 40)
    frames = synth.numbered_frames(30)
    source = tmp_path / "src.avi"
    synth.write_video(source, frames, 30.0, fourcc="MJPG")
    h264 = tmp_path / "b.mp4"
    subprocess.run(["ffmpeg", "-loglevel", "error", "-i", str(source), "-c:v", "libx264", "-bf", "2", "-g", "10",
                    str(h264)], check=True, timeout=60)
    avi = tmp_path / "b.avi"
    subprocess.run(["ffmpeg", "-loglevel", "error", "-i", str(h264), "-c", "copy", str(avi)], check=True, timeout=60)
    capture = cv2.VideoCapture(str(avi))
    declared = capture.get(cv2.CAP_PROP_FRAME_COUNT)
    capture.release()
    with VideoSource(avi) as read:
        got = list(read)
        assert declared > len(got) == 30  # (the header's count is not the frames')
        assert read.damaged is None and read.ended_early is None and read.frames_skipped == 0
    # real damage in such a file is still reported: half its bytes gone from the end
    cut = synth.truncate(avi, tmp_path / "cut.avi", keep=0.5)
    with VideoSource(cut) as read:
        assert len(list(read)) < 30 and (read.damaged or read.ended_early)


@pytest.mark.skipif(shutil.which("ffmpeg") is None, reason="needs Debian's ffmpeg to write transport streams")
@pytest.mark.parametrize("name, packet", [("clip.ts", 188), ("clip.m2ts", 192)])
def test_a_transport_stream_cut_inside_a_packet_is_reported_truncated(videos, tmp_path, name, packet):
    # (was: read as complete — FFmpeg estimates a transport stream's length from its bytes, so a cut-off download
    # is a shorter video that ends where it "should")
    whole = tmp_path / name
    subprocess.run(["ffmpeg", "-loglevel", "error", "-i", str(videos["mp4"]), "-c:v", "libx264", "-g", "5",
                    *(["-mpegts_m2ts_mode", "1"] if packet == 192 else []), "-f", "mpegts", str(whole)],
                   check=True, timeout=60)
    assert whole.stat().st_size % packet == 0
    with VideoSource(whole) as source:
        assert len(list(source)) == COUNT and source.ended_early is None  # whole packets: complete
    data = whole.read_bytes()
    middle = len(data) // 2 // packet * packet
    for cut_at, truncated in [(middle + 7, True), (middle, False)]:
        cut = tmp_path / f"cut{cut_at}{whole.suffix}"
        cut.write_bytes(data[:cut_at])
        with VideoSource(cut) as source:
            frames = list(source)
            assert 0 < len(frames) < COUNT
            if truncated:  # a cut at a packet's end is a stream that ends there: nothing tells it from a short one
                assert source.ended_early == (f"decoding stopped at frame {len(frames)}: it ends 7 bytes into a "
                                              f"{packet}-byte transport-stream packet: the file is truncated (an "
                                              "incomplete download or copy)")
            else:
                assert source.ended_early is None


@pytest.mark.skipif(shutil.which("ffmpeg") is None, reason="needs Debian's ffmpeg to write audio and video")
@pytest.mark.parametrize("suffix", [".mkv", ".ts"])
def test_a_video_whose_audio_goes_on_after_it_is_complete_and_one_cut_is_not(tmp_path, suffix):
    # (was: exit 8, 'decoding stopped at frame 10 of about 40: the file is truncated or corrupt' — Matroska and
    # transport streams store no frame count, and OpenCV estimates it from the file's duration, its audio's here)
    whole = tmp_path / f"talk{suffix}"
    subprocess.run(["ffmpeg", "-loglevel", "error", "-f", "lavfi", "-i", "testsrc=size=64x48:rate=10:duration=1",
                    "-f", "lavfi", "-i", "sine=duration=4", "-c:v", "mpeg4", "-c:a", "mp2", str(whole)],
                   check=True, timeout=60)
    with VideoSource(whole) as source:
        assert source.info.frame_count > 30  # the estimate: 4 s at 10/s
        assert len(list(source)) == 10 and source.ended_early is None and source.damaged is None
    if suffix == ".mkv":  # (a transport stream cut at a packet's end is a shorter one: nothing tells them apart)
        cut = tmp_path / f"cut{suffix}"
        cut.write_bytes(whole.read_bytes()[:whole.stat().st_size * 3 // 4])
        with VideoSource(cut) as source:
            assert len(list(source)) == 10 and source.ended_early is not None  # the audio ends at the cut


@pytest.mark.skipif(shutil.which("ffmpeg") is None, reason="needs Debian's ffmpeg to trim an MP4")
def test_an_mp4_trimmed_without_re_encoding_is_complete_and_one_cut_is_not(tmp_path):
    # (was: exit 8, 'decoding stopped at frame 24 of 30: the file is truncated or corrupt' — a lossless trim keeps the
    # frames from the key frame before its cut, which its edit list leaves out; the frame count counts them)
    whole = tmp_path / "whole.mp4"
    subprocess.run(["ffmpeg", "-loglevel", "error", "-f", "lavfi", "-i", "testsrc=size=64x48:rate=10:duration=3",
                    "-c:v", "libx264", "-g", "10", "-movflags", "+faststart", str(whole)], check=True, timeout=60)
    trimmed = tmp_path / "trimmed.mp4"
    subprocess.run(["ffmpeg", "-loglevel", "error", "-ss", "0.55", "-i", str(whole), "-c", "copy", str(trimmed)],
                   check=True, timeout=60)
    with VideoSource(trimmed) as source:
        assert source.info.frame_count == 30  # from the key frame at 0.0 s
        frames = list(source)
        assert 20 <= len(frames) < 30 and source.ended_early is None and source.damaged is None
    cut = tmp_path / "cut.mp4"  # (its index first: it opens)
    cut.write_bytes(whole.read_bytes()[:whole.stat().st_size * 2 // 3])
    with VideoSource(cut) as source:
        assert len(list(source)) < 30 and source.ended_early is not None


@pytest.mark.skipif(shutil.which("ffmpeg") is None, reason="needs Debian's ffmpeg to encode AV1")
def test_a_video_whose_codec_opencv_cannot_decode_names_the_codec(tmp_path):
    # (was: 'the video has no decodable frame', as for a damaged file: opencv-python's FFmpeg opens AV1, decodes none)
    clip = tmp_path / "phone.mkv"
    made = subprocess.run(["ffmpeg", "-loglevel", "error", "-f", "lavfi", "-i", "testsrc=size=64x48:rate=10",
                           "-frames:v", "2", "-c:v", "libaom-av1", "-cpu-used", "8", str(clip)], timeout=120)
    if made.returncode != 0:
        pytest.skip("this ffmpeg has no AV1 encoder (libaom-av1)")
    capture = cv2.VideoCapture(str(clip), cv2.CAP_FFMPEG)
    decodes = capture.read()[0]
    capture.release()
    if decodes:
        pytest.skip("this OpenCV decodes AV1")
    with pytest.raises(InputUnreadableError, match=r"frames decodes \(codec AV01\): this OpenCV/FFmpeg may have no "
                                                   r"decoder for it"):
        VideoSource(clip)


@pytest.mark.skipif(shutil.which("ffmpeg") is None, reason="needs Debian's ffmpeg to make an audio-only MP4")
def test_an_audio_only_mp4_says_it_has_no_video_not_that_it_is_truncated(tmp_path):
    audio = tmp_path / "talk.mp4"
    subprocess.run(["ffmpeg", "-loglevel", "error", "-f", "lavfi", "-i", "sine=frequency=440:duration=1",
                    "-c:a", "aac", str(audio)], check=True, timeout=60)
    with pytest.raises(InputUnreadableError, match=r"has no video stream \(only audio\)") as info:
        open_source(str(audio))
    assert "truncated" not in str(info.value)


def test_truncated_mp4_without_its_index_is_unreadable_and_says_why(videos, tmp_path):
    cut = synth.truncate(videos["mp4"], tmp_path / "cut.mp4", keep=0.7)
    with pytest.raises(InputUnreadableError, match=r"moov.*truncated"):
        VideoSource(cut)


def test_a_long_damaged_stretch_in_an_mp4_is_skipped_and_the_end_reached(tmp_path):
    """64 KiB of garbage in the middle: FFmpeg decodes the frames after it, and so does emopipe; the damage is
    reported (frames skipped), not an early end (exit 8 is for a lost end)."""
    clip = synth.moving_face_video(tmp_path / "clip.mp4", frames=75, size=(320, 240), empty=None)
    data = bytearray(clip.path.read_bytes())
    middle = len(data) // 2
    data[middle:middle + 65536] = np.random.default_rng(0).integers(0, 256, 65536, dtype=np.uint8).tobytes()
    damaged = tmp_path / "damaged.mp4"
    damaged.write_bytes(bytes(data))
    with VideoSource(damaged) as source:
        frames = list(source)
    assert source.ended_early is None and source.damaged is not None
    assert 0 < source.frames_skipped == 75 - len(frames)
    assert frames[-1].timestamp_s > 2.8  # the end of the 3-second clip was reached
    if shutil.which("ffmpeg"):  # as many frames as FFmpeg itself decodes
        decoded = subprocess.run(["ffmpeg", "-v", "error", "-i", str(damaged), "-f", "framemd5", "-"],
                                 capture_output=True, text=True, timeout=120).stdout
        assert len(frames) == sum(1 for line in decoded.splitlines() if line and not line.startswith("#"))


@pytest.mark.parametrize("container", ["avi", "mkv"])
def test_corruption_in_the_middle_is_reported_and_reading_goes_on(tmp_path, container):
    path = tmp_path / f"clip.{container}"
    synth.write_video(path, synth.numbered_frames(COUNT), FPS, fourcc="MJPG")
    damaged = synth.corrupt(path, tmp_path / f"damaged.{container}", at=0.5, length=4000)
    with VideoSource(damaged) as source:
        frames = list(source)
        message = source.ended_early or source.damaged
    assert COUNT - 5 <= len(frames) < COUNT  # only the damaged frames are lost: reading went past them
    assert message is not None
    assert f"of {COUNT}" in message or f"of about {COUNT}" in message
    if container == "mkv":  # real timestamps show where frames went missing
        assert "could not be decoded (corrupt data around 00:01." in message
        assert "went on to the end (00:02.36)" in message


def test_decoder_noise_stays_off_stderr(videos, tmp_path):
    damaged = synth.corrupt(videos["avi"], tmp_path / "damaged.avi", at=0.5, length=4000)
    script = ("import sys; from emopipe.io.video import VideoSource\n"
              "s = VideoSource(sys.argv[1]); n = sum(1 for _ in s); print(n, s.ended_early is not None)")
    env = {k: v for k, v in os.environ.items() if k not in ("OPENCV_FFMPEG_LOGLEVEL", "OPENCV_LOG_LEVEL")}
    env["PYTHONPATH"] = str(REPO)
    quiet = subprocess.run([sys.executable, "-c", script, str(damaged)], capture_output=True, text=True, env=env,
                           cwd=REPO, check=True)
    assert quiet.stdout.split()[1] == "True"
    assert quiet.stderr == ""
    # the user can still ask for FFmpeg's messages (and there are some for this file)
    loud = subprocess.run([sys.executable, "-c", script, str(damaged)], capture_output=True, text=True,
                          env={**env, "OPENCV_FFMPEG_LOGLEVEL": "16"}, cwd=REPO, check=True)
    assert "FFMPEG" in loud.stdout + loud.stderr


class FakeCapture:
    """Stands in for cv2.VideoCapture: scripted grab results and container timestamps (ms)."""

    def __init__(self, msecs: list[float], fails_at: set[int] = frozenset(), fps: float = 10.0,
                 declared: int | None = None) -> None:
        self.msecs, self.fails_at, self.fps = msecs, set(fails_at), fps
        self.declared = len(msecs) if declared is None else declared
        self.position, self.current = 0, None

    def isOpened(self) -> bool:  # OpenCV's name
        return True

    def grab(self) -> bool:
        if self.position in self.fails_at:
            self.fails_at.discard(self.position)
            return False
        if self.position >= len(self.msecs):
            return False
        self.current, self.position = self.position, self.position + 1
        return True

    def retrieve(self):
        return True, np.full((4, 6, 3), self.current, np.uint8)

    def get(self, prop: int) -> float:
        return {cv2.CAP_PROP_FPS: self.fps, cv2.CAP_PROP_FRAME_COUNT: float(self.declared),
                cv2.CAP_PROP_POS_MSEC: self.msecs[self.current] if self.current is not None else 0.0,
                cv2.CAP_PROP_POS_FRAMES: float(self.position)}[prop]

    def set(self, prop: int, value: float) -> bool:
        return True

    def release(self) -> None:
        pass


@pytest.fixture
def fake_video(tmp_path, monkeypatch):
    path = tmp_path / "fake.avi"
    path.write_bytes(b"RIFF\0\0\0\0AVI LIST")

    def make(capture: FakeCapture) -> VideoSource:
        monkeypatch.setattr("emopipe.io.video._open_capture", lambda p: capture)
        return VideoSource(path)

    return make


@pytest.mark.parametrize(("msecs", "expected"), [
    ([0, 100, 200, 300], [0.0, 0.1, 0.2, 0.3]),  # the container's times
    ([0, 0, 0, 0], [0.0, 0.1, 0.2, 0.3]),  # none given (OpenCV reports 0): index / fps
    ([0, 100, 50, 300], [0.0, 0.1, 0.2, 0.3]),  # going backwards: index / fps for that frame
    ([0, 100, 100, 130], [0.0, 0.1, 0.2, 0.3]),  # repeated then behind the fallback: kept increasing
    ([0, 105, 190, float("nan")], [0.0, 0.105, 0.19, 0.3]),  # variable spacing kept; NaN replaced
])
def test_timestamps_fall_back_to_index_over_fps(fake_video, msecs, expected):
    frames = read_all(fake_video(FakeCapture(msecs)))
    assert [f.timestamp_s for f in frames] == pytest.approx(expected)
    assert all(b.timestamp_s > a.timestamp_s for a, b in itertools.pairwise(frames))


def test_failed_reads_before_the_declared_end_are_retried(fake_video):
    source = fake_video(FakeCapture([i * 100.0 for i in range(6)], fails_at={3}))
    frames = read_all(source)
    assert [f.timestamp_s for f in frames] == pytest.approx([0, 0.1, 0.2, 0.3, 0.4, 0.5])
    assert source.ended_early is None


def test_reads_ending_before_the_declared_count_set_ended_early(fake_video):
    source = fake_video(FakeCapture([i * 100.0 for i in range(6)], declared=10))
    frames = read_all(source)
    assert len(frames) == 6
    assert source.ended_early == ("decoding stopped at frame 6 of 10 (00:00.60): "
                                  "the file is truncated or corrupt")


# -- unreadable inputs -------------------------------------------------------------------------

def test_missing_file_is_not_found(tmp_path):
    with pytest.raises(InputNotFoundError, match="not found"):
        open_source(tmp_path / "nope.mp4")
    with pytest.raises(InputNotFoundError):
        VideoSource(tmp_path / "nope.mp4")


@pytest.mark.parametrize(("name", "content", "message"), [
    ("empty.mp4", b"", "empty"),
    ("notes.mp4", b"these are not the frames you are looking for\n" * 50, "not a video"),
    ("noise.avi", bytes(range(256)) * 40, "not a video"),
])
def test_files_that_are_not_videos_are_unreadable(tmp_path, name, content, message):
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(InputUnreadableError, match=message):
        open_source(path)


def test_video_with_no_frames_is_unreadable(tmp_path):
    path = tmp_path / "zero.avi"
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), FPS, (64, 48))
    writer.release()
    with pytest.raises(InputUnreadableError):
        open_source(path)


# -- images and folders ------------------------------------------------------------------------

def test_image_is_one_frame(tmp_path):
    image = synth.astronaut_bgr()
    cv2.imwrite(str(tmp_path / "astronaut.png"), image)
    with open_source(tmp_path / "astronaut.png") as source:
        assert isinstance(source, ImageSource)
        assert (source.info.kind, source.info.fps, source.info.frame_count) == ("image", None, 1)
        assert (source.info.width, source.info.height) == (512, 512)
        frames = list(source)
    assert len(frames) == 1 and frames[0].index == 0 and frames[0].timestamp_s == 0.0
    assert np.array_equal(frames[0].bgr, image)


@pytest.mark.parametrize("channels", [1, 4])
def test_grey_and_transparent_images_become_bgr(tmp_path, channels):
    pixels = np.random.default_rng(0).integers(0, 256, (30, 40, channels), dtype=np.uint8)
    cv2.imwrite(str(tmp_path / "x.png"), pixels if channels == 4 else pixels[:, :, 0])
    frame = read_all(ImageSource(tmp_path / "x.png"))[0]
    assert frame.bgr.shape == (30, 40, 3)
    assert np.array_equal(frame.bgr[:, :, 0], pixels[:, :, 0])


def test_corrupt_image_is_unreadable(tmp_path):
    (tmp_path / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"garbage" * 20)
    with pytest.raises(InputUnreadableError, match="not an image"):
        open_source(tmp_path / "broken.png")


def test_folder_is_read_in_natural_order_skipping_what_is_not_an_image(tmp_path, caplog):
    sizes = {"img1.png": (40, 30), "img2.jpg": (64, 48), "img10.png": (50, 50), "IMG3.bmp": (20, 10)}
    for name, (w, h) in sizes.items():
        cv2.imwrite(str(tmp_path / name), synth.background(w, h))
    (tmp_path / "notes.txt").write_text("not an image")
    (tmp_path / ".hidden.png").write_bytes(b"")
    (tmp_path / "img5.png").write_bytes(b"broken")
    (tmp_path / "sub").mkdir()
    cv2.imwrite(str(tmp_path / "sub" / "img0.png"), synth.background(8, 8))
    with open_source(tmp_path) as source:
        assert isinstance(source, FolderSource)
        assert [p.name for p in source.paths] == ["img1.png", "img2.jpg", "IMG3.bmp", "img5.png", "img10.png"]
        assert (source.info.kind, source.info.fps, source.info.frame_count) == ("images", None, 5)
        assert (source.info.width, source.info.height) == (40, 30)
        frames = list(source)
        assert [p.name for p in source.skipped] == ["img5.png"]
    assert [f.index for f in frames] == [0, 1, 2, 4]  # an index names a file in `paths`
    assert [f.timestamp_s for f in frames] == [0.0, 1.0, 2.0, 4.0]
    assert [f.bgr.shape[:2] for f in frames] == [(30, 40), (48, 64), (10, 20), (50, 50)]
    assert "img5.png" in caplog.text


def test_folder_max_frames(tmp_path):
    for i in range(5):
        cv2.imwrite(str(tmp_path / f"{i}.png"), synth.background(16, 16, seed=i))
    with FolderSource(tmp_path, max_frames=2) as source:
        assert source.expected_frames == 2
        assert [f.index for f in source] == [0, 1]


@pytest.mark.parametrize("content", [None, "notes.txt", "broken.png"])
def test_folder_without_decodable_images_is_unreadable(tmp_path, content):
    if content == "notes.txt":
        (tmp_path / content).write_text("hello")
    elif content:
        (tmp_path / content).write_bytes(b"garbage")
    with pytest.raises(InputUnreadableError):
        open_source(tmp_path)


def test_natural_order():
    names = ["frame10.png", "frame2.png", "Frame1.png", "frame2b.png", "a.png"]
    assert sorted(names, key=natural_key) == ["a.png", "Frame1.png", "frame2.png", "frame2b.png", "frame10.png"]


# -- choosing a source -------------------------------------------------------------------------

def test_times_do_not_apply_to_images(tmp_path):
    cv2.imwrite(str(tmp_path / "a.png"), synth.background(16, 16))
    with pytest.raises(UsageError, match="videos"):
        open_source(tmp_path / "a.png", start_s=1.0)
    with pytest.raises(UsageError, match="videos"):
        open_source(tmp_path, end_s=3.0)


def test_urls_no_source_kind_reads_are_refused_with_the_kinds_there_are():
    # rtsp://, http(s):// … are read by emopipe.live (tests/test_live.py); nothing reads gopher://
    with pytest.raises(UsageError, match=r"webcam:N.*rtsp://"):
        open_source("gopher://camera.local/stream")


def test_sources_are_chosen_by_kind_from_one_lazy_registry(tmp_path, monkeypatch):
    cv2.imwrite(str(tmp_path / "still.png"), synth.background(16, 16))
    assert source_kind(tmp_path / "still.png") == "image" and source_kind(tmp_path) == "images"
    assert source_kind("clip.mp4") == "video" and source_kind("rtsp://cam/s") == "live"
    assert source_kind("webcam:0") == "live" and source_kind("fake://anything") is None
    opened = []

    def open_image(uri: str, **kwargs: object) -> Source:
        opened.append((uri, kwargs))
        return ImageSource(uri)

    monkeypatch.setattr(SOURCES, "_entries", {**SOURCES._entries, "image": open_image})
    source = open_source(tmp_path / "still.png", max_frames=3)
    assert isinstance(source, Source)
    assert opened == [(str(tmp_path / "still.png"), {"start_s": None, "end_s": None, "max_frames": 3})]
    with pytest.raises(UsageError):
        open_source("fake://anything")


# -- the records ---------------------------------------------------------------------------------

@pytest.mark.parametrize(("kwargs", "message"), [
    ({"bgr": np.zeros((4, 4), np.uint8)}, "H×W×3 uint8"),
    ({"bgr": np.zeros((4, 4, 3), np.float32)}, "H×W×3 uint8"),
    ({"bgr": np.zeros((0, 4, 3), np.uint8)}, "empty"),
    ({"bgr": [[0]]}, "H×W×3 uint8"),
    ({"index": -1}, "index"),
    ({"timestamp_s": math.nan}, "timestamp_s"),
    ({"timestamp_s": -0.5}, "timestamp_s"),
])
def test_frame_validation(kwargs, message):
    fields = {"index": 0, "timestamp_s": 0.0, "bgr": np.zeros((4, 4, 3), np.uint8), "read_time": 0.0, **kwargs}
    with pytest.raises(ValueError, match=message):
        HostFrame(**fields)
    good = HostFrame(index=0, timestamp_s=0.0, bgr=np.zeros((4, 4, 3), np.uint8), read_time=0.0)
    assert isinstance(good, Frame) and good.device_pixels is None  # a host frame is a Frame


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"kind": "bogus"}, "kind"),  # (live sources add "camera" and "stream")
    ({"fps": 0.0}, "fps"),
    ({"fps": math.inf}, "fps"),
    ({"frame_count": -1}, "frame_count"),
    ({"width": 0}, "size"),
])
def test_source_info_validation(kwargs, message):
    fields = {"uri": "x", "kind": "video", "fps": 25.0, "frame_count": 10, "width": 4, "height": 4, **kwargs}
    with pytest.raises(ValueError, match=message):
        SourceInfo(**fields)


@pytest.mark.parametrize(("seconds", "text"), [(0, "00:00.00"), (2.28, "00:02.28"), (61.5, "01:01.50"),
                                               (3723.456, "1:02:03.46")])
def test_format_time(seconds, text):
    assert format_time(seconds) == text


# -- names that are not UTF-8 ------------------------------------------------------------------

def bytes_named(folder: Path, name: bytes, data: bytes) -> Path:
    """A file whose name is ``name``'s bytes (not UTF-8: Python holds them as lone surrogates)."""
    with open(os.path.join(os.fsencode(str(folder)), name), "wb") as file:
        file.write(data)
    return folder / os.fsdecode(name)


def test_a_video_whose_name_is_not_utf8_is_read_by_its_bytes_and_named_as_valid_utf8(videos, tmp_path):
    # (OpenCV was handed the name with its surrogates: a segmentation fault, the whole run gone)
    path = bytes_named(tmp_path, b"zz\xe9.avi", videos["avi"].read_bytes())
    with open_source(path, max_frames=3) as source:
        assert source.info.uri == str(tmp_path / "zz") + "\\xe9.avi"  # (its odd byte as \xNN: valid UTF-8)
        source.info.uri.encode("utf-8")
        frames = list(source)
    with open_source(videos["avi"], max_frames=3) as same:
        assert [f.bgr.tobytes() for f in frames] == [f.bgr.tobytes() for f in same]
    bad = bytes_named(tmp_path, b"bad\xff.mp4", b"not a video" * 50)  # (fails alone, with the usual error)
    with pytest.raises(InputUnreadableError, match=r"not a video"):
        open_source(bad)


def test_images_whose_names_are_not_utf8_are_read_and_named_as_valid_utf8(tmp_path):
    _, data = cv2.imencode(".png", synth.background(16, 16))
    bytes_named(tmp_path, b"\xe9t\xe9.png", data.tobytes())
    with open_source(tmp_path) as source:
        assert [f.file for f in source] == ["\\xe9t\\xe9.png"]
    with open_source(tmp_path / os.fsdecode(b"\xe9t\xe9.png")) as one:
        assert one.info.uri.endswith("\\xe9t\\xe9.png") and len(list(one)) == 1


def test_nvdec_is_never_handed_a_name_that_is_not_utf8(tmp_path, monkeypatch):
    nvdec = pytest.importorskip("emopipe.io.nvdec")

    def native(*args, **kwargs):
        raise AssertionError("PyNvVideoCodec was handed the name")

    monkeypatch.setattr(nvdec, "_pynvvideocodec", native)
    path = bytes_named(tmp_path, b"zz\xe9.mp4", b"x")
    with pytest.raises(InputUnreadableError, match=r"zz\\xe9\.mp4 with NVDEC: its name is not valid UTF-8"):
        nvdec._read_container(path, 0)  # (every NVDEC step starts here; --decoder auto then decodes with OpenCV)
