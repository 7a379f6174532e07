"""Video decoding in a child process, so that it runs beside the pipeline instead of taking turns with it.

In one process the reader thread needs the GIL back after each of OpenCV's calls (decode, position,
colour conversion), while the GPU and writer threads run Python; on the GPU hosts that doubled the
time a frame took to decode and capped the whole run. Here a child process opens the video with
:class:`~emopipe.source.VideoSource` — the same seeking, timestamps and truncation checks — and
decodes ahead into a ring of shared-memory slots. For each frame it sends the slot, index and times
over a socket; the parent copies the pixels out of the slot and hands the slot back, so the ring
stays small (``slots`` frames) however far behind the pipeline falls.

What the in-process source raises (a missing or unreadable file, a start time past the end) is
raised by the parent when it opens the source; a video that stops early sets ``ended_early`` as it
does in-process. A child that dies (FFmpeg crashing on a damaged file) ends the stream early with
its exit status. The child ignores Ctrl-C: the parent handles it and closes the source, which ends
the child.

Linux only (the ring is a memfd); :func:`available` says whether this machine has it.
"""

from __future__ import annotations

import contextlib
import math
import mmap
import os
import signal
import socket
import subprocess
import sys
from collections import deque
from collections.abc import Iterator
from multiprocessing.connection import Connection
from pathlib import Path

import numpy as np

from .errors import InputUnreadableError
from .source import Frame, VideoSource, _check_arguments, _check_file, _SourceBase

DEFAULT_SLOTS = 8  # frames decoded ahead; each 2.8 MB at 1280×720
_CHILD_EXIT_WAIT_S = 5.0


def available() -> bool:
    """Whether videos can be decoded in a child process here (Linux: memfd shared memory)."""
    return sys.platform.startswith("linux") and hasattr(os, "memfd_create")


