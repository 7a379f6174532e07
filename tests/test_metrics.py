"""emopipe.metrics: values read back from a fresh registry per test, exposure helpers, GPU timer logic."""

from __future__ import annotations

import math
import random
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import ClassVar

import pytest
import torch
from prometheus_client import CollectorRegistry, generate_latest

import emopipe
from emopipe.errors import OutputError, UsageError
from emopipe.io.uris import redact_uri
from emopipe.observe import exposition as x
from emopipe.observe import metrics as m
from emopipe.observe.exposition import MetricsExporter
from emopipe.observe.metrics import LATENCY_BUCKETS, PipelineMetrics
from emopipe.pipeline.batcher import StaticBatcher
from emopipe.pipeline.timing import GpuTimer


@pytest.fixture
def registry() -> CollectorRegistry:
    return CollectorRegistry()


@pytest.fixture
def pm(registry) -> PipelineMetrics:
    return PipelineMetrics(registry, info={"backend": "test"})


def value(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(name, labels)


# -- names, units, buckets ---------------------------------------------------------------------

def test_every_metric_is_in_the_namespace_with_base_units(registry, pm):
    pm.source_label("rtsp://camera/x")  # the per-source series exist once a run names its sources
    families = list(registry.collect())
    assert len(families) >= 15
    for family in families:
        assert family.name.startswith("emopipe_"), family.name
        if family.type == "counter":
            assert all(s.name.startswith(family.name) for s in family.samples)
            assert any(s.name == f"{family.name}_total" for s in family.samples), family.name
        if family.type in ("histogram", "gauge") and ("latency" in family.name or family.name.endswith("_seconds")):
            assert family.name.endswith("_seconds"), family.name
    histograms = [f for f in families if f.type == "histogram"]
    assert {f.name for f in histograms} == {"emopipe_frame_latency_seconds", "emopipe_inference_batch_seconds",
                                            "emopipe_stage_seconds", "emopipe_capture_latency_seconds",
                                            "emopipe_frame_queue_seconds", "emopipe_frame_processing_seconds",
                                            "emopipe_source_frame_latency_seconds"}


def test_buckets_cover_half_a_millisecond_to_ten_minutes(registry, pm):
    assert LATENCY_BUCKETS[0] == 0.0005 and LATENCY_BUCKETS[-1] == 600.0  # CPU runs' minutes too
    assert list(LATENCY_BUCKETS) == sorted(set(LATENCY_BUCKETS))
    pm.observe_stage("decode", 0.0004)
    pm.observe_stage("decode", 9.0)
    assert value(registry, "emopipe_stage_seconds_bucket", stage="decode", le="0.0005") == 1
    assert value(registry, "emopipe_stage_seconds_bucket", stage="decode", le="5.0") == 1
    assert value(registry, "emopipe_stage_seconds_bucket", stage="decode", le="10.0") == 2
    # a CPU run's frame that waited 25.8 s is told apart from 10 s (it was shown as 10 s before)
    pm.observe_frame(0.1, 1)
    pm.observe_frame(25.8, 1)
    assert value(registry, "emopipe_frame_latency_seconds_bucket", phase="steady", le="20.0") == 0
    assert value(registry, "emopipe_frame_latency_seconds_bucket", phase="steady", le="30.0") == 1


def test_series_exist_at_zero_before_anything_happens(registry, pm):
    # rate()/increase() only see an event if the series was scraped before it: they must exist from the start.
    for phase in m.PHASES:
        assert value(registry, "emopipe_frame_latency_seconds_count", phase=phase) == 0
    for stage in m.STAGES:
        assert value(registry, "emopipe_stage_seconds_count", stage=stage) == 0
    for kind in m.ERROR_KINDS:
        assert value(registry, "emopipe_errors_total", kind=kind) == 0
    for name in ("emopipe_frames_total", "emopipe_faces_total", "emopipe_frames_detected_total",
                 "emopipe_frames_dropped_total",
                 "emopipe_stream_reconnects_total", "emopipe_batch_slots_total", "emopipe_batch_faces_total",
                 "emopipe_capture_latency_seconds_count"):
        assert value(registry, name) == 0, name
    assert math.isnan(value(registry, "emopipe_first_frame_latency_seconds"))
    assert math.isnan(value(registry, "emopipe_batch_fill_ratio"))


def test_queues_and_batch_sizes_named_up_front_are_exposed_at_zero(registry):
    PipelineMetrics(registry, info={}, queues=("frames", "results"), batch_sizes=(32,))
    assert value(registry, "emopipe_queue_depth", queue="frames") == 0
    assert value(registry, "emopipe_queue_depth", queue="results") == 0
    for phase in m.PHASES:
        assert value(registry, "emopipe_inference_batch_seconds_count", batch_size="32", phase=phase) == 0


# -- first frame vs steady state -----------------------------------------------------------------

def test_first_frame_is_phase_first_and_the_rest_steady(registry, pm):
    pm.observe_frame(0.9, faces=2)
    for latency in (0.02, 0.03, 0.01):
        pm.observe_frame(latency, faces=1)
    assert value(registry, "emopipe_frame_latency_seconds_count", phase="first") == 1
    assert value(registry, "emopipe_frame_latency_seconds_sum", phase="first") == pytest.approx(0.9)
    assert value(registry, "emopipe_frame_latency_seconds_count", phase="steady") == 3
    assert value(registry, "emopipe_frame_latency_seconds_sum", phase="steady") == pytest.approx(0.06)
    assert value(registry, "emopipe_first_frame_latency_seconds") == pytest.approx(0.9)
    assert value(registry, "emopipe_frames_total") == 4
    assert value(registry, "emopipe_faces_total") == 5
    # the slow first frame stays out of the steady histogram: all steady frames are under 0.75 s
    assert value(registry, "emopipe_frame_latency_seconds_bucket", phase="steady", le="0.75") == 3
    assert value(registry, "emopipe_frame_latency_seconds_bucket", phase="first", le="0.75") == 0


def test_frames_between_key_frames_are_not_counted_as_detected(registry, pm):
    for detected in (True, False, False, True, False):
        pm.observe_frame(0.01, faces=1, detected=detected)
    assert value(registry, "emopipe_frames_total") == 5
    assert value(registry, "emopipe_frames_detected_total") == 2


def test_a_frame_without_faces_counts_as_a_frame(registry, pm):
    pm.observe_frame(0.1, faces=0)
    assert value(registry, "emopipe_frames_total") == 1
    assert value(registry, "emopipe_faces_total") == 0


def test_inference_batches_first_per_static_size(registry, pm):
    pm.observe_batch(8, 8, 1.2)
    pm.observe_batch(8, 5, 0.010)
    pm.observe_batch(4, 4, 0.9)  # a new shape: cuDNN would autotune again, so it is "first" too
    pm.observe_batch(8, 8, 0.011)
    assert value(registry, "emopipe_inference_batch_seconds_count", batch_size="8", phase="first") == 1
    assert value(registry, "emopipe_inference_batch_seconds_sum", batch_size="8", phase="first") == pytest.approx(1.2)
    assert value(registry, "emopipe_inference_batch_seconds_count", batch_size="8", phase="steady") == 2
    assert value(registry, "emopipe_inference_batch_seconds_count", batch_size="4", phase="first") == 1
    # the steady series of a size appears (at zero) with its first batch, before its own first observation
    assert value(registry, "emopipe_inference_batch_seconds_count", batch_size="4", phase="steady") == 0
    assert value(registry, "emopipe_inference_batch_seconds_count", batch_size="2", phase="steady") is None
    # every batch is one call of the infer stage
    assert value(registry, "emopipe_stage_seconds_count", stage="infer") == 4
    assert value(registry, "emopipe_stage_seconds_sum", stage="infer") == pytest.approx(1.2 + 0.010 + 0.9 + 0.011)


def test_batch_fill_ratio_is_real_faces_over_slots(registry, pm):
    pm.observe_batch(8, 8, 0.01)
    assert value(registry, "emopipe_batch_fill_ratio") == 1.0
    pm.observe_batch(8, 2, 0.01)
    assert value(registry, "emopipe_batch_fill_ratio") == pytest.approx(10 / 16)
    assert value(registry, "emopipe_batch_slots_total") == 16
    assert value(registry, "emopipe_batch_faces_total") == 10


def test_startup_is_split_into_load_and_warmup(registry, pm):
    assert value(registry, "emopipe_startup_seconds", step="load") is None  # not until observed
    pm.observe_startup(load_s=1.5, warmup_s=4.1)
    assert value(registry, "emopipe_startup_seconds", step="load") == 1.5
    assert value(registry, "emopipe_startup_seconds", step="warmup") == 4.1


def test_counters_and_gauges_of_live_runs(registry, pm):
    pm.frames_dropped()
    pm.frames_dropped(3)
    pm.error("decode")
    pm.error("decode")
    pm.error("network")  # kinds outside ERROR_KINDS are still counted
    pm.set_queue_depth("frames", 7)
    pm.set_queue_depth("frames", 2)
    pm.reconnect()
    pm.observe_capture_latency(0.12)
    assert value(registry, "emopipe_frames_dropped_total") == 4
    assert value(registry, "emopipe_errors_total", kind="decode") == 2
    assert value(registry, "emopipe_errors_total", kind="network") == 1
    assert value(registry, "emopipe_errors_total", kind="write") == 0
    assert value(registry, "emopipe_queue_depth", queue="frames") == 2
    assert value(registry, "emopipe_stream_reconnects_total") == 1
    assert value(registry, "emopipe_capture_latency_seconds_count") == 1
    assert value(registry, "emopipe_capture_latency_seconds_sum") == pytest.approx(0.12)


@pytest.mark.parametrize(("call", "message"), [
    (lambda p: p.observe_stage("resize", 0.1), "stage must be one of"),
    (lambda p: p.observe_stage("infer", 0.1), "observe_batch"),
    (lambda p: p.observe_stage("decode", -0.1), "decode time must be ≥ 0"),
    (lambda p: p.observe_frame(math.nan, 1), "frame latency must be ≥ 0"),
    (lambda p: p.observe_frame(0.1, -1), "≥ 0 faces"),
    (lambda p: p.observe_batch(0, 0, 0.1), "size ≥ 1"),
    (lambda p: p.observe_batch(8, 9, 0.1), "real=9"),
    (lambda p: p.observe_startup(-1, 0), "load time"),
    (lambda p: p.frames_dropped(-1), "dropped frames"),
    (lambda p: p.error(""), "non-empty"),
])
def test_bad_observations_raise_precise_errors(pm, call, message):
    with pytest.raises(ValueError, match=message):
        call(pm)


# -- stage counts in a pipeline-shaped loop, at scale --------------------------------------------

def test_stage_counts_match_the_frames_processed(registry, pm):
    """A model-free run of the pipeline's loop: frames with 0–3 faces, crops packed by the real StaticBatcher."""
    rng = random.Random(7)
    batch_size, frames = 8, 600
    faces_per_frame = [rng.choice((0, 1, 1, 2, 3)) for _ in range(frames)]
    batcher: StaticBatcher[int] = StaticBatcher(batch_size)
    batches = []
    for index, faces in enumerate(faces_per_frame):
        pm.observe_stage("decode", 0.001)
        pm.observe_stage("detect", 0.004)
        if faces:
            pm.observe_stage("crop", 0.0005)
        batches += batcher.add(torch.zeros(faces, 3, 4, 4), index)
        pm.observe_stage("write", 0.0002)
        pm.observe_frame(0.5 if index == 0 else 0.03, faces)
    batches += batcher.flush()
    for batch in batches:
        pm.observe_batch(batch.size, batch.real, 0.011)

    faces_total = sum(faces_per_frame)
    assert value(registry, "emopipe_frames_total") == frames
    for stage in ("decode", "detect", "write"):
        assert value(registry, "emopipe_stage_seconds_count", stage=stage) == frames
    assert value(registry, "emopipe_stage_seconds_count", stage="crop") == sum(1 for f in faces_per_frame if f)
    assert value(registry, "emopipe_stage_seconds_count", stage="infer") == len(batches) == math.ceil(
        faces_total / batch_size)
    assert value(registry, "emopipe_faces_total") == faces_total == value(registry, "emopipe_batch_faces_total")
    assert value(registry, "emopipe_batch_slots_total") == len(batches) * batch_size
    assert value(registry, "emopipe_batch_fill_ratio") == pytest.approx(faces_total / (len(batches) * batch_size))
    assert value(registry, "emopipe_frame_latency_seconds_count", phase="first") == 1
    assert value(registry, "emopipe_frame_latency_seconds_count", phase="steady") == frames - 1
    assert value(registry, "emopipe_stage_seconds_sum", stage="decode") == pytest.approx(frames * 0.001)


def test_time_stage_times_successful_blocks_and_synchronises(registry, pm):
    synced = []
    with pm.time_stage("detect", synchronize=lambda: synced.append(True)):
        time.sleep(0.02)
    with pytest.raises(RuntimeError), pm.time_stage("detect"):
        raise RuntimeError("failed stage")
    assert synced == [True]
    assert value(registry, "emopipe_stage_seconds_count", stage="detect") == 1  # the failed call is not timed
    assert value(registry, "emopipe_stage_seconds_sum", stage="detect") >= 0.02  # the block, however slow the machine


# -- threads --------------------------------------------------------------------------------------

def test_observations_from_many_threads_are_all_counted_and_one_frame_is_first(registry, pm):
    threads, per_thread = 8, 400
    start = threading.Barrier(threads)

    def work(seed: int) -> None:
        rng = random.Random(seed)
        start.wait()
        for _ in range(per_thread):
            pm.observe_frame(rng.uniform(0.01, 0.05), faces=2)
            pm.observe_stage("decode", 0.001)
            pm.observe_batch(4, rng.randint(1, 4), 0.01)
            pm.set_queue_depth("frames", rng.randint(0, 8))

    workers = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    n = threads * per_thread
    assert value(registry, "emopipe_frames_total") == n
    assert value(registry, "emopipe_faces_total") == 2 * n
    assert value(registry, "emopipe_frame_latency_seconds_count", phase="first") == 1
    assert value(registry, "emopipe_frame_latency_seconds_count", phase="steady") == n - 1
    assert value(registry, "emopipe_stage_seconds_count", stage="decode") == n
    assert value(registry, "emopipe_inference_batch_seconds_count", batch_size="4", phase="first") == 1
    assert value(registry, "emopipe_inference_batch_seconds_count", batch_size="4", phase="steady") == n - 1
    assert value(registry, "emopipe_batch_slots_total") == 4 * n
    assert value(registry, "emopipe_batch_fill_ratio") == pytest.approx(
        value(registry, "emopipe_batch_faces_total") / (4 * n))
    assert value(registry, "emopipe_first_frame_latency_seconds") == pytest.approx(
        value(registry, "emopipe_frame_latency_seconds_sum", phase="first"))


# -- build info -----------------------------------------------------------------------------------

def build_labels(registry: CollectorRegistry) -> dict[str, str]:
    (family,) = [f for f in registry.collect() if f.name == "emopipe_build"]
    (sample,) = family.samples
    assert sample.name == "emopipe_build_info" and sample.value == 1
    return dict(sample.labels)


def test_build_info_merges_versions_and_the_engine_info(registry):
    from emopipe.engines.base import EngineOptions
    from emopipe.engines.torch_engine import TorchEngine
    from emopipe.model.emonet import EmoNet

    engine = TorchEngine(EmoNet(8), EngineOptions(device="cpu", batch_size=4, warmup=False))
    pm = PipelineMetrics(registry, info=m.build_info(engine.info(), model="emonet_8"))
    labels = build_labels(registry)
    assert labels["version"] == emopipe.__version__
    assert labels["torch_version"] == torch.__version__
    assert labels["cuda_version"] == (torch.version.cuda or "none")
    if torch.backends.cudnn.is_available():
        assert labels["cudnn_version"] == str(torch.backends.cudnn.version())
    else:
        assert labels["cudnn_version"] == "none"
    assert labels["gpu"] == "none"  # a CPU engine
    assert labels["model"] == "emonet_8"
    assert (labels["backend"], labels["device"], labels["precision"]) == ("torch", "cpu", "fp32")
    assert labels["cudnn_benchmark"] == "true" and labels["batch_size"] == "4"
    assert set(m.BUILD_INFO_LABELS) <= set(labels)
    # set_info replaces the labels, filling the standard ones it lacks and fixing odd keys
    pm.set_info({"backend": "onnxruntime", "ort.version": "1.31.1", "9lives": "x"})
    labels = build_labels(registry)
    assert labels["backend"] == "onnxruntime" and labels["ort_version"] == "1.31.1" and labels["key_9lives"] == "x"
    assert labels["precision"] == "unknown"


def test_default_info_is_gathered_without_an_engine(registry):
    PipelineMetrics(registry)
    labels = build_labels(registry)
    assert labels["torch_version"] == torch.__version__ and labels["backend"] == "unknown"


# -- GPU timing with events, read without waiting -------------------------------------------------

class FakeEvent:
    """A CUDA event stand-in: 'recorded' at a GPU time that the fake GPU reaches when told."""

    gpu_now = 0.0  # GPU time at which the latest launched work will be done
    reached = 0.0  # GPU time the fake GPU has got to
    log: ClassVar[list[FakeEvent]] = []

    def __init__(self) -> None:
        self.at: float | None = None
        self.synchronized = False
        FakeEvent.log.append(self)

    def record(self) -> None:
        FakeEvent.gpu_now += 0.005  # the launched work will finish 5 ms after the previous event
        self.at = FakeEvent.gpu_now

    def query(self) -> bool:
        return self.at is not None and self.at <= FakeEvent.reached

    def synchronize(self) -> None:
        self.synchronized = True
        FakeEvent.reached = max(FakeEvent.reached, self.at or 0.0)

    def elapsed_time(self, end: FakeEvent) -> float:
        return (end.at - self.at) * 1000  # milliseconds, as torch.cuda.Event reports


def test_gpu_timer_records_only_what_the_gpu_has_finished_and_never_waits(registry, pm):
    FakeEvent.gpu_now, FakeEvent.reached, FakeEvent.log = 0.0, 0.0, []
    timer = GpuTimer(event_factory=FakeEvent)
    for _ in range(3):
        with timer.measure(lambda s: pm.observe_stage("crop", s)):
            pass
    assert timer.pending == 3 and value(registry, "emopipe_stage_seconds_count", stage="crop") == 0
    FakeEvent.reached = FakeEvent.log[3].at  # the GPU got past the second measurement's end
    assert timer.poll() == 2
    assert value(registry, "emopipe_stage_seconds_count", stage="crop") == 2
    assert value(registry, "emopipe_stage_seconds_sum", stage="crop") == pytest.approx(0.010)
    assert not any(e.synchronized for e in FakeEvent.log)  # poll never waited
    assert timer.drain() == 1 and FakeEvent.log[-1].synchronized
    assert value(registry, "emopipe_stage_seconds_count", stage="crop") == 3 and timer.pending == 0


def test_gpu_timer_records_read_events_again_instead_of_creating_new_ones(registry, pm):
    """A CUDA event is created on its first record: the GPU thread reuses the ones already read."""
    FakeEvent.gpu_now, FakeEvent.reached, FakeEvent.log = 0.0, 0.0, []
    timer = GpuTimer(event_factory=FakeEvent)
    for _ in range(50):
        with timer.measure(lambda s: pm.observe_stage("crop", s)):
            pass
        FakeEvent.reached = FakeEvent.gpu_now  # the GPU keeps up
    assert timer.drain() == 1 and timer.pending == 0
    assert value(registry, "emopipe_stage_seconds_count", stage="crop") == 50
    assert value(registry, "emopipe_stage_seconds_sum", stage="crop") == pytest.approx(50 * 0.005)
    assert len(FakeEvent.log) == 4  # two measurements' events in turn


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_gpu_timer_with_real_cuda_events(registry, pm):
    timer = GpuTimer()
    x = torch.randn(2048, 2048, device="cuda")
    with timer.measure(lambda s: pm.observe_stage("crop", s)):
        x @ x
    timer.drain()
    assert value(registry, "emopipe_stage_seconds_count", stage="crop") == 1
    assert value(registry, "emopipe_stage_seconds_sum", stage="crop") > 0


# -- exposure ---------------------------------------------------------------------------------------

def fetch(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as response:
        return response.read().decode()


def test_serve_metrics_serves_the_registry_and_closes(registry, pm):
    pm.observe_frame(0.25, faces=3)
    server = x.serve_metrics(registry, 0, "127.0.0.1")
    try:
        assert server.port > 0 and server.url == f"http://127.0.0.1:{server.port}/metrics"
        text = fetch(server.url)
        assert "emopipe_frames_total 1.0" in text and 'emopipe_frame_latency_seconds_count{phase="first"} 1.0' in text
    finally:
        server.close()
    with pytest.raises(urllib.error.URLError):
        fetch(server.url)


def test_leaving_the_metrics_server_on_an_error_raises_that_error_and_closes(registry):
    with pytest.raises(RuntimeError, match="the caller's"), x.serve_metrics(registry, 0, "127.0.0.1") as server:
        url = server.url
        raise RuntimeError("the caller's error")  # (once hidden by an AttributeError of the server's exit)
    with pytest.raises(urllib.error.URLError):
        fetch(url)


def test_serve_metrics_on_a_busy_port_is_a_usage_error(registry):
    with x.serve_metrics(registry, 0, "127.0.0.1") as first, \
            pytest.raises(UsageError, match=f"cannot serve metrics on 127.0.0.1:{first.port}.*--metrics-port"):
        x.serve_metrics(registry, first.port, "127.0.0.1")
    with pytest.raises(UsageError, match=r"0\.\.65535"):
        x.serve_metrics(registry, 70000)


def test_linger_returns_when_stopped():
    stop = threading.Event()
    began = time.monotonic()
    threading.Timer(0.1, stop.set).start()
    took = x.linger(30, stop)
    # it waited for the stop (set ≥ 0.1 s after began), and returned on it, not after its 30 s
    assert stop.is_set() and time.monotonic() - began >= 0.1 and 0 < took < 29


def _catches(pid: int, signum: int) -> bool:
    """Whether process ``pid`` has a handler installed for ``signum`` (Linux: SigCgt in /proc/PID/status)."""
    status = Path(f"/proc/{pid}/status").read_text()
    caught = int(next(line for line in status.splitlines() if line.startswith("SigCgt:")).split()[1], 16)
    return bool(caught & (1 << (signum - 1)))


def test_linger_ends_cleanly_on_sigterm(tmp_path):
    code = ("import sys; from emopipe.observe.exposition import linger; print('lingering', flush=True); "
            "took = linger(60); print(f'done {took:.1f}', flush=True)")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                            cwd=Path(__file__).resolve().parents[1])
    try:
        assert proc.stdout.readline().strip() == "lingering"
        deadline = time.monotonic() + 60  # (bounds a hang only) until linger's SIGTERM handler is in place
        while not _catches(proc.pid, signal.SIGTERM) and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.01)
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=10)
    finally:
        proc.kill()
    assert proc.returncode == 0 and out.startswith("done")


