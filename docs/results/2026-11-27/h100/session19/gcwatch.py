"""Run benchmarks/fleet.py with every garbage collection of 5 ms or more logged (generation, ms, objects collected)."""
import gc
import runpy
import sys
import time

_start = {}
LOG = open(sys.argv.pop(1), "w")  # noqa: SIM115 (open for the whole run)


def watch(phase, info):
    if phase == "start":
        _start["t"] = time.perf_counter()
    else:
        ms = 1000 * (time.perf_counter() - _start.get("t", time.perf_counter()))
        if ms >= 5 or info["generation"] == 2:
            LOG.write(f"{time.time():.3f} gen{info['generation']} {ms:.1f} ms collected={info['collected']} "
                      f"tracked={len(gc.get_objects(info['generation'])) if ms >= 5 else -1}\n")
            LOG.flush()


gc.callbacks.append(watch)
sys.argv = ["benchmarks/fleet.py", *sys.argv[1:]]
runpy.run_path("benchmarks/fleet.py", run_name="__main__")
