"""Session 28: what reading the cuDNN plan folder back costs a fresh process (no warm-up before it), and whether
threads overlap it. python3 s28_plans.py PLAN_DIR seq|threads"""
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path


def main() -> None:
    folder, mode = Path(sys.argv[1]), sys.argv[2]
    t = time.perf_counter()
    import cudnn
    import torch
    torch.zeros(1, device="cuda")
    out = {"mode": mode, "import_and_context_s": round(time.perf_counter() - t, 3)}
    t = time.perf_counter()
    handle = cudnn.create_handle()
    out["first_handle_ms"] = round((time.perf_counter() - t) * 1e3, 1)
    t = time.perf_counter()
    cudnn.create_handle()
    out["second_handle_ms"] = round((time.perf_counter() - t) * 1e3, 1)
    paths = sorted(folder.rglob("*.plan"))
    out["plans"] = len(paths)
    out["bytes"] = sum(p.stat().st_size for p in paths)

    def one(path: Path) -> tuple[float, float, float]:
        t0 = time.perf_counter()
        data = path.read_bytes()
        t1 = time.perf_counter()
        values = list(data)
        t2 = time.perf_counter()
        graph = cudnn.pygraph(handle=handle)
        graph.deserialize(handle, values)
        t3 = time.perf_counter()
        return t1 - t0, t2 - t1, t3 - t2

    t = time.perf_counter()
    if mode == "seq":
        parts = [one(p) for p in paths]
    else:
        with ThreadPoolExecutor(8) as pool:
            parts = list(pool.map(one, paths))
    out["wall_s"] = round(time.perf_counter() - t, 3)
    out["read_s"], out["list_s"], out["deserialize_s"] = (round(sum(p[i] for p in parts), 3) for i in range(3))
    out["deserialize_ms_each"] = sorted(round(p[2] * 1e3, 1) for p in parts)[::4]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
