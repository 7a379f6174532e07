"""``--show``: the annotated live stream in a window on this machine, on a thread of its own."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
from collections.abc import Callable

import cv2

from emopipe.errors import UsageError
from emopipe.observe.livepage import FrameHub, _placeholder

logger = logging.getLogger(__name__)


def check_display() -> None:
    """Fail fast, with a way out, where ``--show`` cannot open a window (probed in a child process:
    a GUI toolkit without a display may abort the process instead of raising)."""
    if sys.platform.startswith("linux") and not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        raise UsageError("--show needs a display, and there is none here (DISPLAY is not set); "
                         "use --serve HOST:PORT to watch the annotated stream in a browser")
    probe = ("import cv2\ncv2.namedWindow('emopipe display check', cv2.WINDOW_NORMAL)\ncv2.waitKey(1)\n"
             "cv2.destroyAllWindows()\ncv2.waitKey(1)\n")
    try:
        result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        raise UsageError("--show: opening a window did not finish within 30 s; use --serve HOST:PORT") from None
    if result.returncode != 0:
        lines = [line for line in result.stderr.strip().splitlines() if line.strip()]
        reason = lines[-1] if lines else f"exit code {result.returncode}"
        if "not implemented" in reason.lower() or "rebuild the library" in reason.lower():
            reason = "this OpenCV has no GUI support (opencv-python-headless?); install opencv-python"
        raise UsageError(f"--show cannot open a window: {reason}; use --serve HOST:PORT to watch in a browser")


class WindowView:
    """An OpenCV window showing the hub's newest frame; q or Esc (or closing it) calls ``on_quit``.

    Every HighGUI call happens on the window's own thread, as GUI toolkits require.
    """

    def __init__(self, hub: FrameHub, title: str, on_quit: Callable[[], None]) -> None:
        self.hub = hub
        self.title = title
        self.on_quit = on_quit
        self._ready = threading.Event()
        self._error: str | None = None
        self._closing = threading.Event()
        self._thread = threading.Thread(target=self._run, name="emopipe-window", daemon=True)
        self._thread.start()
        self._ready.wait(30)
        if self._error is not None:
            raise UsageError(f"--show cannot open a window: {self._error}; use --serve HOST:PORT")

    def _run(self) -> None:
        try:
            cv2.namedWindow(self.title, cv2.WINDOW_NORMAL | cv2.WINDOW_KEEPRATIO)
            cv2.imshow(self.title, _placeholder(640, 360))
            cv2.waitKey(1)
        except cv2.error as exc:
            self._error = str(exc).strip().splitlines()[-1]
            self._ready.set()
            return
        self._ready.set()
        seq = 0
        quit_sent = False
        try:
            while not self._closing.is_set():
                got = self.hub.newer(seq, timeout=0.03)
                if got is not None:
                    seq, image = got
                    cv2.imshow(self.title, image)
                key = cv2.waitKey(1) & 0xFF
                closed = cv2.getWindowProperty(self.title, cv2.WND_PROP_VISIBLE) < 1
                if (key in (ord("q"), ord("Q"), 27) or closed) and not quit_sent:
                    quit_sent = True
                    logger.info("window closed: stopping after the current frame")
                    self.on_quit()
                    if closed:
                        return
        finally:
            try:
                cv2.destroyAllWindows()
                cv2.waitKey(1)
            except cv2.error:
                pass  # the user closed it already

    def close(self) -> None:
        self._closing.set()
        self._thread.join(timeout=5)

