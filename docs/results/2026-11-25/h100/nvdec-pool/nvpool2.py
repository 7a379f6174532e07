"""After reconfigure_decoder: does get_stream_metadata describe the new stream? After a failed reconfigure, does
end() return? What GetDecoderCaps says."""

import sys
import time
from pathlib import Path

import emopipe.io.nvdec as nvdec

nvc = nvdec._pynvvideocodec()
clips = Path(sys.argv[1])
RGB = nvc.OutputColorType.RGB


def threaded(path):
    return nvc.ThreadedDecoder(str(path), buffer_size=16, gpu_id=0, use_device_memory=True, output_color_type=RGB)


def meta(d):
    m = d.get_stream_metadata()
    return (m.codec_name, m.width, m.height, m.num_frames, m.average_fps)


if sys.argv[2] == "meta":
    d = threaded(clips / "a_720p_h264.mp4")
    print("a fresh:", meta(d))
    for name in ["b_1080p_h264.mp4", "c_480p_h264.mp4", "d_720p_hevc.mp4"]:
        d.reconfigure_decoder(str(clips / name))
        before = meta(d)
        n = 0
        while batch := d.get_batch_frames(16):
            n += len(batch)
        fresh = threaded(clips / name)
        print(f"{name}: reused {before} after reading {meta(d)}; fresh {meta(fresh)}; frames {n}")
        fresh.end()
    d.end()
    for codec in ["H264", "HEVC", "VP9", "AV1", "MPEG4"]:
        for chroma, depth in [("420", 8), ("420", 10), ("444", 8)]:
            try:
                caps = nvc.GetDecoderCaps(
                    0, getattr(nvc.cudaVideoCodec, codec), getattr(nvc.cudaVideoChromaFormat, chroma), depth
                )
                print(codec, chroma, depth, caps)
            except Exception as exc:
                print(codec, chroma, depth, "raised", exc)
else:
    d = threaded(clips / "a_720p_h264.mp4")
    d.get_batch_frames(16)
    try:
        d.reconfigure_decoder(str(clips / sys.argv[2]))
    except Exception as exc:
        print("reconfigure raised:", nvdec._reason(exc), flush=True)
    t = time.perf_counter()
    d.end()
    print(f"end() returned after {time.perf_counter() - t:.2f} s", flush=True)
    del d
    print("dropped", flush=True)
