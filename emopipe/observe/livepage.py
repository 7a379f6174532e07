"""Watching a live run: the newest annotated frame (:class:`FrameHub`) and the web page (``--serve``).

The page, the window (``--show``, :mod:`emopipe.observe.window`) and the recording (``--record``,
:mod:`emopipe.observe.recording`) read annotated frames the writer thread publishes to a :class:`FrameHub`,
which keeps only the newest one. JPEG encoding for the page runs on its own thread, and only while someone
is watching; the window has its own thread too, so neither ever slows the GPU thread.

The page (``/``) shows the annotated stream (``/stream.mjpg``, multipart MJPEG, which every browser
shows in an ``<img>``) and the current numbers (``/stats.json``: frames per second, capture → result
latency, faces, drops, reconnections); ``/frame.jpg`` is the newest frame and ``/metrics`` the
Prometheus metrics, so a headless GPU box needs nothing but a browser.

Several cameras in one run (a fleet): the page is a grid, a cell per stream with its own numbers and its
newest frame (``/frame/K.jpg``, polled, so any number of cameras stays within a browser's few connections
per host; ``/stream/K.mjpg`` streams one), and ``/stats.json`` lists the streams; :func:`tile` lays the
streams side by side for the window.
"""

from __future__ import annotations

import html
import json
import logging
import math
import re
import socket
import threading
from collections.abc import Callable, Mapping, Sequence
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import cv2
import numpy as np

from emopipe.errors import UsageError
from emopipe.vision.annotate import FONT

logger = logging.getLogger(__name__)

BOUNDARY = "emopipe-frame"
JPEG_QUALITY = 80


class FrameHub:
    """The newest annotated frame, numbered; readers wait for one newer than what they have."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._seq = 0
        self._image: np.ndarray | None = None
        self._closed = False

    def publish(self, image: np.ndarray) -> None:
        """Hand over ``image`` (the publisher must not modify it afterwards)."""
        with self._cond:
            self._seq += 1
            self._image = image
            self._cond.notify_all()

    def newer(self, seq: int, timeout: float) -> tuple[int, np.ndarray] | None:
        """The newest frame if it is newer than ``seq``, waiting up to ``timeout``; else None."""
        with self._cond:
            self._cond.wait_for(lambda: self._seq > seq or self._closed, timeout)
            if self._seq > seq and self._image is not None:
                return self._seq, self._image
            return None

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def seq(self) -> int:
        """The number of the newest frame (0: none yet)."""
        return self._seq


def draw_numbers(image: np.ndarray, numbers: Mapping[str, Any]) -> np.ndarray:
    """The current numbers on a dark band across the top of ``image`` (drawn in place)."""
    height, width = image.shape[:2]
    text = summary_line(numbers)
    scale = min(max(min(width, height) / 700, 0.35), 1.2)
    thickness = max(1, round(scale * 1.5))
    (text_w, _), _ = cv2.getTextSize(text, FONT, scale, thickness)
    if text_w > 0.96 * width:  # small frames: a smaller font rather than a cut line
        scale *= 0.96 * width / text_w
        thickness = 1
    (_, text_h), baseline = cv2.getTextSize("Ag", FONT, scale, thickness)
    band = text_h + baseline + 2 * max(2, round(text_h / 3))
    image[:band] = image[:band] // 3
    cv2.putText(image, text, (max(2, round(0.02 * width)), band - baseline - max(1, band // 8)), FONT, scale,
                (255, 255, 255), thickness, cv2.LINE_AA)
    return image


def summary_line(numbers: Mapping[str, Any]) -> str:
    def ms(value: float | None) -> str:
        return "-" if value is None else f"{value * 1000:.0f} ms"

    fps = numbers.get("fps")
    parts = [f"{fps:.1f} fps" if fps is not None else "- fps", f"latency {ms(numbers.get('latency_p50_s'))}",
             f"faces {numbers.get('faces', 0)}", f"dropped {numbers.get('frames_dropped', 0)}"]
    if numbers.get("state") == "reconnecting":
        parts.append("RECONNECTING")
    return "  ".join(parts)


# -- the web page ------------------------------------------------------------------------------

class JpegEncoder:
    """Encodes the hub's newest frame as JPEG on its own thread, while at least one client watches."""

    def __init__(self, hub: FrameHub, quality: int = JPEG_QUALITY, placeholder: tuple[int, int] = (640, 360)) -> None:
        self.hub = hub
        self.quality = quality
        self._cond = threading.Condition()
        self._clients = 0
        self._jpeg = (0, self._encode(_placeholder(*placeholder)))  # until the first frame
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="emopipe-jpeg", daemon=True)
        self._thread.start()

    def _encode(self, image: np.ndarray) -> bytes:
        ok, data = cv2.imencode(".jpg", image, [cv2.IMWRITE_JPEG_QUALITY, self.quality])
        if not ok:
            raise RuntimeError("OpenCV could not encode a JPEG")
        return data.tobytes()

    def _run(self) -> None:
        seq = 0
        while not self._closed:
            with self._cond:
                if not self._clients:
                    self._cond.wait(0.5)
                    continue
            got = self.hub.newer(seq, timeout=0.5)
            if got is None:
                continue
            seq, image = got
            jpeg = self._encode(image)
            with self._cond:
                self._jpeg = (seq, jpeg)
                self._cond.notify_all()

    def watch(self) -> None:
        with self._cond:
            self._clients += 1
            self._cond.notify_all()

    def unwatch(self) -> None:
        with self._cond:
            self._clients -= 1

    def newer(self, seq: int, timeout: float) -> tuple[int, bytes]:
        """The newest JPEG once it is newer than ``seq`` (or the current one after ``timeout``)."""
        with self._cond:
            self._cond.wait_for(lambda: self._jpeg[0] > seq or self._closed, timeout)
            return self._jpeg

    def latest(self, timeout: float) -> tuple[int, bytes]:
        """The JPEG of the hub's newest frame, encoding it first if need be (call between watch/unwatch):
        a new viewer starts with the current frame, not whatever was encoded last."""
        target = self.hub.seq
        with self._cond:
            self._cond.wait_for(lambda: self._jpeg[0] >= target or self._closed, timeout)
            return self._jpeg

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._thread.join(timeout=2.0)


