"""The rollout of a change (issue 27.1, 27.2): which replicas restart and why, in waves bounded by
`rollout.max_unavailable`, a surge replica where the pool has room, and the outage (refused unless
accepted) where it has none. Plans are made by the real planner on in-memory federations."""

from __future__ import annotations

from dataclasses import replace

from llm_fabric.engine.capacity.cold_start import cold_start_s
from llm_fabric.plan.document import Plan, Rollout
from llm_fabric.plan.planning import plan_site
from llm_fabric.plan.report import seat
from llm_fabric.review.rollout import plan_rollout
from llm_fabric.site.loader import SiteRepo
from llm_fabric.site.models import (
    Cluster,
    Deployment,
    HostInventory,
    Jurisdiction,
    Operator,
    PolicySet,
    RolloutPolicy,
    SiteSpec,
    SovereigntyRule,
    SparePolicy,
)
from llm_fabric.site.weights_lock import LockedCheckpoint, LockedFile, WeightsLock
from tests.plan.onesite import federation, node

MISTRAL = Deployment(
    name="mistral-small-4",
    recipe="mistral-small-4",
    quantization="fp8",
    tensor_parallel_size=1,
    replicas=1,
    max_model_len=65536,
    data_classes=["public"],
)
GPT_OSS = Deployment(
    name="gpt-oss-120b",
    recipe="gpt-oss-120b",
    quantization="mxfp4",
    tensor_parallel_size=1,
    replicas=7,
    max_model_len=32768,
    data_classes=["public"],
)


def _site(*deployments: Deployment, read_mb_s: float | None = None, spares: PolicySet | None = None) -> SiteRepo:
    fed = federation([node("h200-a", "h200", host=HostInventory(storage_read_mb_s=read_mb_s))], deployments[0])
    fed = replace(fed, deployments={d.name: d for d in deployments})
    return replace(fed, site_policies=fed.site_policies | {"spares": spares}) if spares else fed


def _review(base: SiteRepo, change: SiteRepo) -> tuple[Plan, Plan, Rollout]:
    base_plan = plan_site(base, time_limit_s=2)  # type: ignore[arg-type]
    plan = plan_site(change, base_plan, time_limit_s=2)  # type: ignore[arg-type]
    return base_plan, plan, plan_rollout(change, base_plan, plan, "main")  # type: ignore[arg-type]


def _change(site: SiteRepo, name: str, **update: object) -> SiteRepo:
    dep = site.deployments[name].model_copy(update=update)
    return replace(site, deployments=site.deployments | {name: dep})


def test_a_single_replica_change_without_room_is_an_outage_of_one_cold_start_and_refused() -> None:
    base = _site(MISTRAL, GPT_OSS, read_mb_s=2000.0)  # 1 + 7 replicas fill the node's 8 GPUs
    _, plan, rollout = _review(base, _change(base, "mistral-small-4", max_model_len=32768))
    [mistral] = rollout.deployments
    [restart] = mistral.restarts
    assert (restart.index, restart.reason) == (0, "fingerprint")
    assert restart.before == restart.after == seat(plan.replicas_of("mistral-small-4")[0])  # restarted in place
    weights = int(plan.deployments["mistral-small-4"].weights_gb * 1e9)
    assert mistral.outage_s == cold_start_s(weights, 2000.0)  # the node's measured read speed
    assert mistral.surges == [] and mistral.refused
    [wave] = mistral.waves
    assert (wave.wave, wave.restarts, wave.serving, wave.target, wave.sessions_p50) == (1, [0], 0, 1, 0)
    assert wave.cold_start_s == mistral.outage_s
    minutes = round(mistral.outage_s / 60)
    assert mistral.to_problem().message == (
        f"the change takes every replica of `mistral-small-4` down at once: an outage of about {minutes} minutes"
    )
    assert not plan.model_copy(update={"rollout": rollout}).deployable


