"""`emopipe bench` on the CPU: each configuration in its own process, the table and the JSON it writes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from emopipe.cli.bench import CONFIGS, BenchResult, face_counts, format_table, select_configs, significant
from emopipe.errors import EmopipeError, OutputError, UsageError
from emopipe.pipeline.timing import percentile

REPO = Path(__file__).resolve().parents[1]


def emopipe_bench(*args: object) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "emopipe", "bench", *map(str, args)], capture_output=True,
                          text=True, cwd=REPO, env=os.environ.copy(), timeout=600)


def test_workload_is_seeded_and_within_the_batch():
    counts = face_counts(50, 8, seed=3)
    assert counts == face_counts(50, 8, seed=3) and counts != face_counts(50, 8, seed=4)
    assert min(counts) >= 1 and max(counts) <= 8


def test_percentile_picks_a_measured_value_by_nearest_rank():
    values = [1.0, 2.0, 3.0, 4.0, 5.0]
    assert (percentile(values, 0), percentile(values, 0.5), percentile(values, 1)) == (1.0, 3.0, 5.0)
    assert percentile([1.0, 2.0], 0.5) in (1.0, 2.0)  # never an interpolation between two
    assert percentile(list(range(101)), 0.99) == 99 and percentile([], 0.5) is None


def test_table_shows_the_ratios():
    r = BenchResult("static, benchmark on, warmup on", "cpu", "fp32", 4, 3.0, 1.0, 1.0, first_batch_ms=30.0,
                    p50_ms=10.0, p99_ms=20.0, max_ms=25.0, faces_per_s=100.0, batches=5, faces=17)
    table = format_table([r])
    assert "| 3.0× | 2.00× | 100 |" in table
    assert "static batch 4, 17 faces per configuration (5 static batches)" in table


def test_the_footer_gives_static_and_varying_batching_their_own_number_of_batches():
    # the same 17 faces: 5 static batches of 4, but one batch per frame (12) when varying; the footer once said
    # "5 batches per configuration" from the first row, for the varying rows too
    static = BenchResult(CONFIGS[0].name, "cpu", "fp32", 4, 3.0, 1.0, 1.0, 30.0, 10.0, 20.0, 25.0, 100.0, 5, 17)
    varying = BenchResult(CONFIGS[4].name, "cpu", "fp32", 4, 3.0, 1.0, 1.0, 30.0, 10.0, 20.0, 25.0, 100.0, 12, 17)
    footer = format_table([static, varying]).splitlines()[-1]
    assert footer == "cpu, fp32, static batch 4, 17 faces per configuration (5 static batches, 12 varying batches)"


def test_bench_on_cpu_runs_static_and_varying_configurations(tmp_path):
    out = tmp_path / "bench.json"
    done = emopipe_bench("--device", "cpu", "--batch-size", "2", "--frames", "3", "--configs", "1,5", "--json", out)
    assert done.returncode == 0, done.stderr
    results = json.loads(out.read_text())
    assert [r["config"] for r in results] == [CONFIGS[0].name, CONFIGS[4].name]
    static, varying = results
    faces = static["faces"]
    assert faces == varying["faces"] == sum(face_counts(3, 2, seed=0))
    assert static["batches"] == -(-faces // 2)  # ceil: full static batches of 2, the last one padded
    assert varying["batches"] == 3  # one batch per frame, whatever its size
    for r in results:
        assert r["device"] == "cpu" and r["precision"] == "fp32" and r["batch_size"] == 2
        assert 0 < r["p50_ms"] <= r["p99_ms"] <= r["max_ms"] and r["first_batch_ms"] > 0
        assert r["start_to_ready_s"] >= r["warmup_s"] > 0
    assert CONFIGS[0].name in done.stdout and "first/p50" in done.stdout


@pytest.mark.parametrize("args", [["--configs", "9"], ["--configs", "0"], ["--batch-size", "0"],
                                  ["--precision", "fp64"]])
def test_bad_options_are_one_line_usage_errors(args):
    done = emopipe_bench("--device", "cpu", *args)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert len([line for line in done.stderr.splitlines() if line.startswith("emopipe: error:")]) == 1


def test_each_configuration_uses_the_products_caches(monkeypatch, tmp_path, capsys):
    """Restarts are measured as users see them: with the compiled-kernel and cuDNN-plan caches beside the models."""
    from emopipe.cli import bench

    jobs: list[dict] = []

    def worker(cmd, **kwargs):  # type: ignore[no-untyped-def]
        jobs.append(json.loads(cmd[cmd.index("--worker") + 1]))
        r = BenchResult("x", "cpu", "fp32", 2, 1.0, 0.5, 0.5, 1.0, 1.0, 1.0, 1.0, 2.0, 1, 1)
        return subprocess.CompletedProcess(cmd, 0, json.dumps(r.__dict__), "")

    monkeypatch.setattr(bench.subprocess, "run", worker)
    args = bench.build_parser().parse_args(["--device", "cpu", "--configs", "1", "--models-dir", str(tmp_path)])
    assert bench.run(args) == 0
    assert [job["cache_dir"] for job in jobs] == [str(tmp_path / "cache")]


def _result(config: str, faces_per_s: float = 2.0) -> BenchResult:
    return BenchResult(config, "cpu", "fp32", 2, 1.0, 0.5, 0.5, 1.0, 1.0, 1.0, 1.0, faces_per_s, 2, 2)


@pytest.fixture
def workers(monkeypatch):
    """No EmoNet: each configuration's process is ``outcome["run"](job)``, a CompletedProcess; the jobs are kept."""
    from emopipe.cli import bench

    jobs: list[dict] = []
    def succeeds(job: dict) -> subprocess.CompletedProcess:
        return subprocess.CompletedProcess([], 0, json.dumps(_result(job["config"]["name"]).__dict__), "")

    outcome = {"run": succeeds}

    def worker(cmd, **kwargs):  # type: ignore[no-untyped-def]
        job = json.loads(cmd[cmd.index("--worker") + 1])
        jobs.append(job)
        return outcome["run"](job)

    monkeypatch.setattr(bench.subprocess, "run", worker)
    return jobs, outcome


