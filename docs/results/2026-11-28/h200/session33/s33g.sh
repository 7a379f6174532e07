#!/bin/bash
# session 33 (s33g): where a --processes worker's time goes between "warm" and its first row (1.0-1.9 s on a 2 x H200
# host with 8 workers, 0.25-0.5 s with 4 on one GPU): py-spy dumps of every worker's threads every ~0.35 s from 3 s to 8 s
# after the command starts, two runs of the 64-clip archive over `--processes ${N:-auto}` (MPS) after a first.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
C=/root/rc; mkdir -p $C
cp -r .rw4/blazeface $C/
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl .rwP/*.whl 2>&1 | grep -v "already exists" | tail -2
SPY=/tmp/site/bin/py-spy
R=$OUT/s33g; mkdir -p $R
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/table.txt
PYTHONPATH=/tmp/site python3 -c "
import sys, shutil; sys.path.insert(0, 'benchmarks'); import synthetic; from pathlib import Path
synthetic.random_checkpoint(Path('$C/w.pth'))
d = Path('$C') / 'clips'; d.mkdir(exist_ok=True)
for i in range(64): shutil.copy('.rw4/clip10s_720p_h264.mp4', d / f'clip{i:02d}.mp4')"
mkdir -p /tmp/here; cd /tmp/here
O="--weights $C/w.pth --detector blazeface_back --models-dir $C/blazeface --no-progress"
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log PATH=$PATH:/usr/local/nvidia/bin
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
/usr/local/nvidia/bin/nvidia-cuda-mps-control -d && echo "MPS daemon started" | tee -a $R/table.txt
summary() {  # label
  python3 -c "
import json; s=json.load(open('/tmp/o/summary.json')); p = s['processes']; ws = p['worker_summaries']
print('$1', s['ok'], 'ok,', p['worker_failures'], 'died;', {k: round(v, 2) for k, v in p['timeline'].items()})
pids = {w['pid']: n for n, w in p['per_worker'].items()}
for w in ws: print('  ', w['name'], 'ready', round(w['start']['ready_s'], 2), 'first row', round(w['startup']['first_row_s'], 2), 'first frame latency', round(w['first_frame_latency_s'] or 0, 3))
print('   pids', p['per_worker'] and {n: w['pid'] for n, w in p['per_worker'].items()})" 2>&1 | tee -a $R/table.txt
}
rm -rf /tmp/o; (PYTHONPATH=$ROOT:/tmp/site timeout 200 python3 -m emopipe $C/clips -o /tmp/o $O --processes ${N:-auto} > $R/prime.log 2>&1); summary prime
for r in 1 2; do
  rm -rf /tmp/o; t0=$(date +%s.%N)
  (PYTHONPATH=$ROOT:/tmp/site timeout 200 python3 -m emopipe $C/clips -o /tmp/o $O --processes ${N:-auto} > $R/run$r.log 2>&1) &
  cmd=$!
  sleep 3
  for k in $(seq 1 14); do
    at=$(python3 -c "print(round($(date +%s.%N)-$t0,2))")
    for pid in $(pgrep -f "emopipe.process_worker"); do
      ( $SPY dump --pid $pid --nonblocking > $R/run$r-t$k-$pid.txt 2>&1; sed -i "1i at ${at} s" $R/run$r-t$k-$pid.txt ) &
    done
    sleep 0.35
  done
  wait $cmd
  wait
  summary run$r
done
echo quit | /usr/local/nvidia/bin/nvidia-cuda-mps-control
cp $R/table.txt $OUT/table-g.txt
(cd $R && tar czf $OUT/s33g-logs.tar.gz *.txt *.log && rm -f run*-t*.txt)
