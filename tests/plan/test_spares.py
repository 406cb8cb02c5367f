"""Spares (issue 28.3): the plan holds the policies' `n+1` spares free, states what they cost, and gives
a cordoned node's replicas the spare first; a cordon never makes the plan undeployable (28.5).

Property tests over random federations (the strategy of test_properties) restate the rules
independently of `llm_fabric.policies`; the policy file and the review go through the real commands.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import replace
from pathlib import Path

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from llm_fabric.engine.recipes import get_recipe
from llm_fabric.plan.document import Plan
from llm_fabric.plan.planning import plan_site
from llm_fabric.site.loader import SiteRepo
from llm_fabric.site.models import Deployment, PolicySet, SparePolicy
from tests.fixtures.cli import fabric, git
from tests.plan.onesite import federation, node
from tests.plan.test_properties import GPUS, _allowed, _check, federations

SPARES = """version: 1
spares:
  deployments:
    gpt-oss-120b: n+1
"""


def _with_spares(fed: SiteRepo, data: st.DataObject) -> SiteRepo:
    models = data.draw(st.lists(st.sampled_from(sorted(GPUS)), unique=True, max_size=2))
    deps = data.draw(st.lists(st.sampled_from(sorted(fed.deployments)), unique=True, max_size=2))
    spares = SparePolicy(gpu_models=dict.fromkeys(models, "n+1"), deployments=dict.fromkeys(deps, "n+1"))
    return replace(fed, site_policies=fed.site_policies | {"spares": PolicySet(spares=spares)})


def _cordon(fed: SiteRepo, name: str) -> SiteRepo:
    return replace(fed, nodes=fed.nodes | {name: fed.nodes[name].model_copy(update={"status": "cordoned"})})


def _may_run(fed: SiteRepo, plan: Plan, deployment: str, node_name: str, gpus: int) -> bool:
    """Whether one more replica of `gpus` GPUs of `deployment` could go to `node_name` as the plan stands:
    sovereignty, tier, dedicated owner, free GPUs and what the owner lends, restated."""
    dep, node = fed.deployments[deployment], fed.nodes[node_name]
    if node.status != "active" or not all(_allowed(node.site, dc) for dc in dep.data_classes):
        return False
    if node.tier != "full" and not get_recipe(dep.recipe).small:
        return False
    used = sum(len(r.gpu_indices) for r in plan.replicas if r.node == node_name)
    used += sum(h.gpus for h in plan.spares if h.node == node_name)
    if node.gpus.count - used < gpus:
        return False
    if dep.dedicated_for is not None:
        return node.owner == dep.dedicated_for
    ded = fed.tenants[node.owner].dedicated
    active = sum(n.gpus.count for n in fed.nodes.values() if n.owner == node.owner and n.status == "active")
    pool = sum(len(r.gpu_indices) for r in plan.replicas if r.owner == node.owner and r.dedicated_for is None)
    return pool + gpus <= active - (ded.gpus if ded else 0)


def _check_spares(fed: SiteRepo, plan: Plan) -> None:
    held = [h for h in plan.spares if h.state == "held"]
    seats = Counter((r.node, g) for r in plan.replicas for g in r.gpu_indices)
    seats.update((h.node, g) for h in held for g in h.gpu_indices)
    assert not seats or max(seats.values()) == 1, "a spare shares a GPU with a replica or another spare"
    for h in held:
        assert h.node is not None and fed.nodes[h.node].status == "active"
        if h.scope == "gpu_model":
            assert fed.nodes[h.node].gpus.catalog_id == h.name and len(h.gpu_indices) == fed.nodes[h.node].gpus.count


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(federations(), st.data())
def test_after_a_cordon_the_replan_keeps_the_rules_and_takes_the_spares_first(
    fed: SiteRepo, data: st.DataObject
) -> None:
    fed = _with_spares(fed, data)
    base = plan_site(fed, time_limit_s=2)
    _check(fed, base)
    _check_spares(fed, base)
    busy = sorted({r.node for r in base.replicas})
    if not busy:
        event("nothing placed: nothing to cordon")
        return
    victim = data.draw(st.sampled_from(busy))
    after = _cordon(fed, victim)
    plan = plan_site(after, base, time_limit_s=2)
    _check(after, plan)
    _check_spares(after, plan)
    assert not any(victim in r.nodes for r in plan.replicas)
    if base.deployable and not base.shortfalls:  # a cordon is always deployable: it costs only a shortfall
        assert plan.deployable, [s.reasons for s in plan.shortfalls]
        assert all(s.out_of_service == [victim] for s in plan.shortfalls)
    seats = {h.node for h in plan.spares if h.state == "in use" and h.node}
    event("a released spare seat" if seats else "no spare seat released")
    if not seats or plan.solver.status != "optimal":
        return
    before = {(r.deployment, r.node) for r in base.replicas}
    for r in plan.replicas:
        if (r.deployment, r.node) in before or r.node in seats:
            continue  # stayed, or took the spare
        for seat in seats:  # moved elsewhere: no spare seat of its GPU model could have taken it
            same = fed.nodes[seat].gpus.catalog_id == r.gpu_model
            assert not (same and _may_run(after, plan, r.deployment, seat, len(r.gpu_indices))), (
                f"{r.deployment} went to {r.node} while the spare on {seat} had room"
            )


def test_spares_are_held_their_cost_stated_and_a_cordon_moves_replicas_onto_them(site_repo: Path) -> None:
    (site_repo / "policies" / "spares.yaml").write_text(SPARES)
    git(site_repo, "add", "-A")
    git(site_repo, "commit", "-qm", "an n+1 spare for gpt-oss-120b")
    planned = fabric("plan", "-C", str(site_repo), "--format", "markdown")
    assert planned.returncode == 0, planned.stdout + planned.stderr
    # the spare sits apart from the deployment's replicas (both on the H100 node): one GPU of the H200 node
    assert (
        "| deployment/gpt-oss-120b | held | hgx-h200-ceitec GPUs 3 | 1 | one more replica of gpt-oss-120b "
        "(619 sessions p50): a fault of a node running one moves it here first |" in planned.stdout
    )
    assert "_spares hold 1 of 28 GPUs in service (3.6% of the pool): replicas are planned on the other 27_" in (
        planned.stdout
    )

    assert fabric("nodes", "cordon", "hgx-h100-tuwien", "-C", str(site_repo)).returncode == 0
    review = fabric("plan", "-C", str(site_repo), "--base", "HEAD~1", "--json")
    assert review.returncode == 0, review.stderr
    plan = Plan.model_validate(json.loads(review.stdout))
    assert plan.diff is not None
    moved = sorted((c.change, c.after or "-") for c in plan.diff.replicas if c.deployment == "gpt-oss-120b")
    assert moved == [("moved", "hgx-h200-ceitec GPUs 3 (1xh200)"), ("removed", "-")]
    [spare] = plan.spares
    assert (spare.state, spare.node, spare.covers) == ("in use", "hgx-h200-ceitec", ["hgx-h100-tuwien"])
    assert spare.reason == (
        "`hgx-h100-tuwien` is cordoned: the spare absorbs the fault; its seat on `hgx-h200-ceitec` takes their "
        "replicas first"
    )
    # the second replica has nowhere to go: a shortfall while the node is out, the rest deployed
    [short] = plan.shortfalls
    assert (short.deployment, short.planned, short.wanted, short.out_of_service) == (
        "gpt-oss-120b",
        1,
        2,
        ["hgx-h100-tuwien"],
    )
    assert plan.deployable and not plan.complete


def test_the_spares_policy_names_what_it_holds(site_repo: Path) -> None:
    (site_repo / "policies" / "spares.yaml").write_text(
        "version: 1\nspares:\n  gpu_models:\n    h20: n+1\n  deployments:\n    gpt-oss-120: n+2\n"
    )
    bad_level = fabric("validate", "-C", str(site_repo))
    assert bad_level.returncode == 2
    assert "policies/spares.yaml:6: spares.deployments.gpt-oss-120" in bad_level.stdout + bad_level.stderr
    assert "'n+1' or 'none'" in bad_level.stdout + bad_level.stderr

    (site_repo / "policies" / "spares.yaml").write_text(
        "version: 1\nspares:\n  gpu_model:\n    h200: n+1\n  deployments:\n    gpt-oss-120: n+1\n    h200: none\n"
    )
    typo = fabric("validate", "-C", str(site_repo))
    assert typo.returncode == 2
    assert "did you mean `gpu_models`" in typo.stdout + typo.stderr

    (site_repo / "policies" / "spares.yaml").write_text(
        "version: 1\nspares:\n  gpu_models:\n    h2000: n+1\n  deployments:\n    gpt-oss-120: n+1\n"
    )
    names = fabric("validate", "-C", str(site_repo))
    out = names.stdout + names.stderr
    assert names.returncode == 2, out
    assert "policies/spares.yaml:4: spares.gpu_models.h2000: unknown GPU model `h2000` (did you mean `h200`?)" in out
    assert (
        "policies/spares.yaml:6: spares.deployments.gpt-oss-120: unknown deployment `gpt-oss-120` "
        "(did you mean `gpt-oss-120b`?)" in out
    )


def test_a_cordoned_nodes_replicas_fill_the_spares_node_before_other_free_gpus() -> None:
    # four alike H200 nodes, nine one-GPU replicas and an n+1 spare: the cordoned node's replicas would
    # fit on the empty nodes as well, so only the spare preference sends them to the spare's node
    dep = Deployment(
        name="gpt-oss-120b",
        recipe="gpt-oss-120b",
        quantization="mxfp4",
        tensor_parallel_size=1,
        replicas=9,
        max_model_len=32768,
        data_classes=["public"],
    )
    fed = federation([node(n, "h200") for n in ("h200-a", "h200-b", "h200-c", "h200-d")], dep)
    spares = PolicySet(spares=SparePolicy(deployments={"gpt-oss-120b": "n+1"}))
    fed = replace(fed, site_policies=fed.site_policies | {"spares": spares})
    base = plan_site(fed, time_limit_s=2)
    [held] = base.spares
    assert held.state == "held" and held.node is not None and len(base.replicas) == 9
    victim = Counter(r.node for r in base.replicas if r.node != held.node).most_common(1)[0][0]
    plan = plan_site(_cordon(fed, victim), base, time_limit_s=2)
    seats = {(b.node, tuple(b.gpu_indices)) for b in base.replicas}
    moved = [r for r in plan.replicas if (r.node, tuple(r.gpu_indices)) not in seats]
    assert moved and len(plan.replicas) == 9 and plan.complete
    on_spare = sum(1 for r in moved if r.node == held.node)
    free_on_spare = 8 - sum(len(r.gpu_indices) for r in base.replicas if r.node == held.node)
    assert on_spare == min(len(moved), free_on_spare), (held.node, [(r.node, r.gpu_indices) for r in moved])
    [in_use] = plan.spares
    assert (in_use.state, in_use.node, in_use.covers) == ("in use", held.node, [victim])
