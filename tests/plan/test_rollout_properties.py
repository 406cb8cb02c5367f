"""Property tests of the rollout (issue 27): random changes to random federations (the generator of
test_properties). No wave takes more than `max_unavailable` replicas of a deployment down, and none takes
every serving replica down unless the rollout says it is an outage; no surge replica breaks a sovereignty
rule, a tier or a dedicated allocation, or takes a GPU that a replica of either plan or another surge
holds; every replica of the base plan is kept or restarted exactly once. The rules are restated here,
independently of `llm_fabric.review.rollout`.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from datetime import UTC, datetime

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from llm_fabric.engine.recipes import get_recipe
from llm_fabric.plan.document import Plan, ReplicaPlacement, Rollout
from llm_fabric.plan.planning import plan_site
from llm_fabric.review.rollout import plan_rollout
from llm_fabric.site.loader import SiteRepo
from llm_fabric.site.models import PolicySet, RolloutPolicy, SparePolicy
from tests.plan.test_properties import SITES, _allowed, _node, federations

STARTED = ("added", "removed")  # reasons that take no serving replica down


def _changed(fed: SiteRepo, data: st.DataObject) -> SiteRepo:
    """The same federation after a random change: engine args, replica counts, rollout policies, a node
    cordoned or enrolled, spares."""
    deployments = {}
    for name, dep in fed.deployments.items():
        update: dict[str, object] = {}
        if data.draw(st.booleans(), label=f"{name}: new max_model_len"):
            update["max_model_len"] = 16384
        if data.draw(st.booleans(), label=f"{name}: new replica count"):
            update["replicas"] = data.draw(st.integers(1, 4))
        update["rollout"] = RolloutPolicy(
            max_unavailable=data.draw(st.integers(1, 3)),
            accept_outage=data.draw(st.sampled_from([None, None, "maintenance window"])),
        )
        deployments[name] = dep.model_copy(update=update)
    nodes = dict(fed.nodes)
    if nodes and data.draw(st.booleans(), label="cordon a node"):
        victim = data.draw(st.sampled_from(sorted(nodes)))
        nodes[victim] = nodes[victim].model_copy(update={"status": "cordoned"})
    if data.draw(st.booleans(), label="enrol a node"):
        site = data.draw(st.sampled_from(sorted(SITES)))
        new = _node(
            9,
            site,
            data.draw(st.sampled_from(sorted(fed.tenants))),
            data.draw(st.sampled_from(["h200", "b200"])),
            8,
            "full",
        )
        nodes[new.name] = new.model_copy(update={"enrolled_at": datetime(2026, 11, 1, tzinfo=UTC)})
    out = replace(fed, deployments=deployments, nodes=nodes)
    if data.draw(st.booleans(), label="spares"):
        spare = SparePolicy(
            deployments=dict.fromkeys(
                data.draw(st.lists(st.sampled_from(sorted(deployments)), unique=True, max_size=2)), "n+1"
            )
        )
        out = replace(out, site_policies=out.site_policies | {"spares": PolicySet(spares=spare)})
    return out


def _same(b: ReplicaPlacement, a: ReplicaPlacement) -> bool:
    fingerprint = (b.config_fingerprint.sha256 if b.config_fingerprint else None) == (
        a.config_fingerprint.sha256 if a.config_fingerprint else None
    )
    return fingerprint and (b.nodes, b.gpu_indices, b.engine, b.engine_args, b.engine_env) == (
        a.nodes,
        a.gpu_indices,
        a.engine,
        a.engine_args,
        a.engine_env,
    )


def _check_replicas(base: Plan, plan: Plan, rollout: Rollout) -> None:
    by_dep = {d.deployment: d for d in rollout.deployments}
    for name in {r.deployment for r in [*base.replicas, *plan.replicas]}:
        before = {r.index: r for r in base.replicas_of(name)}
        after = {r.index: r for r in plan.replicas_of(name)}
        d = by_dep.get(name)
        entries = Counter(r.index for r in d.restarts) if d else Counter[int]()
        in_waves = Counter(i for w in (d.waves if d else []) for i in w.restarts)
        for index in before.keys() | after.keys():
            kept = index in before and index in after and _same(before[index], after[index])
            want = 0 if kept else 1
            assert entries[index] == want and in_waves[index] == want, f"{name}/{index}: kept {kept}"


def _check_waves(base: Plan, plan: Plan, rollout: Rollout) -> None:
    for d in rollout.deployments:
        reasons = {r.index: r.reason for r in d.restarts}
        site_of = {r.index: r.site for r in plan.replicas_of(d.deployment)}
        up = len(base.replicas_of(d.deployment)) + len(d.surges)
        every_wave_serves = True
        largest: Counter[str] = Counter()  # site -> its largest wave of restarts (sites do not wait for each other)
        serving_before_restarts: int | None = None
        for w in d.waves:
            down = [i for i in w.restarts if reasons[i] not in STARTED]
            assert len(down) <= d.max_unavailable, f"{d.deployment} wave {w.wave} takes {len(down)} down"
            if down and serving_before_restarts is None:
                serving_before_restarts = up
            if down and len(down) >= up:
                every_wave_serves = False
            for at, n in Counter(site_of[i] for i in down).items():
                largest[at] = max(largest[at], n)
            if w.surges:
                assert w.wave == 1 and not down, "surges come up before anything restarts"
            up += sum(1 for i in w.restarts if reasons[i] == "added")
        overlapping = len(largest) > 1 and sum(largest.values()) >= (serving_before_restarts or 0)
        assert sorted(largest) == d.unordered_sites or len(largest) <= 1
        assert (every_wave_serves and not overlapping) == (d.outage_s is None), f"{d.deployment}: {d.outage_s}"


def _check_surges(fed: SiteRepo, base: Plan, plan: Plan, rollout: Rollout) -> None:
    taken = Counter((n, g) for p in (base, plan) for r in p.replicas for n in r.nodes for g in r.gpu_indices)
    spares = {(h.node, g) for h in plan.spares if h.state == "held" for g in h.gpu_indices}
    pool = Counter[str]()
    for r in plan.replicas:
        if fed.deployments[r.deployment].dedicated_for is None:
            pool[r.owner] += len(r.gpu_indices)
    for d in rollout.deployments:
        dep = fed.deployments[d.deployment]
        for s in d.surges:
            p, node = s.placement, fed.nodes[s.placement.node]
            assert node.status == "active" and node.gpus.catalog_id == p.gpu_model
            assert all(_allowed(node.site, dc) for dc in dep.data_classes), f"surge of {dep.name} at {node.site}"
            assert node.tier == "full" or get_recipe(dep.recipe).small
            assert all(0 <= g < node.gpus.count for g in p.gpu_indices)
            for g in p.gpu_indices:
                assert taken[(node.name, g)] == 0, f"surge of {dep.name} on a taken GPU {node.name}/{g}"
                taken[(node.name, g)] += 1
                assert ((node.name, g) in spares) == (s.source == "spare")
            if dep.dedicated_for is not None:
                assert node.owner == dep.dedicated_for
            elif s.source == "free":
                pool[node.owner] += len(p.gpu_indices)
    for owner, used in pool.items():
        ded = fed.tenants[owner].dedicated
        active = sum(n.gpus.count for n in fed.nodes.values() if n.owner == owner and n.status == "active")
        assert used <= active - (ded.gpus if ded else 0), f"surges took {owner}'s dedicated GPUs"


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(federations(), st.data())
def test_random_changes_roll_out_within_the_rules(fed: SiteRepo, data: st.DataObject) -> None:
    base = plan_site(fed, time_limit_s=2)  # type: ignore[arg-type]
    after = _changed(fed, data)
    plan = plan_site(after, base, time_limit_s=2)  # type: ignore[arg-type]
    rollout = plan_rollout(after, base, plan, "main")  # type: ignore[arg-type]
    event("a surge" if any(d.surges for d in rollout.deployments) else "no surge")
    event("an outage" if any(d.outage_s for d in rollout.deployments) else "no outage")
    event("restarts" if rollout.deployments else "nothing restarts")
    _check_replicas(base, plan, rollout)
    _check_waves(base, plan, rollout)
    _check_surges(after, base, plan, rollout)
    assert (plan.model_copy(update={"rollout": rollout}).deployable) == (plan.deployable and not rollout.refused)
