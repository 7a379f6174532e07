#!/bin/bash
# session 37 (s37c): s37b again after its two fixes (a worker never warm killed at the run's end, not released — which
# waited 30 s for it; idle warm workers of other options ended for a run's room): a run with other options first
# (--end 20) leaves a warm worker, which the next run ends for its fourth worker; then warm runs cut and whole.
# Ray's wheel (.rwR/ray.part00, .rwQ/ray.part01, .rwS: its dependencies) and the videos (.rw6, .rw7) came in calls of
# their own before this one, copied to /root/raycache and /root/vid.
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
R=/tmp/s37c; mkdir -p $R $OUT/s37c
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/table.txt
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
(python3 -m ray.scripts.scripts start --head --node-ip-address=127.0.0.1 --port=6379 --num-gpus=1 \
  --include-dashboard=false --disable-usage-stats > $R/ray-start.log 2>&1); echo "ray start rc=$?" | tee -a $R/table.txt
A="--ray 127.0.0.1:6379 --ray-keep-warm 300"
many() {  # label args...: a many-source command into /tmp/o/label
  local label=$1; shift; rm -rf /tmp/o/$label; local t0=$(date +%s.%N)
  timeout 240 python3 -m emopipe "$@" -o /tmp/o/$label $O > $R/$label.log 2>&1; local rc=$?
  local wall=$(python3 -c "print(round($(date +%s.%N)-$t0,2))")
  echo "$label: rc=$rc wall=$wall s $(python3 -c "
import json; s = json.load(open('/tmp/o/$label/summary.json')); p = s.get('ray') or s.get('processes') or {}
t = p.get('timeline', {}); w = p.get('per_worker', {})
warm = sum(1 for x in p.get('worker_summaries', []) if (x.get('start') or {}).get('warm_from_an_earlier_run'))
print('frames', s['frames'], 'faces', s['faces'], 'run wall_s', s['wall_s'], '=', round(s['frames'] / s['wall_s']), 'frames/s',
      round(s['faces'] / s['wall_s']), 'faces/s;', 'connect', t.get('connect_s'), 'first row', t.get('first_row_s'), 'ready', t.get('ready_s'),
      'done', t.get('done_s'), '; workers frames', [x['frames'] for x in w.values()], 'warm from before', warm)" 2>&1 | tail -1)" | tee -a $R/table.txt
}
joined() {  # label stem
  python3 -c "
import json; s = json.load(open('/tmp/o/$1/$2.emotions.summary.json'))
print('   video: frames', s['frames'], 'faces', s['faces'], 'parts', s.get('parts'), 'join_s', s.get('join_s'), 'tracks', len(s.get('tracks') or []))" 2>&1 | tee -a $R/table.txt
}
same() {  # a b stem
  for f in emotions.csv emotions.segments.csv; do
    cmp -s /tmp/o/$1/$3.$f /tmp/o/$2/$3.$f && r=same || r=DIFFER
    echo "  $1 vs $2 $f: $r" | tee -a $R/table.txt
  done
}
S1=video540s_720p_1face_h264; S4=video540s_720p_4face_h264
many other $V --end 20 $A
many split1-a $V $A; joined split1-a $S1
grep -h "ended, its room\|warm from an earlier" $R/split1-a.log | tee -a $R/table.txt
many split1-b $V $A; joined split1-b $S1
many whole1-a $V $A --no-split
many split1-c $V $A; joined split1-c $S1
many whole1-b $V $A --no-split
many split1-d $V $A; joined split1-d $S1
same split1-a whole1-a $S1; same split1-b split1-d $S1
many split4-a $V4 $A; joined split4-a $S4
many whole4 $V4 $A --no-split
many split4-b $V4 $A; joined split4-b $S4
same split4-a whole4 $S4
python3 -m ray.scripts.scripts stop --force > /dev/null 2>&1; sleep 2
echo quit | /usr/local/nvidia/bin/nvidia-cuda-mps-control
cp $R/table.txt $OUT/s37c/; (cd /tmp && tar czf $OUT/s37c/logs.tar.gz s37c)
