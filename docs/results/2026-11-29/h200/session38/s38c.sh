#!/bin/bash
# session 38 (s38c: s38b with the clients waited for — a bare `wait` waited for tee's process substitution)
# session 38 (s38b): is a client really under the command's own MPS daemon (-f in the foreground, -d detached), and
# what outlives the daemon SIGKILLed?
set -u
export PATH=$PATH:/usr/local/nvidia/bin
R=$OUT/s38c; mkdir -p $R
exec > >(tee $R/table.txt) 2>&1
pkill -9 -f nvidia-cuda-mps 2>/dev/null
cat > /tmp/hold.py <<'PY'
import os, sys, time, torch
t = time.time(); x = torch.zeros(1, device='cuda'); torch.cuda.synchronize()
print('client', os.getpid(), 'context', round(time.time() - t, 3), 's', flush=True)
open(sys.argv[2], 'w').close()
time.sleep(float(sys.argv[1]))
print('client still computes:', (x + 1).item(), flush=True)
PY
up() { for k in $(seq 1 300); do [ -e $1 ] && return; sleep 0.1; done; echo "  (no client up after 30 s)"; }
ctl() { echo "$1" | timeout 10 nvidia-cuda-mps-control 2>&1; }
look() {
  echo "  [$1] servers: $(ctl get_server_list | tr '\n' ' ')"
  for s in $(ctl get_server_list | grep -E "^[0-9]+$"); do echo "  [$1] clients of $s: $(ctl "get_client_list $s" | tr '\n' ' ')"; done
  echo "  [$1] processes: $(ps -eo pid,ppid,comm | grep -i mps | grep -v grep | tr -s ' ' | tr '\n' ';')"
  echo "  [$1] nvidia-smi apps: $(nvidia-smi --query-compute-apps=pid,process_name --format=csv,noheader | tr '\n' ';')"
}
for mode in f d; do
  P=$(mktemp -d /tmp/emopipe-mps-XXXX); mkdir -p $P/log
  export CUDA_MPS_PIPE_DIRECTORY=$P CUDA_MPS_LOG_DIRECTORY=$P/log
  echo "== mode -$mode"
  if [ $mode = f ]; then nvidia-cuda-mps-control -f > $P/fg.out 2>&1 & D=$!; else nvidia-cuda-mps-control -d; sleep 0.2; D=$(cat $P/nvidia-cuda-mps-control.pid); fi
  for i in $(seq 1 100); do ctl get_server_list > /dev/null && break; sleep 0.02; done; echo "  answers after $i tries; daemon pid $D"
  rm -f /tmp/up1; python3 /tmp/hold.py 6 /tmp/up1 & C=$!
  up /tmp/up1; look "client running"
  kill -9 $D; sleep 1; look "daemon SIGKILLed"
  wait $C; echo "  client rc=$?"; sleep 2; look "client ended"
  pkill -9 -f nvidia-cuda-mps 2>/dev/null; sleep 0.5
done
echo "== -d, two clients, quit"
P=$(mktemp -d /tmp/emopipe-mps-XXXX); mkdir -p $P/log
export CUDA_MPS_PIPE_DIRECTORY=$P CUDA_MPS_LOG_DIRECTORY=$P/log
nvidia-cuda-mps-control -d; sleep 0.3
rm -f /tmp/up1 /tmp/up2; python3 /tmp/hold.py 3 /tmp/up1 & C1=$!; python3 /tmp/hold.py 3 /tmp/up2 & C2=$!; up /tmp/up1; up /tmp/up2; look "two clients"; wait $C1 $C2
t0=$(date +%s.%N); ctl quit; echo "  quit rc=$? $(python3 -c "print(round($(date +%s.%N)-$t0,3))") s"; sleep 0.5; look "after quit"
echo "== -f, client running, quit (does quit wait for the client?)"
P=$(mktemp -d /tmp/emopipe-mps-XXXX); mkdir -p $P/log
export CUDA_MPS_PIPE_DIRECTORY=$P CUDA_MPS_LOG_DIRECTORY=$P/log
nvidia-cuda-mps-control -f > $P/fg.out 2>&1 & D=$!
sleep 0.3; rm -f /tmp/up1; python3 /tmp/hold.py 3 /tmp/up1 & C=$!; up /tmp/up1; look "client running"
t0=$(date +%s.%N); ctl quit; echo "  quit rc=$? $(python3 -c "print(round($(date +%s.%N)-$t0,3))") s"
( sleep 8; kill -9 $D 2>/dev/null && echo "  daemon still there 8 s after quit: killed" ) & W=$!
wait $D; echo "  daemon ended rc=$? $(python3 -c "print(round($(date +%s.%N)-$t0,3))") s after quit"; wait $C; echo "  client rc=$?"
wait $W 2>/dev/null; look "end"
echo "== -f, quit with the server idle"
P=$(mktemp -d /tmp/emopipe-mps-XXXX); mkdir -p $P/log
export CUDA_MPS_PIPE_DIRECTORY=$P CUDA_MPS_LOG_DIRECTORY=$P/log
nvidia-cuda-mps-control -f > $P/fg.out 2>&1 & D=$!
sleep 0.3; python3 /tmp/hold.py 0.1 /tmp/up3; look "idle server"
t0=$(date +%s.%N); ctl quit; ( sleep 8; kill -9 $D 2>/dev/null && echo "  daemon still there 8 s after quit: killed" ) & W=$!
wait $D; echo "  daemon ended rc=$? $(python3 -c "print(round($(date +%s.%N)-$t0,3))") s after quit"; look "end"
tail -5 $P/log/*.log 2>/dev/null
