"""Alerts and recording rules for the serving fleet, over both engines (the dashboards: `dashboards/`).

Each engine names its series its own way: vLLM (v1 engine) `vllm:prompt_tokens_total`,
`vllm:kv_cache_usage_perc`, `vllm:prefix_cache_{hits,queries}_total`, `vllm:num_preemptions_total`...;
SGLang (`--enable-metrics`) `sglang:prompt_tokens_total`, `sglang:token_usage`,
`sglang:cached_tokens_total`, `sglang:num_retracted_requests_total`... Each backend says its names
(`engine.backend.EngineMetrics`) and `ENGINE_SERIES` names the meanings the rules read; the recording
rules select every engine's name of one meaning (`{__name__=~"vllm:a|sglang:b"}`) and aggregate
them into one `fabric:*` series, so alerts, the dashboards and the ledger read one name whichever
engine serves a deployment. SGLang's cached prompt tokens over its prompt tokens is the
prefix-cache hit ratio (vLLM counts hits and queries in tokens too). SGLang counts aborted requests
in `sglang:num_requests_total`: succeeded requests are that minus `sglang:num_aborted_requests_total`.
The PodMonitor of the serving stack relabels every engine series with `deployment`, `replica`,
`owner`, `site` and `node`.

GPU faults are DCGM's: `DCGM_FI_DEV_XID_ERRORS` (from the dcgm-exporter of `gpu_metrics`, relabelled
with `node`) is a gauge holding the last Xid a GPU reported, so there is one alert per Xid class of
`enrollment/xid-classes.yaml`, selecting its Xids by value. A node-fatal Xid pages critical (the GPU
or node must be taken out); a replica-fatal one warns (restart the replica); an application Xid is
an `info` alert: counted and shown, and Alertmanager routes `severity="info"` to no receiver
(kube-prometheus-stack's default `null` route), so it pages nobody. An Xid the table does not list
warns with its value, so that a new Xid gets sorted into the table instead of going unseen.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from llm_fabric import names as N
from llm_fabric.engine.backend import EngineMetrics
from llm_fabric.engine.backends import engine_series, series_selector
from llm_fabric.hardware.xids import XidKind, XidTable, load_xid_table
from llm_fabric.kube import labels as L
from llm_fabric.kube.manifests import Bundle, Manifest
from llm_fabric.kube.options import StackOptions
from llm_fabric.observability.gpu_metrics import build_gpu_metrics
from llm_fabric.trust.sites import TrustedSite

BY_DEPLOYMENT = "deployment, owner, site"
BY_REPLICA = "deployment, replica, owner, site, node"

# meaning -> (vLLM's series, SGLang's series)
# meaning -> each engine's name of it
ENGINE_SERIES: dict[str, Callable[[EngineMetrics], str]] = {
    "prompt_tokens": lambda m: m.prompt_tokens,
    "generation_tokens": lambda m: m.generation_tokens,
    "cache_hit_tokens": lambda m: m.cache_hit_tokens,
    "cache_query_tokens": lambda m: m.cache_query_tokens,
    "requests_running": lambda m: m.requests_running,
    "requests_waiting": lambda m: m.requests_waiting,
    "kv_cache_usage": lambda m: m.kv_cache_usage,
    "requests_finished": lambda m: m.requests_finished,
    "preemptions": lambda m: m.preemptions,
    "ttft_bucket": lambda m: m.ttft_bucket,
    "itl_bucket": lambda m: m.itl_bucket,
    "e2e_bucket": lambda m: m.e2e_bucket,
}


def either(meaning: str) -> str:
    """A selector of every engine's series of one meaning."""
    return series_selector(ENGINE_SERIES[meaning])


def _aborted() -> str:
    """The aborted requests of the engines that count them among the finished ones."""
    names = engine_series(lambda m: m.requests_aborted)
    return names[0] if len(names) == 1 else series_selector(lambda m: m.requests_aborted)


