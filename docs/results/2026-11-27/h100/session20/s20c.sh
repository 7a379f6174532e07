#!/bin/bash
# session 20, second: (1) one 60 s 720p video, --annotate out.mp4: OpenCV's writer, FFmpeg's as first built
# (ad8d4db, .gpu/base20: frames piped on the writer thread) and FFmpeg's with its own feeding thread (head), interleaved
# twice, and no --annotate; (2) the 64-clip archive with and without --annotate mp4 (a video per clip); (3) a fleet of
# paced 720p30 cameras in one process with and without --record mp4 (an FFmpeg per camera), 8 and 16 cameras.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
C=/root/rc; mkdir -p $C /tmp/ffbin; cp -r .rw4/blazeface $C/ 2>/dev/null; cp -n .rw4/*.mp4 $C/
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl 2>&1 | grep -v "already exists" | tail -2
[ -x /tmp/ffbin/ffmpeg ] || xz -dc /root/ffcache/ffmpeg.xz > /tmp/ffbin/ffmpeg; chmod +x /tmp/ffbin/ffmpeg
export EMOPIPE_FFMPEG=/tmp/ffbin/ffmpeg
R=$OUT/s20c; mkdir -p $R
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc; git log --oneline 2>/dev/null | head -1; } | tee $R/table.txt
PYTHONPATH=$ROOT:/tmp/site python3 -c "
import sys, shutil; sys.path.insert(0, 'benchmarks'); import synthetic; from pathlib import Path
synthetic.random_checkpoint(Path('$C/w.pth'))
d = Path('$C/clips'); d.mkdir(exist_ok=True)
for i in range(64): shutil.copy('$C/clip10s_720p_h264.mp4', d / f'clip{i:02d}.mp4')"
O="--weights $C/w.pth --detector blazeface_back --models-dir $C/blazeface --no-progress"
whole() {  # label, tree, extra options...
  local label=$1 tree=$2; shift 2
  rm -rf /tmp/o*; local t0=$(date +%s.%N)
  (cd $tree && PYTHONPATH=$tree:/tmp/site timeout 150 python3 -m emopipe $C/video_720p_h264.mp4 -o /tmp/o.csv $O "$@" > $R/$label.log 2>&1); local rc=$?
  echo "$label: rc=$rc wall=$(python3 -c "print(round($(date +%s.%N)-$t0,2))") s; $(python3 -c "
import json, cv2, os
s = json.load(open('/tmp/o.summary.json'))
line = f\"frames {s['frames']} pipeline {s['fps']:.0f} frames/s, write stage {s['stage_seconds']['write']:.2f} s\"
if os.path.exists('/tmp/o.mp4'):
    cap = cv2.VideoCapture('/tmp/o.mp4'); n = 0
    while cap.grab(): n += 1
    line += f'; video {n} frames, {os.path.getsize(\"/tmp/o.mp4\") / 1e6:.1f} MB'
print(line)" 2>&1 | tail -1)" | tee -a $R/table.txt
}
B=$ROOT/.gpu/base20
whole warm-up $ROOT
whole opencv $ROOT --annotate /tmp/o.mp4 --video-writer opencv; whole ffmpeg-first $B --annotate /tmp/o.mp4 --video-writer ffmpeg
whole ffmpeg-fed $ROOT --annotate /tmp/o.mp4 --video-writer ffmpeg; whole ffmpeg-fed-2 $ROOT --annotate /tmp/o.mp4 --video-writer ffmpeg
whole ffmpeg-first-2 $B --annotate /tmp/o.mp4 --video-writer ffmpeg; whole opencv-2 $ROOT --annotate /tmp/o.mp4 --video-writer opencv
whole plain $ROOT
archive() {  # label, extra options...
  local label=$1; shift
  rm -rf /tmp/oa; local t0=$(date +%s.%N)
  PYTHONPATH=$ROOT:/tmp/site timeout 200 python3 -m emopipe $C/clips -o /tmp/oa $O "$@" > $R/$label.log 2>&1; local rc=$?
  echo "$label: rc=$rc wall=$(python3 -c "print(round($(date +%s.%N)-$t0,2))") s; $(python3 -c "
import json, glob, os
s = json.load(open('/tmp/oa/summary.json')); p = s.get('pipeline') or {}
v = glob.glob('/tmp/oa/*.annotated.mp4')
print(s['ok'], 'ok,', s['frames'], 'frames, pipeline', round(p.get('fps') or 0), 'frames/s,', len(v), 'videos',
      round(sum(map(os.path.getsize, v)) / 1e6, 1), 'MB')" 2>&1 | tail -1)" | tee -a $R/table.txt
}
archive archive-plain; archive archive-annotated --annotate mp4; archive archive-annotated-2 --annotate mp4; archive archive-plain-2
fleet() {  # label, counts, extra...
  local label=$1 counts=$2; shift 2
  PYTHONPATH=$ROOT:/tmp/site timeout 240 python3 benchmarks/fleet.py --models-dir $C/blazeface --out $R/$label --counts $counts --seconds 15 -- "$@" > $R/$label.txt 2>&1
  echo "== $label (rc=$?)" | tee -a $R/table.txt
  grep -A4 "^cameras" $R/$label.txt | grep -v "^---\|^target" | tee -a $R/table.txt
  du -sh $R/$label 2>/dev/null | tee -a $R/table.txt
  find $R/$label -name "*.mp4" -delete; find $R/$label -name "*.csv" -delete
}
fleet fleet-plain "8 16"; fleet fleet-record "8 16" --record mp4
cp $R/table.txt $OUT/table-c.txt; tar czf $OUT/s20c.tgz -C $OUT s20c && rm -rf $R
