"""How a run's metrics leave the process: served for scraping, kept up after a file run, pushed.

Prometheus' advice, in the order a run needs it: a long-lived (live) run serves ``/metrics`` for scraping
(:func:`serve_metrics`); a file run can keep serving for a while after its last frame (:func:`linger`)
and/or push its final values to a Pushgateway (:func:`push_metrics`): one group per job and host, replaced by
the host's next run, so the gateway holds a bounded set of series however many files a host processes.
:class:`MetricsExporter` does all three from the command line's flags. The metrics themselves are
defined in :mod:`emopipe.observe.metrics`.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from http.client import HTTPException
from typing import Any
from urllib.parse import urlsplit

from prometheus_client import CollectorRegistry, push_to_gateway, start_http_server
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from emopipe.errors import OutputError, UsageError

logger = logging.getLogger(__name__)

DEFAULT_PORT = 9478  # live mode serves here unless --metrics-port says otherwise


# Live mode serves metrics without being asked, so by default only to this machine.
DEFAULT_HOST = "127.0.0.1"


PUSH_JOB = "emopipe-batch"  # job label of pushed runs, apart from the scraped `emopipe` job
# Not pushed: a queue's depth after the run is meaningless, and the _created series double a gateway's size
# and never change for a finished run.
NOT_PUSHED = ("emopipe_queue_depth",)


class MetricsServer:
    """The /metrics endpoint of a run (prometheus_client's threaded WSGI server); :meth:`close` stops it."""

    def __init__(self, httpd: Any, thread: threading.Thread, host: str) -> None:
        self._httpd = httpd
        self._thread = thread
        self.host = host
        self.port = int(httpd.server_port)

    @property
    def url(self) -> str:
        host = "localhost" if self.host in ("", "0.0.0.0", "::") else self.host
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{self.port}/metrics"

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> MetricsServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def serve_metrics(registry: CollectorRegistry, port: int, host: str = DEFAULT_HOST) -> MetricsServer:
    """Serve ``registry`` on http://host:port/metrics from a daemon thread (port 0: a free one)."""
    if not 0 <= port <= 65535:
        raise UsageError(f"metrics port must be 0..65535, got {port}")
    try:
        httpd, thread = start_http_server(port, addr=host, registry=registry)
    except OSError as exc:
        raise UsageError(f"cannot serve metrics on {host}:{port}: {exc.strerror or exc}; "
                         "choose another --metrics-port or --metrics-host") from None
    return MetricsServer(httpd, thread, host)


def linger(seconds: float, stop: threading.Event | None = None) -> float:
    """Keep the process — and so its metrics server — alive up to ``seconds`` after a file run ends,
    so Prometheus scrapes the final values. SIGTERM (docker stop), Ctrl-C or ``stop`` end it early,
    as a normal return. Returns the seconds lingered."""
    stop = stop or threading.Event()
    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
    start = time.monotonic()
    try:
        stop.wait(seconds)
    except KeyboardInterrupt:
        pass
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    return time.monotonic() - start


def check_pushgateway_url(url: str) -> str:
    """``url`` as an http(s) URL (``host:port`` gets ``http://``); a UsageError if it is not one."""
    full = url if "://" in url else f"http://{url}"
    try:
        parts = urlsplit(full)  # (a ValueError for "http://[::1")
        valid = parts.scheme in ("http", "https") and bool(parts.hostname) and full.isprintable() and " " not in full
        _ = parts.port  # a ValueError for a port that is not a number in 0..65535: refused now, not after the run
    except ValueError:
        valid = False
    if not valid:
        raise UsageError(f"--pushgateway must be an http(s) URL such as http://pushgateway:9091, got {url!r}")
    return full


class FinalValues(Collector):
    """A registry's metrics as a finished run pushes them: no ``_created`` series, no queue depths."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry

    def collect(self) -> Iterator[Metric]:
        for family in self.registry.collect():
            if family.name in NOT_PUSHED:
                continue
            kept = Metric(family.name, family.documentation, family.type, family.unit)
            kept.samples = [s for s in family.samples if not s.name.endswith("_created")]
            yield kept


def push_metrics(registry: CollectorRegistry, url: str, *, job: str = PUSH_JOB,
                 grouping_key: Mapping[str, str] | None = None, timeout_s: float = 10.0) -> None:
    """PUT the registry's final values to a Pushgateway, replacing the whole group ``job`` + ``grouping_key``.

    Prometheus' advice for batch jobs: push once, at the end, to a group that the next run of the same job on
    the same host replaces (PUT), so the gateway does not grow with the number of runs or files
    (docs/metrics.md). A failure is an OutputError (the metrics output was asked for).
    """
    full = check_pushgateway_url(url)
    final = CollectorRegistry()
    final.register(FinalValues(registry))
    try:
        push_to_gateway(full, job=job, registry=final, grouping_key=dict(grouping_key or {}), timeout=timeout_s)
    except (OSError, HTTPException) as exc:  # URLError and prometheus_client's "error talking to pushgateway" are
        reason = getattr(exc, "reason", None) or exc  # OSErrors; a reply that is not HTTP is an HTTPException
        raise OutputError(f"cannot push metrics to the Pushgateway at {full}: {reason}") from None


def grouping_key() -> dict[str, str]:
    """The Pushgateway group of a run: its host. Not its source, which would make a group per file."""
    return {"instance": socket.gethostname()}


# How long a run that Prometheus scrapes waits, after it ends, for a scrape that sees how it ended: 1.5 scrape
# intervals and a second (the interval as seen between the last two scrapes), at least FLOOR and at most CAP seconds.
# Scraped means twice at least: a scraper comes back; one look (curl, a test) is no reason to wait.
FINAL_SCRAPE_FLOOR_S = 2.0
FINAL_SCRAPE_CAP_S = 90.0


class ScrapeWatch(Collector):
    """Collects nothing: notes when a scraper reads the registry it is in (a push, :meth:`muted`, is no scrape), so
    that a run can wait for the scrape that sees how it ended (:meth:`MetricsExporter.finish`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._times: list[float] = []  # the last two scrapes (time.monotonic)
        self._after: float | None = None
        self.seen_after = threading.Event()  # a scrape after :meth:`watch_from`'s moment
        self._local = threading.local()

    def describe(self) -> list[Metric]:  # (registered without being collected)
        return []

    def collect(self) -> Iterator[Metric]:
        if not getattr(self._local, "muted", False):
            now = time.monotonic()
            with self._lock:
                self._times = [*self._times[-1:], now]
                if self._after is not None and now > self._after:
                    self.seen_after.set()
        return iter(())

    @contextlib.contextmanager
    def muted(self) -> Iterator[None]:
        self._local.muted = True
        try:
            yield
        finally:
            self._local.muted = False

    @property
    def scraped(self) -> bool:
        """Whether something scrapes the registry: read twice at least."""
        return len(self._times) >= 2

    def wait_bound(self) -> float:
        """Seconds to wait for the next scrape (FINAL_SCRAPE_*)."""
        with self._lock:
            interval = self._times[-1] - self._times[0]
        return min(FINAL_SCRAPE_CAP_S, max(FINAL_SCRAPE_FLOOR_S, 1.5 * interval + 1.0))

    def watch_from(self) -> None:
        """From now on, the next scrape sets :attr:`seen_after`."""
        with self._lock:
            self._after = time.monotonic()
            self.seen_after.clear()


class MetricsExporter:
    """Exposes a run's metrics as the ``--metrics-*`` and ``--pushgateway`` flags ask.

    ``start()`` before loading models (so scrapes see start-up), ``finish()`` after the last result
    (push, then linger), ``close()`` in ``finally`` (or use it as a context manager: start/close; leaving it
    on an exception marks the run ``failed`` and pushes and lingers as a finished run does, so a scraped run is
    seen to have failed; Ctrl-C or SIGTERM mark it ``interrupted``, push, and end at once).
    ``run_state`` receives how the run ended (e.g. :meth:`PipelineMetrics.set_run_state`), before any push.

    A run that was scraped (twice at least) waits, after it ends, for one more scrape (up to 1.5 intervals; a
    second Ctrl-C or SIGTERM ends the wait): its last scrape said ``running``, so every scraped live run ended as a
    crash would — ``EmopipeTargetDown`` fired at each end, even of a run stopped as asked, and a failed run's state
    and errors were never seen (QA pass, session 39). A run nothing scrapes ends at once.
    """

    def __init__(self, registry: CollectorRegistry, *, port: int | None = None, host: str = DEFAULT_HOST,
                 linger_s: float = 0.0, pushgateway: str | None = None, job: str = PUSH_JOB,
                 grouping_key: Mapping[str, str] | None = None,
                 run_state: Callable[[str], None] | None = None) -> None:
        if not linger_s >= 0:
            raise UsageError(f"--metrics-linger must be ≥ 0 seconds, got {linger_s}")
        if linger_s and port is None:
            raise UsageError("--metrics-linger needs --metrics-port (there is nothing to scrape otherwise)")
        self.registry = registry
        self.port = port
        self.host = host
        self.linger_s = linger_s
        self.pushgateway = check_pushgateway_url(pushgateway) if pushgateway else None
        self.job = job
        self.grouping_key = dict(grouping_key or {})
        self.run_state = run_state
        self.server: MetricsServer | None = None
        self.finished = False
        self.scrapes: ScrapeWatch | None = None

    def start(self) -> None:
        if self.port is not None and self.server is None:
            self.server = serve_metrics(self.registry, self.port, self.host)
            self.scrapes = ScrapeWatch()
            self.registry.register(self.scrapes)
            logger.info("metrics on %s", self.server.url)

    def finish(self, linger_after: bool = True, state: str = "finished") -> None:
        """After the last result: record how the run ended (``state``), push the final values, then keep serving
        them ``linger_s`` seconds (not after an interrupted run: Ctrl-C or SIGTERM means stop now, e.g.
        ``docker stop``)."""
        self.finished = True
        if self.scrapes is not None:
            self.scrapes.watch_from()  # (before the state changes: a scrape now may not see it)
        if self.run_state is not None:
            self.run_state(state)
        self._push()
        if self.server is not None and self.linger_s > 0 and linger_after:
            logger.info("run %s; serving final metrics on %s for up to %g s (Ctrl-C or SIGTERM ends this)%s",
                        state, self.server.url, self.linger_s, "; its error follows then" if state == "failed" else "")
            linger(self.linger_s)
        elif self.server is not None and self.scrapes is not None and self.scrapes.scraped:
            bound = self.scrapes.wait_bound()
            logger.info("run %s; waiting up to %.0f s for the scrape that sees it on %s (Ctrl-C or SIGTERM ends "
                        "this)", state, bound, self.server.url)
            linger(bound, stop=self.scrapes.seen_after)  # (its response is sent whole: close() joins its thread)

    def _push(self) -> None:
        if self.pushgateway:
            try:
                with self.scrapes.muted() if self.scrapes is not None else contextlib.nullcontext():
                    push_metrics(self.registry, self.pushgateway, job=self.job, grouping_key=self.grouping_key)
                logger.info("metrics pushed to %s", self.pushgateway)
            except OutputError as exc:  # the results are written and complete: the metrics alone are lost
                logger.warning("%s; the results are complete, only their metrics were not pushed", exc)

    def close(self) -> None:
        if self.server is not None:
            self.server.close()  # (a scrape being answered is answered whole first)
            self.server = None
        if self.scrapes is not None:
            self.registry.unregister(self.scrapes)
            self.scrapes = None

    def __enter__(self) -> MetricsExporter:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        try:
            if exc_type is not None and not self.finished:  # the run ended on an error: say so, wherever it is seen
                interrupted = issubclass(exc_type, KeyboardInterrupt)  # (SIGTERM too: the run turns it into one)
                # a failure lingers like a finished run, or a scraped run's last scrape would still say running
                self.finish(linger_after=issubclass(exc_type, Exception),
                            state="interrupted" if interrupted else "failed")
        finally:
            self.close()