def test_the_locked_checkpoint_size_is_the_cold_start_and_a_new_revision_restarts_for_its_weights() -> None:
    lock = WeightsLock(
        checkpoints={
            "mistralai/Mistral-Small-4-119B-2603": LockedCheckpoint(
                revision="a" * 40, files=[LockedFile(path="model.safetensors", size=30 * 10**9, sha256="0" * 64)]
            )
        }
    )
    base = replace(_site(MISTRAL, GPT_OSS), weights_lock=lock)
    relocked = WeightsLock(
        checkpoints={k: v.model_copy(update={"revision": "b" * 40}) for k, v in lock.checkpoints.items()}
    )
    _, _, rollout = _review(base, replace(base, weights_lock=relocked))
    [mistral] = rollout.deployments
    assert [(r.index, r.reason) for r in mistral.restarts] == [(0, "weights")]
    assert mistral.outage_s == cold_start_s(30 * 10**9, None)  # the locked bytes at the default read speed


def test_an_accepted_outage_is_stated_and_deployable() -> None:
    base = _site(MISTRAL, GPT_OSS)
    accepted = _change(
        base, "mistral-small-4", max_model_len=32768, rollout=RolloutPolicy(accept_outage="night maintenance window")
    )
    _, plan, rollout = _review(base, accepted)
    [mistral] = rollout.deployments
    assert mistral.outage_s is not None and mistral.outage_accepted == "night maintenance window"
    assert not mistral.refused and plan.model_copy(update={"rollout": rollout}).deployable


def test_many_replicas_restart_in_waves_of_max_unavailable_never_all() -> None:
    gpt = GPT_OSS.model_copy(update={"replicas": 5, "rollout": RolloutPolicy(max_unavailable=2)})
    base = _site(gpt)
    _, plan, rollout = _review(base, _change(base, "gpt-oss-120b", max_model_len=16384))
    [dep] = rollout.deployments
    per = plan.deployments["gpt-oss-120b"].max_concurrency_p50 // 5
    assert [(w.wave, w.restarts, w.serving, w.sessions_p50) for w in dep.waves] == [
        (1, [0, 1], 3, 3 * per),
        (2, [2, 3], 3, 3 * per),
        (3, [4], 4, 4 * per),
    ]
    assert dep.surges == [] and dep.outage_s is None and {w.target for w in dep.waves} == {5}

    # max_unavailable above the replica count still leaves one serving
    wide = gpt.model_copy(update={"replicas": 3, "rollout": RolloutPolicy(max_unavailable=10)})
    base = _site(wide)
    _, _, rollout = _review(base, _change(base, "gpt-oss-120b", max_model_len=16384))
    assert [(w.restarts, w.serving) for w in rollout.deployments[0].waves] == [([0, 1], 1), ([2], 2)]


def test_a_single_replica_with_free_gpus_gets_a_surge_replica_first() -> None:
    base = _site(MISTRAL, GPT_OSS.model_copy(update={"replicas": 5}))  # 2 GPUs free
    base_plan, plan, rollout = _review(base, _change(base, "mistral-small-4", max_model_len=32768))
    [mistral] = rollout.deployments
    [surge] = mistral.surges
    used = {g for p in (base_plan, plan) for r in p.replicas for g in r.gpu_indices}
    assert surge.source == "free" and surge.replaces == 0 and surge.placement.node == "h200-a"
    assert len(surge.placement.gpu_indices) == 1 and not set(surge.placement.gpu_indices) & used
    assert surge.placement.engine_args == plan.replicas_of("mistral-small-4")[0].engine_args  # the new config
    assert [(w.wave, w.surges, w.restarts, w.serving) for w in mistral.waves] == [(1, [0], [], 1), (2, [], [0], 1)]
    assert mistral.outage_s is None and not mistral.refused


