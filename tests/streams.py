"""Real network streams for the live tests: Debian's ffmpeg serving a clip on 127.0.0.1, and Chromium.

``ffmpeg -listen 1`` serves one client and exits when it goes away; :class:`MjpegServer` restarts
it each time, as a camera's HTTP server accepts the next connection, until :meth:`MjpegServer.kill`.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest


def need(program: str) -> str:
    path = shutil.which(program)
    if path is None:
        pytest.skip(f"needs {program} (Debian package; .ci/run installs it)")
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


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

    def _command(self) -> list[str]:
        return [self.ffmpeg, "-hide_banner", "-loglevel", "error", "-nostdin", "-re", "-stream_loop", "-1",
                "-i", str(self.clip), "-an", "-c:v", "mjpeg", "-pix_fmt", "yuvj420p", "-q:v", str(self.quality),
                "-f", "mpjpeg", "-listen", "1", self.url]

    def _serve(self) -> None:
        while not self._stop.is_set():
            self.process = subprocess.Popen(self._command(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                            stderr=subprocess.DEVNULL)
            self.starts += 1
            while self.process.poll() is None and not self._stop.is_set():
                time.sleep(0.05)

    def start(self, timeout: float = 10.0) -> MjpegServer:
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
