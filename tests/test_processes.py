"""--processes: the many-source command over worker processes of this machine (emopipe.processes), on the CPU.

Each worker is a real spawned interpreter that loads PyTorch and warms EmoNet (seconds on the CPU machine), so the
runs here are few and their clips a few frames."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from emopipe import processes
from emopipe.api import Analyzer
from emopipe.config import RunConfig
from emopipe.errors import UsageError
from emopipe.model import cuda_context
from emopipe.processes import _Crew, _devices, run_on_processes, workers_for
from tests.support.processes import interruptible
from tests.support.rows import all_rows, same_rows
from tests.support.synth import many_clips_run

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def four_clips(tmp_path_factory, shared_dir, checkpoints):
    tmp_path = tmp_path_factory.mktemp("four")
    folder, config = many_clips_run(tmp_path, shared_dir, checkpoints[8], 4)
    with Analyzer(config) as analyzer:  # what one process writes: the rows every run below must write
        alone = analyzer.run_many(output_dir=tmp_path / "one")
    assert [r.status for r in alone.results] == ["ok"] * 4
    return folder, config, all_rows(tmp_path / "one")


def manifest(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "manifest.jsonl").read_text().splitlines()]


def command(config: RunConfig, out: Path, *extra: str) -> list[str]:
    return [str(config.sources[0]), "-o", str(out), "--weights", str(config.weights), "--detector", "blazeface",
            "--models-dir", str(config.models_dir), "--device", "cpu", "--no-progress", "--processes", "2", *extra]


def test_two_worker_processes_write_the_rows_one_process_writes(tmp_path, four_clips):
    folder, config, alone = four_clips
    outcome = run_on_processes(replace(config, metrics_port=0), 2, output_dir=tmp_path / "two")
    assert sorted(r.status for r in outcome.results) == ["ok"] * 4
    assert same_rows(all_rows(tmp_path / "two"), alone)
    lines = manifest(tmp_path / "two")
    assert sorted(line["source"] for line in lines) == sorted(str(p) for p in folder.glob("*.mp4"))  # once each
    facts = outcome.run["processes"]
    assert facts["workers"] == 2 and facts["worker_failures"] == 0
    assert sum(w["sources"] for w in facts["per_worker"].values()) == 4
    assert sum(w["frames"] for w in facts["per_worker"].values()) == outcome.run["frames"] == 10
    # (each worker's own summary, as far as its goodbye came before the driver ended: not waited for long)
    assert {s["name"] for s in facts["worker_summaries"]} <= {"emopipe-process-0", "emopipe-process-1"}
    for said in facts["worker_summaries"]:  # its pipeline's time and rates, as a Ray worker's summary gives them
        assert said["seconds"] > 0 and said["fps"] == pytest.approx(said["frames"] / said["seconds"])
        assert said["faces_per_s"] == pytest.approx(said["faces"] / said["seconds"])
        assert said["decoder"] == "opencv" and said["startup"]["engine_warmups"] == 1
    assert facts["timeline"]["first_row_s"] <= facts["timeline"]["done_s"]
    endpoints = facts["metrics"]  # (--metrics-port 0: each worker served its own on a free port)
    assert sorted(endpoints) == ["emopipe-process-0", "emopipe-process-1"] and len(set(endpoints.values())) == 2
    timeline = facts["timeline"]
    assert timeline["plan_s"] <= timeline["first_ready_s"] <= timeline["ready_s"] <= timeline["done_s"]
    assert not list((tmp_path / "two").glob("*.partial*"))  # every file took its final name
    deadline = time.monotonic() + 60  # each worker ends on its own once it has said goodbye
    while _workers_of(os.getpid()) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _workers_of(os.getpid())
    # the same command again resumes: every source skipped, no worker started
    again = run_on_processes(replace(config, resume=True), 2, output_dir=tmp_path / "two")
    assert [r.status for r in again.results] == ["skipped"] * 4 and "processes" not in again.run


def test_workers_killed_mid_run_hand_their_sources_to_new_ones(tmp_path, four_clips):
    _, config, alone = four_clips
    killed: list[int] = []

    def kill_every_worker_once(result) -> None:  # at the first source recorded: every worker then alive is killed
        if not killed:
            for pid in _workers_of(os.getpid()):
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)

    outcome = run_on_processes(config, 2, output_dir=tmp_path / "out", on_result=kill_every_worker_once,
                               progress=True)  # (the bar, its frames going back as the killed workers' are redone)
    assert killed
    assert sorted(r.status for r in outcome.results) == ["ok"] * 4  # redone by the replacements
    assert same_rows(all_rows(tmp_path / "out"), alone)  # no row missing, none twice
    assert len(manifest(tmp_path / "out")) == 4
    facts = outcome.run["processes"]
    assert facts["worker_failures"] >= 1 and facts["started"] > 2  # (one may have said goodbye before it was killed)
    assert any(w["died"] for w in facts["per_worker"].values())


def test_a_worker_that_crashes_prints_its_threads_stacks_first(capfd, four_clips):
    # (a native crash in a library, as NVDEC's have been, must leave more than "killed by SIGSEGV" to go on)
    _, config, _ = four_clips
    crew = _Crew(config, 1)
    worker = next(iter(crew.workers.values()))
    try:
        crew.send(worker)
        assert worker.pipe.recv() == ("want", None)  # it asks for its first source as its engines begin to load
        # Killed once warm, its threads waiting (for the source not sent): faulthandler reads the other threads'
        # stacks without their lock, and a thread being started as the signal came crashed the dump half-way
        # through under a loaded CI run (its first line only, no frame of emopipe's).
        assert worker.pipe.recv()[0] == "ready"
        os.kill(worker.process.pid, signal.SIGSEGV)
        assert worker.process.wait(120) == -signal.SIGSEGV
    finally:
        crew.kill()
    err = capfd.readouterr().err
    assert "Fatal Python error: Segmentation fault" in err
    assert 'File "' in err and "emopipe" in err  # the stacks of its threads, its own code among them
    # the driver's line that it died says so for the signals that print them
    assert processes.death(-signal.SIGSEGV) == "killed by SIGSEGV" and processes.printed_its_stacks(-signal.SIGSEGV)
    assert processes.printed_its_stacks(-signal.SIGABRT) and not processes.printed_its_stacks(-signal.SIGKILL)
    assert processes.death(3) == "exit status 3" and not processes.printed_its_stacks(3)


def test_ctrl_c_keeps_what_was_finished_and_resume_completes_it(tmp_path, four_clips):
    _, config, alone = four_clips
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "tests.support.signal_at", "INT", "manifest",
                           *command(config, out)], cwd=REPO, capture_output=True, text=True, timeout=600,
                          preexec_fn=interruptible)
    assert done.returncode == 130, done.stderr
    assert "Traceback" not in done.stderr
    lines = manifest(out)
    assert lines[0]["status"] == "ok"  # the line the signal came with is kept, its files renamed
    assert all(line["status"] in ("ok", "interrupted") for line in lines)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["run_interrupted"] is True and summary["ok"] == sum(line["status"] == "ok" for line in lines)
    for line in lines:  # a source recorded ok has its rows under the final name
        if line["status"] == "ok":
            assert Path(line["outputs"]["rows"]).exists()
    resumed = subprocess.run(["emopipe", *command(config, out, "--resume")], cwd=REPO, capture_output=True,
                             text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr
    assert same_rows(all_rows(out), alone)
    assert resumed.stderr.count("using your weights file") == 1  # said by the driver, not once a worker


def test_a_killed_driver_takes_its_workers_with_it_and_resume_completes(tmp_path, four_clips):
    _, config, alone = four_clips
    out = tmp_path / "out"
    name = "clip0"  # (its stem)
    driver = subprocess.Popen([sys.executable, "-m", "tests.support.kill_at", "after", "manifest", name,
                               *command(config, out)], cwd=REPO, stderr=subprocess.PIPE, text=True)
    children: set[int] = set()
    while driver.poll() is None:  # its workers, as long as it runs (the parent-death signal must end them)
        children |= _workers_of(driver.pid)
        time.sleep(0.05)
    driver.stderr.read()
    assert driver.returncode == -signal.SIGKILL, "the run ended before clip0's line: nothing was killed"
    assert children, "no worker process was seen"
    deadline = time.monotonic() + 60
    while any(_alive(pid) for pid in children) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(_alive(pid) for pid in children), "a worker outlived its killed driver"
    assert not (out / "summary.json").exists()  # (killed: the run never ended)
    resumed = subprocess.run(["emopipe", *command(config, out, "--resume")], cwd=tmp_path, capture_output=True,
                             text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr
    assert same_rows(all_rows(out), alone)
    statuses = {line["source"]: line["status"] for line in manifest(out)}  # (the latest line of each)
    assert set(statuses.values()) <= {"ok", "skipped"} and len(statuses) == 4


def _workers_of(pid: int) -> set[int]:
    """The worker processes ``pid`` started that have not ended (Linux: /proc)."""
    found = set()
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            if parent == pid and b"emopipe.process_worker" in (entry / "cmdline").read_bytes() and \
                    _alive(int(entry.name)):
                found.add(int(entry.name))
        except (OSError, ValueError, IndexError):
            continue
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"  # (a zombie has ended: only its exit status is left)


def test_a_user_error_in_the_workers_ends_the_run_as_in_one_process(tmp_path, four_clips):
    _, config, _ = four_clips
    broken = tmp_path / "broken.pth"
    broken.write_bytes(b"not a checkpoint")
    bad = replace(config, weights=str(broken))
    one = subprocess.run(["emopipe", *command(bad, tmp_path / "one-bad")[:-2]], cwd=tmp_path, capture_output=True,
                         text=True, timeout=600)
    two = subprocess.run(["emopipe", *command(bad, tmp_path / "two-bad")], cwd=tmp_path, capture_output=True,
                         text=True, timeout=600)
    assert one.returncode not in (0, 1) and two.returncode == one.returncode, (one.stderr, two.stderr)
    assert "Traceback" not in two.stderr
    error = [line for line in two.stderr.splitlines() if line.startswith("emopipe: error:")]
    assert error and str(broken) in error[0]
    assert not (tmp_path / "two-bad" / "manifest.jsonl").exists()  # no source was begun: no line


def test_processes_are_for_files_and_not_with_ray(tmp_path, checkpoints):
    config = RunConfig(sources=(str(tmp_path),), weights=str(checkpoints[8]), device="cpu")
    with pytest.raises(UsageError, match="--processes and --ray"):
        replace(config, processes=2, ray="local")
    with pytest.raises(UsageError, match="--processes must be"):
        replace(config, processes=0)
    with pytest.raises(UsageError, match="--processes must be a whole number ≥ 1 or 'auto', got 'many'"):
        replace(config, processes="many")
    with pytest.raises(UsageError, match="--processes"):  # (refused before any model loads)
        Analyzer(config).run_many(output_dir=tmp_path / "o", processes=2)
    for count in ("2", "auto"):
        camera = subprocess.run(["emopipe", "rtsp://127.0.0.1:9/a", "rtsp://127.0.0.1:9/b", "--processes", count],
                                cwd=tmp_path, capture_output=True, text=True, timeout=120)
        assert camera.returncode == 2 and "files only" in camera.stderr
    typo = subprocess.run(["emopipe", str(tmp_path), "--processes", "al"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert typo.returncode == 2 and "a whole number ≥ 1 or 'auto', got 'al'" in typo.stderr


@pytest.mark.parametrize(("gpus", "mps", "cores", "workers"), [
    (1, True, 16, 4),  # an H100 host under MPS: the measured four
    (1, False, 16, 1),  # without MPS several on one GPU take turns: this process
    (2, False, 32, 2),  # one a GPU
    (2, True, 32, 8),
    (1, True, 8, 2),  # the cores feed two
    (4, False, 4, 1),
    (0, False, 64, 1),  # the CPU: PyTorch's threads use every core in one process
])
def test_processes_auto_is_four_a_gpu_under_mps_else_one_a_gpu_as_the_cores_feed(gpus, mps, cores, workers):
    assert workers_for(gpus, mps, cores) == workers


def test_processes_auto_on_the_cpu_runs_the_sources_in_this_process(tmp_path, four_clips):
    _, config, alone = four_clips
    out = tmp_path / "auto"
    done = subprocess.run(["emopipe", *command(config, out)[:-1], "auto"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "--processes auto: the sources run in this process (the CPU," in done.stderr
    assert "processes" not in json.loads((out / "summary.json").read_text())  # (no worker was started)
    assert same_rows(all_rows(out), alone)


def test_workers_take_the_gpus_in_turn(monkeypatch):
    monkeypatch.setattr(cuda_context, "gpu_count", lambda: 2)
    monkeypatch.setattr(cuda_context, "_torch_has_cuda", lambda: True)
    assert _devices("cpu") == []
    assert _devices("auto") == ["cuda:0", "cuda:1"] == _devices("cuda")
    assert _devices("cuda:1") == ["cuda:1"]  # one named: every worker on it
    monkeypatch.setattr(cuda_context, "gpu_count", lambda: 1)
    assert _devices("auto") == ["auto"] and _devices("cuda") == ["cuda"]
    monkeypatch.setattr(cuda_context, "gpu_count", lambda: 0)
    assert _devices("auto") == []  # no GPU: the workers run on the CPU
    monkeypatch.setattr(cuda_context, "_torch_has_cuda", lambda: False)
    monkeypatch.setattr(cuda_context, "gpu_count", lambda: 2)
    assert _devices("auto") == []  # a CPU build of PyTorch: auto is the CPU whatever the driver says


def test_only_the_first_worker_writes_python_bytecode(monkeypatch):
    """Workers import the same modules: where the command keeps their compiled bytecode (emopipe.cli.bytecode) the
    first writes it and the others read it, rather than four processes writing the same ~1 500 files at once."""
    started: list[dict[str, str]] = []

    class Started:
        def __init__(self, args: list[str], env: dict[str, str], **_: object) -> None:
            started.append(env)

    monkeypatch.setattr(processes.subprocess, "Popen", Started)
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
    monkeypatch.setenv("PYTHONPYCACHEPREFIX", "/cache/python")
    crew = _Crew(RunConfig(sources=("a.mp4",), device="cpu"), 3)
    for worker in crew.workers.values():
        worker.pipe.close()
    assert [env.get("PYTHONDONTWRITEBYTECODE") for env in started] == [None, "1", "1"]
    assert {env["PYTHONPYCACHEPREFIX"] for env in started} == {"/cache/python"}


def test_gpus_are_counted_without_starting_cuda(tmp_path, monkeypatch):
    listing = tmp_path / "gpus"
    for bus in ("0000:18:00.0", "0000:2a:00.0", "0000:3a:00.0"):
        (listing / bus).mkdir(parents=True)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert cuda_context.gpu_count(listing) == 3
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,0")
    assert cuda_context.gpu_count(listing) == 2
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,-1,0")  # (CUDA reads up to the first invalid entry)
    assert cuda_context.gpu_count(listing) == 1
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert cuda_context.gpu_count(listing) == 0
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3,4,5")
    assert cuda_context.gpu_count(listing) == 3  # (no more than there are)


DRIVER_WITHOUT_TORCH = """
import sys
from pathlib import Path
from emopipe.config import RunConfig
from emopipe.errors import EmopipeError
from emopipe.processes import run_on_processes
folder = Path(sys.argv[1])
try:  # (a folder with no video: refused as the run is planned, its workers ended)
    run_on_processes(RunConfig(sources=(str(folder),), device='cpu'), 2, output_dir=folder / 'out')
