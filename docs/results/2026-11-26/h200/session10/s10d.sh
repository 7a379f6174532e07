#!/bin/bash
# session 10, call 4 (same machine as s10c): fleet of 28 in-process 720p30 cameras, 25414de (.gpu/base, run from its
# own folder) against this tree, interleaved — s10c's 28 failed where earlier sessions' held.
set -u
cd "$(dirname "$0")/.."
C=/root/rc; R=$OUT/s10d; mkdir -p $R
HERE=$PWD
for round in 1 2; do
  for v in base head; do
    if [ $v = base ]; then D=$HERE/.gpu/base; else D=$HERE; fi
    (cd $D && PYTHONPATH=$D:/tmp/site timeout 100 python3 $D/benchmarks/fleet.py --models-dir $C/blazeface --counts 28 --seconds 15 --out $R/$v$round > $R/$v$round.txt 2>&1)
    echo "$v $round: $(grep -E '^ +28 ' $R/$v$round.txt)"
  done
done
