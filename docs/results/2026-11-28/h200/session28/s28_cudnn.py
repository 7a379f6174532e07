"""Session 28: what cuDNN's autotuning costs a warm start, and what its choices are worth. In a fresh process, for
the tree on PYTHONPATH: EmoNet's warm-up for a 720p source (the detector's plan-finding pass inside it, as the
command runs it), the detector's warm-up, then EmoNet's engine (batch 64, CUDA graphs) and the BlazeFace back
detector (32 frames of 720p) timed.

    python3 s28_cudnn.py WEIGHTS MODELS_DIR MODE     MODE: tuned | det-heuristic | all-heuristic

tuned: as emopipe runs (cudnn.benchmark on); det-heuristic: the detector's calls with benchmark off (cuDNN's
heuristics pick); all-heuristic: --no-cudnn-benchmark (EmoNet's plain convolutions too).
"""
import json
import sys
import time


def main() -> None:
    import torch

    from emopipe.config import RunConfig
    from emopipe.pipeline import models as models_module
    from emopipe.vision.detectors import base

    weights, models_dir, mode = sys.argv[1], sys.argv[2], sys.argv[3]
    if mode == "det-heuristic":
        device_part = base.FaceDetector._device_part

        def heuristic(self, *args, **kwargs):
            with torch.backends.cudnn.flags(enabled=True, benchmark=False, deterministic=False):
                return device_part(self, *args, **kwargs)

        base.FaceDetector._device_part = heuristic
    config = RunConfig(source="x.mp4", weights=weights, models_dir=models_dir, detector="blazeface_back",
                       device="cuda", no_cudnn_benchmark=(mode == "all-heuristic")).resolved("cuda")
    t = time.perf_counter()
    models = models_module.load_models(config)
    load_s = time.perf_counter() - t
    engine_s = models.warm_engine((720, 1280))
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
    boxes = models.detector.detect(frames[:1])
    print(json.dumps({"mode": mode, "load_s": round(load_s, 3), "engine_warmup_s": round(engine_s, 3),
                      "detector_warmup_s": round(detector_s, 3),
                      "engine_b64_ms": [round(v, 3) for v in engine_ms[:3]],
                      "detector_32x720p_ms": [round(v, 3) for v in detector_ms[:3]],
                      "benchmark_flag_after": torch.backends.cudnn.benchmark,
                      "boxes_first_frame": len(boxes[0]) if boxes else None}))


if __name__ == "__main__":
    main()
