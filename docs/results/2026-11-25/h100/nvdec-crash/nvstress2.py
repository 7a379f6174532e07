"""Which PyNvVideoCodec calls race when readers are opened, read and ended on several threads at once?
mode none: as emopipe does today; create: demuxer/decoder construction and end() under one process lock;
all: every PyNvVideoCodec call (construction, get_batch_frames, metadata, end, and dropping the objects) under it."""

import faulthandler
import sys
import threading
import time
from pathlib import Path

import torch

import emopipe.io.nvdec as nvdec

faulthandler.enable(all_threads=True)
clip, threads, seconds, frames, mode = (
    Path(sys.argv[1]),
    int(sys.argv[2]),
    float(sys.argv[3]),
    int(sys.argv[4]),
    sys.argv[5],
)
LOCK = threading.RLock()
real = nvdec._pynvvideocodec()


class Locked:
    """A PyNvVideoCodec object whose calls (per mode) hold LOCK."""

    def __init__(self, obj, methods):
        self._obj, self._methods = obj, methods

    def __getattr__(self, name):
        attr = getattr(self._obj, name)
        if name not in self._methods or not callable(attr):
            return attr

        def call(*a, **k):
            with LOCK:
                return attr(*a, **k)

        return call

    def __del__(self):
        if mode == "all":
            with LOCK:
                self._obj = None


class Module:
    def __getattr__(self, name):
        attr = getattr(real, name)
        if name not in ("CreateDemuxer", "SimpleDecoder", "ThreadedDecoder") or mode == "none":
            return attr
        methods = (
            {"end"}
            if mode == "create"
            else {"end", "get_batch_frames", "get_stream_metadata", "GetTimebaseNum", "GetTimebaseDen"}
        )

        def make(*a, **k):
            with LOCK:
                return Locked(attr(*a, **k), methods)

        return make


nvdec._pynvvideocodec = lambda: Module()
torch.cuda.init()
done, failures = [0] * threads, []
deadline = time.monotonic() + seconds


def work(k: int) -> None:
    while time.monotonic() < deadline:
        try:
            reader = nvdec._NvdecReader(clip, 0)
            n = 0
            while n < frames and reader.decode() is not None:
                reader.pixels()
                n += 1
            reader.release()
            del reader
            done[k] += 1
            if sum(done) % 20 == 0:
                print("readers", sum(done), flush=True)
        except Exception as exc:
            failures.append(repr(exc))


pool = [threading.Thread(target=work, args=(k,)) for k in range(threads)]
for t in pool:
    t.start()
for t in pool:
    t.join()
print(
    f"mode {mode} threads {threads} frames/reader {frames}: readers opened+ended {sum(done)} in {seconds:.0f} s, "
    f"failures {len(failures)} {failures[:2]}"
)
