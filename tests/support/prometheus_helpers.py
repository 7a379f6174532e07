"""A real Prometheus (and Pushgateway) for tests, and the PromQL expressions deploy/ ships.

The expressions are parsed out of the dashboard JSON and the rule files, so a new panel or rule
is covered by the tests without touching them.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import yaml

from tests.support.ports import free_port

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
PROMETHEUS_DIR = DEPLOY / "prometheus"
PROMETHEUS_CONFIG = PROMETHEUS_DIR / "prometheus.yml"
RULE_FILES = sorted((PROMETHEUS_DIR / "rules").glob("*.yml"))
ALERT_TESTS = sorted((PROMETHEUS_DIR / "tests").glob("*.yml"))
DASHBOARD = DEPLOY / "grafana" / "dashboards" / "emopipe.json"
INTERVAL = "500ms"  # scrape and rule evaluation in tests: data within a second or two


def http_get(url: str, timeout: float = 5.0) -> str:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return response.read().decode()


def scrape(url: str) -> dict[tuple[str, frozenset], float]:
    """A /metrics page as {(sample name, frozenset of label items): value}."""
    from prometheus_client.parser import text_string_to_metric_families

    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(http_get(url)) for s in family.samples}


def wait_until_ready(url: str, process: subprocess.Popen, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{process.args[0]} exited with {process.returncode} before it was ready")
        try:
            http_get(url, timeout=1)
            return
        except OSError:
            time.sleep(0.1)
    raise TimeoutError(f"{url} not ready after {timeout} s")


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


# -- the expressions deploy/ ships ----------------------------------------------------------------

@dataclass(frozen=True)
class Expression:
    where: str  # "dashboard: <panel title>", "record: <name>", "alert: <name>"
    promql: str


def _panels(panels: list[dict]) -> list[dict]:
    out = []
    for panel in panels:
        out.append(panel)
        out.extend(_panels(panel.get("panels", [])))  # rows, collapsed or not
    return out


def dashboard() -> dict:
    return json.loads(DASHBOARD.read_text())


def dashboard_panels() -> list[dict]:
    return _panels(dashboard()["panels"])


def grafana_to_promql(expr: str, variables: dict[str, str]) -> str:
    """Grafana's template variables replaced as Grafana would, for one choice of their values."""
    builtins = {"__rate_interval": "1m", "__interval": "15s", "__range": "1h"}
    values = {**builtins, **variables}

    def replace(match: re.Match) -> str:
        name = match.group(1) or match.group(2)
        if name not in values:
            raise KeyError(f"dashboard variable ${name} has no test value: add it to the test")
        return values[name]

    return re.sub(r"\$\{(\w+)\}|\$(\w+)", replace, expr)


def dashboard_expressions(variables: dict[str, str]) -> list[Expression]:
    """Every panel query, and the metric inside every label_values() variable query."""
    found = []
    for panel in dashboard_panels():
        for target in panel.get("targets", []):
            if target.get("expr"):
                found.append(Expression(f"dashboard: {panel['title']}", grafana_to_promql(target["expr"], variables)))
    for var in dashboard()["templating"]["list"]:
        if var["type"] != "query":
            continue
        query = var["query"]["query"] if isinstance(var["query"], dict) else var["query"]
        inner = re.fullmatch(r"label_values\((.+),\s*\w+\)", query)
        found.append(Expression(f"dashboard variable: {var['name']}",
                                grafana_to_promql(inner.group(1) if inner else query, variables)))
    return found


def rules(kind: str) -> list[dict]:
    """Rules of one kind (``record`` or ``alert``) from every rule file."""
    out = []
    for path in RULE_FILES:
        for group in yaml.safe_load(path.read_text())["groups"]:
            out += [rule for rule in group["rules"] if kind in rule]
    return out


def recording_expressions() -> list[Expression]:
    return [Expression(f"record: {r['record']}", r["expr"]) for r in rules("record")]


# A series an expression reads: `up`, an emopipe metric or a recording rule over one, with its matchers.
_SELECTOR = re.compile(r"(?<![\w:])(up|[a-z_]*:?emopipe_[a-zA-Z0-9_:]*)(\{[^}]*\})?")


def alert_selectors(expr: str) -> list[str]:
    """The series selectors an alert expression reads, each once (e.g. ``emopipe_run_state{state="running"}``)."""
    return list(dict.fromkeys(m.group(1) + (m.group(2) or "") for m in _SELECTOR.finditer(expr)))


