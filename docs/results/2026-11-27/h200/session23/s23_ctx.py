"""Session 23: the CUDA context made on a thread (the driver API through ctypes, the GIL free) while PyTorch imports,
against PyTorch making it at its first CUDA call. Prints import, first-CUDA-call and total seconds."""
import sys
import time

t0 = time.perf_counter()
mode = sys.argv[1]
thread_s = {}
if mode == "early":
    import ctypes
    import threading

    def make() -> None:
        s = time.perf_counter()
        cuda = ctypes.CDLL("libcuda.so.1")
        assert cuda.cuInit(0) == 0
        dev, ctx = ctypes.c_int(), ctypes.c_void_p()
        assert cuda.cuDeviceGet(ctypes.byref(dev), 0) == 0
        assert cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) == 0
        thread_s["ctx"] = time.perf_counter() - s
        thread_s["done_at"] = time.perf_counter() - t0

    helper = threading.Thread(target=make)
    helper.start()
import torch  # noqa: E402

t1 = time.perf_counter()
x = torch.zeros(1, device="cuda")
torch.cuda.synchronize()
t2 = time.perf_counter()
y = torch.nn.functional.conv2d(torch.randn(1, 3, 64, 64, device="cuda"), torch.randn(8, 3, 3, 3, device="cuda"))
torch.cuda.synchronize()
t3 = time.perf_counter()
print(f"{mode}: import {t1 - t0:.3f} s, first CUDA call {t2 - t1:.3f} s, first conv {t3 - t2:.3f} s, "
      f"total {t3 - t0:.3f} s; thread {thread_s}")
