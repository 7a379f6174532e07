"""Camera fleets over Ray: the cameras split over the workers, each worker a fleet of its share.

The driver (``emopipe CAMERAS --ray``) plans the run as one process does (:func:`~emopipe.pipeline.many.plan_fleet`:
each camera's files in the output folder, the folder held until the run ends, the manifest; no PyTorch), connects to
Ray, sizes the workers as a run of files does (one per GPU; ``--ray-workers``; never more than cameras) and deals the
cameras out round-robin. Each worker (:class:`CameraWorker`, a Ray actor) runs a fleet of its cameras exactly as one
process runs one (:meth:`emopipe.Analyzer.process_fleet`): each camera's rows written in place in the output folder,
its summary as it ends. The workers tell a small board actor how far each camera is and what it is doing (every half
second) and each camera as it ends; the driver writes the camera's manifest line then, logs each camera's state as it
changes, draws one bar, and writes ``summary.json`` at the end.

A worker that dies (killed, out of memory, its node lost): its cameras that had not ended start on a new worker after
1, 2, 4… s, up to ``--ray-retries`` times each (then ``failed``). A moved camera goes on in its rows file (a row a
killed worker left cut short is removed, no row is written twice), its frames numbered on from the last, its
``--end`` and ``--max-frames`` what was left of them; its recording (``--record``) goes on in a new part,
``NAME.annotated.2.mp4``. Ctrl-C or SIGTERM: every worker is told to stop and ends its
fleet as one process does at Ctrl-C (every camera's files complete, ``interrupted``); the driver writes the lines and
``summary.json``. docs/cluster.md, "Camera fleets over Ray", says what it does not do.
"""

from __future__ import annotations

import contextlib
import html
import json
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from emopipe.cluster import (
    LOCAL,
    POLL_S,
    RayOptions,
    connect_ray,
    disconnect_ray,
    metrics_endpoint,
    reached_at,
    worker_device,
    worker_sizing,
)
from emopipe.config import DEFAULT_OUTPUT_DIR, RunConfig, StrPath, path_items
from emopipe.errors import EmopipeError, SourceUnavailableError, UsageError
from emopipe.io.records import rows_so_far
from emopipe.pipeline.archive import PlannedSource, SourceResult
from emopipe.pipeline.drivers import HeldSignals, failed_in_worker, log_as_worker, signals_held, worker_metrics_port
from emopipe.pipeline.many import CameraSoFar, FleetOutcome, ManyPlan, finish_many, plan_fleet
from emopipe.pipeline.progress import ProgressBar

if TYPE_CHECKING:
    from emopipe.pipeline.fleet import Camera, Fleet

logger = logging.getLogger(__name__)

CAMERA_WORKER_NAME = "emopipe-cameras-{}"  # actor names, as the Ray dashboard shows them
PAGE_REFRESH_S = 5  # the driver's page of the workers' pages: how often a browser asks it again
MOVE_BACKOFF_S = (1.0, 30.0)  # a dead worker's cameras start again after 1, 2, 4… s, at most 30
STOP_WAIT_S = 30.0  # Ctrl-C: how long the workers get to end their fleets (a worker still loading its models ends then)


class CameraBoard:
    """A small Ray actor the camera workers tell how far each camera is (by worker) and each camera as it ends; the
    driver reads it every half second, so it records a camera as it ends and knows what a worker did before it died."""

    def __init__(self) -> None:
        self.counts: dict[str, dict[int, dict[str, Any]]] = {}  # worker → camera position → its numbers
        # in the order told; kept, not taken: a driver cut off between the answer and its recording reads them again
        self.finished: list[tuple[int, SourceResult, dict[str, Any]]] = []
        self.workers: dict[str, dict[str, Any]] = {}  # worker → where it runs, its metrics

    def started(self, name: str, identity: dict[str, Any]) -> None:
        self.workers.setdefault(name, {}).update(identity)  # (its metrics first, its live page once it serves it)

    def update(self, name: str, counts: dict[int, dict[str, Any]]) -> None:
        self.counts[name] = counts

    def ended(self, position: int, result: SourceResult, facts: dict[str, Any]) -> None:
        self.finished.append((position, result, facts))

    def read(self, ended_since: int) -> tuple[dict[str, dict[int, dict[str, Any]]],
                                              list[tuple[int, SourceResult, dict[str, Any]]],
                                              dict[str, dict[str, Any]]]:
        """The numbers, the cameras ended after the first ``ended_since`` (the driver's count of those recorded),
        and the workers."""
        return dict(self.counts), self.finished[ended_since:], dict(self.workers)


