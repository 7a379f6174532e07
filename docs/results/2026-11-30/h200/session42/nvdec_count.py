"""Frames PyNvVideoCodec's decoders give for each file, against its packet count (session 42)."""
import sys

import PyNvVideoCodec as nvc


def count(decoder, step=8):
    n, pts = 0, []
    while True:
        frames = decoder.get_batch_frames(step)
        if not frames:
            return n, pts
        n += len(frames)
        pts += [int(f.getPTS()) for f in frames]


for path in sys.argv[1:]:
    try:
        demuxer = nvc.CreateDemuxer(path)
        packets = sum(1 for _ in demuxer)
        del demuxer
    except Exception as exc:
        packets = f"demux: {exc}"
    threaded = nvc.ThreadedDecoder(path, buffer_size=12, gpu_id=0, use_device_memory=True,
                                   output_color_type=nvc.OutputColorType.RGB)
    t, tpts = count(threaded)
    meta = threaded.get_stream_metadata()
    threaded.end()
    simple = nvc.SimpleDecoder(path, gpu_id=0, use_device_memory=True, output_color_type=nvc.OutputColorType.RGB)
    s, spts = count(simple)
    del simple
    print(f"{path.rsplit('/', 1)[-1]}: demuxer packets {packets}; threaded {t} (pts {tpts[:2]}..{tpts[-2:]}); "
          f"simple {s}; metadata num_frames {meta.num_frames} fps {meta.average_fps}", flush=True)
