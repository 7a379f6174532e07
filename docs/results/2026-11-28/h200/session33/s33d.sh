#!/bin/bash
# session 33 (s33d): NVDEC's probe in a child process (this checkout, "new": the simple decoder made, read and left to
# the child's exit, nothing deleted in the command's own process) against main's head ec59cfd ("main",
# .gpu/trees/head33): the NVDEC GPU tests; the H.264 4:4:4 clip (refused by the child's probe, read by OpenCV); five
# interleaved pairs of warm one-clip commands; under MPS three interleaved pairs of the 64-clip archive over
# --processes auto (4).
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
C=/root/rc; mkdir -p $C/assets/models $C/assets/data/faces
cp -r .rw4/blazeface $C/; cp -r .rw4/blazeface $C/assets/models/; cp .rw4/faces/*.png $C/assets/data/faces/
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl 2>&1 | grep -v "already exists" | tail -2
R=$OUT/s33d; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/table.txt
PYTHONPATH=/tmp/site python3 -c "
import sys, shutil; sys.path.insert(0, 'benchmarks'); import synthetic; from pathlib import Path
synthetic.random_checkpoint(Path('$C/w.pth'))
d = Path('$C') / 'clips'; d.mkdir(exist_ok=True)
for i in range(64): shutil.copy('.rw4/clip10s_720p_h264.mp4', d / f'clip{i:02d}.mp4')"
(cd $ROOT && PYTHONPATH=$ROOT:/tmp/site EMOPIPE_TEST_ASSETS=$C/assets timeout 240 python3 -m pytest -q -p no:cacheprovider -rs \
  tests/test_gpu.py -k "nvdec or context" > $R/pytest.txt 2>&1)
echo "gpu tests (nvdec) rc=$?: $(tail -1 $R/pytest.txt)" | tee -a $R/table.txt; grep -E "FAILED|SKIPPED|Error" $R/pytest.txt | head -10 | tee -a $R/table.txt
mkdir -p /tmp/here; cd /tmp/here
O="--weights $C/w.pth --detector blazeface_back --models-dir $C/blazeface --no-progress"
tree() { if [ "$1" = main ]; then echo $ROOT/.gpu/trees/head33; else echo $ROOT; fi; }
one() {  # label tree
  rm -rf /tmp/o1; mkdir -p /tmp/o1; local t0=$(date +%s.%N)
  (PYTHONPATH=$(tree $2):/tmp/site timeout 150 python3 -m emopipe $ROOT/.rw4/clip10s_720p_h264.mp4 -o /tmp/o1/rows.csv $O > $R/$1.log 2>&1)
  echo "$1: rc=$? wall=$(python3 -c "print(round($(date +%s.%N)-$t0,2))") s $(python3 -c "
import json; s=json.load(open('/tmp/o1/rows.summary.json')); st=s['startup']
print({k: round(v, 2) for k, v in st.items() if k.endswith('_s') and isinstance(v, float)})" 2>&1 | tail -1)" | tee -a $R/table.txt
}
many() {  # label tree
  rm -rf /tmp/o; local t0=$(date +%s.%N)
  (PYTHONPATH=$(tree $2):/tmp/site timeout 200 python3 -m emopipe $C/clips -o /tmp/o $O --processes auto > $R/$1.log 2>&1)
  local rc=$?
  cp /tmp/o/summary.json $R/$1.summary.json 2>/dev/null
  echo "$1: rc=$rc wall=$(python3 -c "print(round($(date +%s.%N)-$t0,2))") s; $(python3 -c "
import json; s=json.load(open('/tmp/o/summary.json')); p = s['processes']; t = p['timeline']; ws = p['worker_summaries']
print(s['ok'], 'ok,', p['worker_failures'], 'died;', {k: round(v, 2) for k, v in t.items()},
      '| frames/s first row->done %d' % (s['frames'] / (t['done_s'] - t['first_row_s'])),
      '| workers ready', [round(w['start']['ready_s'], 2) for w in ws], 'first row', [round(w['startup']['first_row_s'], 2) for w in ws],
      'load', [round(w['startup']['load_s'], 2) for w in ws], 'before load', [round(w['startup']['before_load_s'], 2) for w in ws])" 2>&1 | tail -1)" | tee -a $R/table.txt
}
rm -rf /tmp/o4; mkdir -p /tmp/o4
(PYTHONPATH=$ROOT:/tmp/site timeout 150 python3 -m emopipe $ROOT/.rw5/h264_444_1s.mp4 -o /tmp/o4/rows.csv $O --debug > $R/h264-444.log 2>&1)
echo "h264-444 (new): rc=$? rows $(wc -l < /tmp/o4/rows.csv) decoder $(python3 -c "import json; print(json.load(open('/tmp/o4/rows.summary.json')).get('decoder'))") | $(grep -i "nvdec\|decoding on" $R/h264-444.log | head -3 | tr '\n' ' ')" | tee -a $R/table.txt
one first-new new; one first-main main
for r in 1 2 3 4 5; do one warm-main-$r main; one warm-new-$r new; done
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log PATH=$PATH:/usr/local/nvidia/bin
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
/usr/local/nvidia/bin/nvidia-cuda-mps-control -d && echo "MPS daemon started" | tee -a $R/table.txt
many archive-prime new
for r in 1 2 3; do many archive-main-$r main; many archive-new-$r new; done
echo quit | /usr/local/nvidia/bin/nvidia-cuda-mps-control
grep -h "died\|Error\|error\|malloc\|corrupt" $R/*.log | sort | uniq -c | head -20 >> $R/table.txt
cp $R/table.txt $OUT/table-d.txt
(cd $R && tar czf $OUT/s33d-logs.tar.gz *.log *.summary.json *.txt && rm -f *.log *.summary.json)
