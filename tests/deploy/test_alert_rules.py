"""The observability rules through the real promtool: they load, every alert fires on the series it is for,
for vLLM's series and for SGLang's, and the recording rules give one `fabric:*` figure over both engines."""

from __future__ import annotations

import copy
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from llm_fabric.distribution import data_path
from llm_fabric.hardware.xids import load_xid_table
from llm_fabric.kube.options import StackOptions
from llm_fabric.observability.rules import XID_ALERTS, XID_UNCLASSIFIED, alert_rules, rule_groups

PROMTOOL = shutil.which("promtool")
pytestmark = pytest.mark.skipif(PROMTOOL is None, reason="promtool not installed (Debian package prometheus)")

REPLICA = 'deployment="glm-5-1", replica="glm-5-1-0", owner="cerit-sc", site="brno", node="dgx-b300-01"'
REPLICA_LABELS = {
    "deployment": "glm-5-1",
    "replica": "glm-5-1-0",
    "owner": "cerit-sc",
    "site": "brno",
    "node": "dgx-b300-01",
}
DEPLOYMENT_LABELS = {"deployment": "glm-5-1", "owner": "cerit-sc", "site": "brno"}
CATALOG = "https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html"
# a dcgm-exporter series as the ServiceMonitor leaves it: the exporter's labels plus `node`
GPU = 'gpu="3", UUID="GPU-30130bfd", Hostname="dgx-b300-01", node="dgx-b300-01"'
GPU_LABELS = {"gpu": "3", "UUID": "GPU-30130bfd", "Hostname": "dgx-b300-01", "node": "dgx-b300-01"}


def _alert(name: str, labels: dict[str, str], severity: str, summary: str, description: str) -> dict[str, Any]:
    return {
        "alertname": name,
        "exp_alerts": [
            {
                "exp_labels": labels | {"severity": severity, "team": "llm-fabric"},
                "exp_annotations": {"summary": summary, "description": description},
            }
        ],
    }


# alert -> (input series, evaluation time, expected firing alert)
CASES: dict[str, tuple[list[dict[str, str]], str, dict[str, Any]]] = {
    "FabricEngineDown": (
        [
            {"series": f'up{{job="engines", {REPLICA}}}', "values": "1 1 0x10"},
            {
                "series": 'up{job="engines", deployment="qwen3-5", replica="qwen3-5-0", node="dgx-b300-01"}',
                "values": "1x12",
            },
        ],
        "10m",
        _alert(
            "FabricEngineDown",
            {"job": "engines"} | REPLICA_LABELS,
            "critical",
            "engine replica glm-5-1/glm-5-1-0 on dgx-b300-01 is not scraped",
            "kubectl describe pod -l fabric.llm/replica=glm-5-1-0; a GPU fault shows as Xid errors",
        ),
    ),
    "FabricQueueDepthHigh": (
        [{"series": f"vllm:num_requests_waiting{{{REPLICA}}}", "values": "120x20"}],
        "15m",
        _alert(
            "FabricQueueDepthHigh",
            DEPLOYMENT_LABELS,
            "warning",
            "glm-5-1 has 120 requests waiting",
            "add replicas (raise the target in deployments/) or move traffic; the plan shows free GPUs",
        ),
    ),
    "FabricKVCacheNearlyFull": (
        [{"series": f"vllm:kv_cache_usage_perc{{{REPLICA}}}", "values": "0.95x20"}],
        "15m",
        _alert(
            "FabricKVCacheNearlyFull",
            REPLICA_LABELS,
            "warning",
            "KV cache of glm-5-1/glm-5-1-0 is 95% full",
            "requests will be preempted and re-prefilled; lower max_model_len or add replicas",
        ),
    ),
    "FabricPrefixCacheHitRateDrop": (
        # 6 hours at an 80 % hit rate, then 2 hours at 20 %
        [
            {"series": f"vllm:prefix_cache_queries_total{{{REPLICA}}}", "values": "0+1000x480"},
            {"series": f"vllm:prefix_cache_hits_total{{{REPLICA}}}", "values": "0+800x360 288200+200x120"},
        ],
        "8h",
        _alert(
            "FabricPrefixCacheHitRateDrop",
            DEPLOYMENT_LABELS,
            "warning",
            "prefix-cache hit rate of glm-5-1 fell to 20%",
            "cached input is the cost lever (seed 004): look for a changed system prompt or routing",
        ),
    ),
    "FabricPreemptions": (
        [{"series": f"vllm:num_preemptions_total{{{REPLICA}}}", "values": "0+3x30"}],
        "25m",
        _alert(
            "FabricPreemptions",
            REPLICA_LABELS,
            "warning",
            "glm-5-1/glm-5-1-0 keeps preempting requests",
            "KV memory runs out: preempted requests redo their whole prefill",
        ),
    ),
    # a node-fatal Xid pages critical, naming the node and the GPU
    "FabricGpuXidNodeFatal": (
        [{"series": f"DCGM_FI_DEV_XID_ERRORS{{{GPU}}}", "values": "0 0 79x10"}],
        "5m",
        _alert(
            "FabricGpuXidNodeFatal",
            GPU_LABELS,
            "critical",
            "GPU 3 (GPU-30130bfd) on dgx-b300-01 reported node-fatal Xid 79",
            "take the node out through a reviewed change: fabric nodes remediate -C SITE --node dgx-b300-01 "
            "--xid 79 (docs/deploy.md), then drain it: playbooks/drain.yml",
        ),
    ),
    # a replica-fatal one warns
    "FabricGpuXidReplicaFatal": (
        [{"series": f"DCGM_FI_DEV_XID_ERRORS{{{GPU}}}", "values": "0 0 109x10"}],
        "5m",
        _alert(
            "FabricGpuXidReplicaFatal",
            GPU_LABELS,
            "warning",
            "GPU 3 (GPU-30130bfd) on dgx-b300-01 reported replica-fatal Xid 109",
            "restart the engine on that GPU: kubectl delete pod -l app.kubernetes.io/component=engine "
            "--field-selector spec.nodeName=dgx-b300-01",
        ),
    ),
    # an application Xid is an info alert: shown, routed to no receiver
    "FabricGpuXidApplication": (
        [{"series": f"DCGM_FI_DEV_XID_ERRORS{{{GPU}}}", "values": "0 0 13x10"}],
        "5m",
        _alert(
            "FabricGpuXidApplication",
            GPU_LABELS,
            "info",
            "GPU 3 (GPU-30130bfd) on dgx-b300-01 reported application Xid 13",
            "the workload's own fault: counted, pages nobody; read the engine's log if it recurs",
        ),
    ),
    # an Xid the table does not know warns with its value
    "FabricGpuXidUnclassified": (
        [{"series": f"DCGM_FI_DEV_XID_ERRORS{{{GPU}}}", "values": "0 0 154x10"}],
        "5m",
        _alert(
            "FabricGpuXidUnclassified",
            GPU_LABELS,
            "warning",
            "GPU 3 (GPU-30130bfd) on dgx-b300-01 reported Xid 154, which enrollment/xid-classes.yaml does not classify",
            f"look it up in {CATALOG} and add it to the table",
        ),
    ),
}


