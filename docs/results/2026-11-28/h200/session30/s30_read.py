"""Session 30: what reading a configuration's cuDNN plans back costs in a fresh process, done before PyTorch is
imported (the cuDNN frontend alone), and whether the reads let other threads run (the interpreter lock).
    python3 s30_read.py PLAN_FOLDER [torchfirst]
"torchfirst": PyTorch imported first and nothing read ahead (the comparison for PyTorch's first convolution).
(As run on the GPU, only laid out for the linter afterwards: one statement a line, the imports in functions.)"""
import time

T0 = time.perf_counter()

import json  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
from pathlib import Path  # noqa: E402

out: dict = {}


def lap(name: str, t: float) -> None:
    out[name] = round(time.perf_counter() - t, 4)


def read_ahead(folder: Path):  # type: ignore[no-untyped-def]
    """The plans read back with the frontend alone; returns the frontend module."""
    from emopipe.model import cuda_context, cudnn_plans, early_plans

    t = time.perf_counter()
    model = cuda_context.device_model(0)
    lap("device_model_s", t)
    t = time.perf_counter()
    early_plans._load_wheel_libraries()
    lap("libraries_s", t)
    sys.modules.setdefault("torch", None)  # type: ignore[arg-type]
    t = time.perf_counter()
    import cudnn
    lap("import_cudnn_s", t)
    t = time.perf_counter()
    cuda_context.make_current(0)
    lap("context_s", t)
    t = time.perf_counter()
    handle = cudnn.create_handle()
    lap("create_handle_s", t)
    environment = cudnn_plans.environment(*model)
    plans = list(early_plans.wanted_plans(folder, environment, ["emonet b64 half", "blazeface_back b32 half"],
                                          early_plans.load_recipes()))
    sizes = sorted(p.stat().st_size for p in plans if p.exists())
    out.update(plans=len(plans), on_disk=len(sizes), kib_min=sizes[0] // 1024, kib_max=sizes[-1] // 1024,
               kib_total=sum(sizes) // 1024)
    read_s = list_s = deserialize_s = 0.0
    each = []
    for p in plans:
        t = time.perf_counter()
        data = p.read_bytes()
        read_s += time.perf_counter() - t
        t = time.perf_counter()
        values = list(data)
        list_s += time.perf_counter() - t
        t = time.perf_counter()
        graph = cudnn.pygraph(handle=handle)
        graph.deserialize(handle, values)
        each.append(round(time.perf_counter() - t, 4))
        deserialize_s += each[-1]
    out.update(read_bytes_s=round(read_s, 4), to_list_s=round(list_s, 4), deserialize_s=round(deserialize_s, 4),
               deserialize_each=each)
    try:  # the same plans again, a bytearray handed to the binding instead of a list
        t = time.perf_counter()
        for p in plans:
            graph = cudnn.pygraph(handle=handle)
            graph.deserialize(handle, bytearray(p.read_bytes()))
        lap("again_bytearray_s", t)
    except Exception as exc:
        out["bytearray"] = f"{type(exc).__name__}: {str(exc)[:120]}"
    t = time.perf_counter()
    for p in plans:
        graph = cudnn.pygraph(handle=handle)
        graph.deserialize(handle, list(p.read_bytes()))
    lap("again_list_s", t)
    # the interpreter lock: a Python thread counting alone, then while the plans are deserialized (lists made first)
    lists = [list(p.read_bytes()) for p in plans]
    count, stop = [0], [False]

    def spin() -> None:
        while not stop[0]:
            count[0] += 1

    spinner = threading.Thread(target=spin)
    spinner.start()
    time.sleep(0.3)
    c0 = count[0]
    t = time.perf_counter()
    time.sleep(0.3)
    alone = (count[0] - c0) / (time.perf_counter() - t)
    c0 = count[0]
    t = time.perf_counter()
    for values in lists:
        graph = cudnn.pygraph(handle=handle)
        graph.deserialize(handle, values)
    busy = time.perf_counter() - t
    beside = (count[0] - c0) / busy
    stop[0] = True
    spinner.join()
    out.update(gil_deserialize_s=round(busy, 4), spinner_share_beside=round(beside / alone, 3))
    del sys.modules["torch"]
    return cudnn


def main() -> None:
    torch_first = "torchfirst" in sys.argv[2:]
    out["mode"] = "torchfirst" if torch_first else "frontend-first"
    cudnn = None if torch_first else read_ahead(Path(sys.argv[1]))
    t = time.perf_counter()
    import torch
    lap("import_torch_s", t)
    import torch.nn.functional as F

    torch.backends.cudnn.benchmark = True
    out["torch_cudnn"] = torch.backends.cudnn.version()
    if cudnn is not None:
        out["frontend_cudnn"] = cudnn.backend_version()
    t = time.perf_counter()
    torch.cuda.init()
    x = torch.rand(64, 3, 256, 256, device="cuda").half().contiguous(memory_format=torch.channels_last)
    torch.cuda.synchronize()
    lap("torch_cuda_first_s", t)
    w = torch.rand(64, 3, 7, 7, device="cuda").half().contiguous(memory_format=torch.channels_last)
    for k in range(3):
        t = time.perf_counter()
        F.conv2d(x, w, stride=2, padding=3)
        torch.cuda.synchronize()
        lap(f"stem_conv_{k}_s", t)
    w3 = torch.rand(128, 64, 3, 3, device="cuda").half().contiguous(memory_format=torch.channels_last)
    y = torch.rand(64, 64, 64, 64, device="cuda").half().contiguous(memory_format=torch.channels_last)
    for k in range(2):
        t = time.perf_counter()
        F.conv2d(y, w3, padding=1)
        torch.cuda.synchronize()
        lap(f"conv3x3_{k}_s", t)
    a = torch.rand(64, 256, device="cuda").half()
    b = torch.rand(256, 8, device="cuda").half()
    t = time.perf_counter()
    a @ b
    torch.cuda.synchronize()
    lap("first_matmul_s", t)
    out["total_s"] = round(time.perf_counter() - T0, 3)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
