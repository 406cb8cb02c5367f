"""The rollout of a reviewed change (`fabric plan --base`): which replicas it restarts, in which waves.

Each replica is its own Kubernetes Deployment with `strategy: Recreate` (it holds all its GPUs), so a
restart is a replica down for a cold start. Per deployment, the waves are:

1. surge replicas (make-before-break, `rollout_room`) and added replicas on GPUs free in the base: they
   take nothing down and serve before anything restarts;
2. the restarts, at most `rollout.max_unavailable` at a time and never every serving replica at once;
3. removed replicas, and added ones whose GPUs a base replica still held: they go last, when the new
   ones serve.

Empty waves are left out, so a deployment's surges are its wave 1 and its restarts start at wave 2;
the site applies every deployment's wave k together (docs/deploy.md "Rollouts"). Across deployments one
order is kept (`_after_the_holders`): a replica that starts on GPUs another deployment's base replica
holds goes in that replica's wave or later, or its pod would wait for GPUs that a later wave frees while
the controller waits for its wave to be ready. A restart that would
leave nothing serving and finds no room for a surge is an outage of one cold start: refused unless the
deployment says `rollout.accept_outage`.
"""

from __future__ import annotations

from dataclasses import dataclass

from llm_fabric.engine.capacity.cold_start import cold_start_s
from llm_fabric.plan.document import (
    DeploymentRollout,
    Plan,
    ReplicaPlacement,
    ReplicaRestart,
    RestartReason,
    Rollout,
    RolloutWave,
    SurgeReplica,
)
from llm_fabric.plan.report import seat
from llm_fabric.review.rollout_room import Room
from llm_fabric.site.loader import SiteRepo
from llm_fabric.site.models import RolloutPolicy
from llm_fabric.trust.sites import TrustedSite


def restart_reason(before: ReplicaPlacement, after: ReplicaPlacement, weights_changed: bool) -> RestartReason | None:
    """Why the change restarts a replica that both plans have (None: it keeps running). A move is named
    first: it says most about where capacity goes. Engine arguments or environment that changed without
    changing the fingerprint (GPU memory share, batch caps) restart it too: its configuration changed."""
    if before.nodes != after.nodes:
        return "node"
    if before.gpu_indices != after.gpu_indices:
        return "gpus"
    if before.engine != after.engine:
        return "engine"
    if weights_changed:
        return "weights"
    if before.config_fingerprint.sha256 != after.config_fingerprint.sha256:
        return "fingerprint"
    if (before.engine_args, before.worker_engine_args, before.engine_env) != (
        after.engine_args,
        after.worker_engine_args,
        after.engine_env,
    ):
        return "fingerprint"
    return None


def replica_cold_start_s(site: SiteRepo, plan: Plan, replica: ReplicaPlacement) -> int:
    """The expected cold start of a replica on its node: the locked bytes where the checkpoint is pinned,
    else the plan's weights estimate, at the node's measured read speed."""
    locked = site.weights_lock.checkpoints.get(replica.checkpoint)
    cap = plan.deployments.get(replica.deployment)
    weights = locked.size if locked is not None else int((cap.weights_gb if cap else 0.0) * 1e9)
    node = site.nodes.get(replica.node)
    return cold_start_s(weights, node.host.storage_read_mb_s if node is not None else None)


@dataclass
class _Change:
    """One deployment's replicas, sorted into what the change does to them."""

    name: str
    policy: RolloutPolicy
    restarts: list[ReplicaRestart]
    restarted: list[ReplicaPlacement]  # the new placement of each restarted replica (in both plans)
    leaving: list[str]  # nodes out of service in the change that a restarted replica ran on
    early: list[ReplicaPlacement]  # added on GPUs free in the base: up in the first wave
    late: list[ReplicaPlacement]  # added on GPUs a base replica held: up in the last wave
    removed: list[ReplicaPlacement]
    base_count: int


def _gpus_of(plan: Plan) -> set[tuple[str, int]]:
    return {(n, g) for r in plan.replicas for n in r.nodes for g in r.gpu_indices}


