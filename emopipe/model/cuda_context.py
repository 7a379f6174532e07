"""The GPU's CUDA context, made on a thread while PyTorch imports.

A command's first seconds on the GPU hosts are PyTorch's import (~3 s of Python holding the interpreter lock);
making the CUDA context (the driver's initialisation and the device's primary context, ~0.3 s there) needs neither
PyTorch nor that lock. So the command line starts it first, on a thread: the driver API through ctypes (which lets
the lock go during each call), the device's *primary* context retained — the one PyTorch, NVDEC and ONNX Runtime
use — and kept for the life of the process. PyTorch then finds it made (benchmarks.md, "Start-up").

Nothing here imports PyTorch (an import contract says so).
"""

from __future__ import annotations

import ctypes
import importlib.util
import logging
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

logger = logging.getLogger(__name__)

_INVALID_DEVICE = 101  # CUDA_ERROR_INVALID_DEVICE

_thread: threading.Thread | None = None
made: dict[str, int] = {}  # what the thread made: {"ordinal": N, "context": address} once retained


def device_ordinal(device: str) -> int | None:
    """The CUDA device ``device`` (``--device``: auto, cpu, cuda, cuda:N) runs on; None for the CPU, for ``auto``
    where PyTorch is a build without CUDA, and for names the run's own device check refuses."""
    if device == "auto":
        return 0 if _torch_has_cuda() else None  # (auto takes PyTorch's current device: 0 in a new process)
    if device == "cuda":
        return 0
    if device.startswith("cuda:") and device[5:].isdigit():
        return int(device[5:])
    return None


GPU_LISTING = Path("/proc/driver/nvidia/gpus")  # a folder per GPU, made by the NVIDIA driver (Linux)


def gpu_count(listing: Path = GPU_LISTING) -> int:
    """The GPUs this process's CUDA would see, asked without PyTorch and without starting CUDA (a process that only
    starts workers on them loads neither): the NVIDIA driver's GPUs in ``listing``, as many of them as
    ``CUDA_VISIBLE_DEVICES`` shows (its entries up to the first invalid one, as CUDA reads it); the driver API where
    there is no such folder; 0 without an NVIDIA driver."""
    if listing.is_dir():
        count = sum(1 for _ in listing.iterdir())
    else:
        try:
            driver = ctypes.CDLL("libcuda.so.1")
        except OSError:
            return 0
        found = ctypes.c_int()
        if driver.cuInit(0) != 0 or driver.cuDeviceGetCount(ctypes.byref(found)) != 0:
            return 0
        return found.value  # (the driver API applies CUDA_VISIBLE_DEVICES itself)
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        shown = 0
        for entry in visible.split(","):
            if not entry.strip() or entry.strip().startswith("-"):
                break
            shown += 1
        count = min(count, shown)
    return count


def _torch_has_cuda() -> bool:
    """Whether the installed PyTorch is a CUDA build, from its files (importing it is what this overlaps)."""
    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        return False
    if spec is None or spec.origin is None:
        return False
    return (Path(spec.origin).parent / "lib" / "libtorch_cuda.so").exists()


def start(device: str, then: Callable[[], object] | None = None) -> None:
    """Begin making ``device``'s primary CUDA context on a thread (once a process), and once it is made, call
    ``then`` there. Where it cannot be made (no driver, no such GPU), the thread ends quietly and PyTorch's own start
    says what is wrong, as before."""
    global _thread
    ordinal = device_ordinal(device)
    if ordinal is None or _thread is not None:
        return
    # PyTorch asks the driver for lazy module loading before it initialises CUDA; the driver reads it now
    os.environ.setdefault("CUDA_MODULE_LOADING", "LAZY")
    _thread = threading.Thread(target=_retain, args=(ordinal, then), name="emopipe-cuda-context", daemon=True)
    _thread.start()


def wait(timeout: float | None = None) -> None:
    """Until the thread :func:`start` began has ended (tests and measurements; a run never needs to wait)."""
    if _thread is not None:
        _thread.join(timeout)


def _retain(ordinal: int, then: Callable[[], object] | None = None) -> None:
    context = _primary_context(ordinal)
    if context is not None:
        made.update(ordinal=ordinal, context=context)
        if then is not None:
            try:
                then()
            except Exception as exc:  # (what it begins is only ahead of time: the run does it anyway)
                logger.debug("after the CUDA context: %s", exc)


