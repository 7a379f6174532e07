"""Can cuDNN finish a ConvBlock convolution in its epilogue, and is that faster than today's glue kernel?

    python scripts/cudnn_epilogue_probe.py [--batch 256] [--json out.json]

Today each ConvBlock convolution writes its output y, and a Triton kernel then reads y and the
residual and writes two things: out's channel slice (y + residual) and the next convolution's input
relu(y · scale + shift) (`emopipe.kernels.add_residual_slice`). A convolution that does both in its
epilogue never writes or re-reads y: the last pass of glue around it is gone. The cuDNN frontend graph
API expresses that as conv_fprop → (add residual → out slice, scale → bias → ReLU → next input), two
outputs, the first into a channel slice of a wider tensor.

For each 3×3 ConvBlock convolution shape (fp16, channels_last, batch 256) this reports whether cuDNN
builds that graph (and the error if not), its time against today's convolution + Triton kernel and
against the convolution alone, whether it matches, and whether it survives CUDA graph capture.
The companion `cudnn_prologue_probe.py` asks the same of BatchNorm + ReLU applied on the input side.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import traceback
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from cudnn_prologue_probe import capture_check, first_line, load_frontend, timed

from emopipe.model import kernels

# (input channels, output channels, first channel of the output slice, next activation?, size): a
# ConvBlock(256, 256)'s conv1, conv2, conv3 at the hourglass's levels (conv3 feeds no convolution).
SHAPES = [(cin, cout, first, act, size) for size in (64, 32, 16, 8, 4)
          for cin, cout, first, act in ((256, 128, 0, True), (128, 64, 128, True), (64, 64, 192, False))]
WIDTH = 256  # channels of the block's output


def fused_conv(cudnn, handle, x, w, residual_slice, out_slice, scale, shift, act, every_plan: bool = False):
    """conv(x, w) → out_slice = · + residual_slice, and act = relu(· scale + shift) (when act is given).
    ``every_plan``: also build every plan the heuristics list, and return (run, graph, bindings)."""
    graph = cudnn.pygraph(io_data_type=cudnn.data_type.HALF, intermediate_data_type=cudnn.data_type.FLOAT,
                          compute_data_type=cudnn.data_type.FLOAT, handle=handle)
    X, W, R = graph.tensor_like(x), graph.tensor_like(w), graph.tensor_like(residual_slice)
    Y = graph.conv_fprop(image=X, weight=W, padding=[1, 1], stride=[1, 1], dilation=[1, 1])
    Out = graph.add(a=Y, b=R)
    Out.set_output(True).set_data_type(cudnn.data_type.HALF).set_stride(list(out_slice.stride()))
    bindings = {X: x, W: w, R: residual_slice, Out: out_slice}
    if act is not None:
        S, B = graph.tensor_like(scale), graph.tensor_like(shift)
        A = graph.relu(input=graph.bias(input=graph.scale(input=Y, scale=S), bias=B))
        A.set_output(True).set_data_type(cudnn.data_type.HALF).set_stride(list(act.stride()))
        bindings.update({S: scale, B: shift, A: act})
    graph.validate()
    graph.build_operation_graph()
    graph.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.B, cudnn.heur_mode.FALLBACK])
    graph.check_support()
    graph.build_plans(cudnn.build_plan_policy.ALL if every_plan else cudnn.build_plan_policy.HEURISTICS_CHOICE)
    workspace = torch.empty(max(1, graph.get_workspace_size()), dtype=torch.uint8, device=x.device)

    def run() -> None:
        graph.execute(bindings, workspace, handle=handle)

    return (run, graph, bindings) if every_plan else run


def plan_times(cudnn, handle, graph, bindings, device) -> list[dict]:
    """Each built plan's name and median ms (the heuristics' order), as cudnn.benchmark would time them."""
    rows = []
    for index in range(graph.get_execution_plan_count()):
        row: dict = {"index": index}
        try:
            row["name"] = graph.get_plan_name_at_index(index)
            size = graph.get_workspace_size_plan_at_index(index)
            workspace = torch.empty(max(1, size), dtype=torch.uint8, device=device)
            row["ms"] = timed(functools.partial(graph.execute_plan_at_index, bindings, workspace, index, handle=handle),
                              iters=20)
        except Exception as exc:  # a listed plan that did not build
            row["error"] = f"{type(exc).__name__}: {exc}"[:200]
        rows.append(row)
    return rows


def probe(cudnn, handle, batch: int, cin: int, cout: int, first: int, with_act: bool, size: int,
          every_plan: bool = False) -> dict:
    torch.manual_seed(0)
    device, cl = torch.device("cuda"), torch.channels_last
    x = torch.randn(batch, cin, size, size, device=device, dtype=torch.half).relu().contiguous(memory_format=cl)
    w = (torch.randn(cout, cin, 3, 3, device=device, dtype=torch.half) / (3 * cin ** 0.5)).contiguous(memory_format=cl)
    residual = torch.randn(batch, WIDTH, size, size, device=device, dtype=torch.half).contiguous(memory_format=cl)
    out = torch.zeros_like(residual)
    scale = (torch.rand(1, cout, 1, 1, device=device) + 0.5).half().contiguous(memory_format=cl)
    shift = (torch.randn(1, cout, 1, 1, device=device) * 0.5).half().contiguous(memory_format=cl)
    act = torch.empty(batch, cout, size, size, device=device, dtype=torch.half).contiguous(memory_format=cl)
    row: dict = {"shape": f"{batch}×{cin}×{size}×{size} → {cout} at channel {first}", "next_act": with_act}
    sl = slice(first, first + cout)

    def today() -> torch.Tensor | None:  # the engine's path: cuDNN's convolution, then the Triton kernel
        affine = (scale.float(), shift.float()) if with_act else ()
        return kernels.add_residual_slice(F.conv2d(x, w, padding=1), residual, out, first, *affine)

    row["today_ms"] = timed(today)
    row["conv_alone_ms"] = timed(lambda: F.conv2d(x, w, padding=1))
    y = F.conv2d(x.float(), w.float(), padding=1)
    want_out = y + residual[:, sl].float()
    want_act = torch.relu(y * scale.float() + shift.float())
    today_act = today()
    row["max_abs_err_today"] = float((out[:, sl].float() - want_out).abs().max())
    try:
        cudnn.set_stream(handle, torch.cuda.current_stream().cuda_stream)
        out.zero_()
        run = fused_conv(cudnn, handle, x, w, residual[:, sl], out[:, sl], scale, shift, act if with_act else None)
        run()
        torch.cuda.synchronize()
    except Exception as exc:  # the answer we are after when it is "not supported"
        row["supported"] = False
        row["error"] = first_line(exc)
        return row
    row["supported"] = True
    row["max_abs_err_fused"] = float((out[:, sl].float() - want_out).abs().max())
    row["other_channels_untouched"] = bool((out[:, :first] == 0).all() and (out[:, first + cout:] == 0).all())
    if with_act:
        row["max_abs_err_fused_act"] = float((act.float() - want_act).abs().max())
        row["max_abs_err_today_act"] = float((today_act.float() - want_act).abs().max())
    row["fused_ms"] = timed(run)
    if every_plan:
        _, graph, bindings = fused_conv(cudnn, handle, x, w, residual[:, sl], out[:, sl], scale, shift,
                                        act if with_act else None, every_plan=True)
        row["plans"] = plan_times(cudnn, handle, graph, bindings, device)
        times = [p["ms"] for p in row["plans"] if "ms" in p]
        row["best_plan_ms"] = min(times) if times else None
    row.update(capture_check(cudnn, handle, run, out.zero_,
                             lambda: float((out[:, sl].float() - want_out).abs().max())))
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--every-plan", action="store_true",
                        help="also build and time every plan cuDNN lists (what autotuning would choose from)")
    args = parser.parse_args()
    loaded = load_frontend()
    if loaded is None:
        return 2
    cudnn, handle = loaded
    rows = []
    for shape in SHAPES:
        try:
            row = probe(cudnn, handle, args.batch, *shape, every_plan=args.every_plan)
        except Exception:
            row = {"shape": str(shape), "error": traceback.format_exc(limit=3)[-600:]}
        rows.append(row)
        print(json.dumps(row), flush=True)
    supported = [r for r in rows if r.get("supported")]
    if supported:
        def total(key: str) -> float:
            return sum(r.get(key, r["fused_ms"]) for r in supported)
        print(f"\nsupported for {len(supported)} of {len(SHAPES)} shapes; sum over them: today (conv + Triton "
              f"kernel) {total('today_ms'):.3f} ms, fused {total('fused_ms'):.3f} ms (graph replay "
              f"{total('graph_replay_ms'):.3f}), convolution alone {total('conv_alone_ms'):.3f} ms")
        if args.every_plan:
            print(f"fastest listed plan per shape, summed: {total('best_plan_ms'):.3f} ms (the heuristics' own "
                  f"choice: {total('fused_ms'):.3f} ms)")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
