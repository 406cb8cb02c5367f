"""A site's dashboards from its plan: deployments, tenants, nodes and the gateway, one ConfigMap each.

The plan decides what a dashboard holds: the deployments with a replica at the site (each with a row
setting its output speed, time to first token and inter-token latency against what the plan
expects, its ceiling and the deployment's targets), the site's nodes, the federation's tenants.
A deployment's speed figures are the plan's for all its replicas; the site's share is the share of
its replicas here (replicas of one deployment on different GPUs differ: the figure is a guide).
The variables' values come from the plan too, so a dashboard offers what the site runs, not what
the series happen to hold. Series of the gateway (LiteLLM's) carry no `site` label (each site's
Prometheus scrapes its own gateway), so the tenant and gateway dashboards have no site variable.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from llm_fabric import names as N
from llm_fabric.hardware.xids import XidTable, load_xid_table
from llm_fabric.kube import labels as L
from llm_fabric.kube.manifests import Bundle, Manifest
from llm_fabric.observability.dashboards import series as S
from llm_fabric.observability.dashboards.panels import (
    DashboardSpec,
    Panel,
    Query,
    Row,
    Variable,
    grafana_json,
    reference,
)
from llm_fabric.observability.rules import XID, XID_ALERTS
from llm_fabric.plan.document import Plan
from llm_fabric.trust.sites import TrustedSite

DASHBOARDS = ("deployments", "tenants", "nodes", "gateway")
BY_REPLICA = "{{deployment}}/{{replica}}"
BY_GPU = "{{node}} GPU {{gpu}}"
SITE = 'site=~"$site"'


def site_dashboards(site: TrustedSite, plan: Plan, site_id: str) -> list[DashboardSpec]:
    """The site's dashboards, in DASHBOARDS order."""
    here = sorted({r.deployment for r in plan.replicas if r.site == site_id})
    nodes = sorted(n.name for n in plan.nodes if n.site == site_id and n.status != "retired")
    sites = Variable("site", "Site", tuple(sorted(site.config.sites)), current=site_id)
    deployments = Variable("deployment", "Deployment", tuple(here))
    tenants = Variable("tenant", "Tenant", tuple(sorted(site.tenants)))
    node_var = Variable("node", "Node", tuple(nodes))
    title = f"llm-fabric {site_id}"
    return [
        DashboardSpec(
            f"llm-fabric-{site_id}-deployments",
            f"{title}: deployments",
            "Every deployment with a replica at the site, each against what the plan expects of it here.",
            [sites, deployments],
            [_every_deployment(), *(_against_plan(site, plan, site_id, name) for name in here)],
        ),
        DashboardSpec(
            f"llm-fabric-{site_id}-tenants",
            f"{title}: tenants",
            "Requests, tokens, refusals and the month's budget of each tenant (the gateway's series).",
            [tenants],
            [_tenants()],
        ),
        DashboardSpec(
            f"llm-fabric-{site_id}-nodes",
            f"{title}: nodes",
            "The site's GPUs as DCGM reports them, Xids by the class of enrollment/xid-classes.yaml.",
            [sites, node_var],
            [_nodes(load_xid_table())],
        ),
        DashboardSpec(
            f"llm-fabric-{site_id}-gateway",
            f"{title}: gateway",
            "What the site's gateway adds to a request, and what it refuses.",
            [tenants],
            [_gateway()],
        ),
    ]


def _every_deployment() -> Row:
    chosen = f'{SITE}, deployment=~"$deployment"'
    e2e = S.engine_series("e2e_bucket", chosen)
    return Row(
        "Every deployment",
        (
            Panel(
                "Requests/s (succeeded)",
                (Query(f"sum by (deployment) (fabric:requests_succeeded:rate5m{{{chosen}}})", "{{deployment}}"),),
                "reqps",
            ),
            _p50_p95("End-to-end latency p50 / p95", e2e, "deployment", "{{deployment}} "),
            Panel(
                "Queue depth (requests waiting)",
                (Query(f"sum by (deployment) (fabric:requests_waiting:sum{{{chosen}}})", "{{deployment}}"),),
            ),
            Panel(
                "KV-cache use (per replica)",
                (Query(f"fabric:kv_cache_usage:max{{{chosen}}}", BY_REPLICA),),
                "percentunit",
            ),
            Panel(
                "Prefix-cache hit rate (30m)",
                (Query(f"fabric:prefix_cache_hit_ratio:rate30m{{{chosen}}}", "{{deployment}}"),),
                "percentunit",
            ),
            Panel(
                "Canary (1 pass, 0 fail) and rotation (1 in)",
                (
                    Query(f"{N.CANARY_PASS_METRIC}{{{chosen}}}", f"{BY_REPLICA} canary"),
                    Query(f"{N.CANARY_IN_ROTATION_METRIC}{{{chosen}}}", f"{BY_REPLICA} in rotation"),
                ),
                kind="stat",
                description="each replica's last canary round (no value: no verdict yet, unknown) and "
                "whether the gateway routes to it",
            ),
        ),
    )


