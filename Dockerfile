# syntax=docker/dockerfile:1
# emopipe on NVIDIA GPUs. Build from the repository root:   docker build -t emopipe .
# Run (NVIDIA Container Toolkit on the host):
#   docker run --rm --gpus all -v emopipe-models:/models emopipe models fetch
#   docker run --rm --gpus all -v emopipe-models:/models -v "$PWD:/data" -p 9478:9478 \
#       emopipe /data/video.mp4 -o /data/emotions.csv --metrics-port 9478 --metrics-host 0.0.0.0
# deploy/compose.yaml runs it with Prometheus and Grafana (docs/metrics.md).
#
# The image installs this package with pip, as the README does, at the versions the GPU benchmarks ran
# with (deploy/constraints.txt). PyTorch's wheels bring their CUDA and cuDNN libraries (onnxruntime-gpu
# loads the same ones), so the base is CUDA's smallest image — not a second copy of the runtime and
# cuDNN; the host's driver comes in through the container toolkit.
ARG CUDA_IMAGE=nvidia/cuda:13.0.1-base-ubuntu24.04

FROM ${CUDA_IMAGE} AS build
ENV DEBIAN_FRONTEND=noninteractive
# Ubuntu's archive keeps only the current build of a package, so exact pins would break the build.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 python3-venv \
    && rm -rf /var/lib/apt/lists/*
RUN python3 -m venv /opt/emopipe
ENV PATH=/opt/emopipe/bin:$PATH \
    PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY deploy/constraints.txt deploy/constraints.txt
COPY models/manifest.json models/manifest.json
COPY emopipe emopipe
# [nvdec]: PyNvVideoCodec, so videos are decoded by the GPU's NVDEC (--decoder auto); [cudnn]: the
# cuDNN frontend, for EmoNet's fused convolutions; [ray]: --ray workers use this image too, and ray[default]
# (Ray's dashboard and job server) so that KubeRay can run deploy/kuberay/rayjob.yaml on it: its submitter runs
# `ray job submit`, which plain `ray` refuses ("require the ray[default] installation"), as the head's job server.
# hadolint ignore=DL3013
RUN pip install --no-cache-dir -c deploy/constraints.txt ".[nvdec,cudnn,ray,video]" "ray[default]"

FROM ${CUDA_IMAGE}
ENV DEBIAN_FRONTEND=noninteractive
# libGL and GLib: OpenCV's wheel links against them. tini: PID 1 that forwards SIGTERM (docker stop)
# to emopipe, which then closes its files and exits 130. A C compiler and Python's headers: Triton
# builds its kernel launchers at first use (EmoNet's glue kernels), once, cached in the models volume —
# without them the engine falls back to slower PyTorch glue.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 libgl1 libglib2.0-0t64 tini gcc libc6-dev python3-dev \
    && rm -rf /var/lib/apt/lists/*
# Weights live in a volume (EmoNet's licence forbids redistributing them in an image):
# `emopipe models fetch` downloads and verifies them into $EMOPIPE_HOME once.
RUN useradd --create-home --uid 10001 --user-group emopipe \
    && mkdir -p /models /data \
    && chown emopipe:emopipe /models /data
COPY --from=build /opt/emopipe /opt/emopipe
# "video": the container toolkit then mounts the driver's NVDEC library (libnvcuvid) too.
# CUDA_CACHE_PATH: the driver's cache of compiled GPU code (cuDNN's runtime-compiled kernels) in the
# models volume beside emopipe's own (Triton kernels, cuDNN plans), so a new container's EmoNet is
# ready in ~6-8 s instead of 25-40 s (docs/benchmarks.md).
ENV PATH=/opt/emopipe/bin:$PATH \
    EMOPIPE_HOME=/models \
    CUDA_CACHE_PATH=/models/cache/cuda \
    PYTHONUNBUFFERED=1 \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility,video
VOLUME ["/models"]
USER 10001:10001
WORKDIR /data
# Prometheus /metrics (--metrics-port; the default port in live mode)
EXPOSE 9478
# Healthy while /metrics answers, for runs that serve it (EMOPIPE_HEALTH_URL, set by deploy/compose.yaml);
# a run without metrics has nothing to probe and counts as healthy. The probe asks OPTIONS, which the server answers
# without reading the metrics: a GET is a scrape to emopipe, which after its run's end waits for the one scrape that
# sees how it ended — the probe's GET could be that one, and Prometheus never saw the end (EmopipeTargetDown).
HEALTHCHECK --interval=30s --timeout=5s --start-period=120s --retries=3 \
    CMD ["python3", "-c", "import os, sys, urllib.request as r; u = os.environ.get('EMOPIPE_HEALTH_URL'); sys.exit(0 if not u or r.urlopen(r.Request(u, method='OPTIONS'), timeout=4).status == 200 else 1)"]
ENTRYPOINT ["tini", "--", "emopipe"]
CMD ["--help"]
