#!/bin/bash
# session 38 (s38b): is a client really under the command's own MPS daemon (-f in the foreground, -d detached), and
# what outlives the daemon SIGKILLed?
set -u
export PATH=$PATH:/usr/local/nvidia/bin
R=$OUT/s38b; mkdir -p $R
exec > >(tee $R/table.txt) 2>&1
pkill -9 -f nvidia-cuda-mps 2>/dev/null
cat > /tmp/hold.py <<'PY'
import os, sys, time, torch
t = time.time(); x = torch.zeros(1, device='cuda'); torch.cuda.synchronize()
print('client', os.getpid(), 'context', round(time.time() - t, 3), 's', flush=True)
time.sleep(float(sys.argv[1]))
print('client still computes:', (x + 1).item(), flush=True)
PY
ctl() { echo "$1" | timeout 10 nvidia-cuda-mps-control 2>&1; }
look() {
  echo "  [$1] servers: $(ctl get_server_list | tr '\n' ' ')"
  for s in $(ctl get_server_list); do echo "  [$1] clients of $s: $(ctl "get_client_list $s" | tr '\n' ' ')"; done
  echo "  [$1] processes: $(ps -eo pid,ppid,comm | grep -i mps | grep -v grep | tr -s ' ' | tr '\n' ';')"
  echo "  [$1] nvidia-smi apps: $(nvidia-smi --query-compute-apps=pid,process_name --format=csv,noheader | tr '\n' ';')"
}
for mode in f d; do
  P=$(mktemp -d /tmp/emopipe-mps-XXXX); mkdir -p $P/log
  export CUDA_MPS_PIPE_DIRECTORY=$P CUDA_MPS_LOG_DIRECTORY=$P/log
  echo "== mode -$mode"
  if [ $mode = f ]; then nvidia-cuda-mps-control -f > $P/fg.out 2>&1 & D=$!; else nvidia-cuda-mps-control -d; sleep 0.2; D=$(cat $P/nvidia-cuda-mps-control.pid); fi
  for i in $(seq 1 100); do ctl get_server_list > /dev/null && break; sleep 0.02; done; echo "  answers after $i tries; daemon pid $D"
  python3 /tmp/hold.py 6 & C=$!
  sleep 3; look "client running"
  kill -9 $D; sleep 1; look "daemon SIGKILLed"
  wait $C; echo "  client rc=$?"; sleep 2; look "client ended"
  pkill -9 -f nvidia-cuda-mps 2>/dev/null; sleep 0.5
done
echo "== -d, two clients, quit"
P=$(mktemp -d /tmp/emopipe-mps-XXXX); mkdir -p $P/log
export CUDA_MPS_PIPE_DIRECTORY=$P CUDA_MPS_LOG_DIRECTORY=$P/log
nvidia-cuda-mps-control -d; sleep 0.3
python3 /tmp/hold.py 2 & python3 /tmp/hold.py 2 & sleep 1.5; look "two clients"; wait
t0=$(date +%s.%N); ctl quit; echo "  quit rc=$? $(python3 -c "print(round($(date +%s.%N)-$t0,3))") s"; sleep 0.5; look "after quit"
echo "== -f, client running, quit (does quit wait for the client?)"
P=$(mktemp -d /tmp/emopipe-mps-XXXX); mkdir -p $P/log
export CUDA_MPS_PIPE_DIRECTORY=$P CUDA_MPS_LOG_DIRECTORY=$P/log
nvidia-cuda-mps-control -f > $P/fg.out 2>&1 & D=$!
sleep 0.3; python3 /tmp/hold.py 3 & C=$!; sleep 1.5; look "client running"
t0=$(date +%s.%N); ctl quit; echo "  quit rc=$? $(python3 -c "print(round($(date +%s.%N)-$t0,3))") s"
( sleep 8; kill -9 $D 2>/dev/null && echo "  daemon still there 8 s after quit: killed" ) & W=$!
wait $D; echo "  daemon ended rc=$? $(python3 -c "print(round($(date +%s.%N)-$t0,3))") s after quit"; wait $C; echo "  client rc=$?"
wait $W 2>/dev/null; look "end"
echo "== -f, quit with the server idle"
P=$(mktemp -d /tmp/emopipe-mps-XXXX); mkdir -p $P/log
export CUDA_MPS_PIPE_DIRECTORY=$P CUDA_MPS_LOG_DIRECTORY=$P/log
nvidia-cuda-mps-control -f > $P/fg.out 2>&1 & D=$!
sleep 0.3; python3 /tmp/hold.py 0.1; look "idle server"
t0=$(date +%s.%N); ctl quit; ( sleep 8; kill -9 $D 2>/dev/null && echo "  daemon still there 8 s after quit: killed" ) & W=$!
wait $D; echo "  daemon ended rc=$? $(python3 -c "print(round($(date +%s.%N)-$t0,3))") s after quit"; look "end"
tail -5 $P/log/*.log 2>/dev/null
