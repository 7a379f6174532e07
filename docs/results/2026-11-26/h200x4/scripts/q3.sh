#!/bin/bash
# session 9, call 3: ray part 02, the assets, installs; the 256-clip archive over 1, 2 and 4 GPUs with --ray local,
# interleaved (GPUS overrides).
set -u
cd "$(dirname "$0")/.."
C=/root/rc; mkdir -p $C/assets/models $C/assets/data/faces
cp .rwC/ray.part02 $C/; cp -r .rw4/* $C/; cp -r .rw4/blazeface $C/assets/models/; cp .rw4/faces/*.png $C/assets/data/faces/
W=$C/ray-2.60.0-cp312-cp312-manylinux2014_x86_64.whl
[ -f $W ] || cat $C/ray.part00 $C/ray.part01 $C/ray.part02 > $W
python3 -m pip install -q --no-index --no-deps --target /tmp/site $W $C/*.whl 2>&1 | grep -v "already exists" | tail -2
export PATH=/tmp/site/bin:$PATH PYTHONPATH=$PWD:/tmp/site
R=$OUT/q3; mkdir -p $R
nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader | tee $R/gpu.txt
python3 -c "import torch, ray; print('torch', torch.__version__, 'cudnn', torch.backends.cudnn.version(), 'ray', ray.__version__, 'gpus', torch.cuda.device_count())" | tee -a $R/gpu.txt
nproc | tee -a $R/gpu.txt; git log --oneline -1 | tee -a $R/gpu.txt
timeout 540 python3 benchmarks/scaling.py --out /tmp/sc --clip $C/clip10s_720p_h264.mp4 --clips ${CLIPS:-256} \
  --models-dir $C/blazeface --gpus ${GPUS:-1,2,4,4,2,1} > $R/scaling.txt 2>&1
echo "scaling rc=$?"; grep "^|" $R/scaling.txt
cp /tmp/sc/scaling.json /tmp/sc/log-* $R/ 2>/dev/null
for d in /tmp/sc/run*; do cp $d/summary.json $R/$(basename $d)-summary.json 2>/dev/null; done
cd $OUT && tar czf q3.tgz q3 && rm -rf q3
