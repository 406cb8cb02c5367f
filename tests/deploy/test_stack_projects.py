"""The Pulumi projects under stacks/: declared config keys, thin programs, and the real plan end to end."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from llm_fabric.deploy.build import build_stack, load_inputs
from llm_fabric.init import init_site
from llm_fabric.kube import labels as L
from llm_fabric.kube.manifests import all_objects
from llm_fabric.kube.options import STACK_FIELDS, StackOptions, camel, config_keys
from llm_fabric.quota.allocations import split_allocation
from llm_fabric.trust.sites import load_trusted_site

STACKS = Path(__file__).resolve().parents[2] / "stacks"


@pytest.mark.parametrize("stack", sorted(STACK_FIELDS))
def test_pulumi_yaml_declares_every_key_with_a_description(stack: str) -> None:
    project = yaml.safe_load((STACKS / stack / "Pulumi.yaml").read_text())
    assert project["name"] == f"llm-fabric-{stack}" and project["runtime"]["name"] == "python"
    declared = {key: spec["description"] for key, spec in project["config"].items()}
    assert declared == config_keys(stack)
    assert "default" not in project["config"]["siteRepo"]  # the one required key
    defaults = StackOptions(site_repo=Path("."))
    for name in STACK_FIELDS[stack][2:]:
        value = getattr(defaults, name)
        assert str(project["config"][camel(name)]["default"]) == ("" if value is None else str(value))


@pytest.mark.parametrize("stack", sorted(STACK_FIELDS))
def test_program_is_a_few_lines(stack: str) -> None:
    code = [line for line in (STACKS / stack / "__main__.py").read_text().splitlines() if line.strip()]
    assert len(code) <= 6 and f'deploy_stack("{stack}", pulumi.Config())' in code[-1]


def test_real_plan_renders_and_quotas_match_its_allocations(tmp_path: Path) -> None:
    root = init_site(tmp_path / "site", "cerit-sc").root
    inputs = load_inputs(StackOptions(site_repo=root, site="brno"), site=load_trusted_site(root))
    plan = inputs.the_plan()  # plan_site on the reference site
    objects = all_objects(build_stack("serving", inputs))
    workloads = [o for o in objects if o["kind"] == "Deployment" and L.REPLICA in o["metadata"]["labels"]]
    assert len(workloads) == len([r for r in plan.replicas if r.site == "brno"]) == len(plan.replicas) - 1
    alloc = split_allocation(inputs.site, "brno")
    brno_owners = {n.owner for n in inputs.site.nodes.values() if n.site == "brno"}
    for owner, figures in plan.owners.items():
        if owner not in brno_owners:  # tuwien-ai contributes in Vienna: that site's allocations stack
            continue
        assert sum(alloc.dedicated[owner].values()) == figures.dedicated_gpus
        flavors = [f for f in alloc.flavors if f.owner == owner]
        assert sum(alloc.pooled(f) for f in flavors) == figures.lent_gpus
