#!/bin/bash
# session 27 (s27a): where PyTorch's own import goes on the GPU host (-X importtime, twice), whether its bytecode is
# cached (writable __pycache__? a pycache prefix?), and the shared libraries' loading alone.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
R=$OUT/s27a; mkdir -p $R
{
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc
grep -m1 "model name" /proc/cpuinfo; cat /proc/loadavg
python3 -c "import sys; print(sys.version); print(sys.flags)"
env | grep -i -E "^PYTHON|^LD_|^CUDA" | sort
TD=$(python3 -c "import importlib.util as u; print(u.find_spec('torch').submodule_search_locations[0])")
echo "torch at $TD"; df -h $TD | tail -1; mount | grep -E " / | $(df $TD | tail -1 | awk '{print $6}') " | head -3
echo "py files: $(find $TD -name '*.py' | wc -l), pyc files: $(find $TD -name '*.pyc' | wc -l)"
ls -ld $TD/__pycache__ $TD/_decomp/__pycache__ 2>&1 | head; touch $TD/__pycache__/.w 2>&1 && echo writable && rm -f $TD/__pycache__/.w
ls $TD/__pycache__ | head -5
ls -la $TD/lib | sort -k5 -n | tail -8 | awk '{print $5, $9}'
} > $R/facts.txt 2>&1
cat $R/facts.txt
t() { local l=$1; shift; local t0=$(date +%s.%N); "$@" > /dev/null 2>&1; echo "$l $(python3 -c "print(round($(date +%s.%N)-$t0,3))")"; }
for i in 1 2 3; do
  t "python-pass" python3 -c "pass"
  t "import-numpy" python3 -c "import numpy"
  t "import-torch" python3 -c "import torch"
  t "import-torch-prefix" env PYTHONPYCACHEPREFIX=/tmp/pyc python3 -c "import torch"
  t "import-torch-nobc" env PYTHONDONTWRITEBYTECODE=1 python3 -c "import torch"
done 2>&1 | tee $R/times.txt
python3 - <<'PY' 2>&1 | tee $R/dlopen.txt
import ctypes, os, time, importlib.util as u, glob
td = u.find_spec('torch').submodule_search_locations[0]
t0 = time.perf_counter()
for n in ['libc10.so', 'libtorch_cpu.so', 'libc10_cuda.so', 'libtorch_cuda.so', 'libtorch.so', 'libtorch_python.so']:
    p = os.path.join(td, 'lib', n)
    if os.path.exists(p):
        t = time.perf_counter()
        try:
            ctypes.CDLL(p, mode=ctypes.RTLD_GLOBAL); print(n, round(time.perf_counter() - t, 3))
        except OSError as e:
            print(n, 'failed', str(e)[:120])
print('dlopen total', round(time.perf_counter() - t0, 3))
PY
python3 -X importtime -c "import torch" 2> $R/it1.txt
python3 -X importtime -c "import torch" 2> $R/it2.txt
echo "== top self (second import)"; sort -t'|' -k1.13 -n $R/it2.txt | tail -30 | cut -c1-120
echo "== top cumulative"; sort -t'|' -k2 -n $R/it2.txt | tail -40 | cut -c1-120
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rwF/*.whl 2>&1 | tail -1
/tmp/site/bin/py-spy record --native -r 250 -f raw -o $R/native.txt -- python3 -c "import torch" > /dev/null 2>&1
echo "== native leaves"; python3 - $R/native.txt <<'PY'
import sys, collections
leaf, lib, total = collections.Counter(), collections.Counter(), 0
for line in open(sys.argv[1]):
    stack, _, n = line.rstrip().rpartition(' ')
    n = int(n); total += n; frames = stack.split(';')
    leaf[frames[-1][:110]] += n
    for f in reversed(frames):
        if '.so' in f or '(python' in f or '.py' in f:
            lib[f.split('(')[-1].split(':')[0][-60:]] += n; break
print('samples', total)
for k, v in leaf.most_common(25): print(f'{v / total:6.1%} {k}')
print('-- innermost file')
for k, v in lib.most_common(20): print(f'{v / total:6.1%} {k}')
PY
LD_DEBUG=statistics python3 -c "import torch" 2>&1 | tail -12 | tee $R/lddebug.txt
(cd $R && tar czf $OUT/s27a-logs.tar.gz *)
