import time, sys, os, threading, gc
T0 = time.time()
import emopipe.cli
code = 0
try:
    emopipe.cli.main(sys.argv[1:])
except SystemExit as e:
    code = e.code
t = time.time()
print(f"[wrap] main returned at {t-T0:.2f}; threads: {[ (th.name, th.daemon) for th in threading.enumerate()]}", file=sys.stderr)
if os.environ.get("GC"):
    gc.collect(); print(f"[wrap] gc {time.time()-t:.2f}", file=sys.stderr)
if os.environ.get("ATEXIT"):
    import atexit
    t=time.time(); atexit._run_exitfuncs(); print(f"[wrap] atexit funcs {time.time()-t:.2f}", file=sys.stderr)
if os.environ.get("FAST"):
    sys.stdout.flush(); sys.stderr.flush(); os._exit(code)
sys.exit(code)