except EmopipeError as exc:
    print('refused:', exc)
assert 'torch' not in sys.modules, 'the driver imported PyTorch'
"""


def test_the_driver_loads_no_pytorch_and_ends_its_workers_when_the_run_is_refused(tmp_path):
    (tmp_path / "empty").mkdir()
    driver = subprocess.Popen([sys.executable, "-c", DRIVER_WITHOUT_TORCH, str(tmp_path / "empty")], cwd=REPO,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = driver.communicate(timeout=300)
    assert driver.returncode == 0, err
    assert "refused:" in out
    # its two workers (started before planning) were ended, not left behind: none with its pid as their driver's
    left = [p for p in Path("/proc").glob("[0-9]*") if "emopipe.process_worker" in _cmdline(p)
            and _cmdline(p).split()[-1] == str(driver.pid) and _alive(int(p.name))]
    assert not left


def _cmdline(entry: Path) -> str:
    try:
        words = (entry / "cmdline").read_bytes().split(b"\0")
    except OSError:
        return ""
    return " ".join(w.decode(errors="replace") for w in words if w)



def test_a_worker_probes_its_first_source_while_its_engines_load_and_never_once_they_warm(monkeypatch, tmp_path):
    import threading
    from multiprocessing.connection import Pipe

    import emopipe.io.nvdec
    from emopipe.pipeline.archive import PlannedSource
    from emopipe.processes import _FirstSource

    gate, probing = threading.Event(), threading.Event()
    probed: list[str] = []

    def probe_ahead(uri, *, decoder, device):  # (NVDEC's probe; the CPU machine has none)
        probed.append(uri)
        probing.set()
        assert gate.wait(60)
        return 720, 1280

    monkeypatch.setattr(emopipe.io.nvdec, "probe_ahead", probe_ahead)
    config = RunConfig(device="cpu")
    source = PlannedSource(0, str(tmp_path / "a.mp4"), tmp_path / "a.csv", tmp_path / "a.json")
    told: list[str] = []

    # it came while the engines loaded: its probe under way is waited for by the warm-up, which gets its frame size
    driver, worker = Pipe()
    driver.send(source)
    first = _FirstSource(worker, lambda kind, body=None: told.append(kind), config)
    assert probing.wait(60) and told == ["want"]
    answer: list = []
    warming = threading.Thread(target=lambda: answer.append(first.frame_size()))
    warming.start()
    warming.join(0.2)
    assert answer == []  # (the probe is not over: the warm-up waits)
    gate.set()
    warming.join(60)
    assert answer == [(720, 1280)] and first.taken() == source and probed == [source.uri]

    # it came once the warm-up had begun: no probe (nothing may decode while CUDA graphs are captured)
    driver, worker = Pipe()
    late = _FirstSource(worker, lambda kind, body=None: None, config)
    assert late.frame_size() is None
    driver.send(source)
    assert late.taken() == source and probed == [source.uri]

    # the driver had none for it
    driver, worker = Pipe()
    driver.send(None)
    assert _FirstSource(worker, lambda kind, body=None: None, config).taken() is None
    driver.close()


def test_a_source_that_cannot_be_read_fails_alone(tmp_path, four_clips):
    folder, config, alone = four_clips
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    shutil.copy(folder / "clip0.mp4", mixed / "clip0.mp4")
    (mixed / "broken.mp4").write_bytes((folder / "clip1.mp4").read_bytes()[:3000])  # truncated: no index
    outcome = run_on_processes(replace(config, sources=(str(mixed),)), 2, output_dir=tmp_path / "out")
    statuses = {Path(r.source).name: r.status for r in outcome.results}
    assert statuses == {"clip0.mp4": "ok", "broken.mp4": "failed"}
    failed = next(r for r in outcome.results if r.status == "failed")
    assert failed.exit_code == 4 and failed.kind == "InputUnreadableError" and "truncated" in failed.error  # (as in
    # one process)
    def elsewhere(rows: list[dict[str, str]]) -> list[dict[str, str]]:  # (the source's path is another folder's)
        return [{k: v for k, v in row.items() if k != "source"} for row in rows]

    written = all_rows(tmp_path / "out")
    assert list(written) == ["clip0.emotions.csv"]
    assert same_rows({"clip0": elsewhere(written["clip0.emotions.csv"])},
                     {"clip0": elsewhere(alone["clip0.emotions.csv"])})


def test_a_worker_says_its_own_messages_and_no_other_librarys_chatter():
    # (PyNvVideoCodec's logger, at INFO, said its NVENC version twice a worker in the command's output; a worker logs
    # as the command does: emopipe's messages at the level asked, after its name; others' warnings only)
    script = """