@pytest.mark.parametrize(("url", "full"), [
    ("pushgateway:9091", "http://pushgateway:9091"),
    ("https://pg.example/prefix", "https://pg.example/prefix"),
])
def test_pushgateway_urls(url, full):
    assert x.check_pushgateway_url(url) == full


@pytest.mark.parametrize("url", ["ftp://pg:21", "http://", "://x", "http://127.0.0.1:abc", "http://[::1",
                                 "pg:99999", "http://pg:9091/a b", "http://pg:9091/\n"])
def test_bad_pushgateway_urls_are_usage_errors(url):
    with pytest.raises(UsageError, match="--pushgateway must be an http"):
        x.check_pushgateway_url(url)


def test_push_to_nothing_is_an_output_error(registry, pm):
    with x.serve_metrics(registry, 0, "127.0.0.1") as server:
        port = server.port  # a port that was free a moment ago and is closed again below
    with pytest.raises(OutputError, match=f"cannot push metrics to the Pushgateway at http://127.0.0.1:{port}"):
        x.push_metrics(registry, f"127.0.0.1:{port}", timeout_s=2)


@pytest.mark.parametrize(("source", "label"), [
    ("rtsp://admin:secret@cam.local:554/live?token=abc", "rtsp://admin:***@cam.local:554/live?token=***"),
    ("http://[::1]:8080/x", "http://[::1]:8080/x"),  # IPv6 literals keep their brackets
    ("http://cam/stream.mjpg", "http://cam/stream.mjpg"),
    ("/data/videos/clip.mp4", "/data/videos/clip.mp4"),
    ("0", "0"),
])
def test_sources_lose_their_credentials_in_labels(source, label):
    assert redact_uri(source) == label


