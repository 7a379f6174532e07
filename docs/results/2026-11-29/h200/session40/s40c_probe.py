# ruff: noqa: E501  (the ways are one-line programs for a child process, as they ran)
"""session 40 (s40c): NVDEC on each container/codec of the 10-second 720p clip, each way in a child process (a native
abort kills only it): PyNvVideoCodec's threaded decoder alone; emopipe's auto reader fresh; and after an MP4 of the
same clip (the kept decoder pointed at it), then the MP4 again — as a folder holding both reads them."""
import subprocess
import sys
import time

MP4 = sys.argv[1]
FILES = sys.argv[2:]
WAYS = {
 "threaded": "d = nvc.ThreadedDecoder(P, buffer_size=12, gpu_id=0, use_device_memory=True, output_color_type=nvc.OutputColorType.RGB)\nn = 0\nwhile True:\n  b = d.get_batch_frames(12)\n  if not b: break\n  n += len(b)\nprint('frames', n); d.end()",
 "auto": "import torch; from emopipe.io.nvdec import open_input\ns = open_input(P, decoder='auto', device='cuda:0'); k = sum(1 for _ in s); print(s.decoder, 'frames', k, 'ended_early', s.ended_early, 'damaged', getattr(s, 'damaged', None)); s.close()",
 "mp4,it,mp4": "import torch; from emopipe.io.nvdec import open_input\nout = []\nfor p in (M, P, M):\n  s = open_input(p, decoder='auto', device='cuda:0'); out.append((s.decoder, sum(1 for _ in s), s.ended_early)); s.close()\nprint(out)",
}
for path in FILES:
    for name, code in WAYS.items():
        t0 = time.perf_counter()
        r = subprocess.run([sys.executable, "-c", f"import PyNvVideoCodec as nvc\nP = {path!r}; M = {MP4!r}\n{code}"],
                           capture_output=True, text=True, timeout=120)
        tail = (r.stdout.strip().splitlines() or [''])[-1]
        err = (r.stderr.strip().splitlines() or [''])[-1] if r.returncode else ''
        print(f"{path.rsplit('/', 1)[-1]} {name}: rc={r.returncode} {time.perf_counter() - t0:.2f} s | {tail} | {err[:200]}", flush=True)
