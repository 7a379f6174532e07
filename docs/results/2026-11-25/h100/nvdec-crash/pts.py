"""What frames and PTS does each PyNvVideoCodec decoder give for the GPU test's clip (mp4v, 30 frames)?"""

import sys
from pathlib import Path

sys.path.insert(0, ".")
from emopipe.io.nvdec import NvdecVideoSource, _pynvvideocodec
from emopipe.io.video import VideoSource
from tests.support.synth import moving_face_video

out = Path("/tmp/ptsclip")
out.mkdir(exist_ok=True)
video = moving_face_video(out / "clip.mp4", frames=30, size=(640, 360))
nvc = _pynvvideocodec()
with VideoSource(video.path) as s:
    cpu = [(f.index, round(f.timestamp_s, 4)) for f in s]
print("opencv", len(cpu), cpu[:3], cpu[-3:])
d = nvc.SimpleDecoder(str(video.path), gpu_id=0, use_device_memory=True, output_color_type=nvc.OutputColorType.RGB)
print("simple metadata", d.get_stream_metadata())
pts, n = [], 1
while True:
    b = d.get_batch_frames(n)
    n = 16
    if not b:
        break
    pts += [int(f.getPTS()) for f in b]
print("simple pts", len(pts), pts)
t = nvc.ThreadedDecoder(
    str(video.path), buffer_size=16, gpu_id=0, use_device_memory=True, output_color_type=nvc.OutputColorType.RGB
)
pts = []
while True:
    b = t.get_batch_frames(16)
    if not b:
        break
    pts += [int(f.getPTS()) for f in b]
t.end()
print("threaded pts", len(pts), pts)
d2 = nvc.SimpleDecoder(str(video.path), gpu_id=0, use_device_memory=True, output_color_type=nvc.OutputColorType.RGB)
pts = []
while True:
    b = d2.get_batch_frames(16)
    if not b:
        break
    pts += [int(f.getPTS()) for f in b]
print("simple 16-only pts", len(pts), pts)
with NvdecVideoSource(video.path) as s:
    gpu = [(f.index, round(f.timestamp_s, 4)) for f in s]
print("emopipe nvdec", len(gpu), gpu[:3], gpu[-3:])
