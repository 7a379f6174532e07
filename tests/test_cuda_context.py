"""The CUDA context made on a thread while PyTorch imports (emopipe.model.cuda_context): the driver calls it makes,
where it makes none, and that the command line starts it before PyTorch loads. On the GPU: tests/test_gpu.py."""

from __future__ import annotations

import subprocess
import sys

import pytest

from emopipe.model import cuda_context


class FakeDriver:
    """libcuda's entry points the thread calls, answering as a driver with ``devices`` GPUs would."""

    def __init__(self, devices: int = 2, init_status: int = 0) -> None:
        self.devices, self.init_status, self.calls = devices, init_status, []

    def cuInit(self, flags):
        self.calls.append(("cuInit", flags))
        return self.init_status

    def cuDeviceGetCount(self, count):
        self.calls.append(("cuDeviceGetCount",))
        count._obj.value = self.devices
        return 0

    def cuDeviceGet(self, device, ordinal):
        self.calls.append(("cuDeviceGet", ordinal))
        device._obj.value = 10 + ordinal
        return 0

    def cuDevicePrimaryCtxRetain(self, context, device):
        self.calls.append(("cuDevicePrimaryCtxRetain", device.value))
        context._obj.value = 0xC0FFEE
        return 0

    def cuCtxSetCurrent(self, context):
        self.calls.append(("cuCtxSetCurrent", context.value))
        return 0


@pytest.fixture
def fresh(monkeypatch):
    """A process that has made no context yet, with the driver of the test's choosing."""
    monkeypatch.setattr(cuda_context, "_thread", None)
    monkeypatch.setattr(cuda_context, "made", {})
    monkeypatch.delenv("CUDA_MODULE_LOADING", raising=False)

    def use(driver):
        def load(name):
            assert name == "libcuda.so.1"
            if isinstance(driver, Exception):
                raise driver
            return driver
        monkeypatch.setattr(cuda_context.ctypes, "CDLL", load)
        return driver
    return use


@pytest.mark.parametrize(("device", "ordinal"), [("cuda", 0), ("cuda:1", 1), ("cpu", None), ("cuda:x", None),
                                                 ("mps", None)])
def test_the_device_names_the_gpu(device, ordinal):
    assert cuda_context.device_ordinal(device) == ordinal


def test_auto_is_the_first_gpu_only_for_a_cuda_build_of_pytorch(monkeypatch):
    monkeypatch.setattr(cuda_context, "_torch_has_cuda", lambda: True)
    assert cuda_context.device_ordinal("auto") == 0
    monkeypatch.setattr(cuda_context, "_torch_has_cuda", lambda: False)
    assert cuda_context.device_ordinal("auto") is None


def test_the_installed_pytorch_is_told_apart_by_its_files():
    import importlib.util
    from pathlib import Path

    library = Path(importlib.util.find_spec("torch").origin).parent / "lib" / "libtorch_cuda.so"
    assert cuda_context._torch_has_cuda() is library.exists()


def test_the_thread_retains_the_devices_primary_context(fresh):
    driver = fresh(FakeDriver(devices=2))
    cuda_context.start("cuda:1")
    cuda_context.start("cuda:1")  # once a process
    cuda_context.wait(timeout=30)
    assert driver.calls == [("cuInit", 0), ("cuDeviceGetCount",), ("cuDeviceGet", 1),
                            ("cuDevicePrimaryCtxRetain", 11)]
    assert cuda_context.made == {"ordinal": 1, "context": 0xC0FFEE}
    import os

    assert os.environ["CUDA_MODULE_LOADING"] == "LAZY"  # (as PyTorch asks before it initialises CUDA)


@pytest.mark.parametrize("driver", [FakeDriver(devices=1), FakeDriver(init_status=100), OSError("no libcuda")],
                         ids=["no such gpu", "no device", "no driver"])
def test_where_no_context_can_be_made_the_thread_ends_quietly(fresh, driver):
    fresh(driver)
    cuda_context.start("cuda:1")
    cuda_context.wait(timeout=30)
    assert cuda_context.made == {}
    if isinstance(driver, FakeDriver):
        assert ("cuDevicePrimaryCtxRetain", 11) not in driver.calls
        assert ("cuDeviceGetCount",) in driver.calls or driver.init_status != 0


def test_a_process_without_pytorch_makes_the_devices_context_current(fresh):
    """What a cuDNN plan builder does first (emopipe.model.cudnn_plans): the CUDA runtime of the libraries it then
    loads works in the context current to its thread."""
    driver = fresh(FakeDriver(devices=2))
    assert cuda_context.make_current(1)
    assert driver.calls[-2:] == [("cuDevicePrimaryCtxRetain", 11), ("cuCtxSetCurrent", 0xC0FFEE)]
    assert not cuda_context.make_current(2)  # no such GPU: nothing made current
    assert driver.calls[-3] == ("cuCtxSetCurrent", 0xC0FFEE) and driver.calls[-1] == ("cuDeviceGetCount",)
    fresh(OSError("no libcuda"))
    assert not cuda_context.make_current(0)


def test_what_waits_for_the_context_is_called_once_it_is_made_and_only_then(fresh):
    """The command's early cuDNN plans: their builders' contexts are not made beside this one."""
    called: list[dict] = []
    fresh(FakeDriver(devices=2))
    cuda_context.start("cuda:0", then=lambda: called.append(dict(cuda_context.made)))
    cuda_context.wait(timeout=30)
    assert called == [{"ordinal": 0, "context": 0xC0FFEE}]


def test_what_waits_for_a_context_that_cannot_be_made_is_not_called(fresh):
    called: list[int] = []
    fresh(FakeDriver(devices=1))
    cuda_context.start("cuda:1", then=lambda: called.append(1))
    cuda_context.wait(timeout=30)
    assert called == []


def test_the_cpu_makes_no_thread(fresh):
    driver = fresh(FakeDriver())
    cuda_context.start("cpu")
    assert cuda_context._thread is None and driver.calls == []


def test_the_command_line_starts_it_before_pytorch_loads(tmp_path):
    """The run command's first step after reading its options (the source then fails as it would anyway)."""
    script = (
        "import sys\n"
        "from emopipe.model import cuda_context\n"
        "seen = []\n"
        "cuda_context.start = lambda device, then=None: seen.append((device, 'torch' in sys.modules))\n"
        "from emopipe.cli.app import main\n"
        "try:\n"
        f"    main([{str(tmp_path / 'missing.mp4')!r}, '--device', 'cpu', '-o', {str(tmp_path / 'o.csv')!r}])\n"
        "finally:\n"
        "    print('seen', seen)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                          cwd=tmp_path)
    assert "seen [('cpu', False)]" in done.stdout, done.stdout + done.stderr

