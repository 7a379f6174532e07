#!/bin/bash
# session 33 (s33h): a source read ahead opens once the one before it has opened (this checkout, "new") against main's
# head 4a53b02 ("main", .gpu/trees/head4a): the 64-clip archive over --processes 8 and --processes auto (4) under MPS,
# three interleaved pairs each; each worker's first row after it is warm.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
C=/root/rc; mkdir -p $C
cp -r .rw4/blazeface $C/
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl 2>&1 | grep -v "already exists" | tail -2
R=$OUT/s33h; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/table.txt
PYTHONPATH=/tmp/site python3 -c "
import sys, shutil; sys.path.insert(0, 'benchmarks'); import synthetic; from pathlib import Path
synthetic.random_checkpoint(Path('$C/w.pth'))
d = Path('$C') / 'clips'; d.mkdir(exist_ok=True)
for i in range(64): shutil.copy('.rw4/clip10s_720p_h264.mp4', d / f'clip{i:02d}.mp4')"
mkdir -p /tmp/here; cd /tmp/here
O="--weights $C/w.pth --detector blazeface_back --models-dir $C/blazeface --no-progress"
tree() { if [ "$1" = main ]; then echo $ROOT/.gpu/trees/head4a; else echo $ROOT; fi; }
many() {  # label tree workers
  rm -rf /tmp/o; local t0=$(date +%s.%N)
  (PYTHONPATH=$(tree $2):/tmp/site timeout 200 python3 -m emopipe $C/clips -o /tmp/o $O --processes $3 > $R/$1.log 2>&1)
  local rc=$?
  cp /tmp/o/summary.json $R/$1.summary.json 2>/dev/null
  echo "$1: rc=$rc wall=$(python3 -c "print(round($(date +%s.%N)-$t0,2))") s; $(python3 -c "
import json; s=json.load(open('/tmp/o/summary.json')); p = s['processes']; t = p['timeline']; ws = p['worker_summaries']
gaps = sorted(round(w['startup']['first_row_s'] - w['start']['ready_s'], 2) for w in ws)
print(s['ok'], 'ok,', p['worker_failures'], 'died;', {k: round(v, 2) for k, v in t.items()},
      '| frames/s first row->done %d' % (s['frames'] / (t['done_s'] - t['first_row_s'])), '| first row - warm', gaps)" 2>&1 | tail -1)" | tee -a $R/table.txt
}
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log PATH=$PATH:/usr/local/nvidia/bin
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
/usr/local/nvidia/bin/nvidia-cuda-mps-control -d && echo "MPS daemon started" | tee -a $R/table.txt
many prime-main main 8; many prime-new new 8
for r in 1 2 3; do
  many p8-main-$r main 8; many p8-new-$r new 8
  many p4-main-$r main auto; many p4-new-$r new auto
done
echo quit | /usr/local/nvidia/bin/nvidia-cuda-mps-control
grep -h "died\|Fatal" $R/*.log | sort | uniq -c | head -20 >> $R/table.txt
cp $R/table.txt $OUT/table-h.txt
(cd $R && tar czf $OUT/s33h-logs.tar.gz *.log *.summary.json *.txt && rm -f *.log *.summary.json)
