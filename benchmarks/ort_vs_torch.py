#!/usr/bin/env python3
"""PyTorch vs ONNX Runtime for EmoNet on one GPU: parity, then first-batch and steady-state latency per variant.

    PYTHONPATH=/tmp/ortsite:. python3 benchmarks/ort_vs_torch.py --json bench_onnx.json 2> bench_onnx.log

What it does, in one command (a few minutes on an H100):

1. prints which onnxruntime is imported (``__file__``: the CPU-only package can shadow onnxruntime-gpu)
   and its providers, the GPU, torch/CUDA/cuDNN versions;
2. writes a random official-format checkpoint (the tests' ``random_state``: BatchNorm statistics
   randomised so faces differ; speed does not depend on the values) and exports it to ONNX for every
   precision × batch, in parallel processes, into a fresh models dir (``--models-dir`` to keep it);
3. parity on CUDA: ONNX Runtime (default engine settings) and the PyTorch engine against PyTorch fp32
   with TF32 off, on random and real-face crops, each against the stated tolerance;
4. the variants, each measured with the host clock around ``engine.infer`` (which returns CPU tensors,
   so the GPU work is done): engine created (``create s``), the first batch on the fresh engine with
   no warmup (``first ms``: cuDNN autotuning lands here), ``engine.warmup()`` (ONNX Runtime's CUDA
   graph capture, PyTorch's graph capture), then ``--runs`` batches: median and p99.
   PyTorch variants run one per process (cuDNN's autotuning cache is per process). ONNX Runtime
   variants run one process per precision × batch, each variant in a fresh InferenceSession, after a
   throwaway session has loaded the CUDA libraries — so their ``first ms`` is the session's own
   tuning, not the process's library loading;
5. prints a markdown table last and writes everything as JSON to ``--json``.

A variant that cannot run (no CUDA provider, CUDA graphs refused, an option this build lacks) is
listed with the reason instead of stopping the run.
"""

from __future__ import annotations

import argparse
import json
import logging
import multiprocessing
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import synthetic  # noqa: E402  (benchmarks/synthetic.py, beside this script)

ANCHOR = "anchor (H100, ORT 1.31.1 CUDA EP fp32, host arrays, exhaustive): b1 p50 7.0 ms, b32 p50 23.6 ms"


@dataclass(frozen=True)
class Variant:
    backend: str  # "torch" or "onnxruntime"
    precision: str
    batch: int
    cuda_graphs: bool
    conv_algo_search: str = "benchmark"  # ORT: EXHAUSTIVE / HEURISTIC; torch: cudnn.benchmark on
    io_binding: bool = True  # ORT only: False = host arrays in and out
    prefer_nhwc: bool = False

    @property
    def name(self) -> str:
        if self.backend == "torch":
            return f"PyTorch {self.precision} b{self.batch}{' + CUDA graphs' if self.cuda_graphs else ''}"
        io = "IO binding" if self.io_binding else "host arrays"
        extras = (" + CUDA graphs" if self.cuda_graphs else "") + (" + NHWC" if self.prefer_nhwc else "")
        return f"ORT {self.precision} b{self.batch} {self.conv_algo_search.lower()}, {io}{extras}"

    @property
    def input(self) -> str:
        if self.backend == "onnxruntime" and not self.io_binding:
            return f"host {self.precision} array"
        return "device fp32 tensor"


@dataclass
class Result:
    variant: Variant
    skipped: str | None = None
    create_s: float | None = None
    first_ms: float | None = None
    warmup_s: float | None = None
    p50_ms: float | None = None
    p99_ms: float | None = None
    faces_per_s: float | None = None
    runs: int = 0
    info: dict[str, str] = field(default_factory=dict)
    note: str = ""


