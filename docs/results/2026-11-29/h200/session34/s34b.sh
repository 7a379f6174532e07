#!/bin/bash
# session 34 (s34b): NVDEC through PyNvVideoCodec's core decoder (this checkout, "new") against main's head 421785a
# (the threaded decoder and its probe; .gpu/trees/main): the GPU tests of NVDEC; per-frame checksums of both trees'
# NvdecVideoSource; one 60-s video in one process; warm one-clip commands; the 64-clip archive over --processes 8
# under MPS (interleaved, worker deaths counted); sixteen 60-s videos over --processes 8.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
C=/root/rc; mkdir -p $C
cp -r .rw4/blazeface $C/
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl 2>&1 | grep -v "already exists" | tail -2
R=$OUT/s34b; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/table.txt
PYTHONPATH=/tmp/site python3 -c "
import sys, shutil; sys.path.insert(0, 'benchmarks'); import synthetic; from pathlib import Path
synthetic.random_checkpoint(Path('$C/w.pth'))
d = Path('$C') / 'clips'; d.mkdir(exist_ok=True)
for i in range(64): shutil.copy('.rw4/clip10s_720p_h264.mp4', d / f'clip{i:02d}.mp4')
d = Path('$C') / 'long16'; d.mkdir(exist_ok=True)
for i in range(16): shutil.copy('.rw5/video60s_720p_1face_h264.mp4', d / f'long16-{i:02d}.mp4')"
(PYTHONPATH=$ROOT:/tmp/site timeout 300 python3 -m pytest -q -p no:cacheprovider tests/test_gpu.py -k "nvdec or NVDEC or opencv" > $R/gputests.log 2>&1; echo "gpu tests (new): rc=$? $(tail -1 $R/gputests.log)" | tee -a $R/table.txt)
mkdir -p /tmp/here; cd /tmp/here
tree() { if [ "$1" = main ]; then echo $ROOT/.gpu/trees/main; else echo $ROOT; fi; }
for f in $ROOT/.rw4/clip10s_720p_h264.mp4 $ROOT/.rw5/video60s_720p_4face_h264.mp4; do
  for t in main new; do PYTHONPATH=$(tree $t):/tmp/site timeout 120 python3 $ROOT/.gpu/checksums.py $f > /tmp/sum-$t.json 2>> $R/checksums.log; done
  python3 -c "
import json; a=json.load(open('/tmp/sum-main.json')); b=json.load(open('/tmp/sum-new.json'))
print('checksums $(basename $f): main %d frames, new %d frames, identical: %s' % (len(a), len(b), a == b))" | tee -a $R/table.txt
done
O="--weights $C/w.pth --detector blazeface_back --models-dir $C/blazeface --no-progress"
one() {  # label tree file
  rm -rf /tmp/o1; mkdir -p /tmp/o1; local t0=$(date +%s.%N)
  (PYTHONPATH=$(tree $2):/tmp/site timeout 150 python3 -m emopipe $3 -o /tmp/o1/rows.csv $O > $R/$1.log 2>&1)
  echo "$1: rc=$? wall=$(python3 -c "print(round($(date +%s.%N)-$t0,2))") s $(python3 -c "
import json; s=json.load(open('/tmp/o1/rows.summary.json')); st=s['startup']
print('fps %.0f frames %d decoder %s' % (s.get('fps') or 0, s['frames'], s.get('decoder')), {k: round(v, 2) for k, v in st.items() if k.endswith('_s') and isinstance(v, float)})" 2>&1 | tail -1)" | tee -a $R/table.txt
}
many() {  # label tree folder options
  rm -rf /tmp/o; local t0=$(date +%s.%N)
  (PYTHONPATH=$(tree $2):/tmp/site timeout 200 python3 -m emopipe $C/$3 -o /tmp/o $O $4 > $R/$1.log 2>&1)
  local rc=$?
  cp /tmp/o/summary.json $R/$1.summary.json 2>/dev/null
  echo "$1: rc=$rc wall=$(python3 -c "print(round($(date +%s.%N)-$t0,2))") s; $(python3 -c "
import json; s=json.load(open('/tmp/o/summary.json')); p = s['processes']; t = p['timeline']; ws = p['worker_summaries']
gaps = sorted(round(w['startup']['first_row_s'] - w['start']['ready_s'], 2) for w in ws)
print(s['ok'], 'ok,', p['worker_failures'], 'died;', {k: round(v, 2) for k, v in t.items()},
      '| frames/s first row->done %d, summed %d' % (s['frames'] / (t['done_s'] - t['first_row_s']), sum(w['fps'] or 0 for w in ws)), '| first row - warm', gaps)" 2>&1 | tail -1)" | tee -a $R/table.txt
}
LONG=$ROOT/.rw5/video60s_720p_1face_h264.mp4
CLIP=$ROOT/.rw4/clip10s_720p_h264.mp4
one prime-new new $CLIP; one prime-main main $CLIP
for r in 1 2; do one long1-main-$r main $LONG; one long1-new-$r new $LONG; done
for r in 1 2 3; do one clip-main-$r main $CLIP; one clip-new-$r new $CLIP; done
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log PATH=$PATH:/usr/local/nvidia/bin
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
/usr/local/nvidia/bin/nvidia-cuda-mps-control -d && echo "MPS daemon started" | tee -a $R/table.txt
many p8-prime-new new clips "--processes 8"
for r in 1 2 3 4 5; do many p8-main-$r main clips "--processes 8"; many p8-new-$r new clips "--processes 8"; done
many long16-new-1 new long16 "--processes 8"
many long16-main-1 main long16 "--processes 8"
echo quit | /usr/local/nvidia/bin/nvidia-cuda-mps-control
grep -h "died\|Fatal\|malloc\|corrupt" $R/*.log | sort | uniq -c | head -20 >> $R/table.txt
cp $R/table.txt $OUT/table-b.txt
(cd $R && tar czf $OUT/s34b-logs.tar.gz *.log *.summary.json *.txt && rm -f *.log *.summary.json)
