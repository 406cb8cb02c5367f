"""What the gateway refuses of a plan before routing to it: replicas on nodes the site repo does not trust, and
replicas of one deployment configured differently (behind one model name they would answer alike requests apart).
"""

from __future__ import annotations

from llm_fabric import wording
from llm_fabric.errors import PolicyRefusal, Problem
from llm_fabric.plan.document import Plan, ReplicaPlacement, SurgeReplica
from llm_fabric.trust.sites import TrustedSite


def check_trusted_nodes(site: TrustedSite, replicas: list[ReplicaPlacement]) -> None:
    """Route only to replicas on active nodes the site repo holds, all of them trusted (PolicyRefusal otherwise).

    Trust was judged when the `TrustedSite` was loaded, the one gate plan, render and provision pass too. A
    retired node stays in the repo (its manifest says `retired`), but its machine is gone: a plan that
    still places a replica there is as stale as one that names a node the repo never had. A cordoned
    node still serves what it runs until the next plan is deployed, so it is not refused here.
    """
    trusted = site.nodes
    problems = []
    for r in replicas:
        node = trusted.get(r.node)
        if node is None or node.status == "retired":
            why = "which the site repo does not have" if node is None else "which is retired"
            problems.append(
                Problem(
                    f"replica {r.deployment}/{r.index} is placed on node `{r.node}`, {why}",
                    hint=f"the plan is older than the site repo: re-plan (`fabric plan -C {site.root} -o FILE`)",
                )
            )
    if problems:
        raise PolicyRefusal(
            f"the gateway would route to {wording.count(len(problems), 'replica')} on unknown or retired nodes",
            problems=problems,
        )


def check_one_fingerprint(plan: Plan) -> None:
    """Put only replicas with one configuration fingerprint behind one model name (PolicyRefusal otherwise).

    Replicas of one deployment configured differently (another context length, KV dtype, parser...)
    answer the same request differently with a 200 (seed 002): such a plan is refused, naming the
    replicas and the differing fields (every replica carries its fingerprint: `load_plan` refuses a plan
    without).

    A rollout's surge replicas count as replicas of their deployment, and nothing else is accepted
    during a rollout: the plan is the merged revision's, so its replicas already carry the new
    fingerprint, and so does a surge (it runs the new configuration). The pods of the old fingerprint
    that still serve until their wave restarts them are not in the plan; they are the rollout's
    transition, bounded by its waves, not a configuration the gateway is given.
    """
    problems = []
    for name in sorted({r.deployment for r in plan.replicas}):
        members = [(member_id(r, False), r) for r in plan.replicas_of(name)]
        members += [(member_id(s.placement, True), s.placement) for s in plan_surges(plan, name)]
        groups: dict[str, list[str]] = {}
        for ident, r in members:
            groups.setdefault(r.config_fingerprint.sha256, []).append(ident)
        if len(groups) < 2:
            continue
        first_id, first = members[0]
        by_id = dict(members)
        for key, idents in groups.items():
            if key == first.config_fingerprint.sha256:
                continue
            other = by_id[idents[0]]
            fields = (
                f"{first.config_fingerprint.describe_differences(other.config_fingerprint)} "
                f"(fingerprint {first.config_fingerprint.short} vs {other.config_fingerprint.short})"
            )
            problems.append(
                Problem(
                    f"deployment `{name}`: replica {first_id} and replica(s) {', '.join(idents)} are configured "
                    f"differently: {fields}",
                    hint=f"re-plan (`fabric plan -o FILE`) so every replica of `{name}` is served alike",
                )
            )
    if problems:
        raise PolicyRefusal(
            f"the gateway would put differently configured replicas behind one model name ({len(problems)})",
            problems=problems,
        )


def plan_surges(plan: Plan, deployment: str) -> list[SurgeReplica]:
    """The rollout's surge replicas of `deployment` (none without a rollout)."""
    rollouts = plan.rollout.deployments if plan.rollout is not None else []
    return [s for d in rollouts if d.deployment == deployment for s in d.surges]


def member_id(placement: ReplicaPlacement, surge: bool) -> str:
    """`DEPLOYMENT/INDEX`, a surge's `DEPLOYMENT/surge-INDEX` (the replica it stands in for): never a replica's."""
    return f"{placement.deployment}/{'surge-' if surge else ''}{placement.index}"