def test_a_hosts_runs_share_one_pushgateway_group_whatever_their_source():
    # a group per source grew the gateway without bound for a user with thousands of files
    assert x.grouping_key() == {"instance": socket.gethostname()}


def test_the_run_state_says_starting_running_and_how_it_ended(registry):
    pm = PipelineMetrics(registry, mode="live")
    states = {state: value(registry, "emopipe_run_state", mode="live", state=state)
              for state in ("starting", "running", "finished", "failed", "interrupted")}
    assert states == {"starting": 1, "running": 0, "finished": 0, "failed": 0, "interrupted": 0}
    pm.set_run_state("running")
    assert value(registry, "emopipe_run_state", mode="live", state="running") == 1
    assert value(registry, "emopipe_run_state", mode="live", state="starting") == 0
    with pytest.raises(ValueError, match="a run state is one of"):
        pm.set_run_state("done")
    with pytest.raises(ValueError, match="mode must be one of file, live"):
        PipelineMetrics(CollectorRegistry(), mode="batch")


def generate_latest_of(collector) -> list[str]:
    registry = CollectorRegistry()
    registry.register(collector)
    return [generate_latest(registry).decode()]


@pytest.mark.parametrize(("error", "state"), [(RuntimeError, "failed"), (KeyboardInterrupt, "interrupted")])
def test_leaving_the_exporter_on_an_error_records_how_the_run_ended(registry, error, state):
    pm = PipelineMetrics(registry)
    pm.set_run_state("running")
    with pytest.raises(error), MetricsExporter(registry, run_state=pm.set_run_state):
        raise error("a stage failed")
    assert pm.state == state
    assert value(registry, "emopipe_run_state", mode="file", state=state) == 1


