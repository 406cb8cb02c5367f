"""Targets a plan misses, explained: which rule, or which lack of GPUs, keeps which deployment short."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from llm_fabric.plan.document import ReplicaPlacement, Shortfall
from llm_fabric.plan.solver.placement import Demand, NodeClass, PlacementProblem, PlacementSolution

MAX_LISTED = 6


@dataclass
class DemandInfo:
    """Per node class, why a deployment may not go there (policy or hardware), in words."""

    refusals: dict[int, list[str]] = field(default_factory=dict)
    covered: int = 0  # replicas (fixed) or sessions (target) multi-node replicas already hold, outside the solver
    notes: list[str] = field(default_factory=list)  # why a multi-node replica was or was not possible


def _label(cls: NodeClass) -> str:
    more = f" and {len(cls.nodes) - 1} more like it" if len(cls.nodes) > 1 else ""
    return f"{cls.nodes[0]}{more}"


def _listed(items: list[str]) -> list[str]:
    if len(items) <= MAX_LISTED:
        return items
    return [*items[:MAX_LISTED], f"... and {len(items) - MAX_LISTED} more node classes"]


def _blocked(problem: PlacementProblem, info: DemandInfo) -> list[str]:
    if not problem.classes:
        return ["the federation has no active nodes"]
    lines = [f"{_label(problem.classes[c])}: {'; '.join(r)}" for c, r in sorted(info.refusals.items())]
    return ["no node may run it:", *_listed(lines)]


def _crowded(problem: PlacementProblem, demand: Demand, usage: dict[str, Counter[str]]) -> list[str]:
    out: list[str] = []
    sizes = sorted({o.gpus for o in demand.options})
    out.append(f"each replica needs {' or '.join(map(str, sizes))} GPUs inside one node")
    lines = []
    for c in sorted({o.node_class for o in demand.options}):
        cls = problem.classes[c]
        users = Counter[str]()
        for node in cls.nodes:
            users.update(usage.get(node, {}))
        used = sum(users.values())
        taken = ", ".join(f"{d} {n}" for d, n in users.most_common()) or "nothing"
        line = f"{_label(cls)} ({len(cls.nodes) * cls.gpus_per_node} GPUs): {used} in use by {taken}"
        limit = problem.pool_limits.get(cls.owner or "")
        if cls.owner and limit is not None and demand.dedicated_owner != cls.owner:
            line += f"; `{cls.owner}` lends only {limit} GPUs to the pool"
        lines.append(line)
    return [*out, "the eligible nodes are full:", *_listed(lines)]


def shortfalls_of(
    problem: PlacementProblem, sol: PlacementSolution, infos: list[DemandInfo], replicas: list[ReplicaPlacement]
) -> list[Shortfall]:
    out: list[Shortfall] = []
    usage: dict[str, Counter[str]] = {}  # node -> deployment -> GPUs, built once for every shortfall
    for r in replicas:
        for node in r.nodes:
            usage.setdefault(node, Counter())[r.deployment] += len(r.gpu_indices)
    for d, demand in enumerate(problem.demands):
        if demand.spare:  # a spare not held is the plan's `spares` entry, not a deployment's shortfall
            continue
        if sol.missing[d] <= 0 and not any(m > 0 for m in sol.reserved_missing[d].values()):
            continue
        why = _blocked(problem, infos[d]) if not demand.options else _crowded(problem, demand, usage)
        why = [*infos[d].notes, *why]
        if sol.status == "first-fit":
            why = [
                "the plan is the first-fit start, not proven to place the most (solver status first-fit); "
                "a longer FABRIC_PLAN_TIME_LIMIT may place more",
                *why,
            ]
        if sol.missing[d] > 0:
            fixed = demand.replicas is not None
            wanted = demand.replicas if fixed else demand.sessions
            out.append(
                Shortfall(
                    deployment=demand.name,
                    wanted=(wanted or 0) + infos[d].covered,
                    planned=(wanted or 0) + infos[d].covered - sol.missing[d],
                    unit="replicas" if fixed else "sessions",
                    reasons=why,
                )
            )
        for owner, missing in sorted(sol.reserved_missing[d].items()):
            if missing <= 0:
                continue
            k = demand.reserved[owner]
            note = f"`{owner}` reserves {k} replicas of `{demand.name}` on its own nodes"
            out.append(
                Shortfall(deployment=demand.name, wanted=k, planned=k - missing, unit="replicas", reasons=[note, *why])
            )
    return out
