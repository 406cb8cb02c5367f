"""Spares in the plan: each `n+1` of the policies (`policies.spares`) is a demand of one replica that
serves nothing, placed after every real replica (`Demand.spare`, weighted below a missed replica);
its seat is the plan's `SpareHold`. A cordoned node that a spare covers releases it: the spare is not
held again, and its seat in the base plan is a node class of its own (`NodeClass.spare`) where the
re-plan puts replicas first, so a fault's replicas take the spare before lent capacity.
"""

from __future__ import annotations

from collections.abc import Callable

from llm_fabric.plan.document import Plan, SpareHold
from llm_fabric.plan.solver.packing import Seat
from llm_fabric.plan.solver.placement import Demand, NodeClass, Option, PlacementProblem, PlacementSolution
from llm_fabric.policies.spares import SpareAsk
from llm_fabric.site.loader import SiteRepo
from llm_fabric.site.models import NodeManifest

DeploymentOptions = Callable[[str], tuple[list[Option], str | None]]  # deployment -> its options, its owner


def _held_in(base: Plan | None, key: str) -> list[SpareHold]:
    return [h for h in (base.spares if base is not None else []) if h.key == key and h.state == "held" and h.node]


def released_seats(asks: list[SpareAsk], base: Plan | None) -> set[str]:
    """Nodes that held a spare in the base plan which a cordoned node has now released."""
    return {h.node for a in asks if a.released_by for h in _held_in(base, a.key) if h.node}


def base_seats(base: Plan | None, name: str) -> list[tuple[str, tuple[int, ...]]]:
    """Where a replica (or a spare: `SpareAsk.key`) sat in the base plan: packing keeps it there."""
    if base is None:
        return []
    seats = [(r.node, tuple(r.gpu_indices)) for r in base.replicas_of(name)]
    return seats + [(h.node, tuple(h.gpu_indices)) for h in _held_in(base, name) if h.node]


def _whole_node(gpus: int) -> int:
    """The largest replica size (a power of two) that one node of `gpus` GPUs holds."""
    size = 1
    while size * 2 <= gpus:
        size *= 2
    return size if gpus else 0


def spare_demands(
    asks: list[SpareAsk],
    classes: list[NodeClass],
    reps: list[NodeManifest],
    base: Plan | None,
    options_of: DeploymentOptions,
) -> list[Demand]:
    """One demand per spare still held: a whole node of the GPU model (the largest node's GPUs, from lent
    capacity), or one more replica of the deployment where it may run."""
    class_of = {n: c for c, cls in enumerate(classes) for n in cls.nodes}
    out: list[Demand] = []
    for ask in asks:
        if ask.released_by:
            continue
        if ask.scope == "gpu_model":
            mine = [c for c, rep in enumerate(reps) if rep.gpus.catalog_id == ask.name]
            size = _whole_node(max((classes[c].gpus_per_node for c in mine), default=0))
            options = [Option(c, size) for c in mine if classes[c].gpus_per_node >= size]
            owner = None
        else:
            options, owner = options_of(ask.name)
        demand = Demand(ask.key, options, replicas=1, dedicated_owner=owner, spare=True)
        for h in _held_in(base, ask.key):
            if h.node in class_of:
                demand.base[class_of[h.node]] = 1
        out.append(demand)
    return out


def _names(nodes: tuple[str, ...] | list[str]) -> str:
    listed = ", ".join(f"`{n}`" for n in nodes)
    return f"{listed} {'is' if len(nodes) == 1 else 'are'} cordoned"


def spare_holds(
    asks: list[SpareAsk],
    problem: PlacementProblem,
    sol: PlacementSolution,
    seats: dict[tuple[str, int], Seat],
    site: SiteRepo,
    base: Plan | None,
) -> list[SpareHold]:
    """What became of each spare: held (where), in use (released by a cordoned node) or not held (why)."""
    placed = {key[0]: seat for key, seat in seats.items()}
    missing = {d.name: sol.missing[i] > 0 for i, d in enumerate(problem.demands) if d.spare}
    options = {d.name: bool(d.options) for d in problem.demands if d.spare}
    out: list[SpareHold] = []
    for ask in asks:
        hold = SpareHold(scope=ask.scope, name=ask.name, state="held")
        if ask.released_by:
            was = _held_in(base, ask.key)
            seat = was[0] if was else None
            where = f"its seat on `{seat.node}` takes their replicas first" if seat else "its GPUs serve the re-plan"
            out.append(
                hold.model_copy(
                    update={
                        "state": "in use",
                        "node": seat.node if seat else None,
                        "site": seat.site if seat else None,
                        "owner": seat.owner if seat else None,
                        "gpu_model": seat.gpu_model if seat else None,
                        "gpu_indices": list(seat.gpu_indices) if seat else [],
                        "covers": list(ask.released_by),
                        "reason": f"{_names(ask.released_by)}: the spare absorbs the fault; {where}",
                    }
                )
            )
        elif ask.key in placed and not missing.get(ask.key, True):
            seat_now = placed[ask.key]
            node = site.nodes[seat_now.node]
            out.append(
                hold.model_copy(
                    update={
                        "node": node.name,
                        "site": node.site,
                        "owner": node.owner,
                        "gpu_model": node.gpus.catalog_id,
                        "gpu_indices": list(seat_now.gpu_indices),
                    }
                )
            )
        else:
            what = "node of that GPU model" if ask.scope == "gpu_model" else "node that may run it"
            reason = (
                f"no {what} in service has room left after the replicas (or lends GPUs to the pool)"
                if options.get(ask.key)
                else f"no {what} is in service"
            )
            out.append(hold.model_copy(update={"state": "not held", "reason": reason}))
    return out
