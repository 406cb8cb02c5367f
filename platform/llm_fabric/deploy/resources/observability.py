"""Alerts, recording rules and a Grafana dashboard for the serving fleet.

Metric names are vLLM's (v1 engine: `vllm:kv_cache_usage_perc`, `vllm:prefix_cache_{hits,queries}_total`,
`vllm:num_preemptions_total`) and DCGM's (`DCGM_FI_DEV_XID_ERRORS`). The PodMonitor of the serving
stack relabels every engine series with `deployment`, `replica`, `owner`, `site` and `node`; the
recording rules aggregate on those, and the ledger reads the `fabric:*` series.
"""

from __future__ import annotations

import json
from typing import Any

from llm_fabric.deploy import labels as L
from llm_fabric.deploy.manifests import Bundle, Manifest
from llm_fabric.deploy.options import StackOptions

BY_DEPLOYMENT = "deployment, owner, site"
BY_REPLICA = "deployment, replica, owner, site, node"

# name -> expression: per-deployment rates and gauges the ledger and the dashboard read
RECORDING_RULES: dict[str, str] = {
    "fabric:prompt_tokens:rate5m": f"sum by ({BY_DEPLOYMENT}) (rate(vllm:prompt_tokens_total[5m]))",
    "fabric:generation_tokens:rate5m": f"sum by ({BY_DEPLOYMENT}) (rate(vllm:generation_tokens_total[5m]))",
    "fabric:prefix_cache_hits:rate5m": f"sum by ({BY_DEPLOYMENT}) (rate(vllm:prefix_cache_hits_total[5m]))",
    "fabric:prefix_cache_queries:rate5m": f"sum by ({BY_DEPLOYMENT}) (rate(vllm:prefix_cache_queries_total[5m]))",
    "fabric:prefix_cache_hit_ratio:rate30m": (
        f"sum by ({BY_DEPLOYMENT}) (rate(vllm:prefix_cache_hits_total[30m]))"
        f" / sum by ({BY_DEPLOYMENT}) (rate(vllm:prefix_cache_queries_total[30m]) > 0)"
    ),
    "fabric:prefix_cache_hit_ratio:rate6h": (
        f"sum by ({BY_DEPLOYMENT}) (rate(vllm:prefix_cache_hits_total[6h]))"
        f" / sum by ({BY_DEPLOYMENT}) (rate(vllm:prefix_cache_queries_total[6h]) > 0)"
    ),
    "fabric:requests_running:sum": f"sum by ({BY_DEPLOYMENT}) (vllm:num_requests_running)",
    "fabric:requests_waiting:sum": f"sum by ({BY_DEPLOYMENT}) (vllm:num_requests_waiting)",
    "fabric:kv_cache_usage:max": f"max by ({BY_REPLICA}) (vllm:kv_cache_usage_perc)",
    "fabric:requests_succeeded:rate5m": f"sum by ({BY_DEPLOYMENT}) (rate(vllm:request_success_total[5m]))",
}