def _against_plan(site: TrustedSite, plan: Plan, site_id: str, name: str) -> Row:
    capacity = plan.deployments.get(name)
    mine = f'{SITE}, deployment="{name}"'
    share = sum(r.site == site_id for r in plan.replicas_of(name)) / max(len(plan.replicas_of(name)), 1)
    expected = capacity.expected if capacity else None
    speed = [Query(f"sum(fabric:generation_tokens:rate5m{{{mine}}})", "delivering")]
    if expected is not None:
        speed.append(reference(round(expected.output_tokens_per_s_total * share, 1), "plan: expected"))
    if capacity is not None:
        ceiling = capacity.ceiling.output_tokens_per_s_total if capacity.ceiling else capacity.decode_tokens_per_s_total
        speed.append(reference(round(ceiling * share, 1), "plan: ceiling"))
    ttft = S.engine_series("ttft_bucket", mine)
    itl = S.engine_series("itl_bucket", mine)
    target = site.deployments[name].target if name in site.deployments else None
    if expected is None:
        title = f"{name}: no calibrated figure in the plan"
    else:
        title = f"{name}: expected {expected.output_tokens_per_s_total * share:,.0f} tok/s here"
    return Row(
        title,
        (
            Panel("Output tok/s against the plan", tuple(speed), "short", last_in_legend=True),
            _p50_p95(
                "Time to first token p50 / p95",
                ttft,
                "deployment",
                limits=_limits(target.ttft_ms if target else None, expected.ttft_ms if expected else None),
            ),
            _p50_p95(
                "Inter-token latency p50 / p95",
                itl,
                "deployment",
                limits=_limits(target.itl_ms if target else None, expected.itl_ms if expected else None),
            ),
        ),
    )


def _p50_p95(title: str, buckets: str, by: str, legend: str = "", limits: Sequence[Query] = ()) -> Panel:
    """A histogram's median and 95th percentile (seconds), with the lines they are read against."""
    quantiles = (Query(S.quantile(q, buckets, by), f"{legend}p{round(q * 100)}") for q in (0.5, 0.95))
    return Panel(title, (*quantiles, *limits), "s")


def _limits(target_ms: float | None, expected_ms: float | None) -> list[Query]:
    """The deployment's target and the plan's expected figure, in seconds (the engines' unit)."""
    lines = []
    if target_ms is not None:
        lines.append(reference(target_ms / 1000, "target"))
    if expected_ms is not None:
        lines.append(reference(round(expected_ms / 1000, 5), "plan: expected"))
    return lines


def _tenants() -> Row:
    who = f'{S.LITELLM_TENANT}=~"$tenant"'
    by = f"sum by ({S.LITELLM_TENANT})"
    legend = f"{{{{{S.LITELLM_TENANT}}}}}"
    chosen = 'tenant=~"$tenant"'
    return Row(
        "Tenants",
        (
            Panel("Requests/s", (Query(f"{by} (rate({S.LITELLM_REQUESTS}{{{who}}}[{S.WINDOW}]))", legend),), "reqps"),
            Panel(
                "Tokens/s",
                (
                    Query(f"{by} (rate({S.LITELLM_INPUT_TOKENS}{{{who}}}[{S.WINDOW}]))", f"{legend} input"),
                    Query(f"{by} (rate({S.LITELLM_OUTPUT_TOKENS}{{{who}}}[{S.WINDOW}]))", f"{legend} output"),
                ),
            ),
            Panel(
                "429s by reason",
                (
                    Query(
                        f"sum by (tenant, reason) (rate({N.GATEWAY_REFUSALS_METRIC}{{{chosen}}}[{S.WINDOW}]))",
                        "{{tenant}} {{reason}}",
                    ),
                ),
                "reqps",
            ),
            Panel(
                "Tokens this month against the budget",
                (
                    Query(f"{N.TENANT_MONTH_TOKENS_METRIC}{{{chosen}}}", "{{tenant}} used"),
                    Query(f"{N.TENANT_BUDGET_TOKENS_METRIC}{{{chosen}}}", "{{tenant}} budget"),
                ),
            ),
            Panel(
                "Spend this month against the price budget",
                (
                    Query(f"{N.TENANT_MONTH_PRICE_METRIC}{{{chosen}}}", "{{tenant}} spent ({{currency}})"),
                    Query(f"{N.TENANT_BUDGET_PRICE_METRIC}{{{chosen}}}", "{{tenant}} budget ({{currency}})"),
                ),
            ),
        ),
    )