class ProcessVideoSource(_SourceBase):
    """A video file decoded in a child process; frames, timestamps and errors as :class:`VideoSource`'s.

    Iterate in one thread; :meth:`close` may be called from another (it ends the child, which ends
    the iteration).
    """

    def __init__(self, path: str | os.PathLike[str], *, start_s: float | None = None, end_s: float | None = None,
                 max_frames: int | None = None, slots: int = DEFAULT_SLOTS) -> None:
        super().__init__()
        _check_arguments(start_s, end_s, max_frames)
        self.path = Path(path)
        _check_file(self.path)  # the user's mistakes are reported before a process starts
        if slots < 1:
            raise ValueError(f"slots must be at least 1, got {slots}")
        self._closed = False
        self._ring: np.ndarray | None = None
        self._memory_fd = os.memfd_create("emopipe-frames", os.MFD_CLOEXEC)
        ours, theirs = socket.socketpair()
        self._socket = ours
        self._connection = Connection(os.dup(ours.fileno()))
        try:
            self._process = subprocess.Popen(
                [sys.executable, "-m", "emopipe.decode_process", str(theirs.fileno()), str(self._memory_fd)],
                pass_fds=(theirs.fileno(), self._memory_fd), stdin=subprocess.DEVNULL, env=_child_environment())
        except BaseException:
            theirs.close()
            self._release()
            raise
        theirs.close()
        try:
            self._connection.send(("open", str(self.path), start_s, end_s, max_frames, slots))
            reply = self._receive()
            if reply is None:
                raise InputUnreadableError(f"cannot read {self.path}: the decoder process stopped "
                                           f"({self._exit_status()})")
            _, self.info, self._expected, shape = reply
            memory = mmap.mmap(self._memory_fd, slots * math.prod(shape))
            self._ring = np.frombuffer(memory, dtype=np.uint8).reshape(slots, *shape)
        except BaseException:
            self.close()
            raise

    @property
    def expected_frames(self) -> int | None:
        return self._expected

    def _receive(self) -> tuple | None:
        """The child's next message; None once it is gone. Raises what the child raised."""
        try:
            message = self._connection.recv()
        except (EOFError, OSError):
            return None
        if message[0] == "error":
            raise message[1]
        return message

    def _exit_status(self) -> str:
        try:
            code = self._process.wait(timeout=_CHILD_EXIT_WAIT_S)
        except subprocess.TimeoutExpired:
            return "still running"
        if code < 0:
            return f"killed by signal {-code}"
        return f"exit status {code}"

    def _frames(self) -> Iterator[Frame]:
        yielded = 0
        while True:
            message = self._receive()
            if message is None:
                if not self._closed:
                    self.ended_early = (f"decoding stopped after {yielded} frames: the decoder process ended "
                                        f"({self._exit_status()})")
                return
            kind = message[0]
            if kind == "end":
                self.ended_early = message[1]
                return
            if kind == "inline":  # a frame of another size than the ring's (the stream changed size)
                frame = message[1]
            else:
                _, slot, index, timestamp, read_time = message
                assert self._ring is not None
                frame = Frame(index=index, timestamp=timestamp, bgr=self._ring[slot].copy(), read_time=read_time)
                with contextlib.suppress(OSError):  # a child that is gone: what it sent is still read
                    self._connection.send(("free", slot))
            yielded += 1
            yield frame

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        process = getattr(self, "_process", None)
        if process is not None and process.poll() is None:
            with contextlib.suppress(OSError):
                self._connection.send(("stop",))
        # Wakes a reader blocked in recv() on another thread: it sees the end of the stream.
        with contextlib.suppress(OSError):
            self._socket.shutdown(socket.SHUT_RDWR)
        if process is not None:
            try:
                process.wait(timeout=_CHILD_EXIT_WAIT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self._release()

    def _release(self) -> None:
        # The ring's memory is unmapped when the last frame being copied out of it lets go (a reader
        # on another thread may still be in that copy), not here.
        self._ring = None
        for close in (self._connection.close, self._socket.close, lambda: os.close(self._memory_fd)):
            with contextlib.suppress(OSError):
                close()


def _child_environment() -> dict[str, str]:
    # The child imports emopipe from wherever the parent did, installed or not.
    package_root = str(Path(__file__).resolve().parents[1])
    paths = [package_root, *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}


# -- the child ---------------------------------------------------------------------------------

def serve(source: VideoSource, connection: Connection, ring: np.ndarray) -> None:
    """Decode ``source`` into the ring's free slots, telling the parent about each frame.

    Blocks while every slot is waiting for the parent; returns when the source ends, the parent
    says stop or the parent is gone.
    """
    free = deque(range(len(ring)))
    try:
        for frame in source:
            while not free or connection.poll():
                message = connection.recv()  # a hand-back, or stop
                if message[0] == "stop":
                    return
                free.append(message[1])
            if frame.bgr.shape != ring.shape[1:]:
                connection.send(("inline", frame))
                continue
            slot = free.popleft()
            ring[slot] = frame.bgr
            connection.send(("frame", slot, frame.index, frame.timestamp, frame.read_time))
        connection.send(("end", source.ended_early))
    except (EOFError, BrokenPipeError, ConnectionResetError):
        return


def _child(socket_fd: int, memory_fd: int) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle; it closes us
    connection = Connection(socket_fd)
    try:
        _, path, start_s, end_s, max_frames, slots = connection.recv()
    except EOFError:
        return
    try:
        source = VideoSource(path, start_s=start_s, end_s=end_s, max_frames=max_frames)
    except Exception as exc:  # every error goes to the parent, which raises it
        connection.send(("error", exc))
        return
    with source:
        shape = (source.info.height, source.info.width, 3)
        os.ftruncate(memory_fd, slots * math.prod(shape))
        ring = np.frombuffer(mmap.mmap(memory_fd, slots * math.prod(shape)), dtype=np.uint8).reshape(slots, *shape)
        try:
            connection.send(("info", source.info, source.expected_frames, shape))
        except OSError:
            return
        try:
            serve(source, connection, ring)
        except Exception as exc:
            connection.send(("error", exc))
            return
    try:  # wait for the parent to finish reading: it hands back slots until then
        while connection.recv()[0] != "stop":
            pass
    except (EOFError, OSError):
        pass


if __name__ == "__main__":
    _child(int(sys.argv[1]), int(sys.argv[2]))
