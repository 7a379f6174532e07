"""--mps: NVIDIA MPS started by the command for its worker processes (emopipe.model.cuda_context.OwnMps), against a
stand-in for NVIDIA's tool on PATH (no GPU here): started on a pipe directory of its own before the workers start,
given to them and to no other process, ended with the run — or with the command, killed outright."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from emopipe import processes
from emopipe.cli.run import auto_processes
from emopipe.config import RunConfig
from emopipe.errors import UsageError
from emopipe.model import cuda_context
from emopipe.model.cuda_context import MpsUnavailable, OwnMps, mps_running
from emopipe.processes import _Crew, _mps_for, auto_workers

# NVIDIA's nvidia-cuda-mps-control as far as emopipe uses it: "-f" runs the daemon in the foreground on
# $CUDA_MPS_PIPE_DIRECTORY ($MPS_FAIL: it fails at once, saying so); without arguments it is the daemon's client,
# reading one command on its standard input ("Cannot find MPS control daemon process", status 1, where no daemon
# answers on that directory). Every call is written to $MPS_LOG.
STAND_IN = r"""#!/bin/sh
dir=${CUDA_MPS_PIPE_DIRECTORY:-/tmp/nvidia-mps}
if [ "$1" = -f ]; then
  echo "daemon on $dir" >> "$MPS_LOG"
  if [ -n "$MPS_FAIL" ]; then echo "$MPS_FAIL" >&2; exit 1; fi
  echo $$ > "$dir/daemon.pid"
  trap 'rm -f "$dir/control"; echo "daemon ended" >> "$MPS_LOG"; exit 0' TERM
  : > "$dir/control"
  while :; do sleep 0.05; done
fi
read command
echo "asked $command on $dir" >> "$MPS_LOG"
if [ ! -e "$dir/control" ]; then echo "Cannot find MPS control daemon process"; exit 1; fi
if [ "$command" = quit ]; then kill -TERM "$(cat "$dir/daemon.pid")"; fi
exit 0
"""


@pytest.fixture
def mps_tool(tmp_path, monkeypatch) -> Path:
    """The stand-in on PATH (with the shell's tools), the machine's own MPS pipe directory (empty: no daemon of the
    machine's runs), and the calls' log, returned."""
    tools = tmp_path / "tools"
    tools.mkdir()
    tool = tools / "nvidia-cuda-mps-control"
    tool.write_text(STAND_IN)
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tools}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("CUDA_MPS_PIPE_DIRECTORY", str(tmp_path / "machine"))
    (tmp_path / "machine").mkdir()
    log = tmp_path / "mps.log"
    log.touch()
    monkeypatch.setenv("MPS_LOG", str(log))
    monkeypatch.delenv("MPS_FAIL", raising=False)
    return log


def _running(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie no container's init reaped counts as ended)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def _ended(pid: int, within_s: float = 60.0) -> bool:
    """Whether process ``pid`` ends within ``within_s`` (a bound for a loaded machine, not a speed)."""
    deadline = time.monotonic() + within_s
    while _running(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_the_commands_own_mps_answers_only_its_processes_and_ends_with_stop(mps_tool):
    own = OwnMps.start()
    folder, daemon = Path(own.env["CUDA_MPS_PIPE_DIRECTORY"]), own.process.pid
    assert folder.is_dir() and own.env["CUDA_MPS_LOG_DIRECTORY"] == str(folder / "log")
    assert mps_running(env={**os.environ, **own.env})  # the workers, given its directory, find it
    assert not mps_running()  # this process and every other one still find none
    own.stop()
    assert _ended(daemon)
    assert not folder.exists()
    said = mps_tool.read_text()
    assert f"daemon on {folder}" in said and f"asked quit on {folder}" in said and "daemon ended" in said


def test_a_daemon_that_cannot_start_says_why_and_leaves_nothing(mps_tool, monkeypatch, tmp_path):
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temporary))
    monkeypatch.setenv("MPS_FAIL", "An instance of this daemon is already running")
    with pytest.raises(MpsUnavailable, match="its daemon ended: An instance of this daemon is already running"):
        OwnMps.start()
    assert "daemon on" in mps_tool.read_text() and not any(temporary.iterdir())
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    with pytest.raises(MpsUnavailable, match="nvidia-cuda-mps-control not found: it comes with NVIDIA's driver"):
        OwnMps.start()


def test_the_daemon_ends_with_a_command_killed_outright(mps_tool, tmp_path):
    """A driver SIGKILLed cannot stop its daemon: the daemon's parent-death signal ends it (its workers die the same
    way, and MPS's server with its last client), so nothing is left running."""
    command = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\nfrom emopipe.model.cuda_context import OwnMps\n"
         "own = OwnMps.start()\nprint(own.process.pid, flush=True)\ntime.sleep(600)\n"],
        stdout=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parents[1])
    try:
        daemon = int(command.stdout.readline())
        assert _running(daemon)
    finally:
        command.kill()
        command.wait()
    assert _ended(daemon)
    left = next(Path(tempfile.gettempdir()).glob(f"emopipe-mps-{command.pid}-*"))  # (its pipe directory)
    own = OwnMps.start()  # the next command's daemon removes it
    own.stop()
    assert not left.exists()


