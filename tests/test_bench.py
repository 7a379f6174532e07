"""`emopipe bench` on the CPU: each configuration in its own process, the table and the JSON it writes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from emopipe.cli.bench import CONFIGS, BenchResult, face_counts, format_table
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
    assert "| 3.0× | 2.00× | 100 |" in table and "static batch 4, 5 batches / 17 faces" in table


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


@pytest.mark.parametrize("args", [["--configs", "9"], ["--batch-size", "0"]])
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