def make_current(ordinal: int) -> bool:
    """Retain ``ordinal``'s primary context and make it this thread's current one, for a process that runs CUDA
    libraries without PyTorch (the cuDNN plan builders, :mod:`emopipe.model.cudnn_plans`): the CUDA runtime
    those libraries use then works on that device. False where there is no driver or no such GPU."""
    context = _primary_context(ordinal)
    if context is None:
        return False
    status = ctypes.CDLL("libcuda.so.1").cuCtxSetCurrent(ctypes.c_void_p(context))
    if status != 0:
        logger.debug("CUDA context not made current (driver status %s)", status)
    return status == 0


_COMPUTE_CAPABILITY = (75, 76)  # CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, _MINOR


def device_model(ordinal: int) -> tuple[str, int, int] | None:
    """GPU ``ordinal``'s name and compute capability as PyTorch reports them (``NVIDIA H200``, 9, 0), asked of the
    driver without making a context; None where there is no driver or no such GPU."""
    try:
        driver = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None
    device, name = ctypes.c_int(), ctypes.create_string_buffer(256)
    major, minor = ctypes.c_int(), ctypes.c_int()
    status = driver.cuInit(0)
    if status == 0:
        status = driver.cuDeviceGet(ctypes.byref(device), ordinal)
    if status == 0:
        status = driver.cuDeviceGetName(name, len(name), device)
    for value, attribute in zip((major, minor), _COMPUTE_CAPABILITY, strict=True):
        if status == 0:
            status = driver.cuDeviceGetAttribute(ctypes.byref(value), attribute, device)
    if status != 0:
        return None
    return name.value.decode(errors="replace"), major.value, minor.value


def _primary_context(ordinal: int) -> int | None:
    """``ordinal``'s primary context, retained (the driver initialised first); None where it cannot be."""
    try:
        driver = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None  # no NVIDIA driver here
    count, device, context = ctypes.c_int(), ctypes.c_int(), ctypes.c_void_p()
    status = driver.cuInit(0)
    if status == 0:
        status = driver.cuDeviceGetCount(ctypes.byref(count))
    if status == 0 and ordinal >= count.value:
        status = _INVALID_DEVICE
    if status == 0:
        status = driver.cuDeviceGet(ctypes.byref(device), ordinal)
    if status == 0:
        status = driver.cuDevicePrimaryCtxRetain(ctypes.byref(context), device)
    if status != 0:
        logger.debug("CUDA context not made ahead (driver status %s): PyTorch makes it", status)
        return None
    return int(context.value or 0)


MPS_CONTROL = "nvidia-cuda-mps-control"  # NVIDIA's MPS control tool (the daemon and its client), with the driver
MPS_VARIABLES = ("CUDA_MPS_PIPE_DIRECTORY", "CUDA_MPS_LOG_DIRECTORY")  # where a CUDA process looks for its daemon


def mps_running(tries: int = 1, env: dict[str, str] | None = None) -> bool:
    """Whether NVIDIA's MPS control daemon answers on this machine (its pipe directory: ``CUDA_MPS_PIPE_DIRECTORY``,
    else the default; ``env``: the environment that names it, default this process's). Under MPS the processes
    sharing a GPU run their kernels side by side; without it they take turns, so a second worker on a GPU adds ~8 %
    (docs/benchmarks.md). Asked of the daemon itself: a socket left by one that stopped stays in its directory.
    ``tries``: asked that many times, a second apart, before it counts as not running (workers starting at once ask
    it together: one of four once heard no answer, 2026-11-27)."""
    control = shutil.which(MPS_CONTROL)
    if control is None:
        return False
    for attempt in range(tries):
        if attempt:
            time.sleep(1.0)
        if _ask_mps(control, "get_server_list", env) is not None:
            return True
    return False


def _ask_mps(control: str, command: str, env: dict[str, str] | None = None, timeout: float = 5.0) -> str | None:
    """The daemon's answer to ``command``, or None where no daemon answered."""
    try:
        asked = subprocess.run([control], input=command + "\n", capture_output=True, text=True, timeout=timeout,
                               env=env)
    except (OSError, subprocess.SubprocessError):
        return None
    return asked.stdout if asked.returncode == 0 else None


class MpsUnavailable(Exception):
    """NVIDIA MPS could not be started here; the message says why, in a few words."""


# The daemon's process: its parent-death signal set, then NVIDIA's tool run in its place (execv keeps the signal), so
# a command killed outright takes its daemon with it — and the daemon's MPS server ends with its last client (the
# workers die with the command too): nothing is left running (H200, session 38, s38c).
_DIE_WITH_PARENT = ("import ctypes, os, signal, sys\n"
                    "ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)\n"  # PR_SET_PDEATHSIG
                    "os.getppid() == int(sys.argv[1]) or sys.exit(1)\n"  # (its parent died before the signal was set)
                    "os.execv(sys.argv[2], sys.argv[2:])\n")


