#!/bin/bash
# session 33 (s33b): the final head of session 32 (ec59cfd, this checkout: NVDEC's probe decoder deleted by the thread
# that made it, Ray workers told the largest source's frame size) over `--ray local` (4 workers, MPS): eight runs of
# the 64-clip archive, Ray's worker logs searched for a worker's death (session 32 saw heap corruptions with probes
# kept). Ray's wheel came in two parts (.rwR/ray.part00, .rwQ/ray.part01: copied to /root/raycache by the calls
# before; .rwS: the dependencies the host lacks).
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
mkdir -p /root/raycache
cat /root/raycache/ray.part00 /root/raycache/ray.part01 > /root/raycache/ray-2.60.0-cp312-cp312-manylinux2014_x86_64.whl
python3 -m pip install -q --no-index --no-deps --target /tmp/raysite /root/raycache/ray-2.60.0-*.whl 2>&1 | tail -2
for pair in click:click filelock:filelock jsonschema:jsonschema jsonschema_specifications:jsonschema_specifications \
    referencing:referencing rpds:rpds_py attrs:attrs msgpack:msgpack google.protobuf:protobuf yaml:pyyaml; do
  mod=${pair%%:*}; whl=${pair##*:}
  python3 -c "import $mod" 2>/dev/null || python3 -m pip install -q --no-index --no-deps --target /tmp/raysite .rwS/$whl-*.whl 2>&1 | tail -1
done
C=/root/rc; mkdir -p $C
cp -r .rw4/blazeface $C/
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl 2>&1 | grep -v "already exists" | tail -2
R=$OUT/s33b; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/table.txt
PYTHONPATH=/tmp/site python3 -c "
import sys, shutil; sys.path.insert(0, 'benchmarks'); import synthetic; from pathlib import Path
synthetic.random_checkpoint(Path('$C/w.pth'))
d = Path('$C') / 'clips'; d.mkdir(exist_ok=True)
for i in range(64): shutil.copy('.rw4/clip10s_720p_h264.mp4', d / f'clip{i:02d}.mp4')"
mkdir -p /tmp/here; cd /tmp/here
O="--weights $C/w.pth --detector blazeface_back --models-dir $C/blazeface --no-progress"
tree() { if [ "$1" = new ]; then echo $ROOT; else echo $ROOT/.gpu/trees/$1; fi; }
(PYTHONPATH=$ROOT:/tmp/site timeout 150 python3 -m emopipe $ROOT/.rw4/clip10s_720p_h264.mp4 -o /tmp/o1.csv $O > $R/prime.log 2>&1)
echo "prime (one clip): rc=$?" | tee -a $R/table.txt
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log PATH=$PATH:/usr/local/nvidia/bin:/tmp/raysite/bin
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
/usr/local/nvidia/bin/nvidia-cuda-mps-control -d && echo "MPS daemon started" | tee -a $R/table.txt
ray_run() {  # label tree
  rm -rf /tmp/o; local t0=$(date +%s.%N)
  (PYTHONPATH=$(tree $2):/tmp/site:/tmp/raysite timeout 200 python3 -m emopipe $C/clips -o /tmp/o $O --ray local \
    --ray-workers 4 --ray-gpus-per-worker 0.25 > $R/$1.log 2>&1)
  local rc=$?
  cp /tmp/o/summary.json $R/$1.summary.json 2>/dev/null
  local logs=$(ls -td /tmp/ray/session_2* | head -1)/logs
  grep -l -i "terminate\|error 906\|cuda error\|SIGABRT\|SIGSEGV\|Fatal Python\|core dumped\|returned error" $logs/worker-*.err $logs/worker-*.out 2>/dev/null | while read f; do
    echo "== $f" >> $R/$1-worker-ends.txt; grep -i -B3 -A12 "terminate\|error 906\|cuda error\|SIGABRT\|SIGSEGV\|Fatal Python\|core dumped\|returned error" $f | head -60 >> $R/$1-worker-ends.txt; done
  echo "$1: rc=$rc wall=$(python3 -c "print(round($(date +%s.%N)-$t0,2))") s; $(python3 -c "
import json; s=json.load(open('/tmp/o/summary.json')); r = s['ray']; ws = r['worker_summaries']
print(s['ok'], 'ok,', r['worker_failures'], 'died;', {k: round(v, 2) for k, v in r['timeline'].items()},
      '| ready', [w.get('start', {}).get('ready_s') for w in ws], 'warm-ups', [round(w.get('warmup_s') or 0, 2) for w in ws],
      'detector warm-up', [round(w.get('startup', {}).get('detector_warmup_s') or 0, 2) for w in ws],
      'EmoNet warm-up', [round(w.get('startup', {}).get('engine_warmup_s') or 0, 2) for w in ws],
      'detector warm-ups', [w.get('startup', {}).get('detector_warmups') for w in ws],
      'first row', [round(w.get('startup', {}).get('first_row_s') or 0, 2) for w in ws])" 2>&1 | tail -1)" | tee -a $R/table.txt
}
for r in 1 2 3 4 5 6 7 8; do ray_run ray-new-$r new; done
echo quit | /usr/local/nvidia/bin/nvidia-cuda-mps-control
for f in $R/*-worker-ends.txt; do [ -f "$f" ] && { echo "== $(basename $f)"; head -40 "$f"; } >> $R/table.txt; done
grep -h "died\|Error\|error" $R/*.log | sort | uniq -c | head -20 >> $R/table.txt
cp $R/table.txt $OUT/table-h.txt
(cd $R && tar czf $OUT/s33b-logs.tar.gz *.log *.summary.json *.txt && rm -f *.log *.summary.json)
