"""Which decoder set-up crashes with four reader threads (open, read to the end, end; over and over)?
threaded: emopipe's (a SimpleDecoder probes the first frame, then a ThreadedDecoder with its own native decoding
thread reads); noprobe: the ThreadedDecoder alone; simple: a SimpleDecoder reads (decodes in the caller's thread).
lock/nolock: emopipe's library lock around every call, or none."""

import contextlib
import faulthandler
import sys
import threading
import time
from pathlib import Path

import torch

import emopipe.io.nvdec as nvdec

faulthandler.enable(all_threads=True)
clip, threads, seconds, variant, lock = (
    Path(sys.argv[1]),
    int(sys.argv[2]),
    float(sys.argv[3]),
    sys.argv[4],
    sys.argv[5],
)
if lock == "nolock":
    nvdec._library_lock = contextlib.nullcontext()


class Simple:
    def __init__(self, decoder):
        self.decoder = decoder

    def get_batch_frames(self, n):
        return self.decoder.get_batch_frames(n)

    def end(self):
        pass


def open_simple(nvc, path, gpu):
    demuxer = nvc.CreateDemuxer(str(path))
    tick = demuxer.GetTimebaseNum() / demuxer.GetTimebaseDen()
    del demuxer
    decoder = nvc.SimpleDecoder(
        str(path), gpu_id=gpu, use_device_memory=True, output_color_type=nvc.OutputColorType.RGB
    )
    return Simple(decoder), tick, decoder.simple_decoder.get_stream_metadata()


def open_noprobe(nvc, path, gpu):
    demuxer = nvc.CreateDemuxer(str(path))
    tick = demuxer.GetTimebaseNum() / demuxer.GetTimebaseDen()
    del demuxer
    decoder = nvc.ThreadedDecoder(
        str(path),
        buffer_size=nvdec._DECODE_AHEAD,
        gpu_id=gpu,
        use_device_memory=True,
        output_color_type=nvc.OutputColorType.RGB,
    )
    return decoder, tick, decoder.get_stream_metadata()


if variant == "simple":
    nvdec._NvdecReader._open = staticmethod(open_simple)
elif variant == "noprobe":
    nvdec._NvdecReader._open = staticmethod(open_noprobe)
torch.cuda.init()
done, frames, failures = [0] * threads, [0] * threads, []
deadline = time.monotonic() + seconds


def work(k: int) -> None:
    while time.monotonic() < deadline:
        try:
            reader = nvdec._NvdecReader(clip, 0)
            while reader.decode() is not None:
                reader.pixels()
                frames[k] += 1
            reader.release()
            del reader
            done[k] += 1
        except Exception as exc:
            failures.append(repr(exc))


pool = [threading.Thread(target=work, args=(k,)) for k in range(threads)]
for t in pool:
    t.start()
for t in pool:
    t.join()
print(
    f"{variant} {lock} threads {threads}: {sum(done)} readers, {sum(frames)} frames in {seconds:.0f} s "
    f"({sum(frames) / seconds:.0f} frames/s), failures {len(failures)} {failures[:2]}"
)