def bench_run(*argv: str) -> int:
    from emopipe.cli import bench

    return bench.run(bench.build_parser().parse_args(["--device", "cpu", *argv]))


def test_table_numbers_each_row_by_its_configuration_and_shows_slow_throughputs():
    table = format_table([_result(CONFIGS[4].name, faces_per_s=0.1274), _result(CONFIGS[0].name, faces_per_s=1234.4)])
    rows = [line for line in table.splitlines() if line.startswith("| ") and "configuration" not in line]
    assert rows[0].startswith(f"| 5 | {CONFIGS[4].name} |") and rows[0].endswith("| 0.127 |")
    assert rows[1].startswith(f"| 1 | {CONFIGS[0].name} |") and rows[1].endswith("| 1234 |")
    assert [significant(v) for v in (0.13, 2.5, 99.0, 12345.6)] == ["0.130", "2.50", "99.0", "12346"]


@pytest.mark.parametrize("spec", ["0", "7", "-1", "1,0", "", "x"])
def test_configs_out_of_range_are_refused(spec):
    with pytest.raises(UsageError, match=r"numbers 1\.\.6"):
        select_configs(spec, cuda=False)
    assert select_configs("6,1", cuda=False) == [CONFIGS[5], CONFIGS[0]]


def test_a_workload_of_one_static_batch_is_refused_before_any_worker(workers):
    """No latency after the first batch to measure: said up front, not a crash in the worker (max of nothing)."""
    jobs, _ = workers
    assert sum(face_counts(2, 2, seed=1)) <= 2  # one static batch of 2
    with pytest.raises(UsageError, match="1 static batch"):
        bench_run("--batch-size", "2", "--frames", "2", "--configs", "1", "--seed", "1")
    assert jobs == []
    assert bench_run("--batch-size", "2", "--frames", "2", "--configs", "5", "--seed", "1") == 0  # varying: 2 batches


@pytest.mark.parametrize("args", [["--precision", "fp64"], ["--device", "cuda:99"]])
def test_bad_device_or_precision_is_a_usage_error_before_any_worker(workers, args):
    jobs, _ = workers
    with pytest.raises(UsageError):
        bench_run(*args)
    assert jobs == []


def test_an_unwritable_json_is_refused_before_any_worker(workers, tmp_path):
    jobs, _ = workers
    with pytest.raises(OutputError, match="does not exist"):
        bench_run("--configs", "1", "--json", str(tmp_path / "missing" / "bench.json"))
    assert jobs == []