# the same alerts on an SGLang replica: its own series names (sglang:*), the same labels from the PodMonitor
SGLANG_CASES: dict[str, tuple[list[dict[str, str]], str, dict[str, Any]]] = {
    "FabricQueueDepthHigh": (
        [{"series": f'sglang:num_queue_reqs{{model_name="glm-5-1", {REPLICA}}}', "values": "120x20"}],
        *CASES["FabricQueueDepthHigh"][1:],
    ),
    "FabricKVCacheNearlyFull": (
        [{"series": f'sglang:token_usage{{model_name="glm-5-1", {REPLICA}}}', "values": "0.95x20"}],
        *CASES["FabricKVCacheNearlyFull"][1:],
    ),
    "FabricPrefixCacheHitRateDrop": (
        [
            {"series": f'sglang:prompt_tokens_total{{is_streaming="false", {REPLICA}}}', "values": "0+1000x480"},
            {
                "series": f'sglang:cached_tokens_total{{cache_source="device", {REPLICA}}}',
                "values": "0+800x360 288200+200x120",
            },
        ],
        *CASES["FabricPrefixCacheHitRateDrop"][1:],
    ),
    "FabricPreemptions": (
        [{"series": f"sglang:num_retracted_requests_total{{{REPLICA}}}", "values": "0+3x30"}],
        *CASES["FabricPreemptions"][1:],
    ),
}


@pytest.fixture
def rules_file(tmp_path: Path) -> Path:
    path = tmp_path / "rules.yaml"
    path.write_text(yaml.safe_dump({"groups": rule_groups(StackOptions(site_repo=data_path("examples")))}))
    return path


def _promtool(*args: str) -> subprocess.CompletedProcess[str]:
    assert PROMTOOL is not None
    return subprocess.run([PROMTOOL, *args], capture_output=True, text=True, timeout=60, check=False)


def test_rules_pass_promtool_check(rules_file: Path) -> None:
    result = _promtool("check", "rules", str(rules_file))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 21 rules found" in result.stdout


def test_every_alert_has_a_firing_test() -> None:
    assert {r["alert"] for r in alert_rules(StackOptions(site_repo=data_path("examples")))} == set(CASES)


