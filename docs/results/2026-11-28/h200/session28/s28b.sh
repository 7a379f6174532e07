#!/bin/bash
# session 28 (s28b): (1) reading the cuDNN plan folder back in a fresh process, one after the other and on eight
# threads (s28_plans.py; the folder filled by a warm command first); (2) the GPU tests (tests/test_gpu.py,
# tests/test_detect.py) twice, and the NVDEC tests of test_gpu.py ten times, each in a process of its own: does the
# segmentation fault of s27h (test_nvdec_decodes_what_opencv_decodes) come back?
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
C=/root/rc; mkdir -p $C/assets/models $C/assets/data/faces
cp -r .rw4/blazeface $C/; cp -r .rw4/blazeface $C/assets/models/; cp .rw4/faces/*.png $C/assets/data/faces/
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/*.whl 2>&1 | grep -v "already exists" | tail -2
R=$OUT/s28b; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/table.txt
[ -f $C/w.pth ] || PYTHONPATH=/tmp/site python3 -c "
import sys; sys.path.insert(0, 'benchmarks'); import synthetic; from pathlib import Path
synthetic.random_checkpoint(Path('$C/w.pth'))"
mkdir -p /tmp/here; cd /tmp/here
O="--weights $C/w.pth --detector blazeface_back --models-dir $C/blazeface --no-progress"
rm -rf /tmp/o1; mkdir -p /tmp/o1
PYTHONPATH=$ROOT:/tmp/site timeout 150 python3 -m emopipe $ROOT/.rw4/clip10s_720p_h264.mp4 -o /tmp/o1/rows.csv $O > $R/prime.log 2>&1
echo "prime rc=$? $(ls $C/blazeface/cache/cudnn 2>/dev/null | wc -l) entries in the plan folder" | tee -a $R/table.txt
echo "== (1) the plan folder read back in a fresh process" | tee -a $R/table.txt
for m in seq threads seq threads; do
  PYTHONPATH=$ROOT:/tmp/site timeout 120 python3 $ROOT/.gpu/s28_plans.py $C/blazeface/cache/cudnn $m 2> $R/plans-$m.log | tail -1 | tee -a $R/table.txt
done
echo "== (2) GPU tests" | tee -a $R/table.txt
cd $ROOT
for k in 1 2; do
  PYTHONPATH=$ROOT:/tmp/site EMOPIPE_TEST_ASSETS=$C/assets timeout 200 python3 -m pytest -q -p no:cacheprovider -rs \
    tests/test_gpu.py tests/test_detect.py > $R/pytest-$k.txt 2>&1
  echo "full $k rc=$?: $(tail -1 $R/pytest-$k.txt)" | tee -a $R/table.txt
  grep -E "FAILED|Fatal|Segmentation" $R/pytest-$k.txt | head -5 | tee -a $R/table.txt
done
for k in $(seq 1 10); do
  PYTHONPATH=$ROOT:/tmp/site EMOPIPE_TEST_ASSETS=$C/assets timeout 60 python3 -m pytest -q -p no:cacheprovider \
    tests/test_gpu.py -k nvdec > $R/nvdec-$k.txt 2>&1
  echo "nvdec $k rc=$?: $(tail -1 $R/nvdec-$k.txt)" | tee -a $R/table.txt
done
cp $R/table.txt $OUT/table-b.txt
(cd $R && tar czf $OUT/s28b-logs.tar.gz *.log *.txt)
rm -rf $R