def test_the_json_replaces_only_an_earlier_benchmarks_results(workers, tmp_path):
    # --json notes.json (a typo for another name) wrote over the user's file
    jobs, _ = workers
    notes = tmp_path / "notes.json"
    notes.write_text('{"mine": 1}')
    with pytest.raises(UsageError, match=r"notes\.json exists and is not an earlier emopipe bench's results"):
        bench_run("--configs", "1", "--json", str(notes))
    assert jobs == [] and notes.read_text() == '{"mine": 1}'  # refused before any worker, the file untouched


def test_a_failing_worker_gives_its_own_exit_code_and_line(workers, tmp_path):
    jobs, outcome = workers
    said = "loading …\nemopipe: error: cannot read x.pth\n"
    outcome["run"] = lambda job: subprocess.CompletedProcess([], 6, "", said)
    with pytest.raises(EmopipeError) as caught:
        bench_run("--configs", "1,5")
    assert caught.value.exit_code == 6 and len(jobs) == 1
    assert str(caught.value) == f"benchmark configuration {CONFIGS[0].name!r} failed: cannot read x.pth"
    outcome["run"] = lambda job: subprocess.CompletedProcess([], -9, "", "")  # killed by a signal: not a code of ours
    with pytest.raises(EmopipeError) as caught:
        bench_run("--configs", "1")
    assert caught.value.exit_code == 1 and "no output" in str(caught.value)


def test_json_is_written_whole_in_place_of_an_earlier_one(workers, tmp_path, capsys):
    out = tmp_path / "bench.json"
    out.write_text(json.dumps([_result("earlier").__dict__]))  # an earlier benchmark's results
    assert bench_run("--configs", "5,1", "--json", str(out)) == 0
    assert [r["config"] for r in json.loads(out.read_text())] == [CONFIGS[4].name, CONFIGS[0].name]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bench.json"]  # no partial file left beside it
    table = capsys.readouterr().out
    assert f"| 5 | {CONFIGS[4].name} |" in table and f"| 1 | {CONFIGS[0].name} |" in table


def test_debug_shows_the_workers_traceback_and_quiet_reaches_the_workers(monkeypatch, capsys):
    """A worker's error says "rerun with --debug for the traceback": --debug must then show the worker's traceback
    (it once showed only this process's, re-raising the one line), and -q silences the progress lines."""
    from emopipe.cli import bench

    commands: list[list[str]] = []
    said = {"stderr": ""}

    def worker(cmd, **kwargs):  # type: ignore[no-untyped-def]
        commands.append(cmd)
        return subprocess.CompletedProcess(cmd, 1, "", said["stderr"])

    monkeypatch.setattr(bench.subprocess, "run", worker)
    said["stderr"] = "emopipe: internal error: RuntimeError: boom (rerun with --debug for the traceback)\n"
    with pytest.raises(EmopipeError) as caught:
        bench_run("--configs", "1")
    assert "--debug" not in commands[-1] and "-q" not in commands[-1]
    assert str(caught.value).endswith("failed: internal error: RuntimeError: boom (rerun with --debug for the "
                                      "traceback)")
    assert "running: " in capsys.readouterr().err

    said["stderr"] = 'Traceback (most recent call last):\n  File "x.py", line 1, in <module>\nRuntimeError: boom\n'
    with pytest.raises(EmopipeError) as caught:
        bench_run("--debug", "--configs", "1")
    worker_argv = commands[-1][commands[-1].index("bench") + 1:]
    assert "--debug" in worker_argv[:worker_argv.index("--worker")]
    assert str(caught.value).endswith("failed: RuntimeError: boom")
    err = capsys.readouterr().err
    assert "Traceback (most recent call last):" in err and 'File "x.py", line 1' in err

    said["stderr"] = "emopipe: error: cannot read x.pth\n"
    with pytest.raises(EmopipeError):
        bench_run("-q", "--configs", "1")
    assert "-q" in commands[-1] and "--debug" not in commands[-1]
    assert capsys.readouterr().err == ""  # no progress line (the one-line error is the command line's to print)


def test_a_failed_benchmark_leaves_an_earlier_json_as_it_was(workers, tmp_path):
    _, outcome = workers
    out = tmp_path / "bench.json"
    out.write_text("earlier\n")
    outcome["run"] = lambda job: subprocess.CompletedProcess([], 6, "", "emopipe: error: cannot read x.pth\n")
    with pytest.raises(EmopipeError):
        bench_run("--configs", "1", "--json", str(out))
    assert out.read_text() == "earlier\n" and sorted(p.name for p in tmp_path.iterdir()) == ["bench.json"]
