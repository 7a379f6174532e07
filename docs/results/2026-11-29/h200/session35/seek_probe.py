"""session 35: where PyNvVideoCodec's ThreadedDecoder(start_frame=k) lands, per stream (pts of the first frames)."""
import subprocess
import sys

import imageio_ffmpeg
import PyNvVideoCodec as nvc

sys.path.insert(0, sys.argv[1])
from tests.test_gpu import SEEK_STREAMS

ffmpeg = imageio_ffmpeg.get_ffmpeg_exe()
for name, args in SEEK_STREAMS.items():
    path = f"/tmp/{name}"
    subprocess.run([ffmpeg, "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=1280x720:rate=30:duration=12",
                    *args, "-pix_fmt", "yuv420p", path], check=True)
    demuxer = nvc.CreateDemuxer(path)
    print(name, "time base", demuxer.GetTimebaseNum(), "/", demuxer.GetTimebaseDen())
    for start in (0, 5, 45, 47, 48, 50, 95, 96, 100, 200):
        d = nvc.ThreadedDecoder(path, buffer_size=16, gpu_id=0, use_device_memory=True,
                                output_color_type=nvc.OutputColorType.RGB, start_frame=start)
        pts = [int(f.getPTS()) for f in d.get_batch_frames(6)]
        d.end()
        print(f"  start_frame {start}: pts {pts}")