def test_pushed_values_leave_out_created_series_and_queue_depths(registry):
    pm = PipelineMetrics(registry, queues=("frames",))
    pm.observe_frame(0.1, 2)
    pushed = "".join(generate_latest_of(x.FinalValues(registry)))
    assert "emopipe_frames_total 1.0" in pushed and "emopipe_faces_total 2.0" in pushed
    assert 'emopipe_run_state{' in pushed
    assert "_created" not in pushed and "emopipe_queue_depth" not in pushed
    assert "_created" in generate_latest(registry).decode()  # the scraped registry itself keeps them


def test_a_frames_latency_is_split_into_queueing_and_processing(registry, pm):
    pm.observe_frame_split(4.0, 0.02)  # a file run's frame: waited behind the reader, processed in 20 ms
    assert value(registry, "emopipe_frame_queue_seconds_bucket", le="2.5") == 0
    assert value(registry, "emopipe_frame_queue_seconds_bucket", le="5.0") == 1
    assert value(registry, "emopipe_frame_processing_seconds_bucket", le="0.02") == 1
    with pytest.raises(ValueError, match="frame queueing time must be ≥ 0 s"):
        pm.observe_frame_split(-1.0, 0.1)


def test_an_unreachable_pushgateway_after_a_complete_run_is_a_warning(registry, caplog):
    with x.serve_metrics(registry, 0, "127.0.0.1") as server:
        port = server.port  # closed again below: nothing listens there
    exporter = MetricsExporter(registry, pushgateway=f"127.0.0.1:{port}")
    exporter.finish()  # no exception: the run's results are fine
    assert f"cannot push metrics to the Pushgateway at http://127.0.0.1:{port}" in caplog.text
    assert "the results are complete" in caplog.text


