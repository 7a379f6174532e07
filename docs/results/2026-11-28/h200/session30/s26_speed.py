"""Session 26: warm-up seconds and steady speed of EmoNet's engine (batch 64, CUDA graphs) and the BlazeFace back
detector (32 frames of 720p), in a fresh process, for the tree on PYTHONPATH.

    python3 s26_speed.py WEIGHTS MODELS_DIR LABEL
"""
import json
import sys
import time


def main() -> None:
    import torch

    from emopipe.config import RunConfig
    from emopipe.pipeline import models as models_module

    weights, models_dir, label = sys.argv[1], sys.argv[2], sys.argv[3]
    config = RunConfig(source="x.mp4", weights=weights, models_dir=models_dir, detector="blazeface_back",
                       device="cuda").resolved("cuda")
    models = models_module.load_models(config)
    engine_s = models.warm_engine()
    detector_s = models.warm_detector(720, 1280)
    crops = torch.randint(0, 256, (64, 3, 256, 256), dtype=torch.uint8, device="cuda")
    frames = torch.randint(0, 256, (32, 720, 1280, 3), dtype=torch.uint8, device="cuda")

    def per_call(fn, calls: int) -> float:
        for _ in range(10):
            fn()
        torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
        return (time.perf_counter() - t) / calls * 1e3

    engine_ms = sorted(per_call(lambda: models.engine.infer(crops), 100) for _ in range(5))
    detector_ms = sorted(per_call(lambda: models.detector.detect(frames), 50) for _ in range(5))
    print(json.dumps({"label": label, "engine_warmup_s": round(engine_s, 3), "detector_warmup_s": round(detector_s, 3),
                      "engine_b64_ms": [round(v, 3) for v in engine_ms],
                      "detector_32x720p_ms": [round(v, 3) for v in detector_ms]}))


if __name__ == "__main__":
    main()