def alert_rules(options: StackOptions) -> list[dict[str, Any]]:
    """One alert per failure the fleet must page on; each says what to look at next."""
    drop = options.prefix_hit_drop_ratio
    return [
        _alert(
            "FabricEngineDown",
            'up{deployment!=""} == 0',
            "5m",
            "critical",
            "vLLM replica {{ $labels.deployment }}/{{ $labels.replica }} on {{ $labels.node }} is not scraped",
            "kubectl describe pod -l fabric.llm/replica={{ $labels.replica }}; a GPU fault shows as Xid errors",
        ),
        _alert(
            "FabricQueueDepthHigh",
            f"fabric:requests_waiting:sum > {options.queue_depth_threshold}",
            "10m",
            "warning",
            "{{ $labels.deployment }} has {{ $value }} requests waiting",
            "add replicas (raise the target in deployments/) or move traffic; the plan shows free GPUs",
        ),
        _alert(
            "FabricKVCacheNearlyFull",
            f"fabric:kv_cache_usage:max > {options.kv_cache_threshold}",
            "10m",
            "warning",
            "KV cache of {{ $labels.deployment }}/{{ $labels.replica }} is {{ $value | humanizePercentage }} full",
            "requests will be preempted and re-prefilled; lower max_model_len or add replicas",
        ),
        _alert(
            "FabricPrefixCacheHitRateDrop",
            f"fabric:prefix_cache_hit_ratio:rate30m < {drop} * fabric:prefix_cache_hit_ratio:rate6h",
            "30m",
            "warning",
            "prefix-cache hit rate of {{ $labels.deployment }} fell to {{ $value | humanizePercentage }}",
            "cached input is the cost lever (seed 004): look for a changed system prompt or routing",
        ),
        _alert(
            "FabricPreemptions",
            f"sum by ({BY_REPLICA}) (increase(vllm:num_preemptions_total[10m])) > 0",
            "15m",
            "warning",
            "{{ $labels.deployment }}/{{ $labels.replica }} keeps preempting requests",
            "KV memory runs out: preempted requests redo their whole prefill",
        ),
        _alert(
            "FabricGpuXidError",
            "DCGM_FI_DEV_XID_ERRORS > 0",
            "0m",
            "critical",
            "GPU {{ $labels.gpu }} on {{ $labels.Hostname }} reported Xid {{ $value }}",
            "drain the node: ansible-playbook playbooks/drain.yml -e fabric_drain_node={{ $labels.Hostname }}",
        ),
    ]


def _alert(name: str, expr: str, for_: str, severity: str, summary: str, action: str) -> dict[str, Any]:
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


def build_observability(namespace: str, options: StackOptions) -> list[Bundle]:
    labels = L.common_labels("observability", "llm-fabric")
    rule: Manifest = {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {"name": "llm-fabric", "namespace": namespace, "labels": labels},
        "spec": {"groups": rule_groups(options)},
    }
    dashboard: Manifest = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "llm-fabric-dashboard",
            "namespace": namespace,
            # the Grafana sidecar (kube-prometheus-stack) loads ConfigMaps with this label
            "labels": labels | {"grafana_dashboard": "1"},
        },
        "data": {"llm-fabric.json": json.dumps(dashboard_json(), indent=1, sort_keys=True)},
    }
    return [Bundle("alert-rules", "llm-fabric", [rule]), Bundle("dashboard", "llm-fabric", [dashboard])]


_PANELS = [
    ("Generated tokens/s", "fabric:generation_tokens:rate5m", "short"),
    ("Prompt tokens/s", "fabric:prompt_tokens:rate5m", "short"),
    ("Prefix-cache hit rate (30m)", "fabric:prefix_cache_hit_ratio:rate30m", "percentunit"),
    ("Requests waiting", "fabric:requests_waiting:sum", "short"),
    ("Requests running", "fabric:requests_running:sum", "short"),
    ("KV cache usage (max per replica)", "fabric:kv_cache_usage:max", "percentunit"),
    ("Preemptions / 10m", f"sum by ({BY_REPLICA}) (increase(vllm:num_preemptions_total[10m]))", "short"),
    ("GPU Xid errors", "DCGM_FI_DEV_XID_ERRORS", "short"),
]


def dashboard_json() -> dict[str, Any]:
    panels = []
    for i, (title, expr, unit) in enumerate(_PANELS):
        panels.append(
            {
                "id": i + 1,
                "type": "timeseries",
                "title": title,
                "datasource": {"type": "prometheus", "uid": "${datasource}"},
                "gridPos": {"h": 8, "w": 12, "x": 12 * (i % 2), "y": 8 * (i // 2)},
                "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
                "targets": [{"refId": "A", "expr": expr, "legendFormat": "{{deployment}} {{replica}}"}],
            }
        )
    return {
        "title": "llm-fabric serving",
        "uid": "llm-fabric-serving",
        "schemaVersion": 39,
        "tags": ["llm-fabric", "vllm"],
        "time": {"from": "now-6h", "to": "now"},
        "templating": {
            "list": [{"name": "datasource", "type": "datasource", "query": "prometheus", "label": "Prometheus"}]
        },
        "panels": panels,
    }
