"""NVDEC readers opened, read to the end and ended on several threads at once, with emopipe's library lock
(lock) or without it (nolock): native crashes, and readers per second."""

import contextlib
import faulthandler
import sys
import threading
import time
from pathlib import Path

import torch

import emopipe.io.nvdec as nvdec

faulthandler.enable(all_threads=True)
clip, threads, seconds, mode = Path(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
if mode == "nolock":
    nvdec._library_lock = contextlib.nullcontext()
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
    f"{mode} threads {threads}: {sum(done)} readers, {sum(frames)} frames in {seconds:.0f} s "
    f"({sum(frames) / seconds:.0f} frames/s), failures {len(failures)} {failures[:2]}"
)
