"""Serve emopipe's metrics with synthetic, realistic values — for dashboard and alert work without a GPU.

    python3 deploy/metrics_demo.py --port 9478            # then point Prometheus/Grafana at it
    python3 deploy/metrics_demo.py --port 0 --duration 30 # a free port (printed), 30 s

Two threads drive :class:`emopipe.observe.metrics.PipelineMetrics` the way the pipeline does — a reader
(decode, queue depth, drops) and a worker (detect, crop, inference batches, write, frame latency) —
at ``--fps`` frames per second, with latencies shaped like the H100 figures in shared/anchors.md
(a slow first frame, then tens of milliseconds). The build-info labels say ``backend="demo"``,
so nobody mistakes these values for a measurement. It ends as emopipe does (its MetricsExporter): ``finished``
after ``--duration``, then pushed and lingering; Ctrl-C or SIGTERM ``interrupted``, exit 130; and a scraped demo
waits for the scrape that sees how it ended — so stopping it raises no EmopipeTargetDown, as stopping emopipe raises
none (it once ended as a crash does: its last scrape said running).
"""

from __future__ import annotations

import argparse
import logging
import queue
import random
import signal
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from prometheus_client import CollectorRegistry

from emopipe.observe.exposition import MetricsExporter, grouping_key
from emopipe.observe.metrics import PipelineMetrics

BATCH_SIZE = 8


def _jitter(rng: random.Random, median_s: float, spread: float = 0.25) -> float:
    """A log-normal time around ``median_s``: mostly close, with a tail, like real stage times."""
    return median_s * rng.lognormvariate(0.0, spread)


def simulate(metrics: PipelineMetrics, fps: float, stop: threading.Event, seed: int = 0,
             live: bool = True) -> None:
    """Observe frames until ``stop`` is set: startup, then a reader thread feeding a worker thread."""
    rng = random.Random(seed)
    metrics.observe_startup(load_s=_jitter(rng, 1.4, 0.1), warmup_s=_jitter(rng, 4.1, 0.1))
    metrics.set_run_state("running")
    source = "rtsp://camera.local/demo" if live else "/data/demo.mp4"
    metrics.set_source_state(source, "up")
    frames: queue.Queue[tuple[float, float] | None] = queue.Queue(maxsize=8)

    def reader() -> None:
        period = 1.0 / fps
        next_at = time.monotonic()
        index = 0
        while not stop.is_set():
            capture = time.monotonic()
            metrics.observe_stage("decode", _jitter(rng, 0.0008))
            if index % 97 == 13:
                metrics.error("decode")  # a corrupt packet now and then
            if index % 211 == 50 and live:
                metrics.reopen_failed()  # one failed attempt, then the stream is back
                metrics.reconnect()
                metrics.source_reconnect(source)
            try:
                frames.put_nowait((capture - _jitter(rng, 0.004), time.monotonic()))
            except queue.Full:
                metrics.frames_dropped()
                metrics.source_frames_dropped(source)
            metrics.set_queue_depth("frames", frames.qsize())
            index += 1
            next_at += period
            stop.wait(max(0.0, next_at - time.monotonic()))
        frames.put(None)

    def worker() -> None:
        rng_w = random.Random(seed + 1)
        pending: list[tuple[float, float, float, int]] = []
        first_detect = first_batch = True
        while (item := frames.get()) is not None:
            captured, read = item
            taken = time.monotonic()
            metrics.set_queue_depth("frames", frames.qsize())
            spent = _jitter(rng_w, 0.0037) + (0.3 if first_detect else 0.0)  # detect (slow once: lazy init)
            first_detect = False
            time.sleep(spent)
            metrics.observe_stage("detect", spent)
            faces = rng_w.choice((0, 1, 1, 1, 2, 3))
            if faces:
                metrics.observe_stage("crop", _jitter(rng_w, 0.0003))
            pending.append((captured, read, taken, faces))
            queued = sum(f for *_, f in pending)
            metrics.set_queue_depth("faces", queued)
            if queued >= BATCH_SIZE or len(pending) >= 3:  # full, or the oldest face waited long enough
                while queued:  # static batches of BATCH_SIZE slots, the last one padded
                    real = min(queued, BATCH_SIZE)
                    queued -= real
                    spent = _jitter(rng_w, 0.35 if first_batch else 0.011)
                    time.sleep(spent)
                    metrics.observe_batch(BATCH_SIZE, real, spent)
                    first_batch = False
                for captured_at, read_at, taken_at, n in pending:
                    metrics.observe_stage("write", _jitter(rng_w, 0.0002))
                    done = time.monotonic()
                    metrics.observe_frame(done - read_at, n)
                    metrics.observe_source_frame(source, done - read_at, n)
                    metrics.observe_frame_split(taken_at - read_at, done - taken_at)
                    if live:
                        metrics.observe_capture_latency(done - captured_at)
                pending.clear()
                metrics.set_queue_depth("faces", 0)

    threads = [threading.Thread(target=reader, name="demo-reader", daemon=True),
               threading.Thread(target=worker, name="demo-worker", daemon=True)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    metrics.set_source_state(source, "ended")  # as emopipe's: read to its end, or the run stopped


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--port", type=int, default=9478, help="serve /metrics here (0: a free port)")
    parser.add_argument("--host", default="127.0.0.1", help="listen address")
    parser.add_argument("--fps", type=float, default=25.0, help="simulated frames per second")
    parser.add_argument("--duration", type=float, default=0.0, help="seconds to simulate (0: until Ctrl-C)")
    parser.add_argument("--linger", type=float, default=0.0, help="seconds to keep serving after the simulation")
    parser.add_argument("--file", action="store_true", help="simulate a file run (no capture latency, reconnects)")
    parser.add_argument("--pushgateway", default=None, help="push the final values to this Pushgateway")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    registry = CollectorRegistry()
    metrics = PipelineMetrics(registry, queues=("frames", "faces"), mode="file" if args.file else "live", info={
        "version": "demo", "model": "demo (synthetic values)", "backend": "demo", "precision": "fp16",
        "device": "cuda:0", "gpu": "none (simulated)", "batch_size": str(BATCH_SIZE), "cudnn_benchmark": "true"})
    logging.basicConfig(level=logging.INFO, format="%(message)s")  # (the exporter says where it waits, what it pushed)
    exporter = MetricsExporter(registry, port=args.port, host=args.host, linger_s=args.linger,
                               pushgateway=args.pushgateway, grouping_key=grouping_key(),
                               run_state=metrics.set_run_state)
    signal.signal(signal.SIGTERM, _interrupt)  # docker stop, kill: as Ctrl-C, as emopipe takes it
    stop = threading.Event()
    worker = threading.Thread(target=simulate, args=(metrics, args.fps, stop, args.seed, not args.file), daemon=True)
    with exporter:
        assert exporter.server is not None
        print(f"serving synthetic emopipe metrics on {exporter.server.url}", flush=True)
        worker.start()
        try:
            if args.duration > 0:
                stop.wait(args.duration)
            else:
                while worker.is_alive():
                    worker.join(0.5)
        except KeyboardInterrupt:
            _end(stop, worker)
            exporter.finish(linger_after=False, state="interrupted")  # pushed; a scraped demo waits for one scrape
            return 130
        _end(stop, worker)
        exporter.finish()  # finished: pushed, then --linger
    return 0


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _end(stop: threading.Event, worker: threading.Thread) -> None:
    stop.set()
    worker.join()


if __name__ == "__main__":
    raise SystemExit(main())
