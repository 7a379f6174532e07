"""Stress PyNvVideoCodec readers opened, read and ended from several threads at once (the archive's pattern):
does the glibc heap corruption seen once in a 64-clip run come from here?"""

import sys
import threading
import time
from pathlib import Path

import torch

from emopipe.io.nvdec import _NvdecReader

clip, threads, seconds, frames = Path(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
torch.cuda.init()
done, failures = [0] * threads, []
deadline = time.monotonic() + seconds


def work(k: int) -> None:
    while time.monotonic() < deadline:
        try:
            reader = _NvdecReader(clip, 0)
            n = 0
            while n < frames and reader.decode() is not None:
                reader.pixels()
                n += 1
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
    f"threads {threads} frames/reader {frames}: readers opened+ended {sum(done)} in {seconds:.0f} s, "
    f"failures {len(failures)} {failures[:2]}"
)
