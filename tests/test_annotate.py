"""Drawing faces on frames and writing the annotated video."""

from __future__ import annotations

import subprocess
from pathlib import Path

import cv2
import numpy as np
import pytest

from emopipe.errors import OutputError, UsageError
from emopipe.io import encode
from emopipe.io.encode import find_ffmpeg
from emopipe.types import LABELS, FaceRecord
from emopipe.vision.annotate import AnnotatedVideoWriter, _style, draw, letterbox, track_colour
from tests.support.synth import background, moving_face_video, paste_head


def face(box, track_id: int = 1, valence: float = 0.3, arousal: float = -0.2, classes: int = 8,
         landmarks: np.ndarray | None = None) -> FaceRecord:
    probabilities = np.full(classes, 0.1 / (classes - 1))
    probabilities[1] = 0.9
    return FaceRecord.create(labels=LABELS[classes], probabilities=probabilities, source="clip.mp4", frame=0,
                             timestamp_s=0.0, track_id=track_id, box=tuple(box), score=0.95, valence=valence,
                             arousal=arousal, landmarks=landmarks)


def changed(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """H×W mask of pixels that differ."""
    return (a != b).any(axis=2)


# -- draw --------------------------------------------------------------------------------------


def test_draw_marks_the_face_and_leaves_the_input_untouched():
    frame = background(320, 240)
    box = paste_head(frame, 120, 120, 0.6)
    original = frame.copy()
    out = draw(frame, [face(box)])
    assert np.array_equal(frame, original), "draw must not modify its input"
    assert out.shape == frame.shape and out.dtype == np.uint8
    mask = changed(out, frame)
    x1, y1, x2, y2 = (round(v) for v in box)
    assert mask[y1 - 1:y1 + 2, x1:x2].any(axis=0).all()  # the top edge of the box is drawn
    assert mask[y1:y2, x1 - 1:x1 + 2].any(axis=1).all()  # and the left edge
    far = mask.copy()
    far[max(0, y1 - 60):y2 + 60, max(0, x1 - 60):x2 + 100] = False
    assert not far.any(), "drawing must stay near the face"
    # the box is drawn in the track's colour
    assert tuple(out[y1, (x1 + x2) // 2]) == track_colour(1)


def test_a_box_between_key_frames_is_drawn_by_its_corners():
    from dataclasses import replace

    frame = background(320, 240)
    box = (100.0, 60.0, 200.0, 180.0)
    detected = changed(draw(frame, [face(box)]), frame)
    between = changed(draw(frame, [replace(face(box), detected=False)]), frame)
    x1, y1, y2 = 100, 60, 180  # the left edge (the label sits on the top one, the inset on the right)
    assert detected[y1:y2, x1].all()  # the detector's box: a full edge
    assert between[y1:y1 + 25, x1].all() and between[y2 - 25:y2, x1].all()  # corners
    assert not between[(y1 + y2) // 2, x1 - 1:x1 + 2].any()  # but no middle of the edge


def test_draw_without_faces_is_an_identical_copy():
    frame = background(320, 240)
    out = draw(frame, [])
    assert out is not frame
    assert np.array_equal(out, frame)


def test_each_track_gets_its_own_colour():
    frame = np.zeros((240, 320, 3), np.uint8)
    out = draw(frame, [face((20, 60, 80, 120), track_id=1), face((180, 60, 240, 120), track_id=2)])
    assert tuple(out[120, 50]) == track_colour(1)
    assert tuple(out[120, 210]) == track_colour(2)
    assert track_colour(1) != track_colour(2)


def _dot_centre(valence: float, arousal: float) -> np.ndarray:
    """Where the valence/arousal dot lands: its white outline is the only white right of and below the box top."""
    frame = np.full((480, 640, 3), 90, np.uint8)
    box = (100, 100, 220, 240)
    out = draw(frame, [face(box, valence=valence, arousal=arousal)])
    white = (out > 200).all(axis=2)
    white[:100] = False  # the caption above the box has white text
    white[:, :221] = False
    ys, xs = np.nonzero(white)
    assert xs.size, "no dot found"
    return np.array([xs.mean(), ys.mean()])


def test_valence_runs_left_to_right_and_arousal_bottom_to_top():
    centre = _dot_centre(0.0, 0.0)
    right = _dot_centre(0.9, 0.0)
    up = _dot_centre(0.0, 0.9)
    assert right[0] > centre[0] + 10 and abs(right[1] - centre[1]) < 3
    assert up[1] < centre[1] - 10 and abs(up[0] - centre[0]) < 3
    left_down = _dot_centre(-0.9, -0.9)
    assert left_down[0] < centre[0] - 10 and left_down[1] > centre[1] + 10
    assert centre[0] > 220, "the inset sits to the right of the box when there is room"


def test_out_of_range_valence_and_arousal_are_clamped_for_display():
    frame = np.full((240, 320, 3), 90, np.uint8)
    box = (40, 40, 120, 140)
    assert np.array_equal(draw(frame, [face(box, valence=7.0, arousal=-3.0)]),
                          draw(frame, [face(box, valence=1.0, arousal=-1.0)]))


@pytest.mark.parametrize("box", [
    (250, 170, 330, 250),  # past the bottom-right corner
    (-30, -20, 40, 60),  # past the top-left corner
    (0, 0, 320, 240),  # the whole frame
    (400, 300, 500, 400),  # entirely outside
    (150, 110, 152, 112),  # tiny
])
def test_faces_at_the_edges_draw_without_error(box):
    frame = np.full((240, 320, 3), 90, np.uint8)
    out = draw(frame, [face(box)])
    assert out.shape == frame.shape
    assert changed(out, frame).any(), "the caption and inset are drawn inside the frame"


def test_inset_moves_left_when_the_box_touches_the_right_edge():
    frame = np.full((240, 320, 3), 90, np.uint8)
    out = draw(frame, [face((230, 100, 319, 190))])
    mask = changed(out, frame)
    assert mask[100:190, :225].any(), "inset placed left of the box"


def test_landmarks_are_drawn_when_present():
    frame = np.full((240, 320, 3), 90, np.uint8)
    box = (60, 60, 160, 180)
    points = np.stack(np.meshgrid(np.linspace(80, 140, 17), np.linspace(90, 160, 4)), -1).reshape(68, 2)
    without = draw(frame, [face(box)])
    with_points = draw(frame, [face(box, landmarks=points)])
    for x, y in points.round().astype(int):
        assert tuple(with_points[y, x]) == track_colour(1)
    assert changed(with_points, without)[90:161, 80:141].sum() >= 68


def test_sizes_scale_with_the_frame():
    small, large = _style(320, 240), _style(1920, 1080)
    assert large.font_scale > small.font_scale
    assert large.line > small.line and large.inset > small.inset
    assert small.text_height >= 8, "text stays legible on small frames"
    text_width = cv2.getTextSize("#12 surprise 100%", cv2.FONT_HERSHEY_SIMPLEX, small.font_scale,
                                 small.text_thickness)[0][0]
    assert text_width < 320 / 2


def test_draw_marks_five_faces_of_a_720p_frame_each_in_its_track_colour():
    # (how fast it draws is a benchmark's business, not a test's: this machine may be loaded)
    frame = background(1280, 720)
    records = [face((100 + 220 * i, 200, 260 + 220 * i, 400), track_id=i + 1) for i in range(5)]
    out = draw(frame, records)
    mask = changed(out, frame)
    for i in range(5):
        x1, x2 = 100 + 220 * i, 260 + 220 * i
        assert mask[199:202, x1:x2].any(axis=0).all(), i  # its top edge
        assert tuple(out[200, (x1 + x2) // 2]) == track_colour(i + 1), i


@pytest.mark.parametrize("bad", [np.zeros((240, 320), np.uint8), np.zeros((240, 320, 3), np.float32),
                                 np.zeros((240, 320, 4), np.uint8)])
def test_draw_rejects_frames_that_are_not_bgr_uint8(bad):
    with pytest.raises(ValueError, match="BGR uint8"):
        draw(bad, [])


# -- letterbox ---------------------------------------------------------------------------------


def test_letterbox_keeps_the_aspect_ratio_and_centres_the_image():
    square = np.full((200, 200, 3), 200, np.uint8)
    out = letterbox(square, (320, 240))
    assert out.shape == (240, 320, 3)
    assert (out[:, :40] == 0).all() and (out[:, 280:] == 0).all()  # black bars left and right
    assert (out[:, 40:280] == 200).all()  # the image, scaled to 240×240
    same = np.zeros((240, 320, 3), np.uint8)
    assert letterbox(same, (320, 240)) is same


# -- the video ---------------------------------------------------------------------------------


def read_video(path) -> tuple[list[np.ndarray], float]:
    capture = cv2.VideoCapture(str(path))
    fps = capture.get(cv2.CAP_PROP_FPS)
    frames = []
    while True:
        ok, frame = capture.read()
        if not ok:
            break
        frames.append(frame)
    capture.release()
    return frames, fps


needs_ffmpeg = pytest.mark.skipif(find_ffmpeg() is None,
                                  reason="FFmpeg not found (Debian's ffmpeg; .ci/run installs it)")


@pytest.mark.parametrize(("suffix", "fps", "encoder"), [
    (".mp4", 29.97, "opencv"), (".avi", 25.0, "opencv"),
    pytest.param(".mp4", 29.97, "ffmpeg", marks=needs_ffmpeg), pytest.param(".mkv", 25.0, "ffmpeg", marks=needs_ffmpeg),
    pytest.param(".avi", 25.0, "ffmpeg", marks=needs_ffmpeg)])
def test_annotated_video_round_trip(tmp_path, suffix, fps, encoder):
    video = moving_face_video(tmp_path / "in.mp4", frames=16, fps=fps, empty=(6, 10))
    frames, source_fps = read_video(video.path)
    assert len(frames) == 16 and source_fps == pytest.approx(fps, abs=1e-3)

    out_path = tmp_path / f"annotated{suffix}"
    rendered = []
    with AnnotatedVideoWriter(out_path, fps=source_fps, size=video.size, writer=encoder) as writer:
        for i, frame in enumerate(frames):
            records = [face(box, track_id=1) for box in video.faces[i]]
            rendered.append(writer.render(frame, records))
            writer.write(frame, records)
        assert writer.frames_written == 16

    for i in video.empty_frames:
        assert np.array_equal(rendered[i], frames[i]), "a frame without faces is written unchanged"
    for i in video.face_frames:
        x1, y1, x2, y2 = (round(v) for v in video.faces[i][0])
        near = changed(rendered[i], frames[i])[max(0, y1 - 20):y2 + 5, max(0, x1 - 5):x2 + 5]
        assert near.mean() > 0.05, f"frame {i}: nothing drawn near the face"

    written, written_fps = read_video(out_path)
    assert len(written) == 16
    assert written_fps == pytest.approx(fps, abs=1e-3)
    assert written[0].shape == frames[0].shape

    def drift(i: int) -> float:
        """Mean change around the face position (the box of the face frames, which barely moves)."""
        x1, y1, x2, y2 = (round(v) for v in video.faces[video.face_frames[-1]][0])
        region = np.s_[max(0, y1 - 20):y2 + 5, max(0, x1 - 5):x2 + 60]
        return float(np.abs(written[i][region].astype(int) - frames[i][region].astype(int)).mean())

    # After lossy encoding, annotated frames still differ from the source far more than bare ones.
    assert max(drift(i) for i in video.empty_frames) * 2 < min(drift(i) for i in video.face_frames)


def test_frames_of_another_size_are_letterboxed_into_the_video(tmp_path):
    path = tmp_path / "mixed.mp4"
    with AnnotatedVideoWriter(path, fps=10.0, size=(320, 240)) as writer:
        small = np.full((100, 100, 3), 200, np.uint8)
        assert writer.render(small, []).shape == (240, 320, 3)
        writer.write(small, [face((10, 10, 60, 60))])
        writer.write(np.full((480, 640, 3), 50, np.uint8), [])
    assert writer.fps == 10.0
    frames, _ = read_video(path)
    assert len(frames) == 2 and frames[0].shape == (240, 320, 3)
    assert frames[0][:, :30].mean() < 10  # black bar left of the centred square


def test_numpy_frame_rate_is_accepted(tmp_path):
    with AnnotatedVideoWriter(tmp_path / "a.avi", fps=np.float32(12.5), size=(64, 48)) as writer:
        assert writer.fps == 12.5


def test_a_video_whose_name_is_near_the_limit_is_written_under_a_hashed_partial_name(tmp_path):
    # (was: NAME.partial.mp4 made the name too long for the file system, and OpenCV could not open it)
    path = tmp_path / ("x" * 248 + ".mp4")
    video = AnnotatedVideoWriter(path, 10.0, (64, 48), partial=True)
    assert video.writing.name.startswith(".emopipe-") and video.writing.name.endswith(".partial.mp4")
    video.write(np.zeros((48, 64, 3), np.uint8), ())
    assert video.commit() == path and path.stat().st_size > 0 and not video.writing.exists()


def test_write_after_close_is_refused(tmp_path):
    writer = AnnotatedVideoWriter(tmp_path / "a.mp4", fps=25.0, size=(64, 48))
    writer.close()
    writer.close()
    with pytest.raises(ValueError, match="closed"):
        writer.write(np.zeros((48, 64, 3), np.uint8), [])


def test_missing_directory_is_an_output_error(tmp_path):
    with pytest.raises(OutputError, match="does not exist"):
        AnnotatedVideoWriter(tmp_path / "missing" / "a.mp4", fps=25.0, size=(64, 48))


def test_directory_as_video_output_is_an_output_error(tmp_path):
    folder = tmp_path / "folder.mp4"
    folder.mkdir()
    with pytest.raises(OutputError, match="directory"):
        AnnotatedVideoWriter(folder, fps=25.0, size=(64, 48))


def test_unknown_video_extension_is_an_output_error(tmp_path):
    with pytest.raises(OutputError, match=r"\.mp4, \.mkv or \.avi"):
        AnnotatedVideoWriter(tmp_path / "a.gif", fps=25.0, size=(64, 48))


def test_opencv_refusal_is_an_output_error(tmp_path, monkeypatch):
    class Refusing:
        def __init__(self, *args):
            pass

        def isOpened(self):
            return False

    monkeypatch.setattr(cv2, "VideoWriter", Refusing)
    with pytest.raises(OutputError, match="could not open"):
        AnnotatedVideoWriter(tmp_path / "a.mp4", fps=25.0, size=(64, 48), writer="opencv")


def _codec(path) -> str:
    return subprocess.run(["ffprobe", "-v", "error", "-select_streams", "v:0", "-show_entries", "stream=codec_name",
                           "-of", "csv=p=0", str(path)], capture_output=True, text=True, check=True).stdout.strip()


@needs_ffmpeg
def test_auto_encodes_mp4_as_h264_with_ffmpeg_and_as_mp4v_with_opencv_when_ffmpeg_is_absent(tmp_path, monkeypatch):
    """H.264 plays in browsers (the HTML report's readers), MPEG-4 Part 2 does not: FFmpeg's where found."""
    frame = np.full((48, 64, 3), 90, np.uint8)
    with AnnotatedVideoWriter(tmp_path / "a.mp4", fps=25.0, size=(64, 48)) as writer:
        writer.write(frame, [])
    assert _codec(tmp_path / "a.mp4") == "h264" and writer.codec in encode.H264
    monkeypatch.setenv("EMOPIPE_FFMPEG", "none")
    with AnnotatedVideoWriter(tmp_path / "b.mp4", fps=25.0, size=(64, 48)) as writer:
        writer.write(frame, [])
    assert writer.codec == "mp4v" and _codec(tmp_path / "b.mp4") == "mpeg4"
    with pytest.raises(UsageError, match="no FFmpeg found"):
        AnnotatedVideoWriter(tmp_path / "c.mp4", fps=25.0, size=(64, 48), writer="ffmpeg")


@needs_ffmpeg
def test_ffmpeg_pads_an_odd_frame_size_by_one_black_column_and_row(tmp_path):
    """4:2:0 H.264 needs even sides: 65×49 frames become 66×50, the picture itself unmoved."""
    frame = np.full((49, 65, 3), 200, np.uint8)
    with AnnotatedVideoWriter(tmp_path / "odd.mp4", fps=10.0, size=(65, 49), writer="ffmpeg") as writer:
        for _ in range(3):
            writer.write(frame, [])
    frames, _ = read_video(tmp_path / "odd.mp4")
    assert len(frames) == 3 and frames[0].shape == (50, 66, 3)
    assert abs(float(frames[0][:48, :63].mean()) - 200) < 4 and frames[0][:, 65].mean() < 40


def test_an_ffmpeg_that_does_not_run_is_refused_when_asked_for_and_passed_over_for_opencv_by_auto(
        tmp_path, monkeypatch, caplog):
    broken = tmp_path / "ffmpeg"
    broken.write_bytes(b"")  # executable, but no program (a download cut short): "Exec format error"
    broken.chmod(0o755)
    monkeypatch.setenv("EMOPIPE_FFMPEG", str(broken))
    with pytest.raises(UsageError, match=r"--video-writer ffmpeg: .*ffmpeg does not run"):
        AnnotatedVideoWriter(tmp_path / "a.mp4", fps=25.0, size=(64, 48), writer="ffmpeg")
    with AnnotatedVideoWriter(tmp_path / "b.avi", fps=25.0, size=(64, 48)) as writer:
        writer.write(np.zeros((48, 64, 3), np.uint8), [])
    assert writer.codec == "MJPG" and "does not run" in caplog.text and read_video(tmp_path / "b.avi")[0]


def test_an_ffmpeg_that_fails_is_an_output_error_with_its_own_last_line(tmp_path, monkeypatch):
    fake = tmp_path / "ffmpeg"
    fake.write_text("#!/bin/sh\n[ \"$2\" = -encoders ] && echo ' V....D mpeg4  MPEG-4 part 2' && exit 0\n"
                    "echo 'Conversion failed: No space left on device' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("EMOPIPE_FFMPEG", str(fake))
    writer = AnnotatedVideoWriter(tmp_path / "a.mp4", fps=25.0, size=(64, 48), writer="ffmpeg")
    with pytest.raises(OutputError, match=r"FFmpeg (ended with code 1|stopped): Conversion failed: No space left"):
        writer.write(np.zeros((48, 64, 3), np.uint8), [])  # (into the pipe's buffer, or the pipe found closed)
        writer.close()  # (FFmpeg's end awaited)


@pytest.mark.parametrize("fps", [0, -5, float("nan"), float("inf"), None])
def test_missing_or_bad_frame_rate_is_a_usage_error(tmp_path, fps):
    with pytest.raises(UsageError, match="frame rate"):
        AnnotatedVideoWriter(tmp_path / "a.mp4", fps=fps, size=(64, 48))  # type: ignore[arg-type]
    assert not (tmp_path / "a.mp4").exists()


@pytest.mark.parametrize(("options", "role", "expected"), [
    ({"source": "v/clip.mp4", "annotate": "mp4"}, "annotate", "clip.annotated.mp4"),
    ({"source": "v/clip.mp4", "annotate": ".MKV", "output": "out/r.jsonl"}, "annotate", "out/r.annotated.mkv"),
    ({"source": "v/clip.mp4", "annotate": "out/a.avi"}, "annotate", "out/a.avi"),  # a file name stays one
    ({"source": "rtsp://cam.local/live", "annotate": "mp4"}, "record", "cam.local_live.annotated.mp4"),
    ({"source": "webcam:0", "record": "avi"}, "record", "webcam0.annotated.avi"),
])
def test_a_container_alone_names_the_video_after_the_rows_file(options, role, expected):
    """``--annotate mp4`` (as for several sources): the video beside the rows, named as they are."""
    from emopipe.config import RunConfig

    assert getattr(RunConfig(**options).resolved("cpu"), role) == expected


def test_a_container_alone_with_rows_on_stdout_is_refused():
    from emopipe.config import RunConfig

    with pytest.raises(UsageError, match=r"--annotate mp4: with -o - .*give it a file name"):
        RunConfig(source="clip.mp4", annotate="mp4", output="-").resolved("cpu")


def test_ffmpeg_is_found_in_the_documented_order(tmp_path, monkeypatch):
    """EMOPIPE_FFMPEG, else imageio-ffmpeg's program (the [video] extra), else ffmpeg on PATH; 'none': no FFmpeg."""
    import sys
    import types

    def program(name: str) -> str:
        path = tmp_path / name / "ffmpeg"
        path.parent.mkdir()
        path.write_text("#!/bin/sh\nexit 0\n")
        path.chmod(0o755)
        return str(path)

    on_path, bundled, chosen = program("bin"), program("imageio"), program("chosen")
    monkeypatch.setenv("PATH", str(Path(on_path).parent))
    monkeypatch.delenv("EMOPIPE_FFMPEG", raising=False)
    monkeypatch.setitem(sys.modules, "imageio_ffmpeg", None)  # not installed
    assert encode.find_ffmpeg() == on_path
    monkeypatch.setitem(sys.modules, "imageio_ffmpeg", types.SimpleNamespace(get_ffmpeg_exe=lambda: bundled))
    assert encode.find_ffmpeg() == bundled
    monkeypatch.setenv("EMOPIPE_FFMPEG", chosen)
    assert encode.find_ffmpeg() == chosen
    monkeypatch.setenv("EMOPIPE_FFMPEG", "none")
    assert encode.find_ffmpeg() is None and encode.choose_ffmpeg("auto") is None
    monkeypatch.setenv("EMOPIPE_FFMPEG", str(tmp_path / "missing"))
    assert encode.find_ffmpeg() is None


@needs_ffmpeg
def test_an_ffmpeg_writer_dropped_unclosed_still_gets_its_file_finished(tmp_path):
    """(A bug's path: a writer lost without close.) Its feeding thread holds no reference to it, so it is collected;
    the thread pipes what was queued and closes the pipe, and FFmpeg ends the file with every frame."""
    import gc
    import time

    writer = encode.FfmpegVideo(tmp_path / "dropped.mp4", 10.0, (64, 48), find_ffmpeg())
    for _ in range(5):
        writer.write(np.zeros((48, 64, 3), np.uint8))
    pid, feeder = writer.pid, writer._feeder
    del writer
    gc.collect()

    def ended() -> bool:  # (a zombie has ended)
        try:
            return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
        except (OSError, IndexError):
            return True

    deadline = time.monotonic() + 60
    while not ended() and time.monotonic() < deadline:
        time.sleep(0.05)
    feeder.join(timeout=60)
    assert ended() and not feeder.is_alive()
    assert len(read_video(tmp_path / "dropped.mp4")[0]) == 5
