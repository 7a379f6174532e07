"""``emopipe bench``: what cuDNN tuning, warmup and static batching buy, measured per configuration.

cuDNN keeps its autotuning results per process, so every configuration runs in a fresh Python
process: "start → ready" then covers interpreter start, imports, model build and warmup, and the
first real batch shows whatever tuning was left for it. The workload is a seeded sequence of
frames with 1..B faces each; *static* packs them into batches of B with the static batcher,
*varying* sends each frame's faces as one batch (the shapes a naive pipeline would produce).
Latencies are host-clock times around a call that returns results on the CPU (so the GPU work
is complete), which is what a pipeline sees.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from emopipe.errors import EmopipeError, OutputError, UsageError
from emopipe.pipeline.timing import percentile


@dataclass(frozen=True)
class BenchConfig:
    name: str
    batching: str  # "static" or "varying"
    cudnn_benchmark: bool
    warmup: bool
    cuda_graphs: bool | None = None


CONFIGS = (
    BenchConfig("static, benchmark on, warmup on", "static", True, True),
    BenchConfig("static, benchmark on, warmup off", "static", True, False, cuda_graphs=False),
    BenchConfig("static, benchmark off, warmup on", "static", False, True),
    BenchConfig("static, benchmark off, warmup off", "static", False, False, cuda_graphs=False),
    BenchConfig("varying, benchmark on, warmup B only", "varying", True, True, cuda_graphs=False),
    BenchConfig("varying, benchmark off, warmup B only", "varying", False, True, cuda_graphs=False),
)


@dataclass
class BenchResult:
    config: str
    device: str
    precision: str
    batch_size: int
    start_to_ready_s: float
    load_s: float
    warmup_s: float
    first_batch_ms: float
    p50_ms: float
    p99_ms: float
    max_ms: float
    faces_per_s: float
    batches: int
    faces: int

    @property
    def first_over_p50(self) -> float:
        return self.first_batch_ms / self.p50_ms if self.p50_ms else float("nan")

    @property
    def p99_over_p50(self) -> float:
        return self.p99_ms / self.p50_ms if self.p50_ms else float("nan")


def build_parser() -> argparse.ArgumentParser:
    from emopipe.cli.parsing import new_parser

    parser = new_parser("emopipe bench", "Benchmark EmoNet inference: cuDNN benchmark, warmup and static batching. "
                        "Exit codes: 0 ok, 1 a configuration failed unexpectedly (a bug), 2 bad options (also: "
                        "--json naming a file that is not an earlier bench's results), 5 --json not writable, 10 the "
                        "GPU out of memory; a configuration that fails exits with its own code, its line said.")
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N")
    parser.add_argument("--precision", default=None, help="fp32, fp16 or bf16 (default: fp16 on CUDA, fp32 on CPU)")
    parser.add_argument("--batch-size", type=int, default=None, help="static batch B (default: 32 on CUDA, 4 on CPU)")
    parser.add_argument("--frames", type=int, default=None,
                        help="frames in the workload, each with 1..B faces (default: 200 on CUDA, 4 on CPU); "
                             "the static configurations need faces for 2 or more batches")
    parser.add_argument("--configs", default="all",
                        help="comma-separated config numbers (1-based, see the table) or 'all'")
    parser.add_argument("--json", type=Path, help="also write the results as JSON here (checked before the run)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the face-count sequence")
    parser.add_argument("--models-dir", default=None,
                        help="whose <dir>/cache the engines use, as `emopipe` does (compiled kernels, cuDNN plans)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    return parser


def run(args: argparse.Namespace) -> int:
    if args.worker:
        print(json.dumps(asdict(_worker(json.loads(args.worker)))))
        return 0
    from emopipe.engines.base import EngineOptions
    from emopipe.io.records import ensure_writable, written_whole
    from emopipe.model.devices import resolve_device
    from emopipe.model.weights import models_dir

    device = resolve_device(args.device)  # a bad device or precision is refused here, before any worker starts
    cuda = device.type == "cuda"
    batch = (32 if cuda else 4) if args.batch_size is None else args.batch_size
    frames = (200 if cuda else 4) if args.frames is None else args.frames
    if batch < 1 or frames < 2:
        raise UsageError("need --batch-size ≥ 1 and --frames ≥ 2")
    EngineOptions(precision=args.precision, batch_size=batch).resolved(device)
    configs = select_configs(args.configs, cuda)
    static = -(-sum(face_counts(frames, batch, args.seed)) // batch)
    if static < 2 and any(c.batching == "static" for c in configs):  # latencies after the first need a second
        raise UsageError(f"--frames {frames} make {static} static batch of {batch} faces (seed {args.seed}); "
                         "the latency after the first batch needs 2 or more: give more --frames")
    if args.json:
        ensure_writable(args.json, "the results")  # now, not after the whole benchmark
        _refuse_other_file(args.json)

    cache_dir = str(models_dir(args.models_dir) / "cache")  # the product's caches: restarts as users see them
    results = []
    for config in configs:
        job = {"config": asdict(config), "device": args.device, "precision": args.precision, "batch": batch,
               "frames": frames, "seed": args.seed, "cache_dir": cache_dir, "t0": time.time()}
        if not args.quiet:  # (-q: only warnings and errors on stderr)
            print(f"running: {config.name} …", file=sys.stderr, flush=True)
        # --debug and -q reach the worker: its error says "rerun with --debug for the traceback", and the traceback
        # is the worker's, not this process's
        flags = [flag for flag, on in (("--debug", args.debug), ("-q", args.quiet)) if on]
        done = subprocess.run([sys.executable, "-m", "emopipe", "bench", *flags, "--worker", json.dumps(job)],
                              capture_output=True, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        if done.returncode != 0:
            if args.debug and done.stderr.strip():  # the worker's whole stderr (its traceback), then the one line
                print(done.stderr.rstrip("\n"), file=sys.stderr, flush=True)
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            last = last.removeprefix("emopipe: error: ").removeprefix("emopipe: ")
            error = EmopipeError(f"benchmark configuration {config.name!r} failed: {last}")
            error.exit_code = done.returncode if done.returncode > 0 else 1  # the worker's own code (a signal: 1)
            raise error
        results.append(BenchResult(**json.loads(done.stdout.strip().splitlines()[-1])))
    print(format_table(results))
    if args.json:
        _refuse_other_file(args.json)  # (again: made meanwhile)
        try:  # whole or not at all, under a name of its own (two benchmarks at once: the last one's file, whole)
            with written_whole(args.json) as file:
                file.write((json.dumps([asdict(r) for r in results], indent=2) + "\n").encode())
        except OSError as exc:
            raise OutputError(f"cannot write the results {args.json}: {exc.strerror or exc}") from None
    return 0


def _refuse_other_file(path: Path) -> None:
    """A file at ``--json``'s name is replaced only when it holds an earlier benchmark's results (a list of what
    :class:`BenchResult` has): any other is the user's (a typo for another file), never written over (exit 2)."""
    if not os.path.lexists(path):
        return
    try:
        earlier = json.loads(path.read_bytes())
        ours = isinstance(earlier, list) and all(isinstance(r, dict) and {"config", "p50_ms"} <= r.keys()
                                                 for r in earlier)
    except (OSError, ValueError):
        ours = False
    if not ours:
        raise UsageError(f"the results {path} exists and is not an earlier emopipe bench's results: choose another "
                         "name, or move or remove that file")


