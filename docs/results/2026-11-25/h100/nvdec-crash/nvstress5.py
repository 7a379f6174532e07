"""Four reader threads over and over a 10-s clip: emopipe's reader (a new ThreadedDecoder per source, after a
SimpleDecoder probe) against one ThreadedDecoder per thread reused for every source through reconfigure_decoder
(no native decoding thread started and stopped per source)."""

import faulthandler
import sys
import threading
import time
from pathlib import Path

import torch

import emopipe.io.nvdec as nvdec

faulthandler.enable(all_threads=True)
clip, threads, seconds, variant = Path(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
nvc = nvdec._pynvvideocodec()
torch.cuda.init()
done, frames, failures = [0] * threads, [0] * threads, []
deadline = time.monotonic() + seconds


def work(k: int) -> None:
    decoder = None
    while time.monotonic() < deadline:
        try:
            if variant == "reconfigure":
                if decoder is None:
                    decoder = nvc.ThreadedDecoder(str(clip), buffer_size=16, gpu_id=0, use_device_memory=True,
                                                  output_color_type=nvc.OutputColorType.RGB)
                else:
                    decoder.reconfigure_decoder(str(clip))
                while batch := decoder.get_batch_frames(16):
                    rgb = torch.stack([torch.from_dlpack(f) for f in batch])
                    torch.cuda.synchronize()
                    frames[k] += rgb.shape[0]
            else:
                reader = nvdec._NvdecReader(clip, 0)
                while reader.decode() is not None:
                    frames[k] += 1
                reader.release()
                del reader
            done[k] += 1
        except Exception as exc:
            failures.append(repr(exc))
    if decoder is not None:
        decoder.end()


pool = [threading.Thread(target=work, args=(k,)) for k in range(threads)]
for t in pool:
    t.start()
for t in pool:
    t.join()
print(
    f"{variant} threads {threads}: {sum(done)} sources, {sum(frames)} frames in {seconds:.0f} s "
    f"({sum(frames) / seconds:.0f} frames/s; {sum(frames) / max(1, sum(done)):.0f} a source), "
    f"failures {len(failures)} {failures[:2]}"
)
