"""deploy/ and the Dockerfile read as an operator would, without any server: the labels every query and rule
matches on are the labels emopipe exposes, the image can run what deploy/ asks of it, no weights go into it,
and every file compose mounts is there. (tests/test_metrics_prometheus.py runs them against real servers.)"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time

import yaml

from emopipe.observe import metrics as m
from tests.support.prometheus_helpers import (
    DEPLOY,
    REPO,
    dashboard_expressions,
    free_port,
    rules,
    scrape,
    stop,
    wait_until_ready,
)
from tests.test_metrics_prometheus import a_metrics_registry

# a metric, optionally with its matchers: emopipe_run_state{state="running"}
SELECTOR = re.compile(r"(?<![\w:])(emopipe_[a-z0-9_]+)(?![\w:])(\{[^}]*\})?")
MATCHER = re.compile(r'(\w+)\s*(=~|!=|!~|=)\s*"([^"]*)"')
# the values a label can take, as emopipe/observe/metrics.py defines them (per metric where two share a name)
VALUES = {("emopipe_run_state", "state"): m.RUN_STATES, ("emopipe_run_state", "mode"): m.RUN_MODES,
          ("emopipe_source_state", "state"): m.SOURCE_STATES, ("*", "phase"): m.PHASES, ("*", "stage"): m.STAGES,
          ("*", "kind"): m.ERROR_KINDS, ("*", "step"): ("load", "warmup")}


def _shipped_queries() -> list[tuple[str, str]]:
    variables = {"datasource": "p", "job": ".*", "instance": ".*", "source": ".*"}
    found = [(e.where, e.promql) for e in dashboard_expressions(variables)]
    found += [(f"record: {r['record']}", r["expr"]) for r in rules("record")]
    return found + [(f"alert: {r['alert']}", r["expr"]) for r in rules("alert")]


def test_every_label_a_query_or_rule_matches_on_is_one_emopipe_exposes_with_that_value():
    """A matcher on a label the metric lacks, or on a value it never takes (phase="stedy", state="lost" on the run
    state), selects nothing: the panel stays empty and the alert can never fire, and promtool accepts both."""
    labels: dict[str, set[str]] = {}
    for family in a_metrics_registry().collect():
        for sample in family.samples:
            labels.setdefault(sample.name, set()).update(sample.labels)
    checked = 0
    for where, promql in _shipped_queries():
        for name, body in SELECTOR.findall(promql):
            for label, op, value in MATCHER.findall(body):
                if label in ("job", "instance"):  # Prometheus' own target labels
                    continue
                assert label in labels[name], f"{where}: {name} has no label {label!r}: {promql}"
                allowed = VALUES.get((name, label)) or VALUES.get(("*", label))
                if allowed is None or op not in ("=", "=~") or value == ".*":
                    continue
                for alternative in value.split("|") if op == "=~" else [value]:
                    assert alternative in allowed, f"{where}: {name}{{{label}}} is never {alternative!r}: {promql}"
                    checked += 1
        for grouping in re.findall(r"\bby\s*\(([^)]*)\)", promql):  # each label kept by an aggregation exists
            kept = {g.strip() for g in grouping.split(",")} - {"job", "instance", "le"}
            names = [n for n, _ in SELECTOR.findall(promql)]
            if names:
                have = set().union(*(labels[n] for n in names))
                assert kept <= have, f"{where}: by ({grouping}) names labels no metric of it has: {promql}"
    assert checked >= 10  # the phase, stage and state matchers were found


def _image_install() -> str:
    (line,) = [line for line in (REPO / "Dockerfile").read_text().splitlines() if line.startswith("RUN pip install")]
    return line


def test_the_image_can_run_the_kuberay_job_with_the_ray_it_declares():
    """KubeRay submits a RayJob's entrypoint with `ray job submit` (its submitter pod, on the head's image) to the
    head's job server: both need ray[default] — plain `ray`, which the [ray] extra installs, refuses with "The Ray
    jobs CLI & SDK require the ray[default] installation". And the image's Ray is the rayVersion the job declares."""
    install = shlex.split(_image_install())
    assert any(re.fullmatch(r"ray\[([a-z,]*\bdefault\b[a-z,]*)\]", word) for word in install), install
    job = yaml.safe_load((DEPLOY / "kuberay" / "rayjob.yaml").read_text())
    cluster = job["spec"]["rayClusterSpec"]
    pins = dict(line.split("#")[0].strip().split("==") for line in (DEPLOY / "constraints.txt").read_text().splitlines()
                if line.strip() and not line.startswith("#"))
    assert pins.get("ray") == cluster["rayVersion"], "the image's Ray (deploy/constraints.txt) is not the RayJob's"
    images = {c["image"] for spec in [cluster["headGroupSpec"], *cluster["workerGroupSpecs"]]
              for c in spec["template"]["spec"]["containers"]}
    assert len(images) == 1  # head, workers and the submitter (the head's image) run the same emopipe and Ray