def select_configs(spec: str, cuda: bool) -> list[BenchConfig]:
    """``--configs``: 'all' (on the CPU, those with cuDNN benchmark on: it means nothing there), or numbers."""
    if spec == "all":
        return list(CONFIGS) if cuda else [c for c in CONFIGS if c.cudnn_benchmark]
    try:
        numbers = [int(i) for i in spec.split(",")]
    except ValueError:
        numbers = []
    if not numbers or not all(1 <= n <= len(CONFIGS) for n in numbers):
        raise UsageError(f"--configs takes numbers 1..{len(CONFIGS)} or 'all', got {spec!r}")
    return [CONFIGS[n - 1] for n in numbers]


def format_table(results: list[BenchResult]) -> str:
    head = ("| # | configuration | start→ready s | warmup s | first batch ms | p50 ms | p99 ms | first/p50 "
            "| p99/p50 | faces/s |")
    rule = "|---|---|---|---|---|---|---|---|---|---|"
    number = {c.name: str(i) for i, c in enumerate(CONFIGS, 1)}  # the number --configs takes
    rows = [
        f"| {number.get(r.config, '?')} | {r.config} | {r.start_to_ready_s:.2f} | {r.warmup_s:.2f} | "
        f"{r.first_batch_ms:.1f} | {r.p50_ms:.2f} | {r.p99_ms:.2f} | {r.first_over_p50:.1f}× | "
        f"{r.p99_over_p50:.2f}× | {significant(r.faces_per_s)} |"
        for r in results
    ]
    if results:
        r = results[0]
        # static and varying batching cut the same faces into different numbers of batches: each its own
        batching = {c.name: c.batching for c in CONFIGS}
        batches: dict[str, int] = {}
        for result in results:
            batches.setdefault(batching.get(result.config, result.config), result.batches)
        how = ", ".join(f"{n} {kind} batches" for kind, n in batches.items())
        rows.append(f"\n{r.device}, {r.precision}, static batch {r.batch_size}, {r.faces} faces per configuration "
                    f"({how})")
    return "\n".join([head, rule, *rows])