def variants(batches: list[int], precisions: list[str], nhwc: bool, device: str = "cuda") -> list[Variant]:
    if device == "cpu":  # a smoke run of this script's plumbing: no GPU knobs to compare
        return [Variant(backend, p, b, False, io_binding=False) for p in precisions for b in batches
                for backend in ("torch", "onnxruntime")]
    out = []
    for precision in precisions:
        for batch in batches:
            out += [Variant("torch", precision, batch, graphs) for graphs in (False, True)]
            for search in ("EXHAUSTIVE", "HEURISTIC"):
                out += [Variant("onnxruntime", precision, batch, False, search, io_binding=False),
                        Variant("onnxruntime", precision, batch, False, search),
                        Variant("onnxruntime", precision, batch, True, search)]
            if nhwc and precision == "fp16":
                out.append(Variant("onnxruntime", precision, batch, True, "EXHAUSTIVE", prefer_nhwc=True))
    return out


# -- the parent ------------------------------------------------------------------------------------

def environment() -> dict[str, object]:
    import torch

    env: dict[str, object] = {"python": platform.python_version(), "torch": torch.__version__,
                              "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(),
                              "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None}
    try:
        import onnxruntime

        env.update(onnxruntime=onnxruntime.__version__, onnxruntime_file=onnxruntime.__file__,
                   providers=onnxruntime.get_available_providers())
    except ImportError as exc:
        env.update(onnxruntime=None, onnxruntime_error=str(exc))
    from emopipe.engines.onnxruntime_engine import tensorrt_library

    env["tensorrt_library"] = tensorrt_library()
    env["date"] = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    return env


def write_checkpoint(path: Path, classes: int) -> None:
    """A random official-format checkpoint (speed does not depend on the weights' values)."""
    synthetic.random_checkpoint(path, classes=classes, seed=classes)


def _export_one(job: tuple[str, str, str, int, str]) -> tuple[str, str | None]:
    """(what happened, error or None) for one precision × batch."""
    checkpoint, digest, directory, batch, precision = job
    from emopipe.engines import export
    from emopipe.model.emonet import build_emonet, read_checkpoint

    model = build_emonet(read_checkpoint(checkpoint))
    spec = export.OnnxSpec(digest, model.num_classes, batch, precision)
    t0 = time.perf_counter()
    try:
        path, fresh = export.ensure_onnx(model, spec, Path(directory))
    except Exception as exc:
        error = f"export failed: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:200]
        return f"{spec.file_name}: {error}", error
    return f"{path.name}: {'exported in %.1f s' % (time.perf_counter() - t0) if fresh else 'cached'}", None


def run_worker(job: dict, timeout: float) -> dict:
    """One fresh Python process; its last stdout line is its JSON answer."""
    done = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--worker", json.dumps(job)],
                          capture_output=True, text=True, timeout=timeout, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    sys.stderr.write(done.stderr)
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"worker exited with {done.returncode}: {tail}")
    return json.loads(lines[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", type=Path, required=False, help="write all results here")
    parser.add_argument("--batch-sizes", default="1,32", help="latency batch and throughput batch")
    parser.add_argument("--precisions", default="fp32,fp16")
    parser.add_argument("--runs", type=int, default=100, help="steady-state batches per variant (≥ 50)")
    parser.add_argument("--classes", type=int, default=8, choices=(8, 5))
    parser.add_argument("--models-dir", type=Path, help="keep checkpoint and exports here (default: a temp dir)")
    parser.add_argument("--no-nhwc", action="store_true", help="skip the fp16 prefer_nhwc variant")
    parser.add_argument("--worker-timeout", type=float, default=300)
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"),
                        help="cpu: a quick smoke run of the script itself (any --runs allowed)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(json.loads(args.worker))))
        return 0
    if args.runs < 50 and args.device == "cuda":
        parser.error("--runs must be at least 50")
    batches = [int(b) for b in args.batch_sizes.split(",")]
    precisions = args.precisions.split(",")
    started = time.perf_counter()

    env = environment()
    print(f"onnxruntime {env.get('onnxruntime')} from {env.get('onnxruntime_file', env.get('onnxruntime_error'))}")
    print(f"providers: {env.get('providers')}; TensorRT library: {env['tensorrt_library'] or 'absent'}")
    print(f"GPU {env['gpu']}; torch {env['torch']} (CUDA {env['cuda']}, cuDNN {env['cudnn']}); {env['date']}",
          flush=True)
    if not env["gpu"] and args.device == "cuda":
        print("no CUDA GPU visible to PyTorch: nothing to measure (--device cpu for a smoke run)", file=sys.stderr)
        return 1

    from emopipe.model.weights import sha256_of

    home = args.models_dir or Path(tempfile.mkdtemp(prefix="emopipe-bench-onnx-"))
    home.mkdir(parents=True, exist_ok=True)
    checkpoint = home / f"random_emonet_{args.classes}.pth"
    if not checkpoint.is_file():
        write_checkpoint(checkpoint, args.classes)
    digest = sha256_of(checkpoint)
    from emopipe.engines.export import cache_dir

    cache = cache_dir(home)  # where the engines in the workers look ($EMOPIPE_CACHE, else <home>/cache)
    jobs = [(str(checkpoint), digest, str(cache), b, p) for p in precisions for b in batches]
    t0 = time.perf_counter()
    failed_exports: dict[tuple[str, int], str] = {}
    # spawn, not fork: the parent has touched CUDA (device name), and a forked CUDA context is unusable.
    with ProcessPoolExecutor(max_workers=min(len(jobs), 4), mp_context=multiprocessing.get_context("spawn")) as pool:
        for job, (line, error) in zip(jobs, pool.map(_export_one, jobs), strict=True):
            print(f"export {line}", file=sys.stderr, flush=True)
            if error:
                failed_exports[(job[4], job[3])] = error
    print(f"exports ready in {time.perf_counter() - t0:.0f} s ({cache})", flush=True)

    common = {"checkpoint": str(checkpoint), "digest": digest, "home": str(home), "runs": args.runs,
              "device": args.device}
    parity: list[dict] = []
    try:
        parity = run_worker({**common, "task": "parity", "precisions": precisions, "batch": max(batches)},
                            args.worker_timeout)["parity"]
    except Exception as exc:
        print(f"parity skipped: {exc}", file=sys.stderr)
    for row in parity:
        print(f"parity {row['what']}: {row['describe']}", flush=True)

    results: list[Result] = []
    plan = variants(batches, precisions, nhwc=not args.no_nhwc, device=args.device)
    groups: list[list[Variant]] = [[v] for v in plan if v.backend == "torch"]
    for precision in precisions:
        for batch in batches:
            group = [v for v in plan if v.backend == "onnxruntime" and v.precision == precision and v.batch == batch]
            if group:
                groups.append(group)
    for group in groups:
        error = failed_exports.get((group[0].precision, group[0].batch))
        if error and group[0].backend == "onnxruntime":
            results += [Result(variant=v, skipped=error) for v in group]
            continue
        print(f"measuring {', '.join(v.name for v in group)} …", file=sys.stderr, flush=True)
        try:
            answer = run_worker({**common, "task": "time", "variants": [asdict(v) for v in group]},
                                args.worker_timeout)
            for row in answer["results"]:
                variant = Variant(**row.pop("variant"))
                results.append(Result(variant=variant, **row))
        except Exception as exc:
            results += [Result(variant=v, skipped=f"{type(exc).__name__}: {exc}"[:200]) for v in group]

    if args.json:
        args.json.write_text(json.dumps({"environment": env, "parity": parity,
                                         "results": [asdict(r) for r in results]}, indent=2) + "\n")
    print(f"\n{len(results)} variants in {time.perf_counter() - started:.0f} s; {ANCHOR}")
    print(summary(results))
    print()
    print(table(results, env))
    return 0


def table(results: list[Result], env: dict) -> str:
    head = ("| variant | input | CUDA graphs | create s | first batch ms | warmup s | p50 ms | p99 ms | faces/s "
            "| note |\n|---|---|---|---|---|---|---|---|---|---|")
    rows = []
    for r in results:
        v = r.variant
        if r.skipped:
            rows.append(f"| {v.name} | {v.input} | | | | | | | | skipped: {r.skipped} |")
            continue
        graphs = r.info.get("cuda_graphs", str(v.cuda_graphs).lower())
        rows.append(f"| {v.name} | {v.input} | {graphs} | {r.create_s:.2f} | {r.first_ms:.1f} | {r.warmup_s:.2f} | "
                    f"{r.p50_ms:.2f} | {r.p99_ms:.2f} | {r.faces_per_s:.0f} | {r.note} |")
    foot = (f"\n{env['gpu'] or 'CPU'}; torch {env['torch']}, CUDA {env['cuda']}, cuDNN {env['cudnn']}; "
            f"onnxruntime {env.get('onnxruntime')}; {env['date']}; host clock around engine.infer "
            "(results on the CPU), median and p99 of the steady-state runs")
    return "\n".join([head, *rows]) + foot


def summary(results: list[Result]) -> str:
    """Best PyTorch and best ONNX Runtime p50 per precision × batch, and their ratio."""
    lines = []
    keys = sorted({(r.variant.precision, r.variant.batch) for r in results})
    for precision, batch in keys:
        best = {}
        for backend in ("torch", "onnxruntime"):
            done = [r for r in results if r.variant.backend == backend and r.variant.precision == precision
                    and r.variant.batch == batch and r.p50_ms is not None]
            if done:
                best[backend] = min(done, key=lambda r: r.p50_ms)
        if len(best) == 2:
            t, o = best["torch"], best["onnxruntime"]
            lines.append(f"{precision} b{batch}: best PyTorch {t.p50_ms:.2f} ms ({t.variant.name}), best ORT "
                         f"{o.p50_ms:.2f} ms ({o.variant.name}): ORT/PyTorch = {o.p50_ms / t.p50_ms:.2f}")
    return "\n".join(lines)


# -- the workers -----------------------------------------------------------------------------------

def worker(job: dict) -> dict:
    # The engines log their providers, refused CUDA graphs and warmup on stderr, which lands in the log.
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="  emopipe: %(message)s")
    if job["task"] == "parity":
        return {"parity": parity_on_cuda(job)}
    return {"results": [asdict(r) for r in time_variants(job)]}


def _model(job: dict):
    from emopipe.model.emonet import build_emonet, read_checkpoint

    return build_emonet(read_checkpoint(job["checkpoint"]))


def parity_on_cuda(job: dict) -> list[dict]:
    """ORT (default engine settings) and the PyTorch engine against PyTorch fp32 without TF32."""
    import torch  # noqa: I001
    from emopipe.engines.base import EngineOptions

    from emopipe.engines import export, parity
    from emopipe.engines.onnxruntime_engine import OrtEngine
    from emopipe.engines.torch_engine import TorchEngine

    device = job["device"]
    model = _model(job).to(device)
    batch = job["batch"]
    faces = REPO / "shared" / "data" / "faces"
    crops = parity.verification_crops(batch, faces if faces.is_dir() else None)
    rows = []
    for precision in job["precisions"]:
        options = EngineOptions(device=device, precision=precision, batch_size=batch)
        engines = []
        try:
            engines.append(("ORT CUDA EP", OrtEngine(model, options, checkpoint_sha256=job["digest"],
                                                     models_dir=job["home"])))
        except Exception as exc:
            rows.append({"what": f"ORT {precision} b{batch}", "describe": f"skipped: {exc}"})
        engines.append(("PyTorch engine", TorchEngine(_model(job), options)))
        spec = export.OnnxSpec(job["digest"], model.num_classes, batch, precision)
        for name, engine in engines:
            engine.warmup()
            for report in parity.check_parity(engine.infer, model, spec, crops):
                rows.append({"what": f"{name} {precision} b{batch} ({engine.info().get('providers', 'torch')})",
                             "describe": report.describe(), "ok": report.ok, **asdict(report)})
        engines.clear()
        if device == "cuda":
            torch.cuda.empty_cache()
    return rows


def time_variants(job: dict) -> list[Result]:
    import torch

    variants_ = [Variant(**v) for v in job["variants"]]
    model = _model(job)
    if job["device"] == "cuda":
        torch.cuda.init()
    if variants_[0].backend == "onnxruntime" and job["device"] == "cuda":
        _prime_onnxruntime(model, variants_[0], job)
    return [_time_one(model, v, job) for v in variants_]


def _prime_onnxruntime(model, variant: Variant, job: dict) -> None:
    """Load the CUDA, cuDNN and cuBLAS libraries and kernels once, in a session that is thrown away."""
    from emopipe.engines.base import EngineOptions  # noqa: I001

    from emopipe.engines.onnxruntime_engine import OrtEngine

    try:
        engine = OrtEngine(model, EngineOptions(device="cuda", precision=variant.precision, batch_size=variant.batch,
                                                cuda_graphs=False), checkpoint_sha256=job["digest"],
                           models_dir=job["home"], conv_algo_search="HEURISTIC")
        engine.warmup()
        del engine
    except Exception as exc:
        print(f"priming session failed: {exc}", file=sys.stderr)


def _engine(model, v: Variant, job: dict):
    from emopipe.engines.base import EngineOptions  # noqa: I001

    from emopipe.engines.onnxruntime_engine import OrtEngine
    from emopipe.engines.torch_engine import TorchEngine

    options = EngineOptions(device=job["device"], precision=v.precision, batch_size=v.batch,
                            cuda_graphs=v.cuda_graphs)
    if v.backend == "torch":
        return TorchEngine(model, options)
    search = None if v.conv_algo_search == "benchmark" else v.conv_algo_search
    return OrtEngine(model, options, checkpoint_sha256=job["digest"], models_dir=job["home"],
                     conv_algo_search=search, io_binding=v.io_binding, prefer_nhwc=v.prefer_nhwc)


def _time_one(model, v: Variant, job: dict) -> Result:
    import copy

    import torch

    from emopipe.engines.parity import random_crops
    from emopipe.model.devices import PRECISIONS

    cuda = job["device"] == "cuda"
    crops = random_crops(v.batch, seed=1)
    if v.input.startswith("host"):
        crops = crops.to(PRECISIONS[v.precision])  # a host array already in the model's dtype
    elif cuda:
        crops = crops.to("cuda")
    result = Result(variant=v)
    try:
        if cuda:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        engine = _engine(copy.deepcopy(model), v, job)
        if cuda:
            torch.cuda.synchronize()
        result.create_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        engine.infer(crops)  # no warmup: whatever tuning is left lands here
        result.first_ms = (time.perf_counter() - t0) * 1000
        result.warmup_s = engine.warmup().seconds
        latencies = []
        for _ in range(job["runs"]):
            t0 = time.perf_counter()
            engine.infer(crops)
            latencies.append(time.perf_counter() - t0)
        latencies.sort()
        result.p50_ms = statistics.median(latencies) * 1000
        result.p99_ms = latencies[min(len(latencies) - 1, round(0.99 * (len(latencies) - 1)))] * 1000
        result.faces_per_s = v.batch / statistics.median(latencies)
        result.runs = len(latencies)
        result.info = engine.info()
        if v.backend == "onnxruntime" and v.cuda_graphs and result.info.get("cuda_graphs") != "true":
            result.note = "CUDA graphs refused by onnxruntime (see log)"
        del engine
    except Exception as exc:
        result.skipped = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:200]
    if cuda:
        torch.cuda.empty_cache()
    return result


if __name__ == "__main__":
    sys.exit(main())