def alert_expressions() -> list[Expression]:
    """Every series each alert reads: each must return data from a live run, so that an alert can fire at all
    (the alerts themselves are gated on a run's state and compare against thresholds: promtool tests them)."""
    out = []
    for rule in rules("alert"):
        selectors = alert_selectors(rule["expr"])
        if not selectors:
            raise ValueError(f"alert {rule['alert']}: reads no emopipe series: {rule['expr']!r}")
        out += [Expression(f"alert: {rule['alert']}", selector) for selector in selectors]
    return out


# -- Prometheus ------------------------------------------------------------------------------------

def prometheus_config(emopipe_targets: list[str], pushgateway_target: str | None) -> dict:
    """deploy/prometheus/prometheus.yml, pointed at local targets, with test-speed intervals."""
    config = yaml.safe_load(PROMETHEUS_CONFIG.read_text())
    config["global"].update(scrape_interval=INTERVAL, scrape_timeout="400ms", evaluation_interval=INTERVAL)
    config["rule_files"] = [str((PROMETHEUS_DIR / f).resolve()) for f in config["rule_files"]]
    targets = {"emopipe": emopipe_targets, "pushgateway": [pushgateway_target] if pushgateway_target else []}
    jobs = []
    for job in config["scrape_configs"]:
        if targets.get(job["job_name"]):
            job["static_configs"] = [{"targets": targets[job["job_name"]]}]
            jobs.append(job)
    config["scrape_configs"] = jobs
    return config


class PrometheusServer:
    """Debian's prometheus on 127.0.0.1 with a temporary config and data dir; stopped on exit."""

    def __init__(self, workdir: Path, emopipe_targets: list[str], pushgateway_target: str | None = None) -> None:
        self.workdir = workdir
        self.config = prometheus_config(emopipe_targets, pushgateway_target)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen | None = None

    def __enter__(self) -> PrometheusServer:
        self.workdir.mkdir(parents=True, exist_ok=True)
        config = self.workdir / "prometheus.yml"
        config.write_text(yaml.safe_dump(self.config))
        log = (self.workdir / "prometheus.log").open("w")
        self.process = subprocess.Popen(
            [shutil.which("prometheus"), f"--config.file={config}", f"--storage.tsdb.path={self.workdir / 'data'}",
             f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn"],
            stdout=log, stderr=subprocess.STDOUT)
        try:
            wait_until_ready(f"{self.url}/-/ready", self.process)
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        if self.process is not None:
            stop(self.process)

    def api(self, path: str, **params: object) -> object:
        body = json.loads(http_get(f"{self.url}/api/v1/{path}?{urllib.parse.urlencode(params)}"))
        if body["status"] != "success":
            raise RuntimeError(f"{path} {params}: {body}")
        return body["data"]

    def query_range(self, promql: str, start: float, end: float) -> list[dict]:
        return self.api("query_range", query=promql, start=start, end=end, step="1s")["result"]

    def rule_health(self) -> dict[str, str]:
        return {rule["name"]: (rule["health"], rule.get("lastError", ""))
                for group in self.api("rules")["groups"] for rule in group["rules"]}


def _finite(series: dict) -> bool:
    return any(math.isfinite(float(v)) for _, v in series["values"])


def missing_data(prom: PrometheusServer, expressions: list[Expression], since: float,
                 instance: str | None = None, nan_ok: tuple[str, ...] = ()) -> list[str]:
    """The expressions that returned no series (for ``instance``, where they carry that label),
    or only NaN/Inf values — unless they mention one of ``nan_ok``, where a series is enough."""
    problems = []
    for expression in expressions:
        result = prom.query_range(expression.promql, since, time.time())
        if instance is not None:
            result = [s for s in result if s["metric"].get("instance", instance) == instance]
        if not result:
            problems.append(f"{expression.where}: no series for {expression.promql}")
        elif not any(map(_finite, result)) and not any(name in expression.promql for name in nan_ok):
            problems.append(f"{expression.where}: only NaN/Inf for {expression.promql}")
    return problems


def wait_for_data(prom: PrometheusServer, expressions: list[Expression], since: float, timeout: float,
                  **kwargs: object) -> list[str]:
    """Poll until every expression has data (or ``timeout``); returns what is still missing."""
    deadline = time.monotonic() + timeout
    while True:
        problems = missing_data(prom, expressions, since, **kwargs)
        if not problems or time.monotonic() > deadline:
            return problems
        time.sleep(0.5)
