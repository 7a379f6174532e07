"""Can cuDNN apply BatchNorm + ReLU as it loads a convolution's input (a "prologue"), and is it faster?

    python scripts/cudnn_prologue_probe.py [--batch 256] [--json out.json]

`docs/benchmarks.md` ("What limits us now") says what stands between the engine and 10 000 faces/s:
each ConvBlock convolution reads an input that a separate kernel first wrote as ReLU(scale·x + bias)
(the folded BatchNorm). A convolution that applies scale, bias and ReLU while loading its input removes
that pass. PyTorch's convolution cannot; cuDNN's runtime fusion engines can, through the cuDNN frontend
graph API (`pip install nvidia-cudnn-frontend`; on the GPU host its wheel goes with `--target`).

For each 3×3 convolution shape of EmoNet's ConvBlocks (fp16, channels_last, batch 256) this builds the
graph scale → bias → ReLU → conv_fprop, and reports: whether cuDNN supports it (and the error if not),
its time against the two-kernel path the engine uses today (PyTorch's elementwise + cuDNN's conv)
and against the convolution alone (the floor), whether it matches, and whether it can be captured
in a CUDA graph (the engine replays one per static shape). Nothing here is in the product yet.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import traceback
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from detector_bench import time_cuda

# (input channels, output channels, spatial size): conv1/conv2/conv3 of ConvBlock(256, 256) at the
# hourglass levels, and of the stem's ConvBlocks (64→128, 128→128, 128→256 at 128 / 64 px).
SHAPES = [(256, 128, s) for s in (64, 32, 16, 8, 4)] + [(128, 64, 64), (64, 64, 64), (64, 64, 16), (64, 64, 4),
                                                       (64, 32, 128), (128, 64, 128)]


def timed(fn, iters: int = 50) -> float:
    """Median ms per call over ``iters`` calls (CUDA events), after 5 untimed calls."""
    for _ in range(5):
        fn()
    return statistics.median(time_cuda(fn, iters))


def first_line(exc: Exception) -> str:
    """An exception as one short line (cuDNN's messages run on)."""
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}"[:300]


def load_frontend():
    """(the cuDNN frontend module, a handle), the versions printed; or None after saying why not."""
    if not torch.cuda.is_available():
        print("needs a CUDA GPU", file=sys.stderr)
        return None
    try:
        import cudnn
    except ImportError as exc:
        print(f"needs the cuDNN frontend (pip install nvidia-cudnn-frontend): {exc}", file=sys.stderr)
        return None
    torch.backends.cudnn.benchmark = True  # the engine's setting, for the convolutions compared against
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()} "
          f"(torch's), frontend {cudnn.__version__}, backend {cudnn.backend_version()}")
    return cudnn, cudnn.create_handle()


def capture_check(cudnn, handle, run, reset, error) -> dict:
    """Capture ``run`` in a CUDA graph (as the engine does per static shape), replay it after ``reset``:
    its ``error()`` then, and its replay time; or why capture failed."""
    try:
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            cudnn.set_stream(handle, stream.cuda_stream)
            run()
            captured = torch.cuda.CUDAGraph()
            with torch.cuda.graph(captured, stream=stream):
                run()
        torch.cuda.current_stream().wait_stream(stream)
        cudnn.set_stream(handle, torch.cuda.current_stream().cuda_stream)
        reset()
        captured.replay()
        torch.cuda.synchronize()
        return {"graph_replay_max_abs_err": error(), "graph_replay_ms": timed(captured.replay)}
    except Exception as exc:
        return {"graph_capture_error": f"{type(exc).__name__}: {exc}"[:300]}


