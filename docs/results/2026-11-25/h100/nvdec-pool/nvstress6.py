"""Does the crash stay away with decoders kept between sources? N reader threads open emopipe's NVDEC reader on a
10-s clip, read it to the end and release it, over and over: `pool` (emopipe/io/nvdec.py now: decoders kept and
reconfigured) or `before` (.gpu/nvdec_old.py: a new threaded decoder, and its native thread, per source)."""

import faulthandler
import importlib.util
import sys
import threading
import time
from pathlib import Path

import torch

faulthandler.enable(all_threads=True)
clip, threads, seconds, variant = Path(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
if variant == "before":
    import emopipe.io  # noqa: F401

    spec = importlib.util.spec_from_file_location("emopipe.io.nvdec", ".gpu/nvdec_old.py")
    nvdec = importlib.util.module_from_spec(spec)
    sys.modules["emopipe.io.nvdec"] = nvdec
    spec.loader.exec_module(nvdec)
else:
    import emopipe.io.nvdec as nvdec
torch.cuda.init()
done, frames, failures = [0] * threads, [0] * threads, []
deadline = time.monotonic() + seconds


def work(k: int) -> None:
    while time.monotonic() < deadline:
        try:
            reader = nvdec._NvdecReader(clip, 0)
            while reader.decode() is not None:
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
    f"{variant} threads {threads}: {sum(done)} sources, {sum(frames)} frames in {seconds:.0f} s "
    f"({sum(frames) / seconds:.0f} frames/s), failures {len(failures)} {failures[:2]}",
    flush=True,
)
if variant == "pool":
    nvdec._pool.close()