def test_no_weights_go_into_the_image():
    """EmoNet's weights are CC BY-NC-ND: never in an image. Only the weights manifest is copied, nothing is fetched
    while building, and the models folder is a volume."""
    dockerfile = (REPO / "Dockerfile").read_text()
    instructions = [line for line in dockerfile.splitlines() if line and not line.lstrip().startswith("#")]
    copied = [word for line in instructions if line.split()[:1] in (["COPY"], ["ADD"])
              for word in line.split()[1:-1] if not word.startswith("--")]
    assert not any(line.startswith("ADD ") for line in instructions)  # (ADD fetches URLs and unpacks archives)
    models = [path for path in copied if path.startswith("models")]
    assert models == ["models/manifest.json"], copied
    assert not re.search(r"\.(pth|pt|onnx|tar|bin|safetensors)\b", " ".join(copied))
    assert "models fetch" not in " ".join(line for line in instructions if line.startswith("RUN"))
    assert re.search(r'^VOLUME \["/models"\]$', dockerfile, re.M)
    ignored = (REPO / ".dockerignore").read_text().splitlines()
    assert "!models/manifest.json" in ignored and "!models" not in ignored and ignored[
        next(i for i, line in enumerate(ignored) if not line.startswith("#"))] == "*"


def test_every_file_compose_and_prometheus_name_is_there():
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    for name, service in compose["services"].items():
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith("."):
                assert (DEPLOY / source).exists() or source == "./data", (name, volume)  # ./data: the user's
    config = yaml.safe_load((DEPLOY / "prometheus" / "prometheus.yml").read_text())
    assert config["rule_files"] and all((DEPLOY / "prometheus" / path).is_file() for path in config["rule_files"])
    home = compose["services"]["grafana"]["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
    mounts = dict(v.split(":")[:2] for v in compose["services"]["grafana"]["volumes"] if v.startswith("./"))
    (folder,) = [source for source, target in mounts.items() if home.startswith(target + "/")]
    assert (DEPLOY / folder / home.rsplit("/", 1)[1]).is_file()


def _run_state(url: str) -> str | None:
    """The run state a scrape of ``url`` says (None: nothing answers)."""
    try:
        values = scrape(url)
    except OSError:
        return None
    states = [dict(labels)["state"] for (name, labels), value in values.items()
              if name == "emopipe_run_state" and value == 1]
    return states[0] if states else ""


def test_the_demo_stopped_by_sigterm_ends_as_emopipe_does_not_as_a_crash():
    """deploy/metrics_demo.py is for alert work: stopped (docker stop, Ctrl-C) it must say ``interrupted`` to the
    scrape after the signal, as emopipe does, not vanish with its last scrape saying ``running`` (EmopipeTargetDown,
    critical, fired a minute after every demo was stopped), and exit 130."""
    port = free_port()
    url = f"http://127.0.0.1:{port}/metrics"
    demo = subprocess.Popen([sys.executable, str(DEPLOY / "metrics_demo.py"), "--port", str(port), "--duration", "120"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until_ready(url, demo)
        deadline = time.monotonic() + 30
        while _run_state(url) != "running":  # (start-up observed, then running)
            assert time.monotonic() < deadline and demo.poll() is None
            time.sleep(0.05)
        time.sleep(3)  # two scrapes 3 s apart: it waits ~5.5 s for the next one after it ends
        assert _run_state(url) == "running"
        demo.send_signal(signal.SIGTERM)
        seen = "running"
        deadline = time.monotonic() + 30
        while seen == "running" and time.monotonic() < deadline:
            seen = _run_state(url)
            time.sleep(0.02)
        assert seen == "interrupted"
        assert demo.wait(timeout=30) == 130
    finally:
        stop(demo)


def _healthcheck() -> list[str]:
    """The image's HEALTHCHECK command (exec form), with this Python for the image's."""
    text = (REPO / "Dockerfile").read_text()
    block = re.search(r"^HEALTHCHECK .*\\\n\s*CMD (\[.*\])$", text, re.M)
    assert block, "no HEALTHCHECK … CMD [...] in the Dockerfile"
    command = json.loads(block.group(1))
    assert command[0] == "python3"
    return [sys.executable, *command[1:]]


def test_the_healthcheck_probes_the_metrics_server_without_being_taken_for_a_scrape():
    """A run waits after its end for the scrape that sees how it ended; the health probe (every 30 s in compose)
    must not be that scrape, or Prometheus never sees the end and EmopipeTargetDown fires for a run stopped as
    asked. Healthy while the server answers, unhealthy once it does not, healthy with nothing to probe."""
    from prometheus_client import CollectorRegistry

    from emopipe.observe.exposition import MetricsExporter
    from emopipe.observe.metrics import PipelineMetrics

    probe = _healthcheck()
    env = {k: v for k, v in os.environ.items() if k != "EMOPIPE_HEALTH_URL"}
    assert subprocess.run(probe, env=env, timeout=60).returncode == 0  # no metrics served: nothing to probe
    registry = CollectorRegistry()
    metrics = PipelineMetrics(registry, info={})
    exporter = MetricsExporter(registry, port=0, host="127.0.0.1", run_state=metrics.set_run_state)
    exporter.start()
    try:
        assert exporter.server is not None and exporter.scrapes is not None
        url = exporter.server.url
        exporter.scrapes.watch_from()  # as a run that ended does
        for _ in range(2):
            done = subprocess.run(probe, env={**env, "EMOPIPE_HEALTH_URL": url}, capture_output=True, timeout=60)
            assert done.returncode == 0, done.stderr
        assert not exporter.scrapes.scraped and not exporter.scrapes.seen_after.is_set()
    finally:
        exporter.close()
    done = subprocess.run(probe, env={**env, "EMOPIPE_HEALTH_URL": url}, capture_output=True, timeout=60)
    assert done.returncode == 1  # nothing answers: unhealthy
