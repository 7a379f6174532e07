# ruff: noqa: E501  (the ways are one-line programs for a child process, as they ran)
"""session 40 (s40b): can NVDEC read an MPEG-TS file? Each way in a child process (a native abort kills only it)."""
import subprocess
import sys
import time

TS, MP4 = sys.argv[1], sys.argv[2]
WAYS = {
 "simple": "d = nvc.SimpleDecoder(P, gpu_id=0, use_device_memory=True, output_color_type=nvc.OutputColorType.RGB); print('frames', len(d.get_batch_frames(1)))",
 "simple-scanned": "d = nvc.SimpleDecoder(P, gpu_id=0, use_device_memory=True, need_scanned_stream_metadata=True, output_color_type=nvc.OutputColorType.RGB); print('frames', len(d.get_batch_frames(1)))",
 "threaded": "d = nvc.ThreadedDecoder(P, buffer_size=12, gpu_id=0, use_device_memory=True, output_color_type=nvc.OutputColorType.RGB)\nn = 0; pts = []\nwhile True:\n  b = d.get_batch_frames(12)\n  if not b: break\n  n += len(b); pts += [int(f.getPTS()) for f in b]\nprint('frames', n, 'pts first', pts[:3], 'last', pts[-2:], 'meta', d.get_stream_metadata().num_frames, d.get_stream_metadata().average_fps); d.end()",
 "core": "dm = nvc.CreateDemuxer(P); dec = nvc.CreateDecoder(gpuid=0, codec=dm.GetNvCodecId(), usedevicememory=True)\nn = 0\nfor pkt in dm:\n  n += len(dec.Decode(pkt))\n  if n >= 1: break\nprint('frames', n)",
 "emopipe-auto": "import torch; from emopipe.io.nvdec import open_input\ns = open_input(P, decoder='auto', device='cuda:0'); k = sum(1 for _ in s); print(type(s).__name__, 'frames', k, 'ended_early', s.ended_early, 'damaged', getattr(s, 'damaged', None))",
 "emopipe-after-mp4": "import torch; from emopipe.io.nvdec import open_input\ns = open_input(M, decoder='nvdec', device='cuda:0'); k0 = sum(1 for _ in s); s.close()\ns = open_input(P, decoder='nvdec', device='cuda:0'); k = sum(1 for _ in s); print('mp4 frames', k0, type(s).__name__, 'ts frames', k, 'ended_early', s.ended_early); s.close()",
}
for path in (TS, MP4):
    for name, code in WAYS.items():
        t0 = time.perf_counter()
        r = subprocess.run([sys.executable, "-c", f"import PyNvVideoCodec as nvc\nP = {path!r}; M = {MP4!r}\n{code}"],
                           capture_output=True, text=True, timeout=120)
        tail = (r.stdout.strip().splitlines() or [''])[-1]
        err = (r.stderr.strip().splitlines() or [''])[-1]
        print(f"{path.rsplit('/', 1)[-1]} {name}: rc={r.returncode} {time.perf_counter() - t0:.2f} s | {tail} | {err[:200]}", flush=True)
