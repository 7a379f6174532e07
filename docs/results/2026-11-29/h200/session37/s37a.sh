#!/bin/bash
# session 37 (s37a): one long video over a local Ray cluster's workers (`--ray local`, 4 workers sharing the H200 under
# MPS): cut into parts and joined (this tree) against whole (--no-split), and against --processes 4; the 9-minute
# one-face video and the 9-minute four-face one; rows, tracks and segments compared (cmp).
# Ray's wheel came in two parts (.rwR/ray.part00, .rwQ/ray.part01, with .rwS: the dependencies the host lacks) and the
# videos (.rw6, .rw7) in calls of their own before this one, copied to /root/raycache and /root/vid.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
cat /root/raycache/ray.part00 /root/raycache/ray.part01 > /root/raycache/ray-2.60.0-cp312-cp312-manylinux2014_x86_64.whl
python3 -m pip install -q --no-index --no-deps --target /tmp/site /root/raycache/ray-2.60.0-*.whl 2>&1 | tail -2
for pair in click:click filelock:filelock jsonschema:jsonschema jsonschema_specifications:jsonschema_specifications \
    referencing:referencing rpds:rpds_py attrs:attrs msgpack:msgpack google.protobuf:protobuf yaml:pyyaml; do
  mod=${pair%%:*}; whl=${pair##*:}
  python3 -c "import $mod" 2>/dev/null || python3 -m pip install -q --no-index --no-deps --target /tmp/site /root/raycache/$whl-*.whl 2>&1 | tail -1
done
C=/root/rc; mkdir -p $C
cp -r .rw4/blazeface $C/
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/pynvvideocodec*.whl .rw4/nvidia_cudnn*.whl .rw4/face_alignment*.whl 2>&1 | grep -v "already exists" | tail -2
R=$OUT/s37a; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/table.txt
PYTHONPATH=/tmp/site python3 -c "import ray; print('ray', ray.__version__)" | tee -a $R/table.txt
PYTHONPATH=/tmp/site python3 -c "
import sys; sys.path.insert(0, 'benchmarks'); import synthetic; from pathlib import Path
synthetic.random_checkpoint(Path('$C/w.pth'))"
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log PATH=$PATH:/usr/local/nvidia/bin
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
/usr/local/nvidia/bin/nvidia-cuda-mps-control -d && echo "MPS daemon started" | tee -a $R/table.txt
mkdir -p /tmp/here; cd /tmp/here
O="--weights $C/w.pth --detector blazeface_back --models-dir $C/blazeface --no-progress"
V=/root/vid/video540s_720p_1face_h264.mp4
V4=/root/vid/video540s_720p_4face_h264.mp4
export PYTHONPATH=$ROOT:/tmp/site
many() {  # label args...: a many-source command into /tmp/o/label
  local label=$1; shift; rm -rf /tmp/o/$label; local t0=$(date +%s.%N)
  timeout 240 python3 -m emopipe "$@" -o /tmp/o/$label $O > $R/$label.log 2>&1; local rc=$?
  local wall=$(python3 -c "print(round($(date +%s.%N)-$t0,2))")
  echo "$label: rc=$rc wall=$wall s $(python3 -c "
import json; s = json.load(open('/tmp/o/$label/summary.json')); p = s.get('ray') or s.get('processes') or {}
t = p.get('timeline', {}); w = p.get('per_worker', {})
print('frames', s['frames'], 'faces', s['faces'], 'run wall_s', s['wall_s'], '=', round(s['frames'] / s['wall_s']), 'frames/s',
      round(s['faces'] / s['wall_s']), 'faces/s;', 'connect', t.get('connect_s'), 'first row', t.get('first_row_s'), 'ready', t.get('ready_s'),
      'done', t.get('done_s'), '; workers frames', [x['frames'] for x in w.values()])" 2>&1 | tail -1)" | tee -a $R/table.txt
}
joined() {  # label stem: the video's summary (parts, join_s)
  python3 -c "
import json; s = json.load(open('/tmp/o/$1/$2.emotions.summary.json'))
print('   video: frames', s['frames'], 'faces', s['faces'], 'parts', s.get('parts'), 'join_s', s.get('join_s'), 'tracks', len(s.get('tracks') or []))" 2>&1 | tee -a $R/table.txt
}
same() {  # a b stem: rows, tracks, segments
  for f in emotions.csv emotions.tracks.csv emotions.segments.csv; do
    cmp -s /tmp/o/$1/$3.$f /tmp/o/$2/$3.$f && r=same || r=DIFFER
    echo "  $1 vs $2 $f: $r" | tee -a $R/table.txt
  done
}
S1=video540s_720p_1face_h264; S4=video540s_720p_4face_h264
many prime $V --end 20 --ray local
many ray1-a $V --ray local; joined ray1-a $S1
many ray1-whole $V --ray local --no-split
many proc1 $V --processes 4; joined proc1 $S1
many ray1-b $V --ray local; joined ray1-b $S1
same ray1-a ray1-whole $S1; same ray1-a proc1 $S1; same ray1-a ray1-b $S1
many ray4-a $V4 --ray local; joined ray4-a $S4
many ray4-whole $V4 --ray local --no-split
many proc4 $V4 --processes 4; joined proc4 $S4
many ray4-b $V4 --ray local; joined ray4-b $S4
same ray4-a ray4-whole $S4; same ray4-a proc4 $S4
grep -h "parts of\|part" $R/ray1-a.log | head -5 | tee -a $R/table.txt
echo quit | /usr/local/nvidia/bin/nvidia-cuda-mps-control