def _nodes(xids: XidTable) -> Row:
    chosen = f'{SITE}, node=~"$node"'
    used, free = "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE"
    by_class = []
    for kind in XID_ALERTS:
        any_of = " or ".join(f"{XID}{{{chosen}}} == {x}" for x in xids.of_kind(kind))
        by_class.append(Query(f"count by (node) ({any_of})", f"{{{{node}}}} {kind}"))
    return Row(
        "GPUs",
        (
            Panel("GPU utilisation", (Query(f"DCGM_FI_DEV_GPU_UTIL{{{chosen}}}", BY_GPU),), "percent"),
            Panel(
                "GPU memory used",
                (Query(f"{used}{{{chosen}}} / ({used}{{{chosen}}} + {free}{{{chosen}}})", BY_GPU),),
                "percentunit",
            ),
            Panel("GPU power", (Query(f"DCGM_FI_DEV_POWER_USAGE{{{chosen}}}", BY_GPU),), "watt"),
            Panel(
                "GPU and memory temperature",
                (
                    Query(f"DCGM_FI_DEV_GPU_TEMP{{{chosen}}}", BY_GPU),
                    Query(f"DCGM_FI_DEV_MEMORY_TEMP{{{chosen}}}", f"{BY_GPU} memory"),
                ),
                "celsius",
            ),
            Panel(
                "GPUs reporting an Xid, by class",
                tuple(by_class),
                description="DCGM holds the last Xid a GPU reported; the classes are enrollment/xid-classes.yaml's",
            ),
            Panel(
                "Uncorrectable ECC errors / 1h",
                (Query(f"increase(DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{{{chosen}}}[1h])", BY_GPU),),
            ),
        ),
    )


def _gateway() -> Row:
    who = f'{S.LITELLM_TENANT}=~"$tenant"'
    overhead, latency = f"{S.LITELLM_OVERHEAD}{{{who}}}", f"{S.LITELLM_TOTAL_LATENCY}{{{who}}}"
    failed = f'{S.LITELLM_FAILED}{{{who}, exception_status=~"401|403|429|5.."}}'
    return Row(
        "Gateway",
        (
            _p50_p95("Latency the gateway adds p50 / p95", overhead, "job"),
            _p50_p95("End-to-end latency at the gateway p50 / p95", latency, "job"),
            Panel(
                "Refused and failed requests/s (401, 403, 429, 5xx)",
                (Query(f"sum by (exception_status) (rate({failed}[{S.WINDOW}]))", "{{exception_status}}"),),
                "reqps",
                description="a refused key (401) names no tenant: it counts only while Tenant is All",
            ),
            Panel(
                "Requests/s by status",
                (Query(f"sum by (status_code) (rate({S.LITELLM_REQUESTS}{{{who}}}[{S.WINDOW}]))", "{{status_code}}"),),
                "reqps",
            ),
        ),
    )


def build_dashboards(site: TrustedSite, plan: Plan, site_id: str, namespace: str) -> list[Bundle]:
    """One ConfigMap per dashboard; the Grafana sidecar (kube-prometheus-stack) loads those with its label."""
    labels = L.common_labels("observability", "llm-fabric") | {"grafana_dashboard": "1"}
    maps: list[Manifest] = []
    for kind, spec in zip(DASHBOARDS, site_dashboards(site, plan, site_id), strict=True):
        maps.append(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": f"llm-fabric-dashboard-{kind}", "namespace": namespace, "labels": labels},
                "data": {f"{spec.uid}.json": json.dumps(grafana_json(spec), indent=1, sort_keys=True)},
            }
        )
    return [Bundle("dashboards", "llm-fabric", maps)]
