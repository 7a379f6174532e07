#!/bin/bash
# session 14: the Ray driver without PyTorch. Base 5160596 (.gpu/base14) against this session's tree (.gpu/new14),
# each on its own Ray cluster started beside the runs (one GPU) with --ray-keep-warm: the 64-clip archive (the
# first run starts its worker, the next two claim it warm) and a one-clip folder (twice, warm); one process too.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
C=/root/rc; mkdir -p $C
cp -r .rw4/* $C/
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl 2>&1 | grep -v "already exists" | tail -2
cat /root/raycache/ray.part00 /root/raycache/ray.part01 > /root/raycache/ray-2.60.0-cp312-cp312-manylinux2014_x86_64.whl
python3 -m pip install -q --no-index --no-deps --target /tmp/raysite /root/raycache/ray-2.60.0-*.whl 2>&1 | tail -2
for pair in click:click filelock:filelock jsonschema:jsonschema jsonschema_specifications:jsonschema_specifications \
    referencing:referencing rpds:rpds_py attrs:attrs msgpack:msgpack google.protobuf:protobuf yaml:pyyaml; do
  mod=${pair%%:*}; whl=${pair##*:}
  python3 -c "import $mod" 2>/dev/null || python3 -m pip install -q --no-index --no-deps --target /tmp/raysite .rwC/$whl-*.whl 2>&1 | tail -1
done
R=$OUT/${S14:-s14a}; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/table.txt
PYTHONPATH=/tmp/site python3 -c "
import sys, shutil; sys.path.insert(0, 'benchmarks'); import synthetic; from pathlib import Path
synthetic.random_checkpoint(Path('$C/w.pth'))
d = Path('$C/clips'); d.mkdir(exist_ok=True)
for i in range(64): shutil.copy('$C/clip10s_720p_h264.mp4', d / f'clip{i:02d}.mp4')
d = Path('$C/one'); d.mkdir(exist_ok=True); shutil.copy('$C/clip10s_720p_h264.mp4', d / 'clip.mp4')"
O="--weights $C/w.pth --detector blazeface_back --models-dir $C/blazeface --no-progress"
run() {  # label, tree, input folder, extra options
  rm -rf /tmp/o; local t0=$(date +%s.%N)
  (cd $2 && PYTHONPATH=$2:/tmp/site:/tmp/raysite timeout 150 python3 -m emopipe $3 -o /tmp/o $O $4 > $R/$1.log 2>&1); local rc=$?
  echo "$1: rc=$rc wall=$(python3 -c "print(round($(date +%s.%N)-$t0,2))") s; $(python3 -c "
import json; s=json.load(open('/tmp/o/summary.json')); r = s.get('ray', {})
m = [json.loads(l) for l in open('/tmp/o/manifest.jsonl')]
st = (s.get('pipeline') or {}).get('startup') or {}
print(s['ok'], 'ok;', s.get('frames'), 'frames;', json.dumps(r.get('timeline')), 'src_s', round(sum(x.get('seconds', 0) for x in m) / len(m), 3),
      'busy', json.dumps({n: (w.get('warm_from_an_earlier_run'), w.get('busy_s')) for n, w in r.get('per_worker', {}).items()}),
      'first_row_1p', st.get('first_row_s'))" 2>&1 | tail -1)" | tee -a $R/table.txt
}
ray_up() {  # tree
  (cd $1 && PYTHONPATH=$1:/tmp/site:/tmp/raysite python3 -m ray.scripts.scripts start --head --node-ip-address=127.0.0.1 \
    --port=6379 --num-gpus=1 --include-dashboard=false --disable-usage-stats > $R/ray-start-$(basename $1).log 2>&1)
  echo "ray start $(basename $1) rc=$?" | tee -a $R/table.txt
}
ray_down() { PYTHONPATH=/tmp/site:/tmp/raysite python3 -m ray.scripts.scripts stop --force > /dev/null 2>&1 || true; sleep 1; }
B=$ROOT/.gpu/base14; N=$ROOT/.gpu/new14
A="--ray 127.0.0.1:6379 --ray-keep-warm 600"
run one-new-0 $N $C/clips ""
for round in 1 2; do
  [ $round = 2 ] && [ $SECONDS -gt 290 ] && { echo "round 2 skipped at ${SECONDS} s" | tee -a $R/table.txt; break; }
  for T in $B $N; do
    t=$(basename $T)
    ray_up $T
    run ray-cold-$t-$round $T $C/clips "$A"
    run ray-warm-$t-$round-a $T $C/clips "$A"
    run ray-warm-$t-$round-b $T $C/clips "$A"
    run clip-warm-$t-$round-a $T $C/one "$A"
    run clip-warm-$t-$round-b $T $C/one "$A"
    ray_down
  done
  run one-base-$round $B $C/clips ""
  run one-new-$round $N $C/clips ""
  run clip-one-base-$round $B $C/one ""
  run clip-one-new-$round $N $C/one ""
done
(cd $R && tar czf logs.tar.gz *.log && rm *.log)