def test_a_held_spare_takes_the_surge_when_no_gpu_is_free() -> None:
    spares = PolicySet(spares=SparePolicy(deployments={"mistral-small-4": "n+1"}))
    base = _site(MISTRAL, GPT_OSS.model_copy(update={"replicas": 6}), spares=spares)  # 1 + 6 + the spare's 1
    _, plan, rollout = _review(base, _change(base, "mistral-small-4", max_model_len=32768))
    [held] = [h for h in plan.spares if h.state == "held"]
    [mistral] = rollout.deployments
    [surge] = mistral.surges
    assert surge.source == "spare" and surge.placement.gpu_indices == held.gpu_indices
    assert [(w.surges, w.restarts) for w in mistral.waves] == [([0], []), ([], [0])]
    assert not mistral.refused


def _with_zurich(site: SiteRepo) -> SiteRepo:
    """A second site outside the EU with an empty H200 node; `internal` data may only be in the EU."""
    zurich = SiteSpec(
        display_name="Zurich",
        jurisdiction=Jurisdiction(country="CH", eu=False),
        operator=Operator(name="ETH", federation_member=True),
        cluster=Cluster(name="zurich"),
    )
    config = site.config.model_copy(update={"sites": site.config.sites | {"zurich": zurich}})
    empty = node("h200-zurich", "h200").model_copy(update={"site": "zurich"})
    rules = PolicySet(sovereignty={"internal": SovereigntyRule(eu_only=True)})
    return replace(site, config=config, nodes=site.nodes | {empty.name: empty}, site_policies={"rules": rules})


def test_a_surge_goes_only_where_the_deployments_data_may_be() -> None:
    public = _with_zurich(_site(MISTRAL, GPT_OSS))  # Brno is full; Zurich is empty
    _, _, rollout = _review(public, _change(public, "mistral-small-4", max_model_len=32768))
    [surge] = rollout.deployments[0].surges
    assert (surge.placement.node, surge.placement.site, surge.source) == ("h200-zurich", "zurich", "free")

    eu = {"data_classes": ["internal"]}
    internal = _with_zurich(_site(MISTRAL.model_copy(update=eu), GPT_OSS.model_copy(update=eu)))
    _, _, rollout = _review(internal, _change(internal, "mistral-small-4", max_model_len=32768))
    [mistral] = rollout.deployments
    assert mistral.surges == [] and mistral.refused  # internal data stays in the EU, even for a surge


def test_an_unchanged_site_restarts_nothing() -> None:
    base = _site(MISTRAL, GPT_OSS)
    _, _, rollout = _review(base, base)
    assert rollout.deployments == [] and rollout.waves == 0 and rollout.refused == []


def test_a_replica_starting_on_gpus_another_deployment_frees_waits_for_that_wave() -> None:
    # the node's 8 GPUs: gpt-oss 7, mistral 1. The change shrinks gpt-oss to 6 (and restarts them, one a wave)
    # and adds a mistral replica, which can only go on the GPU the removed gpt-oss replica frees
    base = _site(MISTRAL, GPT_OSS)
    change = _change(_change(base, "gpt-oss-120b", replicas=6, max_model_len=16384), "mistral-small-4", replicas=2)
    base_plan, plan, rollout = _review(base, change)
    [removed] = [r for r in base_plan.replicas_of("gpt-oss-120b") if r.index == 6]
    [added] = [r for r in plan.replicas_of("mistral-small-4") if r.index == 1]
    assert (added.node, added.gpu_indices) == (removed.node, removed.gpu_indices)
    waves = {(d.deployment, i): w.wave for d in rollout.deployments for w in d.waves for i in w.restarts}
    assert waves[("mistral-small-4", 1)] >= waves[("gpt-oss-120b", 6)] > 1
    gpt = next(d for d in rollout.deployments if d.deployment == "gpt-oss-120b")
    assert max(len(w.restarts) for w in gpt.waves[:-1]) == 1  # its own steps are unchanged