def _placeholder(width: int, height: int) -> np.ndarray:
    image = np.full((height, width, 3), 40, dtype=np.uint8)
    cv2.putText(image, "emopipe: waiting for the first frame", (20, height // 2), FONT, 0.7, (200, 200, 200), 1,
                cv2.LINE_AA)
    return image


_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>emopipe live: {source}</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body {{ margin: 0; background: #111; color: #eee; font: 15px system-ui, sans-serif; }}
header {{ padding: 8px 14px; display: flex; flex-wrap: wrap; gap: 18px; align-items: baseline; }}
header b {{ font-size: 20px; color: #fff; }} .k {{ color: #999; }}
#view {{ display: block; max-width: 100vw; max-height: calc(100vh - 48px); margin: 0 auto; }}
#view.stale {{ opacity: 0.35; filter: grayscale(1); }}
a {{ color: #8cf; }} .bad {{ color: #f66; }}
</style></head>
<body>
<header>
 <span><span class="k">source</span> {source}</span>
 <span><b id="fps">{fps}</b> <span class="k">fps</span></span>
 <span><span class="k">latency p50</span> <b id="latency">{latency}</b></span>
 <span><span class="k">p99</span> <span id="latency99">{latency99}</span></span>
 <span><span class="k">faces</span> <b id="faces">{faces}</b></span>
 <span><span class="k">frames</span> <span id="frames">{frames}</span></span>
 <span><span class="k">dropped</span> <span id="dropped">{dropped}</span></span>
 <span><span class="k">reconnects</span> <span id="reconnects">{reconnects}</span>
  <span class="k">(failed attempts</span> <span id="failures">{failures}</span><span class="k">)</span></span>
 <span id="state" class="{state_class}">{state}</span>
 <a href="metrics">metrics</a>
</header>
<img id="view" class="{view_class}" src="stream.mjpg" alt="annotated live stream">
<script>
function ms(s) {{ return s === null ? "-" : (s * 1000).toFixed(0) + " ms"; }}
async function refresh() {{
  try {{
    const n = await (await fetch("stats.json", {{cache: "no-store"}})).json();
    document.getElementById("fps").textContent = n.fps === null ? "-" : n.fps.toFixed(1);
    document.getElementById("latency").textContent = ms(n.latency_p50_s);
    document.getElementById("latency99").textContent = ms(n.latency_p99_s);
    document.getElementById("faces").textContent = n.faces;
    document.getElementById("frames").textContent = n.frames;
    document.getElementById("dropped").textContent = n.frames_dropped;
    document.getElementById("reconnects").textContent = n.reconnects;
    document.getElementById("failures").textContent = n.reopen_failures;
    const state = document.getElementById("state");
    const stale = n.outage_s !== null && n.outage_s !== undefined;
    state.textContent = stale ? n.state + " — the frame shown is " + n.outage_s.toFixed(0) + " s old" : n.state;
    state.className = n.state === "live" ? "" : "bad";
    document.getElementById("view").className = stale ? "stale" : "";
  }} catch (e) {{
    document.getElementById("state").textContent = "emopipe is not answering";
  }}
}}
setInterval(refresh, 500);
</script>
</body></html>
"""


def render_page(numbers: Mapping[str, Any]) -> str:
    """The page with the numbers of the moment filled in (the script then refreshes them)."""

    def ms(value: float | None) -> str:
        return "-" if value is None else f"{value * 1000:.0f} ms"

    fps = numbers.get("fps")
    state = str(numbers.get("state", "starting"))
    outage = numbers.get("outage_s")
    shown = state if outage is None else f"{state} — the frame shown is {outage:.0f} s old"
    return _PAGE.format(
        source=html.escape(str(numbers.get("source", ""))),
        fps="-" if fps is None else f"{fps:.1f}",
        latency=ms(numbers.get("latency_p50_s")), latency99=ms(numbers.get("latency_p99_s")),
        faces=int(numbers.get("faces", 0)), frames=int(numbers.get("frames", 0)),
        dropped=int(numbers.get("frames_dropped", 0)), reconnects=int(numbers.get("reconnects", 0)),
        failures=int(numbers.get("reopen_failures", 0)),
        state=html.escape(shown), state_class="" if state == "live" else "bad",
        view_class="stale" if numbers.get("outage_s") is not None else "",
    )


def tile(images: Sequence[np.ndarray | None], width: int = 1280) -> np.ndarray:
    """Several streams' newest frames side by side in one image ``width`` wide (``--show`` with several
    cameras): a grid of equal cells, each frame scaled to fit its cell; a stream without a frame is grey."""
    if not images:
        raise ValueError("tile needs at least one image")
    columns = math.ceil(math.sqrt(len(images)))
    rows = math.ceil(len(images) / columns)
    cell_w = width // columns
    cell_h = max(1, cell_w * 9 // 16)
    canvas = np.full((rows * cell_h, columns * cell_w, 3), 40, dtype=np.uint8)
    for k, image in enumerate(images):
        if image is None:
            continue
        scale = min(cell_w / image.shape[1], cell_h / image.shape[0])
        w, h = max(1, round(image.shape[1] * scale)), max(1, round(image.shape[0] * scale))
        x, y = (k % columns) * cell_w + (cell_w - w) // 2, (k // columns) * cell_h + (cell_h - h) // 2
        canvas[y:y + h, x:x + w] = cv2.resize(image, (w, h), interpolation=cv2.INTER_AREA)
    return canvas


_GRID = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>emopipe live: {count} streams</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body {{ margin: 0; background: #111; color: #eee; font: 14px system-ui, sans-serif; }}
header {{ padding: 8px 14px; }} a {{ color: #8cf; }} .k {{ color: #999; }} .bad {{ color: #f66; }}
#grid {{ display: grid; grid-template-columns: repeat(auto-fill, minmax(320px, 1fr)); gap: 8px; padding: 8px; }}
.cell {{ background: #1b1b1b; }} .cell img {{ width: 100%; display: block; }}
.cell img.stale {{ opacity: 0.35; filter: grayscale(1); }}
.nums {{ padding: 4px 8px; display: flex; flex-wrap: wrap; gap: 10px; overflow-wrap: anywhere; }}
.why:empty {{ display: none; }}
</style></head>
<body>
<header><b>emopipe</b> <span class="k">{count} streams</span>
 <a href="stats.json">stats.json</a> <a href="metrics">metrics</a></header>
<div id="grid">
{cells}
</div>
<script>
function ms(s) {{ return s === null || s === undefined ? "-" : (s * 1000).toFixed(0) + " ms"; }}
function set(k, name, text) {{ document.getElementById(name + "-" + k).textContent = text; }}
async function refresh() {{
  try {{
    const n = await (await fetch("stats.json", {{cache: "no-store"}})).json();
    n.streams.forEach((s, k) => {{
      set(k, "fps", s.fps === null ? "-" : s.fps.toFixed(1));
      set(k, "latency", ms(s.latency_p50_s)); set(k, "latency99", ms(s.latency_p99_s));
      set(k, "faces", s.faces); set(k, "frames", s.frames); set(k, "dropped", s.frames_dropped);
      set(k, "reconnects", s.reconnects); set(k, "error", s.error || "");
      const stale = s.outage_s !== null && s.outage_s !== undefined;
      const state = document.getElementById("state-" + k);
      state.textContent = stale ? s.state + " (" + s.outage_s.toFixed(0) + " s old)" : s.state;
      state.className = s.state === "live" ? "" : "bad";
      document.getElementById("view-" + k).className = stale ? "stale" : "";
    }});
  }} catch (e) {{  // emopipe ended or cannot be reached: no cell goes on saying live
    document.querySelectorAll("[id^=state-]").forEach(state => {{
      state.textContent = "emopipe is not answering"; state.className = "bad"; }});
  }}
}}
function follow(k) {{  // the newest frame of stream k, one request at a time
  const view = document.getElementById("view-" + k);
  view.onload = view.onerror = () => setTimeout(() => {{ view.src = "frame/" + k + ".jpg?t=" + Date.now(); }}, 150);
}}
for (let k = 0; k < {count}; k++) follow(k);
setInterval(refresh, 500);
</script>
</body></html>
"""

_CELL = """<div class="cell" id="stream-{k}">
 <img id="view-{k}" class="{view_class}" src="frame/{k}.jpg" alt="stream {k}">
 <div class="nums"><b>{source}</b> <span id="state-{k}" class="{state_class}">{state}</span></div>
 <div class="nums"><span><b id="fps-{k}">{fps}</b> <span class="k">fps</span></span>
  <span><span class="k">p50</span> <span id="latency-{k}">{latency}</span></span>
  <span><span class="k">p99</span> <span id="latency99-{k}">{latency99}</span></span>
  <span><span class="k">faces</span> <span id="faces-{k}">{faces}</span></span>
  <span><span class="k">frames</span> <span id="frames-{k}">{frames}</span></span>
  <span><span class="k">dropped</span> <span id="dropped-{k}">{dropped}</span></span>
  <span><span class="k">reconnects</span> <span id="reconnects-{k}">{reconnects}</span></span></div>
 <div class="nums bad why" id="error-{k}">{error}</div>
</div>"""


def render_grid(numbers: Mapping[str, Any]) -> str:
    """The fleet's page: a cell per stream (``numbers["streams"]``), filled in now and refreshed by the script."""

    def ms(value: float | None) -> str:
        return "-" if value is None else f"{value * 1000:.0f} ms"

    cells = []
    for k, n in enumerate(numbers.get("streams", [])):
        fps, state = n.get("fps"), str(n.get("state", "starting"))
        cells.append(_CELL.format(
            k=k, source=html.escape(str(n.get("source", ""))), state=html.escape(state),
            state_class="" if state == "live" else "bad", view_class="stale" if n.get("outage_s") is not None else "",
            fps="-" if fps is None else f"{fps:.1f}", latency=ms(n.get("latency_p50_s")),
            latency99=ms(n.get("latency_p99_s")), faces=int(n.get("faces", 0)), frames=int(n.get("frames", 0)),
            dropped=int(n.get("frames_dropped", 0)), reconnects=int(n.get("reconnects", 0)),
            error=html.escape(str(n.get("error") or ""))))  # why a lost camera is lost
    return _GRID.format(count=len(cells), cells="\n".join(cells))


def parse_address(text: str, default_host: str = "127.0.0.1") -> tuple[str, int]:
    """``HOST:PORT``, ``:PORT``, ``PORT`` or ``[IPv6]:PORT`` → (host, port)."""
    host, _, port_text = text.rpartition(":")
    host = host.strip("[]") or default_host
    try:
        port = int(port_text)
    except ValueError:
        raise UsageError(f"--serve takes HOST:PORT (e.g. 0.0.0.0:8080 or :8080), got {text!r}") from None
    if not 0 <= port <= 65535:
        raise UsageError(f"--serve port must be 0..65535, got {port}")
    return host, port


def _server_for(host: str) -> type[ThreadingHTTPServer]:
    """The server class for ``host``'s address family: the standard one listens on IPv4 only, so ``[::1]:8080``
    (which parse_address takes) needs an IPv6 one. A name with an IPv4 address keeps it, as before (localhost)."""
    families = {found[0] for found in socket.getaddrinfo(host or None, 0, type=socket.SOCK_STREAM,
                                                         flags=socket.AI_PASSIVE)}
    if not families or socket.AF_INET in families:
        return ThreadingHTTPServer
    return type("ThreadingHTTPServer6", (ThreadingHTTPServer,), {"address_family": families.pop()})


class LiveServer:
    """The live page, its MJPEG stream, the numbers and /metrics, on a threaded standard-library server.

    ``hub`` is one stream's; a sequence of hubs (a fleet) serves the grid page, ``/frame/K.jpg`` and
    ``/stream/K.mjpg`` per stream, and ``numbers()`` then returns ``{"streams": [one dict per stream], …}``.
    """

    def __init__(self, host: str, port: int, hub: FrameHub | Sequence[FrameHub], numbers: Callable[[], dict[str, Any]],
                 metrics: Callable[[], tuple[bytes, str]] | None = None) -> None:
        self.grid = not isinstance(hub, FrameHub)
        hubs = list(hub) if not isinstance(hub, FrameHub) else [hub]
        if not hubs:
            raise ValueError("LiveServer needs at least one FrameHub")
        self.hub = hubs[0]
        self.numbers = numbers
        self.metrics = metrics
        self.encoders = [JpegEncoder(h) for h in hubs]
        self.encoder = self.encoders[0]
        self.closing = threading.Event()
        handler = type("LiveHandler", (_Handler,), {"live": self})
        try:
            self.httpd = _server_for(host)((host, port), handler)
        except OSError as exc:
            for encoder in self.encoders:
                encoder.close()
            raise UsageError(f"cannot serve the live page on {host}:{port}: {exc.strerror or exc}; "
                             "choose another --serve address") from None
        self.httpd.daemon_threads = True
        self.host = host
        self.port = int(self.httpd.server_address[1])
        self._thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.2},
                                        name="emopipe-serve", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        host = "localhost" if self.host in ("", "0.0.0.0", "::") else self.host
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{self.port}/"

    def close(self) -> None:
        self.closing.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        for encoder in self.encoders:
            encoder.close()
        self._thread.join(timeout=5)


class _Handler(BaseHTTPRequestHandler):
    live: LiveServer
    protocol_version = "HTTP/1.1"
    server_version = "emopipe"

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("serve: " + format, *args)

    def _send(self, body: bytes, content_type: str, status: HTTPStatus = HTTPStatus.OK) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def do_HEAD(self) -> None:
        self.do_GET()

    def _encoder(self, path: str, single: str, pattern: str) -> JpegEncoder | None:
        """The encoder a frame or stream path names: ``single`` is stream 0, ``pattern`` has stream K."""
        if path == single:
            return self.live.encoder
        found = re.fullmatch(pattern, path)
        if found is not None and int(found.group(1)) < len(self.live.encoders):
            return self.live.encoders[int(found.group(1))]
        return None

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        live = self.live
        frame = self._encoder(path, "/frame.jpg", r"/frame/(\d{1,6})\.jpg")
        stream = self._encoder(path, "/stream.mjpg", r"/stream/(\d{1,6})\.mjpg")
        if path in ("/", "/index.html"):
            page = render_grid(live.numbers()) if live.grid else render_page(live.numbers())
            self._send(page.encode(), "text/html; charset=utf-8")
        elif path == "/stats.json":
            self._send(json.dumps(live.numbers()).encode(), "application/json")
        elif frame is not None:
            frame.watch()
            try:
                _, jpeg = frame.latest(timeout=2.0)
            finally:
                frame.unwatch()
            self._send(jpeg, "image/jpeg")
        elif stream is not None:
            self._stream(stream)
        elif path == "/metrics" and live.metrics is not None:
            body, content_type = live.metrics()
            self._send(body, content_type)
        else:
            self._send(b"not found: try / (the live page), /stream.mjpg, /frame.jpg, /frame/K.jpg, /stream/K.mjpg, "
                       b"/stats.json or /metrics\n", "text/plain; charset=utf-8", HTTPStatus.NOT_FOUND)

    def _stream(self, encoder: JpegEncoder) -> None:
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", f"multipart/x-mixed-replace; boundary={BOUNDARY}")
        self.send_header("Cache-Control", "no-store")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        if self.command == "HEAD":
            return
        live = self.live
        encoder.watch()
        seq = -1
        try:
            while not live.closing.is_set():
                current, jpeg = encoder.latest(2.0) if seq < 0 else encoder.newer(seq, timeout=1.0)
                if current == seq:
                    continue
                seq = current
                self.wfile.write(f"--{BOUNDARY}\r\nContent-Type: image/jpeg\r\nContent-Length: {len(jpeg)}\r\n\r\n"
                                 .encode() + jpeg + b"\r\n")
                self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, TimeoutError):
            pass  # the viewer went away
        finally:
            encoder.unwatch()


# -- the window --------------------------------------------------------------------------------


# -- the recording -------------------------------------------------------------------------------

