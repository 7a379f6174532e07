#!/bin/bash
# A one-process archive run aborted once (malloc: unsorted double linked list corrupted): how often, which decoder.
set -u
cd "$(dirname "$0")/.."
C=/root/rc
[ -f $C/ray-2.60.0-cp312-cp312-manylinux2014_x86_64.whl ] || cat $C/ray.part00 $C/ray.part01 > $C/ray-2.60.0-cp312-cp312-manylinux2014_x86_64.whl
rm -f $C/ray.part0*
[ -d /tmp/site/ray ] || python3 -m pip install -q --no-index --no-deps --target /tmp/site $C/*.whl .rw3/*.whl 2>&1 | tail -2
export PYTHONPATH=$PWD:/tmp/site PATH=/tmp/site/bin:$PATH
M=$C/blazeface
mkdir -p $OUT/r7
[ -f /tmp/arch4/emonet_random.pth ] || timeout 150 python3 benchmarks/archive.py --out /tmp/arch4 --clip $C/clip10s_720p_h264.mp4 --clips 64 --baseline 0 --models-dir $M > $OUT/r7/setup.txt 2>&1
run() {  # $1 name, rest: options
  local name=$1; shift
  /usr/bin/time -f "%e s" timeout 120 python3 -m emopipe /tmp/arch4/clips -o /tmp/o-$name --weights /tmp/arch4/emonet_random.pth --detector blazeface_back --no-progress --models-dir $M "$@" > $OUT/r7/$name.txt 2>&1
  echo "$name rc=$? $(tail -1 $OUT/r7/$name.txt) $(grep -c '^emopipe: ok' $OUT/r7/$name.txt) ok; $(grep -i -m1 'malloc\|corrupt\|fault\|abort' $OUT/r7/$name.txt)"
}
for i in 1 2 3 4 5; do run auto$i; done
python3 -c "import json; print('decoder used:', json.load(open('/tmp/o-auto1/clip000.emotions.summary.json'))['decoder'])"
for i in 1 2 3; do run opencv$i --decoder opencv; done
cd $OUT && tar czf r7.tgz r7 && rm -rf r7
