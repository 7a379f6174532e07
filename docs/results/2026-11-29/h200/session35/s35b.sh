#!/bin/bash
# session 35 (s35b): where PyNvVideoCodec's seeks land (seek_probe.py), the GPU tests of the seek's frames with
# seeks that landed past their target asked again further back, and the final code's `--start` on a 3-minute video
# against main's head 47e6455 (rows byte for byte).
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
C=/root/rc; mkdir -p $C
cp -r .rw4/blazeface $C/
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/pynvvideocodec*.whl .rw4/nvidia_cudnn*.whl .rw4/face_alignment*.whl 2>&1 | grep -v "already exists" | tail -2
python3 -m pip install -q --no-index --no-deps --target /tmp/iofsite /root/iof/*.whl 2>&1 | tail -2
R=$OUT/s35b; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/table.txt
PYTHONPATH=/tmp/site:/tmp/iofsite timeout 200 python3 .gpu/seek_probe.py $ROOT > $R/probe.txt 2>&1; echo "probe rc=$?" >> $R/table.txt
(PYTHONPATH=/tmp/site:/tmp/iofsite timeout 400 python3 -m pytest -q -s -p no:cacheprovider tests/test_gpu.py \
   -k "seek or nvdec" > $R/pytest.log 2>&1; echo "pytest rc=$?") | tee -a $R/table.txt
grep -h "start times reached\|passed\|failed\|Error" $R/pytest.log | tail -20 >> $R/table.txt
PYTHONPATH=/tmp/site python3 -c "
import sys; sys.path.insert(0, 'benchmarks'); import synthetic; from pathlib import Path
synthetic.random_checkpoint(Path('$C/w.pth'))
"
mkdir -p /tmp/here; cd /tmp/here
O="--weights $C/w.pth --detector blazeface_back --models-dir $C/blazeface --no-progress"
tree() { if [ "$1" = main ]; then echo $ROOT/.gpu/trees/main; else echo $ROOT; fi; }
one() {  # label tree file options
  rm -rf /tmp/o1; mkdir -p /tmp/o1; local t0=$(date +%s.%N)
  (PYTHONPATH=$(tree $2):/tmp/site timeout 150 python3 -m emopipe $3 -o /tmp/o1/rows.csv $O $4 > $R/$1.log 2>&1)
  local rc=$? wall=$(python3 -c "print(round($(date +%s.%N)-$t0,2))")
  cp /tmp/o1/rows.csv $R/$1.rows.csv 2>/dev/null
  echo "$1: rc=$rc wall=$wall s $(python3 -c "
import json; s=json.load(open('/tmp/o1/rows.summary.json')); st=s['startup']
print('first row %.2f s, frames %d in %.2f s, decoder %s' % (st['first_row_s'], s['frames'], s['seconds'], s.get('decoder')))" 2>&1 | tail -1)" | tee -a $R/table.txt
}
LONG=$ROOT/.rw5/video180s_720p_1face_h264.mp4
one prime-new new $LONG "--max-frames 30"; one prime-main main $LONG "--max-frames 30"
for r in 1 2; do
  one start170-main-$r main $LONG "--start 170 --max-frames 300"; one start170-new-$r new $LONG "--start 170 --max-frames 300"
done
one start90-main main $LONG "--start 90.49 --end 100"; one start90-new new $LONG "--start 90.49 --end 100"
for r in 1 2; do cmp $R/start170-main-$r.rows.csv $R/start170-new-$r.rows.csv && echo "rows same $r" | tee -a $R/table.txt; done
cmp $R/start90-main.rows.csv $R/start90-new.rows.csv && echo "rows same start90" | tee -a $R/table.txt
wc -l $R/*.rows.csv | tail -4 >> $R/table.txt
grep -h "Fatal\|malloc\|corrupt\|Traceback" $R/*.log | sort | uniq -c | head -20 >> $R/table.txt
cp $R/table.txt $OUT/table-b.txt; cp $R/probe.txt $OUT/probe-b.txt
(cd $R && tar czf $OUT/s35b-logs.tar.gz *.log *.txt && rm -f *.log *.rows.csv)
