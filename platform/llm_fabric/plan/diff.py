"""What a change to the site repo does to the plan: replicas added, moved, removed, switched to another
engine; capacity per
deployment before and after; policy violations and shortfalls that appear or go away.
"""

from __future__ import annotations

from llm_fabric.plan.document import CapacityDelta, Plan, PlanDiff, ReplicaChange, ReplicaPlacement, Shortfall


def seat(r: ReplicaPlacement) -> str:
    gpus = ",".join(map(str, r.gpu_indices))
    if r.parallelism == "tp" and not r.worker_nodes:
        return f"{r.node} GPUs {gpus} ({r.tensor_parallel_size}x{r.gpu_model})"
    return f"{'+'.join(r.nodes)} GPUs {gpus} each ({r.layout(len(r.gpu_indices)).describe()}, {r.gpu_model})"


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
        replicas=_replica_changes(base, new),
        capacity=_capacity(base, new),
        new_violations=[v for v in new.violations if v.key() not in old_v],
        resolved_violations=[v for v in base.violations if v.key() not in new_v],
        new_shortfalls=[s for s in new.shortfalls if _shortfall_key(s) not in old_s],
        resolved_shortfalls=[s for s in base.shortfalls if _shortfall_key(s) not in new_s],
    )
