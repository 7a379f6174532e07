"""Session 26: where EmoNet's warm-up goes with every cache warm, in a fresh process.
    python3 s26_warm.py WEIGHTS MODELS_DIR [nobench]
Times the phases of load_models + Models.warm_engine, and the first call of each kind of op (synchronized) during
the warm-up's first real pass (the one after the compile-ahead pass)."""
import time
T0 = time.perf_counter()
import sys, collections, contextlib, functools, json
import torch
T_IMPORT = time.perf_counter() - T0
from emopipe.config import RunConfig
from emopipe.pipeline import models as M
from emopipe.model import fusion, kernels, cudnn_epilogue, cudnn_plans
from emopipe.engines import torch_engine as TE

weights, models_dir = sys.argv[1], sys.argv[2]
nobench = "nobench" in sys.argv[3:]
config = RunConfig(source="x.mp4", weights=weights, models_dir=models_dir, detector="blazeface_back",
                   device="cuda", no_cudnn_benchmark=nobench).resolved("cuda")
phase = collections.OrderedDict()
op = collections.Counter(); opn = collections.Counter()
state = {"on": False, "tag": ""}

def timed(name, fn):
    @functools.wraps(fn)
    def wrap(*a, **k):
        if not state["on"]:
            return fn(*a, **k)
        torch.cuda.synchronize(); t = time.perf_counter()
        try:
            return fn(*a, **k)
        finally:
            torch.cuda.synchronize(); op[state["tag"] + name] += time.perf_counter() - t; opn[state["tag"] + name] += 1
    return wrap

for cls in (fusion.ConvReLU, fusion.ConvAddReLU, fusion.AffineReLU):
    cls.forward = timed(cls.__name__, cls.forward)
torch.nn.Conv2d.forward = timed("nn.Conv2d", torch.nn.Conv2d.forward)
torch.nn.Linear.forward = timed("nn.Linear", torch.nn.Linear.forward)
for name in ("affine_relu", "add_residual_slice", "max_pool2x2", "add_upsampled", "attention_input", "max_pool_mean"):
    setattr(kernels, name, timed("triton." + name, getattr(kernels, name)))
cudnn_epilogue._plan = timed("cudnn_epilogue._plan(read)", cudnn_epilogue._plan)
_Plan_run = cudnn_epilogue._Plan.run
cudnn_epilogue._Plan.run = timed("cudnn_epilogue.run", _Plan_run)

t = time.perf_counter(); models = M.load_models(config); phase["load_models"] = time.perf_counter() - t
eng = models.engine
orig_ahead, orig_graph_init, orig_infer = eng._compile_ahead, TE._CapturedGraph.__init__, TE.TorchEngine.infer
def ahead(example):
    state.update(on=True, tag="ahead:"); t = time.perf_counter(); orig_ahead(example); torch.cuda.synchronize()
    state.update(on=False, tag=""); phase["compile_ahead_pass"] = time.perf_counter() - t
eng._compile_ahead = ahead
def graph_init(self, engine, example):
    # the 3 passes, then the capture, timed apart
    self.engine = engine
    t = time.perf_counter()
    self.static_input = engine._prepare(example).clone()
    stream = torch.cuda.Stream(engine.device); stream.wait_stream(torch.cuda.current_stream(engine.device))
    with torch.cuda.stream(stream):
        for i in range(3):
            state.update(on=i == 0, tag="pass1:")
            t1 = time.perf_counter(); engine._compute(self.static_input); torch.cuda.synchronize()
            phase[f"pass{i+1}"] = time.perf_counter() - t1
            state["on"] = False
    torch.cuda.current_stream(engine.device).wait_stream(stream)
    t1 = time.perf_counter()
    self.graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(self.graph):
        outputs = engine._compute(self.static_input)
        n = self.static_input.shape[0]
        self.shapes = [tuple(x.shape) for x in outputs]
        self.packed = torch.cat([x.float().reshape(n, -1) for x in outputs], dim=1)
    torch.cuda.synchronize(); phase["capture"] = time.perf_counter() - t1
TE._CapturedGraph.__init__ = graph_init
infer_t = [0.0]
def infer(self, crops):
    t = time.perf_counter(); r = orig_infer(self, crops); infer_t[0] += time.perf_counter() - t; return r
TE.TorchEngine.infer = infer
t = time.perf_counter(); models.warm_engine(); phase["warm_engine(total)"] = time.perf_counter() - t
phase["infers(4)"] = infer_t[0]
t = time.perf_counter(); models.warm_detector(720, 1280); phase["warm_detector"] = time.perf_counter() - t
out = {"variant": "nobench" if nobench else "bench", "import_torch": round(T_IMPORT, 3),
       "phases": {k: round(v, 3) for k, v in phase.items()},
       "first_pass_ops": {k: [round(v, 3), opn[k]] for k, v in op.most_common()},
       "total": round(time.perf_counter() - T0, 3)}
print(json.dumps(out))
