#!/bin/bash
# session 23: Ray 2.60.0 into /tmp/raysite from its wheel carried in two parts (.rwA on the call before, .rwB now),
# with those of its dependencies the host lacks (a newer protobuf beside the host's onnx would shadow its own).
set -u
cd "$(dirname "$0")/.."
cat /root/raycache/ray.part00 .rwB/ray.part01 > /tmp/ray-2.60.0-cp312-cp312-manylinux2014_x86_64.whl
python3 -m pip install -q --no-index --no-deps --target /tmp/raysite /tmp/ray-2.60.0-*.whl 2>&1 | tail -2
for pair in click:click filelock:filelock jsonschema:jsonschema jsonschema_specifications:jsonschema_specifications \
    referencing:referencing rpds:rpds_py attrs:attrs msgpack:msgpack google.protobuf:protobuf yaml:pyyaml; do
  mod=${pair%%:*}; whl=${pair##*:}
  python3 -c "import $mod" 2>/dev/null || { echo "installing $whl"; python3 -m pip install -q --no-index --no-deps --target /tmp/raysite .rwB/$whl-*.whl 2>&1 | tail -1; }
done
PYTHONPATH=/tmp/raysite python3 -c "import ray; print('ray', ray.__version__)"