def _rate(meaning: str, window: str) -> str:
    return f"sum by ({BY_DEPLOYMENT}) (rate({either(meaning)}[{window}]))"


def _hit_ratio(window: str) -> str:
    return f"{_rate('cache_hit_tokens', window)} / ({_rate('cache_query_tokens', window)} > 0)"


# requests that finished well: vLLM counts them; SGLang counts all and its aborted ones apart
_SUCCEEDED = (
    f"{_rate('requests_finished', '5m')} - ("
    f"sum by ({BY_DEPLOYMENT}) (rate({_aborted()}[5m])) or {_rate('requests_finished', '5m')} * 0)"
)

# name -> expression: per-deployment rates and gauges the ledger and the dashboard read
RECORDING_RULES: dict[str, str] = {
    "fabric:prompt_tokens:rate5m": _rate("prompt_tokens", "5m"),
    "fabric:generation_tokens:rate5m": _rate("generation_tokens", "5m"),
    "fabric:prefix_cache_hits:rate5m": _rate("cache_hit_tokens", "5m"),
    "fabric:prefix_cache_queries:rate5m": _rate("cache_query_tokens", "5m"),
    "fabric:prefix_cache_hit_ratio:rate30m": _hit_ratio("30m"),
    "fabric:prefix_cache_hit_ratio:rate6h": _hit_ratio("6h"),
    "fabric:requests_running:sum": f"sum by ({BY_DEPLOYMENT}) ({either('requests_running')})",
    "fabric:requests_waiting:sum": f"sum by ({BY_DEPLOYMENT}) ({either('requests_waiting')})",
    "fabric:kv_cache_usage:max": f"max by ({BY_REPLICA}) ({either('kv_cache_usage')})",
    "fabric:requests_succeeded:rate5m": _SUCCEEDED,
    "fabric:preemptions:increase10m": f"sum by ({BY_REPLICA}) (increase({either('preemptions')}[10m]))",
    "fabric:time_to_first_token_seconds:p95_5m": (
        f"histogram_quantile(0.95, sum by (le, {BY_DEPLOYMENT}) (rate({either('ttft_bucket')}[5m])))"
    ),
}


def alert_rules(options: StackOptions) -> list[dict[str, Any]]:
    """One alert per failure the fleet must page on; each says what to look at next."""
    drop = options.prefix_hit_drop_ratio
    return [
        alert_rule(
            "FabricEngineDown",
            'up{deployment!=""} == 0',
            "5m",
            "critical",
            "engine replica {{ $labels.deployment }}/{{ $labels.replica }} on {{ $labels.node }} is not scraped",
            "kubectl describe pod -l fabric.llm/replica={{ $labels.replica }}; a GPU fault shows as Xid errors",
        ),
        alert_rule(
            "FabricQueueDepthHigh",
            f"fabric:requests_waiting:sum > {options.queue_depth_threshold}",
            "10m",
            "warning",
            "{{ $labels.deployment }} has {{ $value }} requests waiting",
            "add replicas (raise the target in deployments/) or move traffic; the plan shows free GPUs",
        ),
        alert_rule(
            "FabricKVCacheNearlyFull",
            f"fabric:kv_cache_usage:max > {options.kv_cache_threshold}",
            "10m",
            "warning",
            "KV cache of {{ $labels.deployment }}/{{ $labels.replica }} is {{ $value | humanizePercentage }} full",
            "requests will be preempted and re-prefilled; lower max_model_len or add replicas",
        ),
        alert_rule(
            "FabricPrefixCacheHitRateDrop",
            f"fabric:prefix_cache_hit_ratio:rate30m < {drop} * fabric:prefix_cache_hit_ratio:rate6h",
            "30m",
            "warning",
            "prefix-cache hit rate of {{ $labels.deployment }} fell to {{ $value | humanizePercentage }}",
            "cached input is the cost lever (seed 004): look for a changed system prompt or routing",
        ),
        alert_rule(
            "FabricPreemptions",
            "fabric:preemptions:increase10m > 0",
            "15m",
            "warning",
            "{{ $labels.deployment }}/{{ $labels.replica }} keeps preempting requests",
            "KV memory runs out: preempted requests redo their whole prefill",
        ),
        *xid_alerts(load_xid_table()),
    ]