def test_a_pushgateway_that_does_not_answer_in_http_is_a_warning_too(registry, caplog):
    listener = socket.create_server(("127.0.0.1", 0))

    def answer_nonsense() -> None:
        connection, _ = listener.accept()
        with connection:
            connection.recv(65536)
            connection.sendall(b"nonsense\r\n\r\n")  # http.client: BadStatusLine, not an OSError

    thread = threading.Thread(target=answer_nonsense)
    thread.start()
    with listener:
        port = listener.getsockname()[1]
        MetricsExporter(registry, pushgateway=f"127.0.0.1:{port}").finish()  # no exception: a warning
        thread.join()
    assert f"cannot push metrics to the Pushgateway at http://127.0.0.1:{port}" in caplog.text
    assert "the results are complete" in caplog.text


def test_exporter_validates_its_flags_before_the_run(registry):
    with pytest.raises(UsageError, match="--metrics-linger needs --metrics-port"):
        MetricsExporter(registry, linger_s=10)
    with pytest.raises(UsageError, match="≥ 0 seconds"):
        MetricsExporter(registry, port=0, linger_s=-1)
    with pytest.raises(UsageError, match="--pushgateway"):
        MetricsExporter(registry, pushgateway="ftp://x")


def test_exporter_serves_during_the_run_and_lingers_after(registry, pm):
    with MetricsExporter(registry, port=0, host="127.0.0.1", linger_s=0.3) as exporter:
        url = exporter.server.url
        pm.observe_frame(0.1, 1)
        assert "emopipe_frames_total 1.0" in fetch(url)
        t0 = time.monotonic()
        exporter.finish()
        assert time.monotonic() - t0 >= 0.3
    assert exporter.server is None
    with pytest.raises(urllib.error.URLError):
        fetch(url)


