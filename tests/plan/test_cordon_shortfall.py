"""A cordon is always deployable (issue 28.5): cordoning a dedicated owner's only node makes its
allocation a reported shortfall, never a refusal to deploy the rest.

Chained through the real commands (`fabric nodes cordon`, `validate`, `plan`, `plan --base`, `render
--check`) on a real git site repo, and through the Pulumi stacks (the SDK with mocks) reading the plan
that `fabric plan -o` wrote.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llm_fabric.deploy.build import load_inputs
from llm_fabric.errors import PolicyRefusal
from llm_fabric.kube.options import StackOptions
from llm_fabric.plan.document import load_plan
from llm_fabric.trust.sites import load_trusted_site
from tests.deploy.test_pulumi_stacks import kubernetes, run_stack
from tests.fixtures.cli import fabric, git

NODE = "hgx-h200-ceitec"  # ceitec-structural's only node: its dedicated qwen3-5-122b replica runs there
SHORT = "ceitec-structural: 4 GPUs out of service (hgx-h200-ceitec cordoned); dedicated allocation short by 2 of 2 GPUs"


def test_cordoning_the_only_dedicated_node_plans_and_renders_the_rest(site_repo: Path, tmp_path: Path) -> None:
    cordoned = fabric("nodes", "cordon", NODE, "-C", str(site_repo))
    assert cordoned.returncode == 0, cordoned.stderr
    assert "warning:" not in cordoned.stdout  # nothing the operator must fix: the plan states the cost

    validated = fabric("validate", "-C", str(site_repo))
    assert validated.returncode == 0, validated.stdout
    assert (
        "2 of `ceitec-structural`'s 2 dedicated GPUs are out of service while `hgx-h200-ceitec` is cordoned; "
        "the plan reports the shortfall and deploys the rest" in validated.stdout
    )

    plan_file = tmp_path / "plan.json"
    planned = fabric("plan", "-C", str(site_repo), "-o", str(plan_file))
    assert planned.returncode == 0, planned.stdout + planned.stderr
    assert "plan DEGRADED" in planned.stdout and SHORT in planned.stdout
    assert "placement.out-of-service" in planned.stdout and "placement.shortfall" not in planned.stdout
    assert "3 short while nodes are cordoned (deployable" in planned.stdout

    document = json.loads(plan_file.read_text())
    owner = document["owners"]["ceitec-structural"]
    assert (owner["dedicated_shortfall_gpus"], owner["out_of_service_nodes"]) == (2, [NODE])
    short = [s for s in document["shortfalls"] if s["deployment"] == "qwen3-5-122b"]
    assert short and all(s["out_of_service"] == [NODE] for s in short)
    assert short[0]["reasons"][0] == f"`{NODE}` is cordoned; back in service, the target is met"
    assert not any(NODE in r["node"] for r in document["replicas"])
    assert {r["deployment"] for r in document["replicas"]} >= {"deepseek-v3-2", "kimi-k2-6", "gpt-oss-120b"}

    review = fabric("plan", "-C", str(site_repo), "--base", "HEAD~1", "--format", "markdown")
    assert review.returncode == 0, review.stdout + review.stderr
    assert review.stdout.startswith("## fabric plan: `cerit-sc` (DEGRADED)")
    assert (
        f"| new | placement.out-of-service | qwen3-5-122b: 0 of 1 replicas while {NODE} is out of service |"
        in review.stdout
    )
    assert f"_{SHORT} until the node is back_" in review.stdout

    rendered = fabric(
        "render", "-C", str(site_repo), "--plan", str(plan_file), "--all-sites", "--check", "--out", str(tmp_path / "o")
    )
    assert rendered.returncode == 0, rendered.stdout + rendered.stderr
    assert "rendered site brno" in rendered.stdout

    # the Pulumi stacks read the same plan file and deploy it as it is
    options = StackOptions(site_repo=site_repo, site="brno", plan_file=plan_file)
    resources = kubernetes(run_stack("serving", load_inputs(options, site=load_trusted_site(site_repo))))
    assert "Deployment/deepseek-v3-2-0" in resources
    assert not any(name.startswith("Deployment/qwen3-5-122b") for name in resources)

    back = fabric("nodes", "uncordon", NODE, "-C", str(site_repo))
    assert back.returncode == 0, back.stderr
    again = fabric("plan", "-C", str(site_repo))
    assert again.returncode == 0 and "plan complete" in again.stdout and "out of service" not in again.stdout


def test_a_shortfall_that_is_not_the_cordons_still_refuses(site_repo: Path, tmp_path: Path) -> None:
    # deepseek-v3-2 asks for two replicas of 8 B200s: one B200 node holds one, with every node in service
    path = site_repo / "deployments" / "deepseek-v3-2.yaml"
    path.write_text(path.read_text().replace("replicas: 1", "replicas: 2"))
    git(site_repo, "commit", "-qam", "two deepseek replicas")
    assert fabric("nodes", "cordon", NODE, "-C", str(site_repo)).returncode == 0

    planned = fabric("plan", "-C", str(site_repo), "-o", str(tmp_path / "plan.json"))
    assert planned.returncode == 3, planned.stdout
    assert "plan INCOMPLETE" in planned.stdout
    assert "the plan for `cerit-sc` is incomplete (4 problems, listed above)" in planned.stderr
    plan = load_plan(tmp_path / "plan.json")
    assert [s.out_of_service for s in plan.shortfalls if s.deployment == "deepseek-v3-2"] == [[]]
    with pytest.raises(PolicyRefusal) as refused:
        plan.require_complete()
    assert [p.message for p in refused.value.problems] == ["deployment `deepseek-v3-2`: planned 1 of 2 replicas"]