class CameraWorker:
    """One Ray actor: a fleet over its share of the cameras, through one pipeline, as one process runs a fleet.

    :meth:`run` runs until each of its cameras has ended or :meth:`stop` is called (the actor takes the two calls at
    once); it writes each camera's rows and summary, and tells the board each camera's numbers and its end."""

    def __init__(self, config: RunConfig, cwd: str | None, name: str, board: Any,
                 metrics_port: int | None = None, serve: str | None = None) -> None:
        log_as_worker("emopipe worker", logging.INFO)
        if cwd and Path(cwd).is_dir():  # relative paths mean what they mean to the driver
            os.chdir(cwd)
        self.config = replace(config, serve=serve)  # (its own page, of its cameras: worker_serve_address)
        self.name = name
        self.board = board
        self.metrics_port = metrics_port
        self.where = f"{socket.gethostname()}:{os.getpid()}"
        self.positions: list[int] = []  # its cameras' numbers in the run
        self._stop = threading.Event()

    def run(self, planned: Sequence[PlannedSource], directory: str,
            so_far: dict[int, CameraSoFar] | None = None) -> dict[str, Any]:
        """The fleet of ``planned`` (``so_far``: the cameras moved here, by position). Each camera that ended, with its
        result and figures (by position); the pipeline's summary; and the error that stopped the fleet, if one did
        (every camera could not be opened, a user error as the models loaded, a bug), as one process would raise it:
        then the cameras it stopped are ``failed``, with it."""
        from emopipe.api import Analyzer, run_metrics
        from emopipe.pipeline.fleet import Fleet

        # the fleet numbers its cameras from 0; the board and the driver know them by their number in the run
        self.positions = [p.position for p in planned]
        mine = [replace(p, position=i) for i, p in enumerate(planned)]
        moved = {i: (so_far or {})[p] for i, p in enumerate(self.positions) if p in (so_far or {})}
        uris = tuple(p.uri for p in planned)
        analyzer = Analyzer(replace(self.config, sources=uris))
        fleet: Fleet | None = None
        reply: dict[str, Any] = {"summary": None, "error": None}
        try:
            with ExitStack() as stack:
                config = analyzer.source_config(uris[0], sources=uris, output=None, summary=None)
                metrics = exporter = None
                if self.metrics_port is not None or config.pushgateway:  # (no live default port: workers share hosts)
                    metrics, exporter = run_metrics(replace(config, metrics_port=self.metrics_port, metrics_linger=0),
                                                    batch_sizes=(int(config.batch_size or 1),), mode="live")
                    exporter.grouping_key = {"instance": self.name}  # (a Pushgateway group each, as file workers)
                    stack.enter_context(exporter)
                served = metrics_endpoint(exporter.server if exporter is not None else None)
                self.board.started.remote(self.name, {"where": self.where, "metrics": served})
                fleet = Fleet(config, mine, Path(directory), None, on_finished=self._ended, so_far=moved,
                              stop=self._stop)
                telling = threading.Event()
                stack.callback(telling.set)
                threading.Thread(target=self._tell, args=(fleet, telling), name="emopipe-tell", daemon=True).start()
                _, summary, interrupted = analyzer.process_fleet(fleet, stack, metrics=metrics)
                reply["summary"] = summary.as_dict() if summary is not None else None
                if exporter is not None:
                    exporter.finish(linger_after=False, state="interrupted" if interrupted else "finished")
        except Exception as exc:  # (its cameras are finished: each has its result)
            logger.error("%s: its fleet failed: %s", self.name, exc)
            reply["error"] = exc
        finally:
            analyzer.close()
        ended = {}
        for camera in fleet.cameras if fleet is not None else []:
            result = camera.result
            if result is not None and reply["error"] is not None and result.status == "interrupted":
                result = failed_in_worker(result, reply["error"], self.name)  # (the error stopped it, not the driver)
            if result is not None:
                ended[self.positions[camera.position]] = (result, camera.facts)
        reply["ended"] = ended
        return reply

    def stop(self) -> None:
        """End the fleet as one process ends at Ctrl-C: every camera's files complete, each ``interrupted``."""
        self._stop.set()

    def _ended(self, camera: Camera) -> None:
        """A camera ended: the driver writes its line now (its worker may die before it replies). One a failure
        stopped (interrupted, the driver never asked) is said by the reply, as failed."""
        assert camera.result is not None
        if camera.result.status != "interrupted" or self._stop.is_set():
            self.board.ended.remote(self.positions[camera.position], camera.result, camera.facts)  # (no reply awaited)

    def _tell(self, fleet: Fleet, done: threading.Event) -> None:
        """Every half second: each camera's frames, faces, the number its next frame would get, its state; and its
        live page's address once it serves one (--serve)."""
        page_told = False
        while not done.wait(POLL_S):
            if not page_told and fleet.server is not None:
                page_told = True
                self.board.started.remote(self.name, {"where": self.where, "page": page_endpoint(fleet.server)})
            counts = {}
            for camera in fleet.cameras:
                source = camera.source
                counts[self.positions[camera.position]] = {
                    "frames": camera.written, "faces": camera.faces, "state": camera.numbers()["state"],
                    "next": source.options.first_index + source.captured if source is not None else 0}
            self.board.update.remote(self.name, counts)


