"""Real network streams for the live tests: Debian's ffmpeg serving a clip on 127.0.0.1, and Chromium.

``ffmpeg -listen 1`` serves one client and exits when it goes away; :class:`MjpegServer` restarts
it each time, as a camera's HTTP server accepts the next connection, until :meth:`MjpegServer.kill`.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from tests.support.ports import free_port


def need(program: str) -> str:
    path = shutil.which(program)
    if path is None:
        pytest.skip(f"needs {program} (Debian package; .ci/run installs it)")
    return path


def serving(port: int) -> bool:
    """Is a server on 127.0.0.1:port listening, or already serving a client (``-listen 1`` stops listening
    once it has one)? Read from /proc: connecting would use up ffmpeg's one client."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields[1].endswith(f":{port:04X}") and fields[3] in ("0A", "01"):  # LISTEN, ESTABLISHED
                return True
    return False


class MjpegServer:
    """``clip`` served as HTTP multipart MJPEG (``-f mpjpeg``) at real-time pace (``-re``), looped."""

    def __init__(self, clip: Path, port: int | None = None, quality: int = 5) -> None:
        self.ffmpeg = need("ffmpeg")
        self.clip = clip
        self.port = port or free_port()
        self.quality = quality
        self.url = f"http://127.0.0.1:{self.port}/stream.mjpg"
        self.process: subprocess.Popen | None = None
        self.starts = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._starting = threading.Lock()  # a kill and the serving thread's restart never interleave

    def _command(self) -> list[str]:
        return [self.ffmpeg, "-hide_banner", "-loglevel", "error", "-nostdin", "-re", "-stream_loop", "-1",
                "-i", str(self.clip), "-an", "-c:v", "mjpeg", "-pix_fmt", "yuvj420p", "-q:v", str(self.quality),
                "-f", "mpjpeg", "-listen", "1", self.url]

    def _serve(self) -> None:
        while True:
            with self._starting:  # (not after a kill: an ffmpeg started then would serve on, orphaned)
                if self._stop.is_set():
                    return
                process = self.process = subprocess.Popen(self._command(), stdin=subprocess.DEVNULL,
                                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                self.starts += 1
            while process.poll() is None and not self._stop.is_set():
                time.sleep(0.05)

    def start(self, timeout: float = 30.0) -> MjpegServer:
        self._stop.clear()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not serving(self.port):
            if time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(f"ffmpeg did not start listening on {self.port}")
            time.sleep(0.05)
        return self

    def stall(self) -> None:
        """Freeze ffmpeg (SIGSTOP): the connection stays open, nothing more is sent."""
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGSTOP)

    def kill(self) -> None:
        with self._starting:
            self._stop.set()
            if self.process is not None and self.process.poll() is None:
                self.process.kill()  # SIGKILL also ends a stopped process
                self.process.wait(timeout=10)
        if self._thread is not None:
            self._thread.join(timeout=10)

    def __enter__(self) -> MjpegServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.kill()


def chromium(tmp: Path, *args: str, timeout: float = 60.0) -> subprocess.CompletedProcess:
    """Headless Chromium with a fresh profile, nothing fetched from elsewhere."""
    profile = tmp / f"chromium-profile-{time.monotonic_ns()}"
    command = [need("chromium"), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
               "--disable-background-networking", "--disable-component-update", "--disable-sync",
               "--disable-dev-shm-usage", f"--user-data-dir={profile}", *args]
    try:
        return subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    finally:
        shutil.rmtree(profile, ignore_errors=True)


class HlsServer:
    """``clip`` as live HLS (H.264, half-second segments, a sliding playlist) written by ffmpeg at
    real-time pace into a folder that the standard library's HTTP server serves."""

    def __init__(self, clip: Path, folder: Path) -> None:
        self.ffmpeg = need("ffmpeg")
        self.clip, self.folder = clip, folder
        self.process: subprocess.Popen | None = None
        self.httpd = None
        self.url = ""

    def __enter__(self) -> HlsServer:
        import functools
        from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

        class Quiet(SimpleHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

        self.folder.mkdir(parents=True, exist_ok=True)
        self.process = subprocess.Popen(
            [self.ffmpeg, "-hide_banner", "-loglevel", "error", "-nostdin", "-re", "-stream_loop", "-1",
             "-i", str(self.clip), "-an", "-c:v", "libx264", "-preset", "ultrafast", "-tune", "zerolatency",
             "-g", "5", "-pix_fmt", "yuv420p", "-f", "hls", "-hls_time", "0.5", "-hls_list_size", "6",
             "-hls_flags", "delete_segments", str(self.folder / "live.m3u8")],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0),
                                         functools.partial(Quiet, directory=str(self.folder)))
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/live.m3u8"
        deadline = time.monotonic() + 20
        while len(list(self.folder.glob("*.ts"))) < 2:  # a playlist with segments to start from
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise RuntimeError("ffmpeg wrote no HLS segments")
            time.sleep(0.1)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.httpd is not None:
            self.httpd.shutdown()
            self.httpd.server_close()
        if self.process is not None:
            self.process.kill()
            self.process.wait(timeout=10)


class Xvfb:
    """A virtual X display (Debian's xvfb) for --show; :meth:`grab` screenshots it with ffmpeg's x11grab."""

    def __init__(self, size: tuple[int, int] = (800, 600)) -> None:
        self.binary = need("Xvfb")
        self.size = size
        self.number = next(n for n in range(90, 200) if not Path(f"/tmp/.X11-unix/X{n}").exists()
                           and not Path(f"/tmp/.X{n}-lock").exists())
        self.display = f":{self.number}"
        self.process: subprocess.Popen | None = None

    def __enter__(self) -> Xvfb:
        width, height = self.size
        self.process = subprocess.Popen([self.binary, self.display, "-screen", "0", f"{width}x{height}x24",
                                         "-nolisten", "tcp"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while not Path(f"/tmp/.X11-unix/X{self.number}").exists():
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise RuntimeError("Xvfb did not start")
            time.sleep(0.05)
        return self

    def grab(self, path: Path) -> Path:
        width, height = self.size
        subprocess.run([need("ffmpeg"), "-hide_banner", "-loglevel", "error", "-y", "-f", "x11grab",
                        "-video_size", f"{width}x{height}", "-i", self.display, "-frames:v", "1", str(path)],
                       check=True, timeout=30, stdin=subprocess.DEVNULL)
        return path

    def __exit__(self, *exc: object) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=10)