@pytest.fixture
def one_gpu(monkeypatch):
    monkeypatch.setattr(processes, "_devices", lambda device: ["cuda"])
    monkeypatch.setattr(processes, "_cores", lambda: 16)


def test_a_run_with_mps_starts_it_only_where_none_runs_and_workers_share_a_gpu(mps_tool, one_gpu, tmp_path):
    config = RunConfig(sources=("a.mp4",), processes=4, mps=True)
    with _mps_for(config, 4) as mps:
        assert mps.state == "started"
        folder = Path(mps.env["CUDA_MPS_PIPE_DIRECTORY"])
        assert (folder / "control").exists()
    assert not folder.exists() and "daemon ended" in mps_tool.read_text()

    mps_tool.write_text("")
    with _mps_for(config, 1) as mps:  # a worker a GPU: nothing to share
        assert mps.state is None and mps.env == {}
    assert "daemon on" not in mps_tool.read_text()
    mps_tool.write_text("")
    with _mps_for(RunConfig(sources=("a.mp4",), processes=4), 4) as mps:  # not asked: nothing started nor asked
        assert mps.state is None and mps.env == {}
    assert mps_tool.read_text() == ""

    (tmp_path / "machine" / "control").touch()  # the machine's own daemon answers: used, none started
    mps_tool.write_text("")
    with _mps_for(config, 4) as mps:
        assert mps.state == "running" and mps.env == {}
    assert "daemon on" not in mps_tool.read_text()


def test_a_run_whose_mps_cannot_start_goes_on_without_it_in_one_line(mps_tool, one_gpu, monkeypatch, caplog):
    monkeypatch.setenv("MPS_FAIL", "no permission")
    with caplog.at_level("WARNING", logger="emopipe.processes"), \
            _mps_for(RunConfig(sources=("a.mp4",), processes=4, mps=True), 4) as mps:
        assert mps.state is None and mps.env == {}
    assert caplog.messages == ["--mps: NVIDIA MPS could not be started (its daemon ended: no permission); the "
                               "workers on a GPU take turns on it"]


def test_processes_auto_with_mps_counts_four_a_gpu_where_its_tool_is(mps_tool, one_gpu, monkeypatch, tmp_path):
    assert auto_workers("auto", start_mps=True) == (4, "1 GPU under NVIDIA MPS (--mps), 16 cores")
    assert auto_workers("auto") == (1, "1 GPU without NVIDIA MPS, 16 cores")
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    assert auto_workers("auto", start_mps=True)[0] == 1


def test_mps_is_for_the_workers_of_processes(monkeypatch):
    with pytest.raises(UsageError, match="--mps: for the workers of --processes"):
        RunConfig(source="a.mp4", mps=True)
    monkeypatch.setattr(processes, "_devices", lambda device: [])  # the CPU: auto runs the sources here
    config = auto_processes(RunConfig(sources=("a.mp4",), processes="auto", mps=True, split=False))
    assert config.processes is None and config.mps is False and config.split  # (this process refuses --no-split)


def test_the_workers_are_given_the_commands_mps(monkeypatch):
    started: list[dict[str, str]] = []

    class Started:
        def __init__(self, args: list[str], env: dict[str, str], **_: object) -> None:
            started.append(env)

    monkeypatch.setattr(processes.subprocess, "Popen", Started)
    monkeypatch.setattr(cuda_context, "gpu_count", lambda: 0)
    own = {"CUDA_MPS_PIPE_DIRECTORY": "/tmp/emopipe-mps-x", "CUDA_MPS_LOG_DIRECTORY": "/tmp/emopipe-mps-x/log"}
    crew = _Crew(RunConfig(sources=("a.mp4",), device="cpu"), 2, env=own)
    for worker in crew.workers.values():
        worker.pipe.close()
    assert len(started) == 2 and all(env.items() >= own.items() for env in started)
