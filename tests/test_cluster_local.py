"""--ray local: the Ray a run starts on this machine is stopped at its end, every process of it (its own file: the
other cluster tests share one Ray the module starts, and this one needs none running)."""

from __future__ import annotations

import signal

import pytest

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'emopipe[ray]')")

from emopipe.cluster import LOCAL, _connect, _disconnect  # noqa: E402

pytestmark = pytest.mark.slow


def test_a_local_ray_the_run_started_stops_with_its_monitor_killed_first(monkeypatch):
    if ray.is_initialized():
        pytest.skip("a Ray is already connected in this process")
    assert _connect(LOCAL) is True
    from ray._private import worker

    started = {kind: [info.process for info in infos] for kind, infos in worker._global_node.all_processes.items()}
    (monitor,) = started["monitor"]
    seen: dict[str, int | None] = {}
    real_shutdown = ray.shutdown

    def shutdown(*args, **kwargs):
        # Left alone the monitor idles for ever; killed, it is gone long before this bound.
        seen["monitor"] = monitor.wait(timeout=60)
        return real_shutdown(*args, **kwargs)

    monkeypatch.setattr(ray, "shutdown", shutdown)
    try:
        _disconnect(LOCAL)
    finally:
        if ray.is_initialized():
            real_shutdown()
    assert seen["monitor"] == -signal.SIGKILL  # killed before Ray's own stop, not by it
    assert not ray.is_initialized()
    still_running = [kind for kind, processes in started.items() for p in processes if p.poll() is None]
    assert still_running == []
