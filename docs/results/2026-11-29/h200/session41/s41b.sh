#!/bin/bash
# session 41 (s41b): a GPU with 0.3 GiB free (another process holding the rest): where emopipe's exit 1 without
# an error line (s41a, "[FATAL] CUDA driver API error CUDA_ERROR_OUT_OF_MEMORY … PyNvVideoCodec") comes from.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
python3 -m pip install -q --no-index --no-deps --target /tmp/site .rw4/pynvvideocodec*.whl .rw4/nvidia_cudnn*.whl .rw4/face_alignment*.whl 2>&1 | grep -v "already exists" | tail -2
R=$OUT/s41b; mkdir -p $R
C=/root/rc; mkdir -p $C; cp -r .rw4/blazeface $C/
[ -f $C/w.pth ] || PYTHONPATH=/tmp/site python3 -c "
import sys; sys.path.insert(0, 'benchmarks'); import synthetic; from pathlib import Path
synthetic.random_checkpoint(Path('$C/w.pth'))"
O="--weights $C/w.pth --detector blazeface_back --models-dir $C/blazeface --no-progress"
export PYTHONPATH=$ROOT:/tmp/site
mkdir -p /tmp/o; cd /tmp/o
rm -f /tmp/held; python3 -c "
import time, torch
free, total = torch.cuda.mem_get_info()
x = torch.empty(int(free - 0.3 * 2**30), dtype=torch.uint8, device='cuda')
open('/tmp/held', 'w').write(str(round(x.numel() / 2**30, 1)))
time.sleep(100)" > $R/hog.log 2>&1 &
hog=$!
for i in $(seq 200); do [ -f /tmp/held ] && break; sleep 0.2; done
for variant in "--debug" "--decoder opencv" "--decoder nvdec"; do
  python3 -X faulthandler -m emopipe $ROOT/.rw4/clip10s_720p_h264.mp4 -o /tmp/o/x.csv $O $variant > $R/log.txt 2>&1; rc=$?
  echo "== $variant: rc=$rc"; tail -c 2500 $R/log.txt
  rm -f /tmp/o/x.*
done
python3 -X faulthandler -c "
import sys; sys.path.insert(0, '/tmp/site')
import PyNvVideoCodec as nvc
print('simple decoder ...', flush=True)
try:
    d = nvc.SimpleDecoder('$ROOT/.rw4/clip10s_720p_h264.mp4', gpu_id=0, use_device_memory=True, output_color_type=nvc.OutputColorType.RGB)
    print('made; frames', len(d.get_batch_frames(1)), flush=True)
except BaseException as e:
    print('raised', type(e).__name__, str(e)[:300], flush=True)
print('after', flush=True)
"; echo "bare SimpleDecoder rc=$?"
kill $hog; wait $hog 2>/dev/null
