"""Every query of every dashboard `fabric render` writes: the metrics it names exist, and it parses.

The dashboards are read back from a real render of the reference federation (`fabric init`,
`fabric plan -o`, `fabric render --all-sites --plan`), one set per site. Each name a query reads
is looked up where its exporter defines it: vLLM's in the real CPU engine's `/metrics`, SGLang's in
the pinned wheel's metric definitions, LiteLLM's in its Prometheus callback as the gateway venv
registers it, DCGM's in the collectors file the render writes for dcgm-exporter, the fabric's in the
rendered recording rules and the metrics the dashboards agree with the canary prober, the report
exporter and the gateway (`series.FABRIC_METRICS`). The parse is a real Prometheus server's.
"""

from __future__ import annotations

import ast
import json
import subprocess
import urllib.error
import urllib.parse
import urllib.request
import warnings
from collections.abc import Callable
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from llm_fabric.engine.process import LocalEngine
from llm_fabric.errors import UsageError
from llm_fabric.gateway.run import gateway_python
from llm_fabric.observability.dashboards.series import (
    FABRIC_METRICS,
    LITELLM_FAILED,
    LITELLM_INPUT_TOKENS,
    LITELLM_OUTPUT_TOKENS,
    LITELLM_OVERHEAD,
    LITELLM_REQUESTS,
    LITELLM_TENANT,
)
from llm_fabric.observability.dashboards.site_set import DASHBOARDS
from tests.deploy.rendered_site import Rendered, render_reference
from tests.fixtures.engine import get_text
from tests.fixtures.prometheus import PrometheusServer
from tests.fixtures.promql import metric_names, plain_promql
from tests.fixtures.required import missing

SITES = ("brno", "vienna")


def sample_names(name: str, kind: str) -> set[str]:
    """The series a metric family of this type is scraped as."""
    if kind == "counter":
        return {name.removesuffix("_total") + "_total"}
    if kind == "histogram":
        return {f"{name}_bucket", f"{name}_sum", f"{name}_count"}
    if kind == "summary":
        return {name, f"{name}_sum", f"{name}_count"}
    return {name}


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> Rendered:
    return render_reference(tmp_path_factory.mktemp("dashboards"))


@pytest.fixture(scope="module")
def litellm_metrics() -> dict[str, list[str]]:
    """Series name -> label names, as LiteLLM's Prometheus callback registers them in the gateway venv."""
    try:
        python = gateway_python()
    except UsageError as exc:
        missing("LiteLLM", f"make gateway ({exc.message})")
    program = (
        "import json\n"
        "from litellm.integrations.prometheus import PrometheusLogger\n"
        "from prometheus_client import REGISTRY\n"
        "PrometheusLogger()\n"
        "out = {}\n"
        "for collector, names in REGISTRY._collector_to_names.items():\n"
        "    for name in names:\n"
        "        out[name] = list(getattr(collector, '_labelnames', ()))\n"
        "print(json.dumps(out))\n"
    )
    env = {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "PATH": "/usr/bin:/bin"}
    done = subprocess.run([str(python), "-c", program], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    names: dict[str, list[str]] = json.loads(done.stdout.splitlines()[-1])
    return names


@pytest.fixture(scope="module")
def sglang_metrics(sglang_wheel: Path) -> set[str]:
    """Series names of every `Counter/Gauge/Histogram/Summary(name="sglang:...")` in the wheel's source."""
    names: set[str] = set()
    for path in (sglang_wheel / "sglang").rglob("*.py"):
        source = path.read_text(encoding="utf-8")
        if '"sglang:' not in source:
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SyntaxWarning)  # the wheel's own invalid escapes
            warnings.simplefilter("ignore", DeprecationWarning)
            tree = ast.parse(source)
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name | ast.Attribute)):
                continue
            kind = (node.func.id if isinstance(node.func, ast.Name) else node.func.attr).lower()
            if kind not in ("counter", "gauge", "histogram", "summary"):
                continue
            given = [k.value for k in node.keywords if k.arg == "name"] + node.args[:1]
            for value in given:
                if isinstance(value, ast.Constant) and str(value.value).startswith("sglang:"):
                    names |= sample_names(str(value.value), kind)
    return names


def _by_source(rendered: Rendered, site: str) -> dict[str, set[str]]:
    names: dict[str, set[str]] = {}
    for _, _, expr in rendered.queries(site):
        for name in metric_names(expr):
            source = next(p for p in ("vllm:", "sglang:", "litellm_", "DCGM_", "fabric") if name.startswith(p))
            names.setdefault(source, set()).add(name)
    return names


def test_the_name_finder_reads_selectors_not_functions_or_labels() -> None:
    expr = (
        'histogram_quantile(0.95, sum by (le, deployment) (rate({__name__=~"vllm:a_bucket|sglang:b_bucket", '
        'site=~"$site"}[$__rate_interval]))) / on (deployment) group_left fabric:x{deployment="up"} or vector(1e3)'
    )
    assert metric_names(expr) == {"vllm:a_bucket", "sglang:b_bucket", "fabric:x"}
    assert metric_names('count by (node) (DCGM_FI_DEV_XID_ERRORS{node=~"$node"} == 79 or up == 48)') == {
        "DCGM_FI_DEV_XID_ERRORS",
        "up",
    }


