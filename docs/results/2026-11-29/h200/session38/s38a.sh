#!/bin/bash
# session 38 (s38a): NVIDIA MPS started by a command for its own processes (a pipe directory of its own), in the
# foreground as the command's child: does it answer, how long does it take, does its server outlive the daemon
# killed (the command SIGKILLed), does `quit` end both?
set -u
export PATH=$PATH:/usr/local/nvidia/bin
R=$OUT/s38a; mkdir -p $R
exec > >(tee $R/table.txt) 2>&1
nvidia-smi --query-gpu=name,driver_version,compute_mode --format=csv,noheader
which nvidia-cuda-mps-control nvidia-cuda-mps-server
echo "system daemon (default pipe dir):"; echo get_server_list | timeout 5 nvidia-cuda-mps-control; echo "rc=$?"
ps -eo pid,ppid,comm | grep -i mps
t() { python3 -c "import time; print(round(time.time(), 3))"; }
# 1. foreground daemon, killed with SIGKILL while a client runs
P=$(mktemp -d /tmp/emopipe-mps-XXXX); mkdir -p $P/log
export CUDA_MPS_PIPE_DIRECTORY=$P CUDA_MPS_LOG_DIRECTORY=$P/log
t0=$(t); nvidia-cuda-mps-control -f > $P/fg.out 2>&1 & D=$!
for i in $(seq 1 50); do echo get_server_list | timeout 5 nvidia-cuda-mps-control > /dev/null 2>&1 && break; sleep 0.02; done
t1=$(t); echo "1. answers after $(python3 -c "print(round($t1-$t0,3))") s (tries $i); pipe dir: $(ls $P)"
python3 -c "
import time, torch
t = time.time(); x = torch.zeros(1, device='cuda'); torch.cuda.synchronize(); print('client context', round(time.time() - t, 3), 's')
time.sleep(4); print('client alive after 4 s:', (x + 1).item())" > $P/client.out 2>&1 & C=$!
sleep 2.5
echo "server list: $(echo get_server_list | nvidia-cuda-mps-control)"
ps -eo pid,ppid,comm,args | grep -i "mps" | grep -v grep
kill -9 $D; sleep 2
echo "1. after SIGKILL of the daemon:"; ps -eo pid,ppid,comm | grep -i mps | grep -v grep || echo "  no mps process"
wait $C; echo "client rc=$?"; cat $P/client.out
sleep 2; ps -eo pid,ppid,comm | grep -i mps | grep -v grep || echo "  no mps process (after the client ended)"
ls -la $P; cat $P/fg.out | tail -5
pkill -9 -f nvidia-cuda-mps 2>/dev/null; sleep 0.5
# 2. foreground daemon, a client, then quit
P=$(mktemp -d /tmp/emopipe-mps-XXXX); mkdir -p $P/log
export CUDA_MPS_PIPE_DIRECTORY=$P CUDA_MPS_LOG_DIRECTORY=$P/log
nvidia-cuda-mps-control -f > $P/fg.out 2>&1 & D=$!
sleep 0.3
python3 -c "
import time, torch
t = time.time(); x = torch.zeros(1, device='cuda'); torch.cuda.synchronize(); print('client context', round(time.time() - t, 3), 's')
" 2>&1
echo "2. server list after the client ended: $(echo get_server_list | nvidia-cuda-mps-control)"
t0=$(t); echo quit | timeout 20 nvidia-cuda-mps-control; echo "quit rc=$?"; wait $D; echo "daemon rc=$? after $(python3 -c "print(round($(t)-$t0,3))") s"
ps -eo pid,ppid,comm | grep -i mps | grep -v grep || echo "  no mps process"
ls -la $P
# 3. quit while a client still runs (does quit wait? for how long?)
P=$(mktemp -d /tmp/emopipe-mps-XXXX); mkdir -p $P/log
export CUDA_MPS_PIPE_DIRECTORY=$P CUDA_MPS_LOG_DIRECTORY=$P/log
nvidia-cuda-mps-control -f > $P/fg.out 2>&1 & D=$!
sleep 0.3
python3 -c "
import time, torch
x = torch.zeros(1, device='cuda'); torch.cuda.synchronize(); print('client up'); time.sleep(3); print('client done', (x+1).item())" 2>&1 & C=$!
sleep 2
t0=$(t); echo quit | timeout 20 nvidia-cuda-mps-control; echo "3. quit rc=$? after $(python3 -c "print(round($(t)-$t0,3))") s"
wait $C; echo "client rc=$?"; sleep 0.5; kill -0 $D 2>/dev/null && echo "daemon still alive" || echo "daemon ended"
ps -eo pid,ppid,comm | grep -i mps | grep -v grep || echo "  no mps process"
# 4. quit -t 2 help
echo "4. help:"; echo help | nvidia-cuda-mps-control 2>&1 | head -30
pkill -9 -f nvidia-cuda-mps 2>/dev/null
# 5. two torch processes side by side under it: matmul rate alone vs two at once (is it really MPS)
P=$(mktemp -d /tmp/emopipe-mps-XXXX); mkdir -p $P/log
export CUDA_MPS_PIPE_DIRECTORY=$P CUDA_MPS_LOG_DIRECTORY=$P/log
nvidia-cuda-mps-control -f > $P/fg.out 2>&1 & D=$!
sleep 0.3
cat > /tmp/small.py <<'PY'
import time, torch
x = torch.randn(64, 64, device='cuda')
for _ in range(200): y = x @ x
torch.cuda.synchronize(); t = time.time(); n = 0
while time.time() - t < 3:
    for _ in range(100): y = x @ x
    torch.cuda.synchronize(); n += 100
print('small matmuls/s', round(n / (time.time() - t)))
PY
python3 /tmp/small.py; python3 /tmp/small.py & python3 /tmp/small.py & wait
echo quit | nvidia-cuda-mps-control; wait $D
unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
echo "5. without MPS:"; python3 /tmp/small.py & python3 /tmp/small.py & wait