@pytest.mark.parametrize(("error", "state", "lingers"), [(RuntimeError, "failed", True),
                                                         (KeyboardInterrupt, "interrupted", False)])
def test_a_run_that_fails_is_served_as_failed_while_it_lingers_and_an_interrupted_one_exits_now(
        registry, monkeypatch, error, state, lingers):
    pm = PipelineMetrics(registry)
    scraped: list[str] = []  # what a scrape during the linger sees
    monkeypatch.setattr(x, "linger", lambda seconds, stop=None: scraped.append(fetch(server.url)) or 0.0)
    with pytest.raises(error), MetricsExporter(registry, port=0, host="127.0.0.1", linger_s=600,
                                               run_state=pm.set_run_state) as exporter:
        server = exporter.server
        pm.set_run_state("running")
        raise error("a stage failed")
    assert pm.state == state
    if lingers:  # Prometheus' last scrape says failed (EmopipeRunFailed), not running (EmopipeTargetDown)
        (text,) = scraped
        assert f'emopipe_run_state{{mode="file",state="{state}"}} 1.0' in text
        assert 'emopipe_run_state{mode="file",state="running"} 0.0' in text
    else:  # Ctrl-C / SIGTERM: stop now
        assert scraped == []


@pytest.mark.parametrize(("state", "linger_after"), [("interrupted", False), ("finished", True), ("failed", True)])
def test_a_scraped_run_ends_only_once_a_scrape_has_seen_how_it_ended(registry, monkeypatch, state, linger_after):
    # (its last scrape said running: every scraped live run's end — even a SIGTERM or --end as asked — fired
    # EmopipeTargetDown, "crashed or killed", and a failed run's state and errors were never seen; QA pass, session 39)
    monkeypatch.setattr(x, "FINAL_SCRAPE_FLOOR_S", 600.0)  # (only the scrape ends the wait here, whatever the load)
    monkeypatch.setattr(x, "FINAL_SCRAPE_CAP_S", 600.0)
    pm = PipelineMetrics(registry, mode="live")
    exporter = MetricsExporter(registry, port=0, host="127.0.0.1", run_state=pm.set_run_state)
    exporter.start()
    pm.set_run_state("running")
    for _ in range(2):  # Prometheus scrapes the run (a scraper comes back: once is a look, no reason to wait)
        assert 'state="running"} 1.0' in fetch(exporter.server.url)
    ending = threading.Thread(target=exporter.finish, kwargs={"linger_after": linger_after, "state": state})
    ending.start()
    ending.join(0.5)
    assert ending.is_alive()  # waiting for the scrape that sees how it ended
    assert f'emopipe_run_state{{mode="live",state="{state}"}} 1.0' in fetch(exporter.server.url)
    ending.join(60)
    assert not ending.is_alive()
    exporter.close()


