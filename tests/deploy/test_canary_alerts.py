"""The canary's alert rules through the real promtool: each fires on the series it is for, and not on a
healthy deployment. The series are the prober's exposition (live.canary.exposition) as its PodMonitor
keeps them (honorLabels: the replica's own site, deployment, replica index and node)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from llm_fabric.observability.canary import LATENCY_THRESHOLD_S, rule_groups

PROMTOOL = shutil.which("promtool")
pytestmark = pytest.mark.skipif(PROMTOOL is None, reason="promtool not installed (Debian package prometheus)")


def labels(index: int, node: str = "dgx-b300-01") -> dict[str, str]:
    return {"site": "brno", "deployment": "qwen3-5", "replica": str(index), "node": node}


def series(name: str, index: int, values: str, **extra: str) -> dict[str, str]:
    pairs = ", ".join(f'{k}="{v}"' for k, v in {**labels(index), **extra}.items())
    return {"series": f"{name}{{{pairs}}}", "values": values}


def expected(name: str, alert_labels: dict[str, str], severity: str, summary: str) -> dict[str, Any]:
    rule = next(r for g in rule_groups() for r in g["rules"] if r["alert"] == name)
    return {
        "exp_labels": alert_labels | {"severity": severity, "team": "llm-fabric"},
        "exp_annotations": {
            "summary": summary,
            "description": rule["annotations"]["description"]
            .replace("{{ $labels.deployment }}", alert_labels.get("deployment", ""))
            .replace("{{ $labels.replica }}", alert_labels.get("replica", "")),
        },
    }


@pytest.fixture
def rules_file(tmp_path: Path) -> Path:
    path = tmp_path / "canary-rules.yaml"
    path.write_text(yaml.safe_dump({"groups": rule_groups()}))
    return path


def promtool_test(
    rules_file: Path, tmp_path: Path, input_series: list[dict[str, str]], cases: list[dict[str, Any]]
) -> subprocess.CompletedProcess[str]:
    spec = {
        "rule_files": [str(rules_file)],
        "evaluation_interval": "1m",
        "tests": [{"interval": "1m", "input_series": input_series, "alert_rule_test": cases}],
    }
    (tmp_path / "test.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    assert PROMTOOL is not None
    return subprocess.run(
        [PROMTOOL, "test", "rules", str(tmp_path / "test.yaml")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_rules_pass_promtool_check(rules_file: Path) -> None:
    assert PROMTOOL is not None
    result = subprocess.run([PROMTOOL, "check", "rules", str(rules_file)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 5 rules found" in result.stdout


def test_a_replica_that_disagrees_with_its_siblings_pages_and_its_siblings_do_not(
    rules_file: Path, tmp_path: Path
) -> None:
    inputs = [
        series("fabric_canary_sibling_agreement", 0, "1x20"),
        series("fabric_canary_sibling_agreement", 1, "1 1 0x18"),
        series("fabric_canary_sibling_agreement", 2, "1x20"),
    ]
    summary = "replica qwen3-5/1 on dgx-b300-01 answers the canary unlike the other replicas of its deployment"
    cases = [
        {"eval_time": "4m", "alertname": "FabricCanaryReplicaDisagrees", "exp_alerts": []},  # not yet 5 minutes
        {
            "eval_time": "10m",
            "alertname": "FabricCanaryReplicaDisagrees",
            "exp_alerts": [expected("FabricCanaryReplicaDisagrees", labels(1), "critical", summary)],
        },
    ]
    result = promtool_test(rules_file, tmp_path, inputs, cases)
    assert result.returncode == 0, result.stdout + result.stderr


def test_of_two_disagreeing_replicas_the_one_the_reference_bears_out_does_not_page(
    rules_file: Path, tmp_path: Path
) -> None:
    inputs = [
        series("fabric_canary_sibling_agreement", 0, "0x20"),
        series("fabric_canary_sibling_agreement", 1, "0x20"),
        series("fabric_canary_reference_agreement", 0, "1x20"),
        series("fabric_canary_reference_agreement", 1, "0x20"),
    ]
    summary = "replica qwen3-5/1 on dgx-b300-01 answers the canary unlike the other replicas of its deployment"
    alert = expected("FabricCanaryReplicaDisagrees", labels(1), "critical", summary)
    cases = [{"eval_time": "10m", "alertname": "FabricCanaryReplicaDisagrees", "exp_alerts": [alert]}]
    result = promtool_test(rules_file, tmp_path, inputs, cases)
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_deployment_whose_replicas_all_disagree_with_the_reference_pages(rules_file: Path, tmp_path: Path) -> None:
    inputs = [
        series("fabric_canary_reference_agreement", 0, "1 1 0x20"),
        series("fabric_canary_reference_agreement", 1, "1 1 0x20"),
    ]
    summary = "every replica of qwen3-5 at brno disagrees with its canary reference"
    cases = [
        {
            "eval_time": "13m",
            "alertname": "FabricCanaryDeploymentChanged",
            "exp_alerts": [
                expected(
                    "FabricCanaryDeploymentChanged", {"site": "brno", "deployment": "qwen3-5"}, "critical", summary
                )
            ],
        },
    ]
    assert promtool_test(rules_file, tmp_path, inputs, cases).returncode == 0


def test_one_replica_agreeing_with_the_reference_keeps_the_deployment_alert_quiet(
    rules_file: Path, tmp_path: Path
) -> None:
    inputs = [
        series("fabric_canary_reference_agreement", 0, "1x20"),
        series("fabric_canary_reference_agreement", 1, "1 1 0x18"),
    ]
    cases = [{"eval_time": "15m", "alertname": "FabricCanaryDeploymentChanged", "exp_alerts": []}]
    assert promtool_test(rules_file, tmp_path, inputs, cases).returncode == 0
    # the same input with a firing expectation fails: the quiet case above can fail
    loud = [
        {
            "eval_time": "15m",
            "alertname": "FabricCanaryDeploymentChanged",
            "exp_alerts": [
                {"exp_labels": {"site": "brno", "deployment": "qwen3-5", "severity": "critical", "team": "llm-fabric"}}
            ],
        }
    ]
    assert promtool_test(rules_file, tmp_path, inputs, loud).returncode == 1


def test_a_failing_replica_warns_and_a_slow_canary_warns(rules_file: Path, tmp_path: Path) -> None:
    slow = LATENCY_THRESHOLD_S * 3
    inputs = [
        series("fabric_canary_replica_pass", 0, "1x20"),
        series("fabric_canary_replica_pass", 1, "0x20"),
        series("fabric_canary_latency_seconds", 0, "0.2x20", prompt="count"),
        series("fabric_canary_latency_seconds", 1, f"{slow}x20", prompt="count"),
        series("fabric_canary_latency_seconds", 1, "0.5x20", prompt="capital"),
    ]
    failing = "replica qwen3-5/1 on dgx-b300-01 fails its canary prompts and is out of the gateway's rotation"
    slow_summary = f"replica qwen3-5/1 on dgx-b300-01 took {slow} s for a canary answer of a few tokens"
    cases = [
        {
            "eval_time": "6m",
            "alertname": "FabricCanaryFailing",
            "exp_alerts": [expected("FabricCanaryFailing", labels(1), "warning", failing)],
        },
        {"eval_time": "10m", "alertname": "FabricCanarySlow", "exp_alerts": []},
        {
            "eval_time": "17m",
            "alertname": "FabricCanarySlow",
            "exp_alerts": [expected("FabricCanarySlow", labels(1), "warning", slow_summary)],
        },
    ]
    result = promtool_test(rules_file, tmp_path, inputs, cases)
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_deployment_held_in_rotation_pages(rules_file: Path, tmp_path: Path) -> None:
    """Issue 39 F3: every replica fails and no reference recorded for its fingerprint bears it out: the prober
    keeps them in (live/prober.canary_holds) and says so; the alert pages once it lasts."""
    inputs = [
        series("fabric_canary_held_in_rotation", 0, "0 0 1x20"),
        series("fabric_canary_held_in_rotation", 1, "0 0 1x20"),
    ]
    summary = (
        "every replica of qwen3-5 at brno fails its canary, and no reference recorded for its configuration "
        "bears it out: the replicas are kept in rotation"
    )
    where = {"site": "brno", "deployment": "qwen3-5"}
    cases = [
        {"eval_time": "4m", "alertname": "FabricCanaryHeldInRotation", "exp_alerts": []},
        {
            "eval_time": "10m",
            "alertname": "FabricCanaryHeldInRotation",
            "exp_alerts": [expected("FabricCanaryHeldInRotation", where, "critical", summary)],
        },
    ]
    result = promtool_test(rules_file, tmp_path, inputs, cases)
    assert result.returncode == 0, result.stdout + result.stderr
