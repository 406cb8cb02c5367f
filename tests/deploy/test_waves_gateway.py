"""The gateway during a rollout: a surge replica is one of its deployment's replicas for the fingerprint
check and, with its own endpoint, for direct routing. The plan is the planner's own (`fabric plan -o`);
its rollout is hand-added (tests/deploy/rolloutfixture.py says why)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from llm_fabric.cli.main import main
from llm_fabric.gateway.config import build_gateway
from llm_fabric.gateway.endpoints import LocalRun
from llm_fabric.plan.document import load_plan
from llm_fabric.trust.sites import load_trusted_site
from tests.deploy.rolloutfixture import rollout_plan
from tests.fixtures.gateway_site import edit_yaml


def _planned(site_repo: Path, path: Path) -> Path:
    assert main(["plan", "-C", str(site_repo), "-o", str(path)]) == 0
    return path


def _gateway(site_repo: Path, plan: Path, out: Path) -> int:
    return main(["gateway", "config", "-C", str(site_repo), "--site", "brno", "--plan", str(plan), "--out", str(out)])


def test_a_surge_of_the_new_configuration_passes_and_one_of_another_is_refused(
    site_repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan = load_plan(_planned(site_repo, tmp_path / "plan.json"))
    assert plan.replicas_of("qwen3-5")[0].config_fingerprint is not None
    alike = tmp_path / "alike.json"
    alike.write_text(rollout_plan(plan).model_dump_json())
    assert _gateway(site_repo, alike, tmp_path / "gw") == 0
    capsys.readouterr()

    # a surge carrying another configuration (the deployment's context halved): it would answer differently
    deployment = site_repo / "deployments" / "qwen3-5.yaml"
    edit_yaml(deployment, lambda d: d.update(max_model_len=131072))
    halved = load_plan(_planned(site_repo, tmp_path / "halved.json"))
    other = halved.replicas_of("qwen3-5")[0].config_fingerprint
    data: dict[str, Any] = json.loads(alike.read_text())
    surge = data["rollout"]["deployments"][0]["surges"][0]
    surge["placement"]["config_fingerprint"] = other.model_dump(mode="json") if other else None
    mixed = tmp_path / "mixed.json"
    mixed.write_text(json.dumps(data))
    assert _gateway(site_repo, mixed, tmp_path / "gw2") == 3
    err = capsys.readouterr().err
    assert "deployment `qwen3-5`: replica qwen3-5/0 and replica(s) qwen3-5/surge-0 are configured differently" in err
    assert "max_model_len (262144 vs 131072)" in err


def test_a_surge_with_its_own_endpoint_gets_an_entry_beside_the_replicas(site_repo: Path, tmp_path: Path) -> None:
    plan = rollout_plan(load_plan(_planned(site_repo, tmp_path / "plan.json")))
    site = load_trusted_site(site_repo)
    files = build_gateway(
        site,
        plan,
        site_id="brno",
        reach=LocalRun(
            replicas={("qwen3-5", 0): "http://127.0.0.1:8000/v1"},
            surges={("qwen3-5", 0): "http://127.0.0.1:8001/v1"},
        ),
    )
    entries = [e for e in files.litellm["model_list"] if e["model_info"].get("fabric_deployment") == "qwen3-5"]
    here = [e for e in entries if e["model_info"].get("fabric_site") == "brno"]
    by_replica = {e["model_info"]["fabric_replica"]: e for e in here if e["model_name"] == here[0]["model_name"]}
    assert sorted(by_replica) == ["qwen3-5/0", "qwen3-5/surge-0"]
    replica, surge = by_replica["qwen3-5/0"], by_replica["qwen3-5/surge-0"]
    assert surge["litellm_params"]["api_base"] == "http://127.0.0.1:8001/v1"
    assert surge["model_info"]["id"] == replica["model_info"]["id"].replace("/0", "/surge-0")
    assert surge["model_info"]["id"] != replica["model_info"]["id"]
    # the deployment's slots are shared between the two, not doubled
    slots = surge["litellm_params"]["max_parallel_requests"]
    assert slots == replica["litellm_params"]["max_parallel_requests"]
    without = build_gateway(
        site, plan, site_id="brno", reach=LocalRun(replicas={("qwen3-5", 0): "http://127.0.0.1:8000/v1"})
    )
    alone = [
        e
        for e in without.litellm["model_list"]
        if e["model_info"].get("fabric_replica") == "qwen3-5/0" and e["model_name"] == replica["model_name"]
    ]
    assert alone[0]["litellm_params"]["max_parallel_requests"] in (2 * slots, 2 * slots + 1)