import logging
from emopipe.pipeline.drivers import log_as_worker
log_as_worker("emopipe-process-3", logging.INFO)
chatty = logging.getLogger("PyNvVideoCodec"); chatty.setLevel(logging.INFO)
chatty.info("Supported NVENC Driver Version: 208")
chatty.warning("a library's warning")
logging.getLogger("emopipe.pipeline.runner").info("300 frames")
logging.getLogger("emopipe.io").debug("a detail")
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == ["a library's warning", "emopipe-process-3: 300 frames"]
    assert done.stdout == ""


@pytest.mark.parametrize(("devices", "warned"), [([], False), (["cuda"], True), (["cuda:0", "cuda:1"], False)],
                         ids=["cpu", "one gpu", "a gpu each"])
def test_only_workers_that_share_a_gpu_are_told_they_share_it_without_mps(devices, warned, caplog):
    # (was: `emopipe a.mp4 b.mp4 --processes 2` on a machine without a GPU warned "emopipe-process-0 shares its GPU
    # without NVIDIA MPS": a CPU worker's device is "auto", and MPS is not running there)
    import types

    from emopipe.processes import _Run

    class Pipe:
        def recv(self) -> tuple[str, dict[str, object]]:
            return "ready", {"pid": 1, "mps": False}

    workers = [types.SimpleNamespace(name=f"emopipe-process-{n}", pipe=Pipe(), ready=False) for n in range(2)]
    run = object.__new__(_Run)
    run.crew = types.SimpleNamespace(devices=devices, alive=lambda: workers)
    run.timeline, run.started, run.warned_mps = {}, time.perf_counter(), False
    with caplog.at_level("WARNING", logger="emopipe"):
        run._hear(workers[0])
    assert ("shares its GPU without NVIDIA MPS" in caplog.text) == warned