def fused_conv(cudnn, handle, x, w, scale, bias, y, stats: bool = False):
    """The cuDNN frontend graph ReLU(x·scale + bias) ⊛ w → y, built; returns a callable running it.
    ``stats``: also y's per-channel sum and sum of squares (cuDNN's ConvBNfprop pattern, the one its
    specialised engine is documented for; the engine would ignore them)."""
    graph = cudnn.pygraph(io_data_type=cudnn.data_type.HALF, intermediate_data_type=cudnn.data_type.FLOAT,
                          compute_data_type=cudnn.data_type.FLOAT, handle=handle)
    X, W = graph.tensor_like(x), graph.tensor_like(w)
    S, B = graph.tensor_like(scale), graph.tensor_like(bias)
    loaded = graph.relu(input=graph.bias(input=graph.scale(input=X, scale=S), bias=B))
    Y = graph.conv_fprop(image=loaded, weight=W, padding=[1, 1], stride=[1, 1], dilation=[1, 1])
    Y.set_output(True).set_data_type(cudnn.data_type.HALF)
    bindings = {X: x, W: w, S: scale, B: bias, Y: y}
    if stats:
        sums = graph.genstats(input=Y, compute_data_type=cudnn.data_type.FLOAT)
        for tensor in sums:
            tensor.set_output(True).set_data_type(cudnn.data_type.FLOAT)
            bindings[tensor] = torch.empty(1, y.shape[1], 1, 1, device=x.device, dtype=torch.float)
    graph.validate()
    graph.build_operation_graph()
    graph.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.B, cudnn.heur_mode.FALLBACK])
    graph.check_support()
    graph.build_plans()
    workspace = torch.empty(max(1, graph.get_workspace_size()), dtype=torch.uint8, device=x.device)

    def run() -> None:
        graph.execute(bindings, workspace, handle=handle)

    return run


def probe(cudnn, handle, batch: int, cin: int, cout: int, size: int, scale_dtype: torch.dtype,
          stats: bool = False) -> dict:
    torch.manual_seed(0)
    device = torch.device("cuda")
    cl = torch.channels_last
    x = torch.randn(batch, cin, size, size, device=device, dtype=torch.half).contiguous(memory_format=cl)
    w = (torch.randn(cout, cin, 3, 3, device=device, dtype=torch.half) / (3 * cin ** 0.5)).contiguous(memory_format=cl)
    scale = (torch.rand(1, cin, 1, 1, device=device) + 0.5).to(scale_dtype).contiguous(memory_format=cl)
    bias = (torch.randn(1, cin, 1, 1, device=device) * 0.5).to(scale_dtype).contiguous(memory_format=cl)
    y = torch.empty(batch, cout, size, size, device=device, dtype=torch.half).contiguous(memory_format=cl)
    row: dict = {"shape": f"{batch}×{cin}×{size}×{size} → {cout}", "scale_dtype": str(scale_dtype), "stats": stats}

    def today() -> torch.Tensor:  # the engine's path: one elementwise pass, then cuDNN's convolution
        return F.conv2d(torch.relu(x * scale.half() + bias.half()), w, padding=1)

    row["today_ms"] = timed(today)
    activated = torch.relu(x * scale.half() + bias.half())
    row["conv_alone_ms"] = timed(lambda: F.conv2d(activated, w, padding=1))
    try:
        cudnn.set_stream(handle, torch.cuda.current_stream().cuda_stream)
        run = fused_conv(cudnn, handle, x, w, scale, bias, y, stats)
        run()
        torch.cuda.synchronize()
    except Exception as exc:  # the answer we are after when it is "not supported"
        row["supported"] = False
        row["error"] = first_line(exc)
        return row
    row["supported"] = True
    reference = F.conv2d(torch.relu(x.float() * scale.float() + bias.float()), w.float(), padding=1)
    row["max_abs_err_fused"] = float((y.float() - reference).abs().max())
    row["max_abs_err_today"] = float((today().float() - reference).abs().max())
    row["fused_ms"] = timed(run)
    row.update(capture_check(cudnn, handle, run, y.zero_, lambda: float((y.float() - reference).abs().max())))
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--stats", action="store_true", help="add the per-channel statistics outputs (ConvBNfprop)")
    parser.add_argument("--shapes", type=int, default=len(SHAPES), help="only the first N shapes")
    args = parser.parse_args()
    loaded = load_frontend()
    if loaded is None:
        return 2
    cudnn, handle = loaded
    rows = []
    for cin, cout, size in SHAPES[: args.shapes]:
        for scale_dtype in (torch.half, torch.float):
            try:
                row = probe(cudnn, handle, args.batch, cin, cout, size, scale_dtype, args.stats)
            except Exception:
                row = {"shape": f"{cin}→{cout} at {size}", "scale_dtype": str(scale_dtype),
                       "error": traceback.format_exc(limit=3)[-600:]}
            rows.append(row)
            print(json.dumps(row), flush=True)
            if row.get("supported"):
                break  # one scale dtype that works is enough
    supported = [r for r in rows if r.get("supported")]
    if supported:
        today = sum(r["today_ms"] for r in supported)
        fused = sum(r["fused_ms"] for r in supported)
        print(f"\nsupported for {len(supported)} of {len(SHAPES)} shapes; sum over them: today {today:.3f} ms, "
              f"fused {fused:.3f} ms, convolution alone {sum(r['conv_alone_ms'] for r in supported):.3f} ms")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