_MPS_FOLDER = "emopipe-mps-"  # an own daemon's pipe directory: emopipe-mps-PID-…, PID the command's


def _remove_left_behind(temporary: Path) -> None:
    """The pipe directories of commands that were killed outright (their daemons died with them; only the
    directories, a few empty files, were left)."""
    for folder in temporary.glob(f"{_MPS_FOLDER}*-*"):
        pid = folder.name[len(_MPS_FOLDER):].split("-", 1)[0]
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(folder, ignore_errors=True)
        except OSError:  # (another user's command, running)
            continue


class OwnMps:
    """NVIDIA MPS started by this command for its worker processes (``--mps``): the control daemon in the foreground
    as this process's child, on a pipe directory of its own — only processes given :attr:`env` use it, so nothing
    else on the machine changes (no GPU setting, no other process's MPS) — and ended by :meth:`stop`, or with this
    process should it be killed. Measured on an H200 (session 38): the daemon answers ~0.1 s after it starts; its
    server starts with the first worker's CUDA context; ``quit`` ends both in ~0.1 s once the workers are gone."""

    START_S = 10.0  # how long a new daemon may take to answer
    QUIT_S = 10.0  # how long ``quit`` may take (it waits for clients still attached) before the daemon is killed

    def __init__(self, control: str, process: subprocess.Popen[bytes], folder: Path) -> None:
        self.control, self.process, self.folder = control, process, folder

    @property
    def env(self) -> dict[str, str]:
        """What a process needs in its environment to run under this daemon."""
        return dict(zip(MPS_VARIABLES, (str(self.folder), str(self.folder / "log")), strict=True))

    @classmethod
    def start(cls) -> OwnMps:
        """A new daemon, answering; :class:`MpsUnavailable` where there is none to start or it did not answer."""
        import sys
        import tempfile

        control = shutil.which(MPS_CONTROL)
        if control is None:
            raise MpsUnavailable(f"{MPS_CONTROL} not found: it comes with NVIDIA's driver")
        _remove_left_behind(Path(tempfile.gettempdir()))
        folder = Path(tempfile.mkdtemp(prefix=f"{_MPS_FOLDER}{os.getpid()}-"))
        (folder / "log").mkdir()
        env = {**os.environ, **dict(zip(MPS_VARIABLES, (str(folder), str(folder / "log")), strict=True))}
        try:
            with open(folder / "daemon.err", "wb") as said:  # (a file: a pipe nobody read could stall it)
                process = subprocess.Popen([sys.executable, "-I", "-S", "-c", _DIE_WITH_PARENT, str(os.getpid()),
                                            control, "-f"], env=env, stdin=subprocess.DEVNULL,
                                           stdout=subprocess.DEVNULL, stderr=said)
        except OSError as exc:
            shutil.rmtree(folder, ignore_errors=True)
            raise MpsUnavailable(f"{MPS_CONTROL} did not start: {exc.strerror or exc}") from None
        own = cls(control, process, folder)
        began = time.monotonic()
        deadline = began + cls.START_S
        while _ask_mps(control, "get_server_list", env) is None:
            if process.poll() is not None or time.monotonic() > deadline:
                said = own._said()
                own.stop()
                raise MpsUnavailable(f"its daemon {'ended' if process.returncode is not None else 'did not answer'}"
                                     + (f": {said}" if said else ""))
            time.sleep(0.02)
        logger.debug("MPS: its daemon answered %.3f s after it started (%s)", time.monotonic() - began, folder)
        return own

    def stop(self) -> None:
        """The daemon (and its server) ended, its pipe directory removed. Call once its processes are gone: ``quit``
        waits for clients still attached (up to QUIT_S; then the daemon is killed, and what they still ran fails)."""
        began = time.monotonic()
        if self.process.poll() is None:
            _ask_mps(self.control, "quit", {**os.environ, **self.env}, timeout=self.QUIT_S)
            try:
                self.process.wait(self.QUIT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.folder, ignore_errors=True)
        logger.debug("MPS: its daemon ended %.3f s after it was asked to", time.monotonic() - began)

    def _said(self) -> str:
        """The last line the ended daemon wrote on its standard error, if any."""
        try:
            lines = (self.folder / "daemon.err").read_text(errors="replace").strip().splitlines()
        except OSError:
            return ""
        return lines[-1].strip()[:200] if lines else ""