def test_a_run_nothing_scrapes_ends_at_once_and_a_push_is_no_scrape(registry, monkeypatch):
    import http.server

    monkeypatch.setattr(x, "FINAL_SCRAPE_FLOOR_S", 600.0)
    monkeypatch.setattr(x, "FINAL_SCRAPE_CAP_S", 600.0)

    class Gateway(http.server.BaseHTTPRequestHandler):
        def do_PUT(self):  # (the Pushgateway's method)
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args):
            pass

    gateway = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Gateway)
    threading.Thread(target=gateway.serve_forever, daemon=True).start()
    try:
        pm = PipelineMetrics(registry, mode="live")
        for scrapes in (0, 1, 2):
            exporter = MetricsExporter(registry, port=0, host="127.0.0.1", run_state=pm.set_run_state,
                                       pushgateway=f"http://127.0.0.1:{gateway.server_port}")
            exporter.start()
            for _ in range(scrapes):
                fetch(exporter.server.url)
            scraped_before = scrapes == 2
            ending = threading.Thread(target=exporter.finish, kwargs={"linger_after": False, "state": "interrupted"})
            ending.start()
            ending.join(0.5 if scraped_before else 60)
            # never scraped, or looked at once: no wait; scraped, and pushed at the end: the push did not count as
            # the final scrape
            assert ending.is_alive() == scraped_before
            if scraped_before:
                fetch(exporter.server.url)
                ending.join(60)
                assert not ending.is_alive()
            exporter.close()
    finally:
        gateway.shutdown()
        gateway.server_close()