XID = "DCGM_FI_DEV_XID_ERRORS"
_ON_GPU = "GPU {{ $labels.gpu }} ({{ $labels.UUID }}) on {{ $labels.node }}"
# Xid class -> (alert, severity, what to do next)
XID_ALERTS: dict[XidKind, tuple[str, str, str]] = {
    "node-fatal": (
        N.XID_NODE_FATAL_ALERT,
        "critical",
        # the reviewed change first (a cordon on a branch, the re-plan); the drain once it is merged
        "take the node out through a reviewed change: fabric nodes remediate -C SITE --node {{ $labels.node }} "
        "--xid {{ $value }} (docs/deploy.md), then drain it: playbooks/drain.yml",
    ),
    "replica-fatal": (
        N.XID_REPLICA_FATAL_ALERT,
        "warning",
        "restart the engine on that GPU: kubectl delete pod -l app.kubernetes.io/component=engine "
        "--field-selector spec.nodeName={{ $labels.node }}",
    ),
    "application": (
        N.XID_APPLICATION_ALERT,
        "info",
        "the workload's own fault: counted, pages nobody; read the engine's log if it recurs",
    ),
}
XID_UNCLASSIFIED = N.XID_UNCLASSIFIED_ALERT


def xid_alerts(table: XidTable) -> list[dict[str, Any]]:
    """One alert per Xid class of the table, then one for the Xids it does not name."""
    rules = []
    for kind, (name, severity, action) in XID_ALERTS.items():
        expr = " or ".join(f"{XID} == {x}" for x in table.of_kind(kind))
        rules.append(alert_rule(name, expr, "0m", severity, f"{_ON_GPU} reported {kind} Xid {{{{ $value }}}}", action))
    unlisted = "".join(f" != {x}" for x in sorted(x.xid for x in table.xids))
    rules.append(
        alert_rule(
            XID_UNCLASSIFIED,
            f"{XID} > 0{unlisted}",
            "0m",
            "warning",
            f"{_ON_GPU} reported Xid {{{{ $value }}}}, which enrollment/xid-classes.yaml does not classify",
            f"look it up in {table.source} and add it to the table",
        )
    )
    return rules


def alert_rule(name: str, expr: str, for_: str, severity: str, summary: str, action: str) -> dict[str, Any]:
    """One Prometheus alerting rule in the fabric's shape (its other rule groups use it too: canary)."""
    return {
        "alert": name,
        "expr": expr,
        "for": for_,
        "labels": {"severity": severity, "team": "llm-fabric"},
        "annotations": {"summary": summary, "description": action},
    }


def rule_groups(options: StackOptions) -> list[dict[str, Any]]:
    """The `groups:` of a Prometheus rule file (what PrometheusRule.spec holds and promtool reads)."""
    recording = [{"record": name, "expr": expr} for name, expr in RECORDING_RULES.items()]
    return [
        {"name": "llm-fabric.recording", "interval": "1m", "rules": recording},
        {"name": "llm-fabric.alerts", "rules": alert_rules(options)},
    ]


def build_observability(site: TrustedSite, site_id: str, namespace: str, options: StackOptions) -> list[Bundle]:
    labels = L.common_labels("observability", "llm-fabric")
    rule: Manifest = {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {"name": "llm-fabric", "namespace": namespace, "labels": labels},
        "spec": {"groups": rule_groups(options)},
    }
    bundles = [Bundle("alert-rules", "llm-fabric", [rule])]
    exporter = build_gpu_metrics(site, site_id, namespace)
    return bundles + ([Bundle("gpu-metrics", "dcgm-exporter", exporter)] if exporter else [])