def _changes(site: TrustedSite, base_plan: Plan, plan: Plan) -> list[_Change]:
    base_gpus = _gpus_of(base_plan)
    out: list[_Change] = []
    for name in sorted({r.deployment for r in [*base_plan.replicas, *plan.replicas]}):
        before = {r.index: r for r in base_plan.replicas_of(name)}
        after = {r.index: r for r in plan.replicas_of(name)}
        dep = site.deployments.get(name)
        change = _Change(name, dep.rollout if dep else RolloutPolicy(), [], [], [], [], [], [], len(before))
        for index in sorted(before.keys() | after.keys()):
            b, a = before.get(index), after.get(index)
            if b is not None and a is not None:
                reason = restart_reason(b, a, b.revision != a.revision)
                if reason is not None:
                    change.restarts.append(ReplicaRestart(index=index, reason=reason, before=seat(b), after=seat(a)))
                    change.restarted.append(a)
                    node = site.nodes.get(b.node)
                    if node is None or node.status != "active":
                        change.leaving.append(b.node)
            elif a is not None:
                change.restarts.append(ReplicaRestart(index=index, reason="added", after=seat(a)))
                overlaps = any((n, g) in base_gpus for n in a.nodes for g in a.gpu_indices)
                (change.late if overlaps else change.early).append(a)
            elif b is not None:
                change.restarts.append(ReplicaRestart(index=index, reason="removed", before=seat(b)))
                change.removed.append(b)
        if change.restarts:
            out.append(change)
    return out


@dataclass(frozen=True)
class _Waves:
    waves: list[RolloutWave]
    outage_s: int | None  # a restart can leave nothing serving, for about this long
    unordered_sites: list[str]  # more than one: sites whose restarts can overlap
    down_at_once: int


def _waves(change: _Change, surges: list[SurgeReplica], site: SiteRepo, plan: Plan) -> _Waves:
    """The deployment's waves, and the outage when a restart can leave nothing serving.

    Waves order restarts within a site only: each site's controller applies its own folder and waits for no
    other cluster. So where a deployment restarts replicas at several sites, the most down at once is the sum
    over those sites of each site's largest wave, and that is what is compared with what serves."""
    cap = plan.deployments.get(change.name)
    per_replica = cap.max_concurrency_p50 // max(1, cap.replicas_planned) if cap else 0
    target = cap.replicas_wanted if cap else 0
    cold = {id(r): replica_cold_start_s(site, plan, r) for r in [*change.restarted, *change.early, *change.late]}
    cold.update({id(s.placement): replica_cold_start_s(site, plan, s.placement) for s in surges})
    waves: list[RolloutWave] = []

    def wave(surge_ix: list[int], restart_ix: list[int], serving: int, starting: list[ReplicaPlacement]) -> None:
        if surge_ix or restart_ix:
            waves.append(
                RolloutWave(
                    wave=len(waves) + 1,
                    surges=surge_ix,
                    restarts=restart_ix,
                    serving=serving,
                    target=target,
                    sessions_p50=serving * per_replica,
                    cold_start_s=max((cold[id(r)] for r in starting), default=0),
                )
            )

    wave(
        [s.replaces for s in surges],
        [r.index for r in change.early],
        change.base_count,
        [s.placement for s in surges] + change.early,
    )
    serving = change.base_count + len(change.early) + len(surges)
    step = max(1, min(change.policy.max_unavailable, serving - 1))
    outage: int | None = None
    largest: dict[str, int] = {}  # site -> its largest wave of this deployment's restarts
    for i in range(0, len(change.restarted), step):
        chunk = change.restarted[i : i + step]
        if serving - len(chunk) <= 0:
            outage = max(cold[id(r)] for r in chunk)
        wave([], [r.index for r in chunk], serving - len(chunk), chunk)
        for at in {r.site for r in chunk}:
            largest[at] = max(largest.get(at, 0), sum(1 for r in chunk if r.site == at))
    wave([], sorted(r.index for r in [*change.removed, *change.late]), serving - len(change.removed), change.late)
    unordered = sorted(largest) if len(largest) > 1 else []
    down = sum(largest.values()) if unordered else max(largest.values(), default=0)
    if outage is None and unordered and down >= serving:
        outage = max(cold[id(r)] for r in change.restarted)
    return _Waves(waves, outage, unordered, min(down, serving))