def test_a_file_run_that_fails_pushes_failed_its_source_not_up_and_its_error_as_the_models(
        tmp_path, checkpoints, models_home, monkeypatch):
    from emopipe.errors import WeightsError
    from tests.support.synth import moving_face_video

    state = torch.load(checkpoints[8], map_location="cpu")
    state["module.emo_fc_2.3.bias"][8] = float("nan")  # the valence output: EmoNet's outputs are not numbers
    broken = tmp_path / "nan.pth"
    torch.save(state, broken)
    clip = moving_face_video(tmp_path / "one.mp4", frames=1, empty=None)
    registry = CollectorRegistry()
    pm = PipelineMetrics(registry, mode="file")
    pushed: list[dict] = []  # the values as they were pushed: (name, labels) → value

    def push(reg, url, **kwargs):
        pushed.append({(s.name, frozenset(s.labels.items())): s.value for f in reg.collect() for s in f.samples})

    monkeypatch.setattr(x, "push_metrics", push)
    exporter = MetricsExporter(registry, pushgateway="pg:9091", run_state=pm.set_run_state)
    with emopipe.Analyzer(detector="blazeface", weights=str(broken), device="cpu") as analyzer, \
            pytest.raises(WeightsError, match="not a number") as failure:
        analyzer.run(str(clip.path), output=str(tmp_path / "rows.csv"), metrics=pm, exporter=exporter)
    assert "--precision" not in str(failure.value)  # the run is fp32 already: that advice cannot help
    (final,) = pushed

    def at_push(name: str, **labels: str) -> float:
        return final[name, frozenset(labels.items())]

    assert at_push("emopipe_run_state", mode="file", state="failed") == 1
    assert at_push("emopipe_source_up", source=str(clip.path)) == 0  # read no more: not up
    assert at_push("emopipe_source_state", source=str(clip.path), state="failed") == 1  # its run failed
    assert at_push("emopipe_errors_total", kind="infer") == 1  # the model's outputs, not the writing
    assert at_push("emopipe_errors_total", kind="write") == 0


def test_metrics_flags_resolve_with_a_live_default_port():
    from emopipe.cli.run import build_parser, config_from_args

    def resolved(*argv: str):
        return config_from_args(build_parser().parse_args(list(argv))).resolved("cpu")

    file_run = resolved("clip.mp4")
    assert file_run.metrics_port is None and file_run.metrics_host == "127.0.0.1"  # on this machine unless asked
    assert resolved("rtsp://cam/x").metrics_port == 9478
    live = resolved("rtsp://u:p@cam/x", "--metrics-port", "0", "--metrics-linger", "5", "--pushgateway", "pg:9091")
    assert (live.metrics_port, live.metrics_host, live.metrics_linger, live.pushgateway) == (0, "127.0.0.1", 5.0,
                                                                                             "pg:9091")
    with pytest.raises(UsageError, match="--metrics-linger needs --metrics-port"):
        resolved("clip.mp4", "--metrics-linger", "5")
    # (was: taken and unused, a file run serving nothing: the user believed its metrics reachable from elsewhere)
    with pytest.raises(UsageError, match="--metrics-host needs --metrics-port"):
        resolved("clip.mp4", "--metrics-host", "0.0.0.0")
    assert resolved("rtsp://cam/x", "--metrics-host", "0.0.0.0").metrics_host == "0.0.0.0"  # live: on 9478