def worker_serve_address(serve: str | None, index: int) -> str | None:
    """``--serve HOST:PORT`` over Ray: worker N serves its cameras' live page on HOST:PORT+1+N (the driver's page of
    them on PORT), as its metrics are numbered; port 0: each a free port of its own."""
    if not serve:
        return None
    from emopipe.observe.livepage import parse_address

    host, base = parse_address(serve)
    if base == 0:
        return f"[{host}]:0" if ":" in host else f"{host}:0"
    port = base + 1 + index
    if port > 65535:
        raise UsageError(f"--serve {serve}: worker {index} would serve on {port}, past 65535; choose a lower port")
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _ports_apart(config: RunConfig, count: int) -> None:
    """``--serve`` and ``--metrics-port`` over Ray number their workers' ports alike (base+1+N): refused at once where
    the first ``count`` workers' would meet, rather than as a worker fails to serve."""
    if not (config.serve and config.metrics_port):
        return
    from emopipe.observe.livepage import parse_address

    base = parse_address(config.serve)[1]
    if base == 0:
        return
    pages = {base} | {base + 1 + n for n in range(count)}
    metrics = {config.metrics_port + 1 + n for n in range(count)}
    if pages & metrics:
        raise UsageError(f"--serve {config.serve} and --metrics-port {config.metrics_port}: with {count} workers their "
                         f"ports meet at {min(pages & metrics)} (the pages on {base}…{base + count}, the metrics on "
                         f"{config.metrics_port + 1}…{config.metrics_port + count}); set the two bases further apart")


def page_endpoint(server: Any) -> str:
    """The URL of a worker's live page as other machines reach it (its node's address when it listens on every
    one), as :func:`~emopipe.cluster.metrics_endpoint` says a worker's metrics."""
    return reached_at(server.host, server.port, "/") or str(server.url)


