"""Run the emopipe command's main() and say when it returned and what is left before the process ends.

ATEXIT=1: run the exit handlers here and time them; GC=1: time a full collection; FAST=1: then os._exit."""

import atexit
import gc
import os
import sys
import threading
import time

started = time.time()
import emopipe.cli  # noqa: E402

code = emopipe.cli.main(sys.argv[1:])
now = time.time()
threads = [(t.name, t.daemon) for t in threading.enumerate()]
print(f"[end] main returned at {now - started:.2f} s; threads: {threads}", file=sys.stderr)
if os.environ.get("GC"):
    gc.collect()
    print(f"[end] gc {time.time() - now:.2f} s", file=sys.stderr)
if os.environ.get("ATEXIT"):
    t = time.time()
    atexit._run_exitfuncs()
    print(f"[end] exit handlers {time.time() - t:.2f} s", file=sys.stderr)
if os.environ.get("FAST"):
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
sys.exit(code)
