"""Session 26: where EmoNet's warm-up goes with every cache warm, in a fresh process.

    python3 s26_warm.py WEIGHTS MODELS_DIR [nobench]

Times the phases of load_models + Models.warm_engine, and the first call of each kind of op (synchronized) during
the warm-up's compile-ahead pass ("ahead:") and its first real pass ("pass1:"). (As run on the GPU in s26a, only laid
out for the linter afterwards: one statement a line, the imports timed in main.)
"""
import collections
import functools
import json
import sys
import time


def main() -> None:
    t0 = time.perf_counter()
    import torch

    t_import = time.perf_counter() - t0
    from emopipe.config import RunConfig
    from emopipe.engines import torch_engine
    from emopipe.model import cudnn_epilogue, fusion, kernels
    from emopipe.pipeline import models as models_module

    weights, models_dir = sys.argv[1], sys.argv[2]
    nobench = "nobench" in sys.argv[3:]
    config = RunConfig(source="x.mp4", weights=weights, models_dir=models_dir, detector="blazeface_back",
                       device="cuda", no_cudnn_benchmark=nobench).resolved("cuda")
    phase: dict[str, float] = {}
    op: collections.Counter[str] = collections.Counter()
    calls: collections.Counter[str] = collections.Counter()
    state = {"on": False, "tag": ""}

    def timed(name, fn):
        @functools.wraps(fn)
        def wrap(*a, **k):
            if not state["on"]:
                return fn(*a, **k)
            torch.cuda.synchronize()
            t = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                torch.cuda.synchronize()
                op[state["tag"] + name] += time.perf_counter() - t
                calls[state["tag"] + name] += 1
        return wrap

    for cls in (fusion.ConvReLU, fusion.ConvAddReLU, fusion.AffineReLU):
        cls.forward = timed(cls.__name__, cls.forward)
    torch.nn.Conv2d.forward = timed("nn.Conv2d", torch.nn.Conv2d.forward)
    torch.nn.Linear.forward = timed("nn.Linear", torch.nn.Linear.forward)
    for name in ("affine_relu", "add_residual_slice", "max_pool2x2", "add_upsampled", "attention_input",
                 "max_pool_mean"):
        setattr(kernels, name, timed("triton." + name, getattr(kernels, name)))
    cudnn_epilogue._plan = timed("cudnn_epilogue._plan(read)", cudnn_epilogue._plan)
    cudnn_epilogue._Plan.run = timed("cudnn_epilogue.run", cudnn_epilogue._Plan.run)

    t = time.perf_counter()
    models = models_module.load_models(config)
    phase["load_models"] = time.perf_counter() - t
    engine = models.engine
    orig_ahead, orig_infer = engine._compile_ahead, torch_engine.TorchEngine.infer

    def ahead(example):
        state.update(on=True, tag="ahead:")
        t = time.perf_counter()
        orig_ahead(example)
        torch.cuda.synchronize()
        state.update(on=False, tag="")
        phase["compile_ahead_pass"] = time.perf_counter() - t

    engine._compile_ahead = ahead

    def graph_init(self, engine, example):  # the 3 passes, then the capture, timed apart
        self.engine = engine
        self.static_input = engine._prepare(example).clone()
        stream = torch.cuda.Stream(engine.device)
        stream.wait_stream(torch.cuda.current_stream(engine.device))
        with torch.cuda.stream(stream):
            for i in range(3):
                state.update(on=i == 0, tag="pass1:")
                t1 = time.perf_counter()
                engine._compute(self.static_input)
                torch.cuda.synchronize()
                phase[f"pass{i + 1}"] = time.perf_counter() - t1
                state["on"] = False
        torch.cuda.current_stream(engine.device).wait_stream(stream)
        t1 = time.perf_counter()
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            outputs = engine._compute(self.static_input)
            n = self.static_input.shape[0]
            self.shapes = [tuple(x.shape) for x in outputs]
            self.packed = torch.cat([x.float().reshape(n, -1) for x in outputs], dim=1)
        torch.cuda.synchronize()
        phase["capture"] = time.perf_counter() - t1

    torch_engine._CapturedGraph.__init__ = graph_init
    infer_s = [0.0]

    def infer(self, crops):
        t = time.perf_counter()
        result = orig_infer(self, crops)
        infer_s[0] += time.perf_counter() - t
        return result

    torch_engine.TorchEngine.infer = infer
    t = time.perf_counter()
    models.warm_engine()
    phase["warm_engine(total)"] = time.perf_counter() - t
    phase["infers(4)"] = infer_s[0]
    t = time.perf_counter()
    models.warm_detector(720, 1280)
    phase["warm_detector"] = time.perf_counter() - t
    print(json.dumps({"variant": "nobench" if nobench else "bench", "import_torch": round(t_import, 3),
                      "phases": {k: round(v, 3) for k, v in phase.items()},
                      "first_pass_ops": {k: [round(v, 3), calls[k]] for k, v in op.most_common()},
                      "total": round(time.perf_counter() - t0, 3)}))


if __name__ == "__main__":
    main()