def _accepted(change: _Change) -> str | None:
    """Why an outage may go ahead: the deployment says so, or its one replica leaves a node that the change
    takes out of service (a cordon answers a fault and is never blocked; the fault, not the review, decides
    that the replica goes)."""
    if change.policy.accept_outage is not None:
        return change.policy.accept_outage
    if change.leaving and len(change.leaving) == len(change.restarted):
        names = ", ".join(f"`{n}`" for n in sorted(set(change.leaving)))
        return f"{names} {'is' if len(set(change.leaving)) == 1 else 'are'} taken out of service"
    return None


def _after_the_holders(rollouts: list[DeploymentRollout], base_plan: Plan, plan: Plan) -> list[DeploymentRollout]:
    """Each deployment's waves shifted (all together, so its own `max_unavailable` steps stay as they are)
    until every replica that starts on GPUs another deployment's base replica holds is in that replica's
    wave or later: the same wave is enough, as a Recreate Deployment stops its old pod before the new one
    is scheduled. Shifts only ever go later, and the passes are bounded by the deployments' count."""
    holder = {(n, g): (r.deployment, r.index) for r in base_plan.replicas for n in r.nodes for g in r.gpu_indices}
    new = {(r.deployment, r.index): r for r in plan.replicas}
    by_name = {d.deployment: d for d in rollouts}
    for _ in range(len(rollouts)):
        wave_of = {(d.deployment, i): w.wave for d in rollouts for w in d.waves for i in w.restarts}
        shifts: dict[str, int] = {}
        for (name, index), wave in wave_of.items():
            replica = new.get((name, index))
            seats = {(n, g) for n in replica.nodes for g in replica.gpu_indices} if replica is not None else set()
            for other in {holder[s] for s in seats if s in holder and holder[s][0] != name}:
                if other in wave_of and wave_of[other] > wave:
                    shifts[name] = max(shifts.get(name, 0), wave_of[other] - wave)
        if not shifts:
            break
        for name, by in shifts.items():
            d = by_name[name]
            by_name[name] = d.model_copy(
                update={"waves": [w.model_copy(update={"wave": w.wave + by}) for w in d.waves]}
            )
        rollouts = [by_name[d.deployment] for d in rollouts]
    return rollouts


def plan_rollout(site: TrustedSite, base_plan: Plan, plan: Plan, base_rev: str) -> Rollout:
    """How `plan` replaces `base_plan` replica by replica, and whether it may (`Rollout.refused`)."""
    changes = _changes(site, base_plan, plan)
    room: Room | None = None
    out: list[DeploymentRollout] = []
    for change in changes:
        surges: list[SurgeReplica] = []
        alone = change.base_count + len(change.early) <= 1 and bool(change.restarted)
        if alone:  # every serving replica would restart at once: look for room beside it first
            room = room or Room.of(site, base_plan, plan)
            for replica in change.restarted:
                found = room.surge(replica)
                if found is not None:
                    surges.append(SurgeReplica(replaces=replica.index, placement=found[0], source=found[1]))
        planned = _waves(change, surges, site, plan)
        out.append(
            DeploymentRollout(
                deployment=change.name,
                max_unavailable=change.policy.max_unavailable,
                restarts=change.restarts,
                surges=surges,
                waves=planned.waves,
                outage_s=planned.outage_s,
                outage_accepted=_accepted(change) if planned.outage_s is not None else None,
                unordered_sites=planned.unordered_sites,
                down_at_once=planned.down_at_once,
            )
        )
    return Rollout(base_revision=base_rev, deployments=_after_the_holders(out, base_plan, plan))
