"""Every metric the dashboards read, by who exports it, and the PromQL pieces the panels share.

The engines' series go through `observability.either` (each engine's name of one meaning, its backend's);
LiteLLM's are its Prometheus callback's (the gateway's `callbacks: [..., prometheus]`), which names
the tenant `api_key_alias` (the fabric's key alias is the tenant: gateway/runtime/hooks.py); DCGM's
are `gpu_metrics.COLLECTED`. `FABRIC_METRICS` lists the fabric's own series with their exporter:
the recording rules, and those of other parts of the fabric built beside the dashboards: a
replica's canary verdict and rotation (the canary prober), a tenant's month so far and its budgets
(the report exporter), and the gateway's refusals by reason (a name the gateway's admission has yet
to export). tests/deploy/test_dashboard_queries.py checks every name against the
real exporters' names.
"""

from __future__ import annotations

from dataclasses import dataclass

from llm_fabric import names as N
from llm_fabric.observability.rules import RECORDING_RULES, either

# a panel's window: Grafana's, at least four scrape intervals of the range shown
WINDOW = "$__rate_interval"


@dataclass(frozen=True)
class FabricMetric:
    exporter: str
    labels: tuple[str, ...]
    help: str


FABRIC_METRICS: dict[str, FabricMetric] = {
    **{name: FabricMetric("the recording rules (observability/rules.py)", (), "recorded") for name in RECORDING_RULES},
    N.CANARY_PASS_METRIC: FabricMetric(
        "the canary prober (live/canary.py, the canary branch)",
        ("site", "deployment", "replica", "node"),
        "1 when the replica passed every canary prompt, else 0; absent: no verdict yet",
    ),
    N.CANARY_IN_ROTATION_METRIC: FabricMetric(
        "the canary prober (live/prober.py, the canary branch)",
        ("site", "deployment", "replica", "node"),
        "1 while the gateway routes to the replica, 0 while it is out of rotation",
    ),
    N.TENANT_MONTH_TOKENS_METRIC: FabricMetric(
        "the report exporter (ledger/tenant_month.py, the budgets branch)", ("tenant",), "tokens this month so far"
    ),
    N.TENANT_BUDGET_TOKENS_METRIC: FabricMetric(
        "the report exporter (ledger/tenant_month.py, the budgets branch)", ("tenant",), "the tenant's tokens_per_month"
    ),
    N.TENANT_MONTH_PRICE_METRIC: FabricMetric(
        "the report exporter (ledger/tenant_month.py, the budgets branch)",
        ("tenant", "currency"),
        "this month's tokens at the reference prices",
    ),
    N.TENANT_BUDGET_PRICE_METRIC: FabricMetric(
        "the report exporter (ledger/tenant_month.py, the budgets branch)",
        ("tenant", "currency"),
        "the tenant's price_per_month",
    ),
    N.GATEWAY_REFUSALS_METRIC: FabricMetric(
        "the gateway's admission (gateway/runtime)",
        ("tenant", "reason"),
        "requests the gateway answered 429, by reason (requests_per_minute, tokens_per_minute, concurrency, budget)",
    ),
}

# LiteLLM's Prometheus callback (litellm/integrations/prometheus.py), sample names as scraped
LITELLM_REQUESTS = "litellm_proxy_total_requests_metric_total"
LITELLM_FAILED = "litellm_proxy_failed_requests_metric_total"
LITELLM_INPUT_TOKENS = "litellm_input_tokens_metric_total"
LITELLM_OUTPUT_TOKENS = "litellm_output_tokens_metric_total"
LITELLM_OVERHEAD = "litellm_overhead_latency_metric_bucket"
LITELLM_TOTAL_LATENCY = "litellm_request_total_latency_metric_bucket"
LITELLM_TENANT = "api_key_alias"


def engine_series(meaning: str, matchers: str) -> str:
    """`observability.either(meaning)` with label matchers (`deployment="x"`): every engine's series of one
    meaning, the histograms the recording rules do not aggregate (`itl_bucket`, `e2e_bucket`) among them."""
    return either(meaning)[:-1] + f", {matchers}}}"


def quantile(q: float, buckets: str, by: str) -> str:
    return f"histogram_quantile({q}, sum by (le, {by}) (rate({buckets}[{WINDOW}])))"