@pytest.mark.parametrize("site", SITES)
def test_each_site_gets_its_dashboards_from_its_plan(rendered: Rendered, site: str) -> None:
    dashboards = rendered.dashboards(site)
    assert [d["uid"] for d in dashboards] == sorted(f"llm-fabric-{site}-{kind}" for kind in DASHBOARDS)
    deployments = next(d for d in dashboards if d["uid"].endswith("-deployments"))
    variables = {v["name"]: v for v in deployments["templating"]["list"]}
    assert set(variables) == {"datasource", "site", "deployment"}
    assert variables["site"]["current"]["value"] == site
    here = {"brno": "deepseek-v3-2,glm-5-1,gpt-oss-120b,kimi-k2-6,mistral-small-4,qwen3-5,qwen3-5-122b"}
    assert variables["deployment"]["query"] == here.get(site, "gpt-oss-120b")
    rows = [p["title"] for p in deployments["panels"] if p["type"] == "row"]
    assert rows[0] == "Every deployment" and len(rows) == 1 + variables["deployment"]["query"].count(",") + 1
    # gpt-oss-120b has one of its two replicas at each site: each gets half the plan's figure
    (gpt,) = [r for r in rows if r.startswith("gpt-oss-120b: expected")]
    speed = next(p for p in deployments["panels"] if p["title"] == "Output tok/s against the plan")
    legends = [t["legendFormat"] for t in speed["targets"]]
    assert legends == ["delivering", "plan: expected", "plan: ceiling"]
    assert gpt.endswith("tok/s here")
    nodes = next(d for d in dashboards if d["uid"].endswith("-nodes"))
    node_var = next(v for v in nodes["templating"]["list"] if v["name"] == "node")
    assert node_var["query"] == {"brno": "dgx-b200-01,dgx-b300-01,hgx-h200-ceitec"}.get(site, "hgx-h100-tuwien")


@pytest.mark.parametrize("site", SITES)
def test_every_name_a_panel_reads_is_defined_by_its_exporter(
    rendered: Rendered,
    site: str,
    sglang_metrics: set[str],
    litellm_metrics: dict[str, list[str]],
) -> None:
    names = _by_source(rendered, site)
    assert set(names) == {"vllm:", "sglang:", "litellm_", "DCGM_", "fabric"}
    assert names["sglang:"] - sglang_metrics == set()
    assert names["litellm_"] - set(litellm_metrics) == set()
    assert names["DCGM_"] - rendered.dcgm_fields(site) == set()
    assert names["fabric"] - (rendered.recorded(site) | set(FABRIC_METRICS)) == set()
    # the labels the tenant and gateway panels select and group by are LiteLLM's
    for name in (LITELLM_REQUESTS, LITELLM_FAILED, LITELLM_INPUT_TOKENS, LITELLM_OUTPUT_TOKENS, LITELLM_OVERHEAD):
        assert LITELLM_TENANT in litellm_metrics[name], name
    assert "exception_status" in litellm_metrics[LITELLM_FAILED]
    assert "status_code" in litellm_metrics[LITELLM_REQUESTS]


def test_a_name_no_exporter_defines_is_found(sglang_metrics: set[str], litellm_metrics: dict[str, list[str]]) -> None:
    """The lookups above can fail: a misspelt name of each source is missing from it."""
    assert "sglang:time_to_first_token_seconds_bucket" in sglang_metrics
    assert "sglang:time_to_first_tokens_seconds_bucket" not in sglang_metrics
    assert "litellm_proxy_total_requests_metric_total" in litellm_metrics
    assert "litellm_proxy_total_request_metric_total" not in litellm_metrics


@pytest.mark.engine
@pytest.mark.slow
def test_every_vllm_name_is_in_the_real_engines_metrics(rendered: Rendered, tiny_engine: LocalEngine) -> None:
    served: set[str] = set()
    for family in text_string_to_metric_families(get_text(tiny_engine, "/metrics")):
        served |= sample_names(family.name, family.type)
    wanted = set().union(*(_by_source(rendered, site)["vllm:"] for site in SITES))
    assert {"vllm:inter_token_latency_seconds_bucket", "vllm:e2e_request_latency_seconds_bucket"} <= wanted
    assert wanted - served == set()


def _format(prom: PrometheusServer, expr: str) -> tuple[bool, str]:
    query = urllib.parse.urlencode({"query": expr})
    try:
        with urllib.request.urlopen(f"{prom.url}/api/v1/format_query?{query}", timeout=10) as resp:
            return True, json.load(resp)["data"]
    except urllib.error.HTTPError as exc:
        return False, json.load(exc)["error"]


@pytest.mark.parametrize("site", SITES)
def test_every_query_parses_on_a_real_prometheus(
    rendered: Rendered, site: str, prometheus_factory: Callable[..., PrometheusServer]
) -> None:
    prometheus = prometheus_factory()
    problems = []
    for dashboard, panel, expr in rendered.queries(site):
        ok, answer = _format(prometheus, plain_promql(expr, site=site))
        if not ok:
            problems.append(f"{dashboard} / {panel}: {answer}")
    assert problems == []
    ok, answer = _format(prometheus, plain_promql("sum by (le (rate(x[$__rate_interval]))"))
    assert not ok and "unexpected" in answer  # the server does refuse a broken query
