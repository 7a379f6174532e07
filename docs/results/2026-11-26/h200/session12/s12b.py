"""Warm-up overlap probe: EmoNet's and the detector's warm-ups one after the other (serial) or on two threads at
once (overlap, graphs captured with capture_error_mode='thread_local'); then each engine's steady-state time, to
see whether autotuning beside other work picked worse algorithms. One variant per process.

(As run in s12b, reformatted for the linter: one statement a line.)"""
import json
import sys
import threading
import time

T_START = time.perf_counter()


def timed(torch, fn, n=200):
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    s = time.perf_counter()
    for _ in range(n):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - s) / n * 1000


def main() -> None:
    import torch

    variant, weights, models_dir = sys.argv[1], sys.argv[2], sys.argv[3]
    if variant == "overlap":
        class ThreadLocalGraph(torch.cuda.graph):
            def __init__(self, cuda_graph, pool=None, stream=None, capture_error_mode="thread_local"):
                super().__init__(cuda_graph, pool=pool, stream=stream, capture_error_mode="thread_local")

        torch.cuda.graph = ThreadLocalGraph
    from emopipe.api import Analyzer
    from emopipe.engines.base import launch
    from emopipe.pipeline.models import load_models

    models = load_models(Analyzer(weights=weights, detector="blazeface_back", models_dir=models_dir)._base)
    t0 = time.perf_counter()
    if variant == "serial":
        models.warm_engine()
        t_e = time.perf_counter() - t0
        models.warm_detector(720, 1280)
        t_d = time.perf_counter() - t0 - t_e
    else:
        times = {}

        def detector() -> None:
            s = time.perf_counter()
            models.warm_detector(720, 1280)
            times["d"] = time.perf_counter() - s

        thread = threading.Thread(target=detector)
        thread.start()
        s = time.perf_counter()
        models.warm_engine()
        t_e = time.perf_counter() - s
        thread.join()
        t_d = times["d"]
    warm = time.perf_counter() - t0
    torch.cuda.synchronize()
    crops = torch.rand(64, 3, 256, 256, device="cuda").to(models.cropper.dtype)
    frames = torch.randint(0, 255, (32, 720, 1280, 3), dtype=torch.uint8, device="cuda")
    emonet_ms = timed(torch, lambda: launch(models.engine, crops).collect())
    det_ms = timed(torch, lambda: models.detector.detect(frames))
    print(json.dumps({"variant": variant, "warm_s": round(warm, 3), "engine_s": round(t_e, 3),
                      "detector_s": round(t_d, 3), "emonet_b64_ms": round(emonet_ms, 3),
                      "detect32_ms": round(det_ms, 3), "process_s": round(time.perf_counter() - T_START, 2)}))


if __name__ == "__main__":
    main()
