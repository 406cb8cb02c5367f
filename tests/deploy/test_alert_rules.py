"""The observability rules through the real promtool: they load, and every alert fires on the series it is for."""

from __future__ import annotations

import copy
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from llm_fabric.deploy.options import StackOptions
from llm_fabric.deploy.resources.observability import alert_rules, rule_groups
from llm_fabric.distribution import data_path

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
            "vLLM replica glm-5-1/glm-5-1-0 on dgx-b300-01 is not scraped",
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
    "FabricGpuXidError": (
        [
            {
                "series": 'DCGM_FI_DEV_XID_ERRORS{gpu="3", UUID="GPU-30130bfd", Hostname="dgx-b300-01"}',
                "values": "0 0 79x10",
            }
        ],
        "5m",
        _alert(
            "FabricGpuXidError",
            {"gpu": "3", "UUID": "GPU-30130bfd", "Hostname": "dgx-b300-01"},
            "critical",
            "GPU 3 on dgx-b300-01 reported Xid 79",
            "drain the node: ansible-playbook playbooks/drain.yml -e fabric_drain_node=dgx-b300-01",
        ),
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
    assert "SUCCESS: 16 rules found" in result.stdout


def test_every_alert_has_a_firing_test() -> None:
    assert {r["alert"] for r in alert_rules(StackOptions(site_repo=data_path("examples")))} == set(CASES)


@pytest.mark.parametrize("alert", sorted(CASES))
def test_alert_fires(alert: str, rules_file: Path, tmp_path: Path) -> None:
    series, at, expected = CASES[alert]
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