def significant(value: float, digits: int = 3) -> str:
    """``value`` with at least ``digits`` significant digits and never an exponent (0.127, 12.7, 1270)."""
    if not math.isfinite(value) or value == 0:
        return f"{value:.0f}"
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(value))))
    return f"{value:.{decimals}f}"


def face_counts(frames: int, batch: int, seed: int) -> list[int]:
    rng = random.Random(seed)
    return [rng.randint(1, batch) for _ in range(frames)]


def _worker(job: dict) -> BenchResult:
    t0 = job["t0"]
    import torch

    from emopipe.engines.base import EngineOptions
    from emopipe.engines.torch_engine import TorchEngine
    from emopipe.model.emonet import build_emonet
    from emopipe.pipeline.batcher import StaticBatcher
    from emopipe.types import INPUT_SIZE

    config = BenchConfig(**job["config"])
    batch = job["batch"]
    torch.manual_seed(0)
    t_load = time.time()
    model = build_emonet(classes=8)
    engine = TorchEngine(model, EngineOptions(device=job["device"], precision=job["precision"], batch_size=batch,
                                              cudnn_benchmark=config.cudnn_benchmark, warmup=config.warmup,
                                              cuda_graphs=config.cuda_graphs), cache_dir=job["cache_dir"])
    load_s = time.time() - t_load
    warmup_s = engine.warmup().seconds if config.warmup else 0.0
    ready = time.time() - t0

    counts = face_counts(job["frames"], batch, job["seed"])
    pool = torch.randint(0, 256, (batch, 3, INPUT_SIZE, INPUT_SIZE), dtype=torch.uint8, device=engine.device)
    if config.batching == "static":
        batcher: StaticBatcher[int] = StaticBatcher(batch)
        batches = [b.crops for i, k in enumerate(counts) for b in batcher.add(pool[:k], i)]
        batches += [b.crops for b in batcher.flush()]
    else:
        batches = [pool[:k] for k in counts]
    latencies = []
    start = time.perf_counter()
    for crops in batches:
        t = time.perf_counter()
        engine.infer(crops)
        latencies.append(time.perf_counter() - t)
    total = time.perf_counter() - start
    steady = sorted(latencies[1:])
    return BenchResult(
        config=config.name, device=str(engine.device), precision=str(engine.options.precision), batch_size=batch,
        start_to_ready_s=ready, load_s=load_s, warmup_s=warmup_s, first_batch_ms=latencies[0] * 1000,
        p50_ms=(percentile(steady, 0.5) or 0.0) * 1000, p99_ms=(percentile(steady, 0.99) or 0.0) * 1000,
        max_ms=max(steady) * 1000,
        faces_per_s=sum(counts) / total, batches=len(batches), faces=sum(counts),
    )
