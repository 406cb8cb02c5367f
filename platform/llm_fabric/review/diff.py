"""What a change to the site repo does to the plan: nodes added, retired, cordoned or changed and the
GPUs they add or take away (per site and GPU class, free GPUs per site); replicas added, moved, removed,
switched to another engine; capacity per deployment before and after; policy violations and shortfalls
that appear or go away.
"""

from __future__ import annotations

from llm_fabric.plan.document import (
    CapacityDelta,
    GpuDelta,
    NodeChange,
    NodeChangeKind,
    NodeEntry,
    Plan,
    PlanDiff,
    ReplicaChange,
    Shortfall,
    SiteDelta,
)
from llm_fabric.plan.report import seat


def _describe(n: NodeEntry) -> str:
    return f"{n.status}, {n.gpus}x {n.gpu_model}, {n.site}, owner {n.owner}"


def _node_change(b: NodeEntry, a: NodeEntry) -> NodeChangeKind | None:
    if (b.site, b.owner, b.gpus, b.gpu_model) != (a.site, a.owner, a.gpus, a.gpu_model):
        return "changed"
    if a.status == b.status:
        return None
    if a.status == "active":
        return "uncordoned"
    return a.status


def _node_changes(base: Plan, new: Plan) -> list[NodeChange]:
    before = {n.name: n for n in base.nodes}
    after = {n.name: n for n in new.nodes}
    out: list[NodeChange] = []
    for name in sorted(before.keys() | after.keys()):
        b, a = before.get(name), after.get(name)
        if b is None and a is not None:
            out.append(NodeChange(node=name, site=a.site, change="added", after=_describe(a)))
        elif a is None and b is not None:
            out.append(NodeChange(node=name, site=b.site, change="removed", before=_describe(b)))
        elif a is not None and b is not None and (change := _node_change(b, a)) is not None:
            out.append(NodeChange(node=name, site=a.site, change=change, before=_describe(b), after=_describe(a)))
    return out


def _active_gpus(plan: Plan) -> dict[tuple[str, str], int]:
    out: dict[tuple[str, str], int] = {}
    for n in plan.nodes:
        if n.status == "active":
            out[(n.site, n.gpu_model)] = out.get((n.site, n.gpu_model), 0) + n.gpus
    return out


def _gpu_changes(base: Plan, new: Plan) -> list[GpuDelta]:
    before, after = _active_gpus(base), _active_gpus(new)
    return [
        GpuDelta(site=key[0], gpu_model=key[1], gpus_before=before.get(key, 0), gpus_after=after.get(key, 0))
        for key in sorted(before.keys() | after.keys())
        if before.get(key, 0) != after.get(key, 0)
    ]


def _site_changes(base: Plan, new: Plan) -> list[SiteDelta]:
    out: list[SiteDelta] = []
    for name in sorted(base.sites.keys() | new.sites.keys()):
        b, a = base.sites.get(name), new.sites.get(name)
        delta = SiteDelta(
            site=name,
            gpus_before=b.gpus_total if b else 0,
            gpus_after=a.gpus_total if a else 0,
            free_before=b.gpus_free if b else 0,
            free_after=a.gpus_free if a else 0,
        )
        if (delta.gpus_before, delta.free_before) != (delta.gpus_after, delta.free_after):
            out.append(delta)
    return out


def _replica_changes(base: Plan, new: Plan) -> list[ReplicaChange]:
    before = {(r.deployment, r.index): r for r in base.replicas}
    after = {(r.deployment, r.index): r for r in new.replicas}
    out: list[ReplicaChange] = []
    for key in sorted(before.keys() | after.keys()):
        b, a = before.get(key), after.get(key)
        if b is None and a is not None:
            out.append(ReplicaChange(deployment=key[0], index=key[1], change="added", after=seat(a)))
        elif a is None and b is not None:
            out.append(ReplicaChange(deployment=key[0], index=key[1], change="removed", before=seat(b)))
        elif a is not None and b is not None and seat(a) != seat(b):
            out.append(ReplicaChange(deployment=key[0], index=key[1], change="moved", before=seat(b), after=seat(a)))
        elif a is not None and b is not None and a.engine != b.engine:
            out.append(ReplicaChange(deployment=key[0], index=key[1], change="engine", before=b.engine, after=a.engine))
    return out


def _capacity(base: Plan, new: Plan) -> list[CapacityDelta]:
    out: list[CapacityDelta] = []
    for name in sorted(base.deployments.keys() | new.deployments.keys()):
        b, a = base.deployments.get(name), new.deployments.get(name)
        delta = CapacityDelta(
            deployment=name,
            replicas_before=b.replicas_planned if b else 0,
            replicas_after=a.replicas_planned if a else 0,
            concurrency_p50_before=b.max_concurrency_p50 if b else 0,
            concurrency_p50_after=a.max_concurrency_p50 if a else 0,
            concurrency_p95_before=b.max_concurrency_p95 if b else 0,
            concurrency_p95_after=a.max_concurrency_p95 if a else 0,
            tokens_per_s_before=b.decode_tokens_per_s_total if b else 0.0,
            tokens_per_s_after=a.decode_tokens_per_s_total if a else 0.0,
        )
        if (
            delta.replicas_before,
            delta.concurrency_p50_before,
            delta.concurrency_p95_before,
            delta.tokens_per_s_before,
        ) != (delta.replicas_after, delta.concurrency_p50_after, delta.concurrency_p95_after, delta.tokens_per_s_after):
            out.append(delta)
    return out


def _shortfall_key(s: Shortfall) -> tuple[str, str, int, int]:
    return s.deployment, s.unit, s.wanted, s.planned


def diff_plans(base: Plan, new: Plan, base_revision: str) -> PlanDiff:
    old_v = {v.key() for v in base.violations}
    new_v = {v.key() for v in new.violations}
    old_s = {_shortfall_key(s) for s in base.shortfalls}
    new_s = {_shortfall_key(s) for s in new.shortfalls}
    return PlanDiff(
        base_revision=base_revision,
        nodes=_node_changes(base, new),
        gpus=_gpu_changes(base, new),
        sites=_site_changes(base, new),
        replicas=_replica_changes(base, new),
        capacity=_capacity(base, new),
        new_violations=[v for v in new.violations if v.key() not in old_v],
        resolved_violations=[v for v in base.violations if v.key() not in new_v],
        new_shortfalls=[s for s in new.shortfalls if _shortfall_key(s) not in old_s],
        resolved_shortfalls=[s for s in base.shortfalls if _shortfall_key(s) not in new_s],
    )
