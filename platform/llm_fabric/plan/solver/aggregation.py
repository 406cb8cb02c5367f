"""A coarser placement problem for very large federations: node classes that every deployment sees alike
are merged, and owners that matter only through their pool limit are pooled into one limit.

Merging classes adds their capacities and pooling owners adds their limits, so every plan of the fine
problem is a plan of the coarse one: the coarse LP is a relaxation, and its value a valid lower bound
for the fine problem. At 10,000 nodes the fine model has 1,500 node classes (one per owner with a
dedicated share and GPU shape) and 340,000 variables; the coarse one has a few dozen classes.
"""

from __future__ import annotations

from dataclasses import dataclass

from llm_fabric.plan.solver.placement_types import Demand, NodeClass, Option, PlacementProblem

POOLED = "*pooled owners*"


@dataclass
class Coarse:
    problem: PlacementProblem
    class_of: list[int]  # fine class -> coarse class
    share: list[float]  # fine class -> its part of the coarse class's GPUs


def _kept_owners(problem: PlacementProblem) -> set[str]:
    """Owners whose identity the model needs beyond a pool limit: reservations and dedicated deployments."""
    out = {d.dedicated_owner for d in problem.demands if d.dedicated_owner}
    out |= {w for d in problem.demands for w, k in d.reserved.items() if k > 0}
    return {w for w in out if w is not None}


def _signatures(problem: PlacementProblem) -> list[tuple[tuple[int, int, int, int], ...]]:
    """Per class, the option every demand has there: classes with one signature are alike to all demands."""
    seen: list[list[tuple[int, int, int, int]]] = [[] for _ in problem.classes]
    for d, demand in enumerate(problem.demands):
        for opt in demand.options:
            seen[opt.node_class].append((d, opt.gpus, opt.capacity, opt.quality))
    return [tuple(s) for s in seen]


def coarsen(problem: PlacementProblem) -> Coarse:
    kept = _kept_owners(problem)
    signatures = _signatures(problem)
    groups: dict[tuple[int, str | None, bool, tuple[tuple[int, int, int, int], ...]], list[int]] = {}
    for c, cls in enumerate(problem.classes):
        owner = cls.owner if cls.owner in kept else (POOLED if cls.owner in problem.pool_limits else cls.owner)
        groups.setdefault((cls.gpus_per_node, owner, cls.spare, signatures[c]), []).append(c)
    classes: list[NodeClass] = []
    class_of = [0] * len(problem.classes)
    share = [0.0] * len(problem.classes)
    for (gpus, owner, spare, _), members in groups.items():
        nodes = tuple(n for c in members for n in problem.classes[c].nodes)
        total = len(nodes) * gpus
        for c in members:
            class_of[c] = len(classes)
            share[c] = len(problem.classes[c].nodes) * gpus / max(1, total)
        classes.append(NodeClass(f"coarse-{len(classes)}", nodes, gpus, owner=owner, spare=spare))
    limits = {w: k for w, k in problem.pool_limits.items() if w in kept}
    pooled = sum(k for w, k in problem.pool_limits.items() if w not in kept)
    if any(c.owner == POOLED for c in classes):
        limits[POOLED] = pooled
    demands = []
    for demand in problem.demands:
        options = {class_of[o.node_class]: o for o in demand.options}  # alike in every merged class
        base: dict[int, int] = {}
        for c, n in demand.base.items():
            base[class_of[c]] = base.get(class_of[c], 0) + n
        demands.append(
            Demand(
                demand.name,
                [Option(c, o.gpus, o.capacity, o.quality) for c, o in options.items()],
                demand.replicas,
                demand.sessions,
                demand.max_replicas,
                demand.dedicated_owner,
                dict(demand.reserved),
                base,
                demand.spare,
            )
        )
    return Coarse(PlacementProblem(classes, demands, limits), class_of, share)


def refine_guide(problem: PlacementProblem, coarse: Coarse, guide: list[dict[int, float]]) -> list[dict[int, float]]:
    """The coarse LP's fractional counts spread over the fine classes in proportion to their GPUs."""
    out: list[dict[int, float]] = []
    for d, demand in enumerate(problem.demands):
        by_class = {coarse.problem.demands[d].options[o].node_class: x for o, x in guide[d].items()}
        fine = {}
        for o, opt in enumerate(demand.options):
            x = by_class.get(coarse.class_of[opt.node_class], 0.0) * coarse.share[opt.node_class]
            if x > 1e-9:
                fine[o] = x
        out.append(fine)
    return out