class _WorkersPage:
    """``--serve`` over Ray: the driver's page, on HOST:PORT — each worker's live page of its cameras (the grid one
    process serves for its fleet) in a frame of its own, the list asked again every few seconds as workers start,
    die and are replaced; ``/workers.json`` says the same for programs."""

    def __init__(self, serve: str, workers: Callable[[], dict[str, dict[str, Any]]]) -> None:
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        from emopipe.observe.livepage import parse_address

        host, port = parse_address(serve)
        page = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                path = self.path.split("?")[0]
                if path not in ("/", "/workers.json"):
                    self.send_error(404)
                    return
                try:
                    body, kind = ((json.dumps(page.workers()).encode(), "application/json") if path != "/" else
                                  (page.render().encode(), "text/html; charset=utf-8"))
                except Exception as exc:  # (said in one line: a traceback on the command's stderr helps nobody)
                    logger.warning("the live page: %s: %s", type(exc).__name__, exc)
                    self.send_error(500)
                    return
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Cache-Control", "no-store")
                self.end_headers()
                self.wfile.write(body)

        self.workers = workers
        try:
            self.httpd = ThreadingHTTPServer((host, port), Handler)
        except OSError as exc:
            raise UsageError(f"cannot serve the live page on {host}:{port}: {exc.strerror or exc}; choose another "
                             "--serve address") from None
        self.httpd.daemon_threads = True
        shown = "localhost" if host in ("", "0.0.0.0", "::") else host
        self.url = f"http://{f'[{shown}]' if ':' in shown else shown}:{self.httpd.server_address[1]}/"
        self._thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.2},
                                        name="emopipe-serve-workers", daemon=True)
        self._thread.start()

    def render(self) -> str:
        cells = []
        for name, worker in self.workers().items():
            state = "died" if worker.get("died") else ("starting" if not worker.get("page") else "live")
            cameras = ", ".join(html.escape(c) for c in worker.get("cameras", []))
            frame = (f'<iframe src="{html.escape(worker["page"])}" title="{html.escape(name)}"></iframe>'
                     if worker.get("page") and not worker.get("died") else "")
            link = f' <a href="{html.escape(worker["page"])}">{html.escape(worker["page"])}</a>' if worker.get(
                "page") else ""
            cells.append(f'<section><h2>{html.escape(name)} <small>{state}</small>{link}</h2>'
                         f'<p>{cameras}</p>{frame}</section>')
        return (f'<!doctype html><html><head><meta charset="utf-8"><title>emopipe: cameras over Ray</title>'
                f'<meta http-equiv="refresh" content="{PAGE_REFRESH_S}">'
                '<style>body{font-family:sans-serif;margin:1em;background:#111;color:#eee}a{color:#8cf}'
                'iframe{width:100%;height:70vh;border:0}section{margin-bottom:1.5em}</style></head>'
                f'<body><h1>emopipe: {len(cells)} worker(s)</h1>{"".join(cells)}</body></html>')

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self._thread.join(timeout=5)


@dataclass
class _Camera:
    """The driver's view of one camera."""

    planned: PlannedSource
    worker: str | None = None
    so_far: CameraSoFar = field(default_factory=CameraSoFar)  # what the workers before its current one did
    faces_before: int = 0  # (the bar's) the faces of the workers before its current one, as last told
    now: dict[str, Any] = field(default_factory=dict)  # its current worker's numbers, as last told
    state: str = "starting"
    began_at: float | None = None  # (monotonic) when its first worker was asked to run it: --end counts from then
    result: SourceResult | None = None
    facts: dict[str, Any] | None = None

    @property
    def name(self) -> str:
        return self.planned.shown_as

    @property
    def frames(self) -> int:
        return self.result.frames if self.result is not None else self.so_far.frames + self.now.get("frames", 0)

    @property
    def faces(self) -> int:
        return self.result.faces if self.result is not None else self.faces_before + self.now.get("faces", 0)


