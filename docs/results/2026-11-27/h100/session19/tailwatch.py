"""Run benchmarks/fleet.py logging, on one clock (perf_counter): every frame's latency by camera, every garbage
collection (generation, ms), and every call of the GPU thread's steps that took 20 ms or more."""
import functools
import gc
import runpy
import sys
import time

LOG = open(sys.argv.pop(1), "w")  # noqa: SIM115 (open for the whole run)
_gc = {}


def watch(phase, info):
    if phase == "start":
        _gc["t"] = time.perf_counter()
    else:
        LOG.write(f"gc {_gc['t']:.4f} gen{info['generation']} {1000 * (time.perf_counter() - _gc['t']):.1f}\n")


gc.callbacks.append(watch)

from emopipe.pipeline import fleet, runner  # noqa: E402

_frame = fleet.FleetObserver.frame


def frame(self, result, latency_s):
    LOG.write(f"f {time.perf_counter():.4f} {result.frame.stream} {1000 * latency_s:.1f}\n")
    return _frame(self, result, latency_s)


fleet.FleetObserver.frame = frame


def timed(cls, name):
    original = getattr(cls, name)

    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        t = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            ms = 1000 * (time.perf_counter() - t)
            if ms >= 20:
                LOG.write(f"s {t:.4f} {name} {ms:.1f}\n")
    setattr(cls, name, wrapper)


for step in ("_launch", "_complete", "_infer", "_deliver_all", "_release", "_upload"):
    timed(runner.Pipeline, step)
timed(runner.PinnedBatches, "upload")
timed(runner.PinnedBatches, "reserve")
for step in ("write", "flush"):
    if hasattr(fleet.FleetSink, step):
        timed(fleet.FleetSink, step)
sys.argv = ["benchmarks/fleet.py", *sys.argv[1:]]
runpy.run_path("benchmarks/fleet.py", run_name="__main__")