ALL_CASES = {("vllm", a): c for a, c in CASES.items()} | {("sglang", a): c for a, c in SGLANG_CASES.items()}


@pytest.mark.parametrize(("engine", "alert"), sorted(ALL_CASES))
def test_alert_fires(engine: str, alert: str, rules_file: Path, tmp_path: Path) -> None:
    series, at, expected = ALL_CASES[engine, alert]
    before = "1m"  # one minute in, nothing has fired yet
    spec = {
        "rule_files": [str(rules_file)],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": series,
                "alert_rule_test": [
                    {"eval_time": before, "alertname": alert, "exp_alerts": []},
                    {"eval_time": at, **expected},
                ],
            }
        ],
    }
    test_file = tmp_path / "test.yaml"
    test_file.write_text(yaml.safe_dump(spec, sort_keys=False))
    result = _promtool("test", "rules", str(test_file))
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_wrong_expectation_fails(rules_file: Path, tmp_path: Path) -> None:
    series, at, expected = copy.deepcopy(CASES["FabricQueueDepthHigh"])
    expected["exp_alerts"][0]["exp_annotations"]["summary"] = "glm-5-1 has 7 requests waiting"
    spec = {
        "rule_files": [str(rules_file)],
        "tests": [{"interval": "1m", "input_series": series, "alert_rule_test": [{"eval_time": at, **expected}]}],
    }
    (tmp_path / "t.yaml").write_text(yaml.safe_dump(spec))
    assert _promtool("test", "rules", str(tmp_path / "t.yaml")).returncode == 1


# Two deployments, one per engine, over 10 minutes at steady rates: every figure is what the engine's counters say.
VLLM_R = 'deployment="kimi", replica="kimi-0", owner="cerit-sc", site="brno", node="dgx-b300-01"'
SGLANG_R = 'deployment="glm", replica="glm-0", owner="ceitec", site="brno", node="h200-01"'
RECORDING_SERIES = [
    {"series": f"vllm:prompt_tokens_total{{{VLLM_R}}}", "values": "0+600x10"},
    {"series": f"vllm:generation_tokens_total{{{VLLM_R}}}", "values": "0+120x10"},
    {"series": f"vllm:request_success_total{{{VLLM_R}}}", "values": "0+6x10"},
    {"series": f"vllm:prefix_cache_queries_total{{{VLLM_R}}}", "values": "0+600x10"},
    {"series": f"vllm:prefix_cache_hits_total{{{VLLM_R}}}", "values": "0+300x10"},
    {"series": f"vllm:num_requests_waiting{{{VLLM_R}}}", "values": "3x10"},
    {"series": f"vllm:kv_cache_usage_perc{{{VLLM_R}}}", "values": "0.5x10"},
    # SGLang splits its counters by is_streaming / cache_source; aborted requests are inside num_requests
    {"series": f'sglang:prompt_tokens_total{{is_streaming="false", {SGLANG_R}}}', "values": "0+900x10"},
    {"series": f'sglang:prompt_tokens_total{{is_streaming="true", {SGLANG_R}}}', "values": "0+300x10"},
    {"series": f'sglang:generation_tokens_total{{is_streaming="false", {SGLANG_R}}}', "values": "0+240x10"},
    {"series": f'sglang:cached_tokens_total{{cache_source="device", {SGLANG_R}}}', "values": "0+900x10"},
    {"series": f'sglang:num_requests_total{{is_streaming="false", {SGLANG_R}}}', "values": "0+150x10"},
    {"series": f"sglang:num_aborted_requests_total{{{SGLANG_R}}}", "values": "0+30x10"},
    {"series": f"sglang:num_queue_reqs{{{SGLANG_R}}}", "values": "7x10"},
    {"series": f"sglang:token_usage{{{SGLANG_R}}}", "values": "0.25x10"},
]
BY_DEP = {
    "kimi": 'deployment="kimi", owner="cerit-sc", site="brno"',
    "glm": 'deployment="glm", owner="ceitec", site="brno"',
}


def _sample(rule: str, labels: str, value: float) -> dict[str, Any]:
    return {"labels": f"{rule}{{{labels}}}", "value": value}