def _as_left(camera: _Camera, **line: Any) -> SourceResult:
    """The line of a camera no worker said the end of (it died, or was stopped before it could say), as its rows file
    says: faces are its rows, frames as its workers last told the driver."""
    rows = 0
    with contextlib.suppress(EmopipeError):  # (unreadable here: its line says no rows)
        rows = rows_so_far(camera.planned.rows)[0]
    outputs = {"rows": str(camera.planned.rows)} if camera.planned.rows.exists() else {}
    outputs.update(camera.planned.recorded_parts(camera.so_far.moves + 1))  # (each part played to its end by FFmpeg)
    return SourceResult(source=camera.name, frames=camera.frames, faces=rows, rows=rows, outputs=outputs, **line)


class _CameraRun:
    """A fleet's run over Ray workers, once planned and Ray joined: cameras dealt out, recorded as they end, moved off
    dead workers, stopped on Ctrl-C."""

    def __init__(self, config: RunConfig, options: RayOptions, planned: list[PlannedSource], directory: Path,
                 plan: ManyPlan, actor_class: Any, board: Any, bar: ProgressBar | None,
                 on_result: Callable[[SourceResult], None] | None) -> None:
        self.config, self.options, self.directory, self.plan = config, options, directory, plan
        self.actor_class, self.board, self.bar, self.on_result = actor_class, board, bar, on_result
        self.cameras = [_Camera(p) for p in planned]
        self.spawned = 0
        self.live: dict[str, Any] = {}  # worker name → actor
        self.running: dict[Any, tuple[str, list[int]]] = {}  # run call → (worker, camera positions)
        self.waiting: list[tuple[float, list[int]]] = []  # (monotonic time due, camera positions) to move
        self.workers: dict[str, dict[str, Any]] = {}  # by name: where, metrics, cameras, died
        self.summaries: dict[str, Any] = {}  # each worker's pipeline summary, as its reply said
        self.failures = 0
        self.ended_read = 0  # how many of the board's ended cameras read_board has been through
        self.stopping = False  # (Ctrl-C: a worker dying now has its cameras recorded, not moved)

    # -- workers -------------------------------------------------------------------------------------

    def start(self, positions: list[int]) -> None:
        """A new worker for the cameras at ``positions`` (a moved camera goes on where its last worker stopped)."""
        name = CAMERA_WORKER_NAME.format(self.spawned)
        port = worker_metrics_port(self.config.metrics_port, self.spawned)
        serve = worker_serve_address(self.config.serve, self.spawned)
        self.spawned += 1
        actor = self.actor_class.options(name=name).remote(self.config, os.getcwd(), name, self.board, port, serve)
        self.live[name] = actor
        self.workers[name] = {"where": None, "metrics": None, "cameras": [], "died": False,
                              **({"page": None} if serve else {})}
        so_far = {}
        now = time.monotonic()
        for position in positions:
            camera = self.cameras[position]
            camera.worker, camera.now, camera.state = name, {}, "starting"
            camera.began_at = now if camera.began_at is None else camera.began_at
            if camera.so_far.moves:
                so_far[position] = camera.so_far
            self.workers[name]["cameras"].append(camera.name)
        ref = actor.run.remote([self.cameras[p].planned for p in positions], str(self.directory), so_far)
        self.running[ref] = (name, positions)
        logger.info("%s: %s", name, ", ".join(self.cameras[p].name for p in positions))

    def dismiss(self, name: str) -> None:
        import ray

        actor = self.live.pop(name, None)
        if actor is not None:
            ray.kill(actor, no_restart=True)

    # -- what the workers say ------------------------------------------------------------------------

    def read_board(self, timeout: float | None = None) -> None:
        """Record each camera the workers said has ended; take each camera's numbers, and log its state's changes."""
        import ray
        from ray.exceptions import RayActorError

        try:
            counts, ended, identities = ray.get(self.board.read.remote(self.ended_read), timeout=timeout)
        except RayActorError:  # the board lost with its node: the workers' replies still say how each camera ended
            return
        for position, result, facts in ended:
            self.record(position, result, facts)
        self.ended_read += len(ended)  # (once recorded: a Ctrl-C before has them read again; record keeps one)
        for name, identity in identities.items():
            entry = self.workers[name]
            if entry["where"] is None:
                entry.update(identity)
                if identity.get("metrics"):
                    logger.info("%s (%s): metrics on %s", name, identity["where"], identity["metrics"])
            if identity.get("page") and entry.get("page") is None:
                entry["page"] = identity["page"]
                logger.info("%s: its cameras' live page on %s", name, identity["page"])
        for name, numbers in counts.items():
            for position, now in numbers.items():
                camera = self.cameras[position]
                if camera.worker != name or camera.result is not None:
                    continue  # (a dead worker's last word, its camera moved on)
                camera.now = now
                if now["state"] != camera.state:
                    camera.state = now["state"]
                    logger.info("%s: %s (%s)", camera.name, camera.state, name)

    def record(self, position: int, result: SourceResult, facts: dict[str, Any] | None) -> None:
        """A camera's manifest line, once."""
        camera = self.cameras[position]
        if camera.result is not None:
            return
        with signals_held():  # (a Ctrl-C between the two would leave the camera ended with no line)
            camera.result = result
            said = facts or {"source": camera.name, "rows_file": str(camera.planned.rows), "frames": result.frames,
                             "faces": result.faces, **({"moves": camera.so_far.moves} if camera.so_far.moves else {})}
            camera.facts = {**said, "status": result.status, "worker": camera.worker}
            self.plan.manifest.append(result.as_dict())
        if self.on_result is not None:
            self.on_result(result)

    def replied(self, ref: Any) -> None:
        """A worker's run call ended: its cameras recorded, or moved if it died."""
        import ray
        from ray.exceptions import RayActorError, RayTaskError

        name, positions = self.running.pop(ref)
        try:
            reply = ray.get(ref)
        except RayActorError as exc:
            self.read_board()  # (its cameras that ended before it died)
            self.failures += 1
            self.workers[name]["died"] = True
            self.live.pop(name, None)
            self.move([p for p in positions if self.cameras[p].result is None], name, type(exc).__name__)
            return
        except RayTaskError as exc:  # (a worker returns its errors; this is Ray's own failure)
            reply = {"ended": {}, "summary": None, "error": exc.cause}
        for position, (result, facts) in reply["ended"].items():
            self.record(position, result, facts)
        if reply["summary"] is not None:
            self.summaries[name] = reply["summary"]
        error = reply["error"]
        if error is not None:
            line = str(error) if isinstance(error, EmopipeError) else f"{type(error).__name__}: {error}"
            logger.error("%s: its fleet failed: %s", name, line)
            for position in positions:
                self.record(position, SourceResult(
                    source=self.cameras[position].name, status="failed", error=line.splitlines()[0],
                    exit_code=getattr(error, "exit_code", 1), kind=type(error).__name__), None)
        self.dismiss(name)
        if isinstance(error, EmopipeError) and not isinstance(error, SourceUnavailableError):
            raise error  # a user error (weights, an option): the run stops with it, as in one process

    def move(self, positions: list[int], dead: str, why: str) -> None:
        """The cameras of a worker that died, to a new worker after a backoff; past --ray-retries moves, failed."""
        moving, spent = [], []
        for position in positions if not self.stopping else []:
            camera = self.cameras[position]
            moves = camera.so_far.moves + 1
            if moves > self.options.retries:
                spent.append(camera.name)
                self.record(position, _as_left(camera, status="failed", exit_code=1, kind="WorkerDied",
                                               error=f"its worker died {moves} time(s): {why}"), None)
                continue
            frames = camera.frames
            assert camera.began_at is not None
            end_s = self.config.end - (time.monotonic() - camera.began_at) if self.config.end else None
            camera.so_far = CameraSoFar(
                frames=frames, first_index=max(camera.so_far.first_index, camera.now.get("next", 0)),
                end_s=max(end_s, 0.001) if end_s is not None else None,  # (time up: it ends at its first frame)
                max_frames=max(self.config.max_frames - frames, 1) if self.config.max_frames else None, moves=moves)
            camera.faces_before = camera.faces
            camera.worker, camera.now, camera.state = None, {}, "moving"  # (its dead worker's last word: not its)
            moving.append(position)
        delay = min(MOVE_BACKOFF_S[0] * 2 ** (max([self.cameras[p].so_far.moves for p in moving] or [1]) - 1),
                    MOVE_BACKOFF_S[1])
        logger.warning("%s died (%s)%s%s", dead, why,
                       f"; its camera(s) {', '.join(self.cameras[p].name for p in moving)} start on a new worker in "
                       f"{delay:g} s" if moving else "",
                       f"; {', '.join(spent)} moved --ray-retries times already: failed" if spent else "")
        if moving:
            self.waiting.append((time.monotonic() + delay, moving))

    # -- the run -------------------------------------------------------------------------------------

    def run(self, groups: Iterable[list[int]], held: HeldSignals) -> bool:
        """Until every camera has its line; True when Ctrl-C or SIGTERM ended it."""
        import ray

        for group in groups:
            self.start(group)
        try:
            held.take()  # a Ctrl-C or SIGTERM while the run started ends it here
            while self.running or self.waiting:
                now = time.monotonic()
                for due, positions in [w for w in self.waiting if w[0] <= now]:
                    self.waiting.remove((due, positions))
                    self.start(positions)
                if self.running:
                    done, _ = ray.wait(list(self.running), num_returns=1, timeout=POLL_S)
                else:
                    done = []
                    time.sleep(POLL_S)
                self.read_board()
                for ref in done:
                    self.replied(ref)
                self.draw()
            return False
        except KeyboardInterrupt:
            self.stop_all()
            return True
        except EmopipeError:
            self.stop_all()
            raise

    def stop_all(self) -> None:
        """Tell every worker to stop, wait for their fleets to end (files complete), record what they say; then
        each camera still without a line is ``interrupted``, with the rows its file holds."""
        import ray

        self.stopping = True
        self.waiting.clear()
        for actor in self.live.values():
            with contextlib.suppress(Exception):
                actor.stop.remote()
        with contextlib.suppress(Exception):
            ray.wait(list(self.running), num_returns=len(self.running), timeout=STOP_WAIT_S)
        for ref in [r for r in self.running if ray.wait([r], timeout=0)[0]]:
            with contextlib.suppress(Exception):  # (a user error after the stop: its cameras recorded, not raised)
                self.replied(ref)
        with contextlib.suppress(Exception):
            self.read_board(timeout=STOP_WAIT_S)
        for name in list(self.live):
            self.dismiss(name)
        for position, camera in enumerate(self.cameras):
            if camera.result is None:
                self.record(position, _as_left(camera, status="interrupted", exit_code=130), None)

    def draw(self) -> None:
        if self.bar is not None:
            self.bar.show(sum(c.frames for c in self.cameras), sum(c.faces for c in self.cameras), None,
                          live=sum(c.state == "live" for c in self.cameras), workers=len(self.live))


