"""Session 32: what opening a video file on NVDEC costs, step by step, in a fresh process (PyTorch imported, CUDA
context made first, as in a worker): PyNvVideoCodec's import, the demuxer, OpenCV's look at the container, the probe
(a simple decoder's first frame), the threaded decoder and its first batch, a kept decoder pointed at the next file."""
import os
import sys
import time

import torch

path = sys.argv[1]
t = time.perf_counter()
torch.zeros(1, device="cuda")
torch.cuda.synchronize()
marks = {"cuda context (torch)": time.perf_counter() - t}


def mark(name, t0):
    marks[name] = time.perf_counter() - t0


t = time.perf_counter()
from emopipe.io import nvdec  # noqa: E402

mark("import emopipe.io.nvdec", t)
t = time.perf_counter()
nvc = nvdec._pynvvideocodec()
mark("import PyNvVideoCodec", t)
t = time.perf_counter()
demuxer = nvc.CreateDemuxer(path)
mark("demuxer", t)
t = time.perf_counter()
facts = nvdec._container_facts(__import__("pathlib").Path(path))
mark("container facts (OpenCV)", t)
t = time.perf_counter()
probe = nvc.SimpleDecoder(path, gpu_id=0, use_device_memory=True, output_color_type=nvc.OutputColorType.RGB)
mark("simple decoder made", t)
t = time.perf_counter()
probe.get_batch_frames(1)
mark("simple decoder: first frame", t)
import threading  # noqa: E402

spins = [0]
stop = threading.Event()


def spin():  # counts while it holds the interpreter: few counts while another thread's native call holds it
    while not stop.is_set():
        spins[0] += 1


counter = threading.Thread(target=spin)
counter.start()
time.sleep(0.1)
before = spins[0]
time.sleep(0.2)
idle_rate = (spins[0] - before) / 0.2
t = time.perf_counter()
before = spins[0]
del probe
mark("simple decoder deleted", t)
during_rate = (spins[0] - before) / marks["simple decoder deleted"]
stop.set()
counter.join()
print("a Python thread's count rate while the simple decoder is deleted:",
      f"{during_rate / idle_rate:.2f} of its idle rate")
t = time.perf_counter()
dec = nvc.ThreadedDecoder(path, buffer_size=16, gpu_id=0, use_device_memory=True,
                          output_color_type=nvc.OutputColorType.RGB)
mark("threaded decoder made", t)
t = time.perf_counter()
frames = dec.get_batch_frames(16)
mark("threaded decoder: first 16 frames", t)
t = time.perf_counter()
frames = dec.get_batch_frames(16)
mark("threaded decoder: next 16 frames", t)
t = time.perf_counter()
dec.reconfigure_decoder(path)
frames = dec.get_batch_frames(16)
mark("reconfigured + 16 frames", t)
counter = threading.Thread(target=spin)
stop.clear()
counter.start()
time.sleep(0.1)
before = spins[0]
t = time.perf_counter()
dec.end()
mark("threaded decoder ended", t)
during_rate = (spins[0] - before) / marks["threaded decoder ended"]
stop.set()
counter.join()
print("a Python thread's count rate while the threaded decoder ends:",
      f"{during_rate / idle_rate:.2f} of its idle rate")
for k, v in marks.items():
    print(f"{k}: {v * 1000:.1f} ms")
os._exit(0)
