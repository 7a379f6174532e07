"""Does cuDNN's fused convolution + bias + ReLU speed up S3FD's conv→ReLU pairs? (issue 7 lever)

S3FD (VGG-16) applies ReLU straight after 19 convolutions, each a full memory pass over large
activations. ``emopipe.fusion.fuse_conv_relu`` (what the sfd detector uses by default) rewrites
those pairs with torch.fx into ``torch.cudnn_convolution_relu``; this script times the network as
the detector runs it (fp16, channels_last, batch 8 at 640×384, CUDA graph) with and without, and
checks the outputs agree.

    python3 scripts/conv_relu_probe.py
"""

from __future__ import annotations

import sys

import torch
from torch import nn

sys.path.insert(0, ".")
from emopipe.model.fusion import fuse_conv_relu
from emopipe.vision.detect import _float32_norms


def timed(network: nn.Module, x: torch.Tensor, runs: int = 200) -> tuple[float, tuple]:
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            network(x)
    torch.cuda.current_stream().wait_stream(stream)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = network(x)
    for _ in range(10):
        g.replay()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(runs):
        start.record()
        g.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    times.sort()
    return times[len(times) // 2], tuple(o.float().clone() for o in out)


@torch.inference_mode()
def main() -> int:
    from face_alignment.detection.sfd.net_s3fd import s3fd

    torch.backends.cudnn.benchmark = True
    torch.manual_seed(0)
    base = s3fd().eval()
    _float32_norms(base)
    base = base.cuda().half().to(memory_format=torch.channels_last)
    fused = fuse_conv_relu(base)
    x = (torch.randn(8, 3, 384, 640, device="cuda") * 50).half().contiguous(memory_format=torch.channels_last)
    rows = []
    for name, net in (("S3FD fp16 cl b8, conv + ReLU", base), ("S3FD fp16 cl b8, cudnn_convolution_relu", fused),
                      ("S3FD fp16 cl b8, conv + ReLU (again)", base)):
        ms, out = timed(net, x)
        rows.append((name, ms, out))
    ref = rows[0][2]
    print("| network | graph replay ms (median of 200) | max |Δ| vs conv + ReLU (relative to max |output|) |")
    print("|---|---|---|")
    for name, ms, out in rows:
        diff = max(float((a - b).abs().max() / b.abs().max().clamp(min=1e-6)) for a, b in zip(out, ref))
        print(f"| {name} | {ms:.3f} | {diff:.2e} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