def run_cameras_on_ray(config: RunConfig, options: RayOptions, *, sources: StrPath | Iterable[StrPath] | None = None,
                       output_dir: StrPath | None = None, on_result: Callable[[SourceResult], None] | None = None,
                       progress: bool = False) -> FleetOutcome:
    """A camera fleet over Ray workers: the same files, manifest, ``summary.json`` and exit codes as
    :meth:`Analyzer.run_fleet` in one process. Options are checked and the folder planned before Ray starts."""
    import ray

    wanted = path_items(sources) if sources is not None else config.sources
    if not wanted:
        raise UsageError("no camera or stream given")
    used = [flag for flag, value in (("--show", config.show), ("--ray-keep-warm", config.ray_keep_warm is not None))
            if value]
    if used:
        raise UsageError(f"{', '.join(used)}: not for cameras over Ray (each worker runs its own fleet); run the "
                         "cameras in one process for these")
    if options.retries < 0:
        raise UsageError(f"--ray-retries must be ≥ 0, got {options.retries}")
    # checked as one process checks a camera's options (for a GPU worker unless --device cpu; each worker resolves its
    # own), and planned as one process plans the folder: an error is said before Ray starts
    checked = replace(config, sources=wanted, source=wanted[0], webcam=None, output=None, summary=None).resolved(
        "cpu" if config.device == "cpu" else "cuda")
    directory = Path(output_dir if output_dir is not None else (config.output or DEFAULT_OUTPUT_DIR))
    with ExitStack() as stack:
        started = time.perf_counter()
        planned, manifest = plan_fleet(replace(checked, summary=config.summary, annotate=config.annotate,
                                               record=config.record, report=config.report), wanted, directory, stack,
                                     video_parts=max(options.retries, 0) + 1)  # (a part more each move)
        plan = ManyPlan(checked, directory, manifest, planned, planned, [])
        run: _CameraRun | None = None
        if config.serve:  # the driver's page first: its address taken (or refused) before Ray starts
            page = _WorkersPage(config.serve, lambda: {name: dict(entry) for name, entry in list(
                run.workers.items())} if run is not None else {})  # (copies: the run changes them meanwhile)
            stack.callback(page.close)
            logger.info("live page on %s (each worker's cameras, as the workers start)", page.url)
        logger.info("%d camera(s); connecting to Ray (%s), then its workers start …", len(planned), options.address)
        held = HeldSignals()  # Ctrl-C and SIGTERM until the run takes them (as for files: HeldSignals says why)
        held.hold()
        ours, board = False, None
        try:
            ours = connect_ray(options.address)
            count, per_gpu, per_cpu = worker_sizing(options, cameras=True)
            worker_device(config, per_gpu)  # (--device cuda where the workers get no GPU: refused)
            count = min(count, len(planned))
            worker_metrics_port(config.metrics_port, count - 1)  # every first worker's port is valid before any starts
            worker_serve_address(config.serve, count - 1)
            _ports_apart(config, count)
            board = ray.remote(num_cpus=0)(CameraBoard).remote()
            # (two calls at once: its run, and the driver's stop)
            actor_class = ray.remote(num_gpus=per_gpu, num_cpus=per_cpu, max_restarts=0, max_concurrency=2)(
                CameraWorker)
            bar = ProgressBar(None) if progress else None
            run = _CameraRun(config, options, planned, directory, plan, actor_class, board, bar, on_result)
            groups = [list(range(len(planned)))[i::count] for i in range(count)]  # round-robin
            try:
                interrupted = run.run(groups, held)
            finally:
                if bar is not None:
                    bar.close()  # (its last line on its own, before the log's)
            held.hold()  # every camera has its line: what is left (summary.json, Ray stopped) is not cut short
        except Exception as exc:
            held.overrule(exc)  # (a Ctrl-C while Ray started, then an error: the Ctrl-C ends the run)
            raise
        finally:
            if run is not None:
                for name in list(run.live):
                    run.dismiss(name)
            if board is not None:
                ray.kill(board, no_restart=True)
            if ours:
                stopping = time.perf_counter()
                disconnect_ray(options.address)
                logger.info("Ray %s in %.1f s", "stopped" if options.address == LOCAL else "disconnected",
                            time.perf_counter() - stopping)
            held.release()
        assert run is not None
        results = [c.result for c in run.cameras if c.result is not None]
        outcome = FleetOutcome(results, {}, interrupted)
        outcome.run = finish_many(
            plan, results, None, interrupted, time.perf_counter() - started,
            cameras=[c.facts for c in run.cameras], timestamps="wall-clock capture time, Unix seconds (UTC)",
            ray={"workers": count, "gpus_per_worker": per_gpu, "worker_failures": run.failures,
                 "per_worker": run.workers, "worker_summaries": run.summaries}).run
    return outcome


__all__ = ["CameraWorker", "run_cameras_on_ray"]