RECORDED: dict[str, list[dict[str, Any]]] = {
    # per second over 5 minutes: vLLM 600/min, SGLang 900 + 300 per minute
    "fabric:prompt_tokens:rate5m": [
        _sample("fabric:prompt_tokens:rate5m", BY_DEP["glm"], 20),
        _sample("fabric:prompt_tokens:rate5m", BY_DEP["kimi"], 10),
    ],
    "fabric:generation_tokens:rate5m": [
        _sample("fabric:generation_tokens:rate5m", BY_DEP["glm"], 4),
        _sample("fabric:generation_tokens:rate5m", BY_DEP["kimi"], 2),
    ],
    # vLLM: hits / queries; SGLang: cached tokens / prompt tokens
    "fabric:prefix_cache_hit_ratio:rate30m": [
        _sample("fabric:prefix_cache_hit_ratio:rate30m", BY_DEP["glm"], 0.75),
        _sample("fabric:prefix_cache_hit_ratio:rate30m", BY_DEP["kimi"], 0.5),
    ],
    # SGLang: (150 - 30 aborted) per minute
    "fabric:requests_succeeded:rate5m": [
        _sample("fabric:requests_succeeded:rate5m", BY_DEP["glm"], 2),
        _sample("fabric:requests_succeeded:rate5m", BY_DEP["kimi"], 0.1),
    ],
    "fabric:requests_waiting:sum": [
        _sample("fabric:requests_waiting:sum", BY_DEP["glm"], 7),
        _sample("fabric:requests_waiting:sum", BY_DEP["kimi"], 3),
    ],
    "fabric:kv_cache_usage:max": [
        _sample("fabric:kv_cache_usage:max", SGLANG_R, 0.25),
        _sample("fabric:kv_cache_usage:max", VLLM_R, 0.5),
    ],
}


def test_recording_rules_read_both_engines(rules_file: Path, tmp_path: Path) -> None:
    spec = {
        "rule_files": [str(rules_file)],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": RECORDING_SERIES,
                "promql_expr_test": [
                    {"expr": rule, "eval_time": "10m", "exp_samples": samples} for rule, samples in RECORDED.items()
                ],
            }
        ],
    }
    test_file = tmp_path / "test.yaml"
    test_file.write_text(yaml.safe_dump(spec, sort_keys=False))
    result = _promtool("test", "rules", str(test_file))
    assert result.returncode == 0, result.stdout + result.stderr


XID_ALERT_OF = {kind: name for kind, (name, _, _) in XID_ALERTS.items()}


def test_each_xid_fires_its_class_alone_and_an_application_xid_pages_nobody(rules_file: Path, tmp_path: Path) -> None:
    """Every Xid of the table, one GPU each: its class's alert fires and no other GPU alert does."""
    table = load_xid_table()
    xid_alerts = [*XID_ALERTS_NAMES, XID_UNCLASSIFIED]
    tests = []
    for entry in table.xids:
        firing = XID_ALERT_OF[entry.kind]
        _, severity, action = XID_ALERTS[entry.kind]
        summary = f"GPU 3 (GPU-30130bfd) on dgx-b300-01 reported {entry.kind} Xid {entry.xid}"
        expected = _alert(
            firing,
            GPU_LABELS,
            severity,
            summary,
            action.replace("{{ $labels.node }}", "dgx-b300-01").replace("{{ $value }}", str(entry.xid)),
        )
        checks: list[dict[str, Any]] = [{"eval_time": "5m", **expected}]
        checks += [{"eval_time": "5m", "alertname": a, "exp_alerts": []} for a in xid_alerts if a != firing]
        series = [{"series": f"DCGM_FI_DEV_XID_ERRORS{{{GPU}}}", "values": f"0 0 {entry.xid}x10"}]
        tests.append({"interval": "1m", "input_series": series, "alert_rule_test": checks})
    spec = {"rule_files": [str(rules_file)], "evaluation_interval": "1m", "tests": tests}
    test_file = tmp_path / "test.yaml"
    test_file.write_text(yaml.safe_dump(spec, sort_keys=False))
    result = _promtool("test", "rules", str(test_file))
    assert result.returncode == 0, result.stdout + result.stderr
    # the application class reaches nobody: its severity is the one Alertmanager routes to no receiver
    assert XID_ALERTS["application"][1] == "info"
    assert {XID_ALERTS["node-fatal"][1], XID_ALERTS["replica-fatal"][1]} == {"critical", "warning"}


XID_ALERTS_NAMES = [name for name, _, _ in XID_ALERTS.values()]


def test_the_rules_name_exactly_the_xids_of_the_table() -> None:
    rules = {r["alert"]: r["expr"] for r in alert_rules(StackOptions(site_repo=data_path("examples")))}
    table = load_xid_table()
    for kind, name in XID_ALERT_OF.items():
        named = {int(x) for x in re.findall(r"== (\d+)", rules[name])}
        assert named == set(table.of_kind(kind)), kind
    unlisted = {int(x) for x in re.findall(r"!= (\d+)", rules[XID_UNCLASSIFIED])}
    assert unlisted == {x.xid for x in table.xids}
    # the examples, in the classes NVIDIA's catalog gives them
    assert {48, 74, 79, 94, 95, 119, 120} <= set(table.of_kind("node-fatal"))
    assert {13, 31, 43} <= set(table.of_kind("application"))
    assert table.source == CATALOG
