"""The placement model (OR-tools CP-SAT) on plain inputs: how many replicas of each deployment go to
each class of interchangeable nodes.

Scale comes from symmetry: nodes that are alike for every rule (same GPU model and count, site,
tier, and owner where the owner's allocation matters) form one node class, and the model counts
replicas per (deployment, option), an option being one class and one tensor-parallel size. It never
has a boolean per GPU. Replicas stay inside one node (tensor parallelism within one NVLink domain);
with power-of-two replica sizes, a class of k nodes of G GPUs can hold a set of replicas exactly when,
for every size t, the GPUs of the replicas of size >= t fit in k * t * floor(G / t) (divisible sizes
pack largest-first), so per-node packing is left to `llm_fabric.deploy.packing`.

Objective, in lexicographic order by weights: meet every target (the shortfall, replicas or sessions,
normalised per deployment: when targets cannot all be met this maximises the capacity served), then
keep replicas where the base plan had them, then use the fewest GPUs (the rest stays with the pool),
then prefer the options with more capacity per replica.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from ortools.sat.python import cp_model

W_MISS = 1_000_000  # per replica (or replica-equivalent of sessions) not placed
W_MOVE = 1_000  # per replica taken away from a class it ran on in the base plan
W_GPU = 10  # per GPU used
QUALITY_MAX = 9  # the capacity preference is worth less than one GPU


@dataclass(frozen=True)
class NodeClass:
    key: str
    nodes: tuple[str, ...]
    gpus_per_node: int
    owner: str | None = None  # set when the owner's allocation limits what the pool may take here

    def slots(self, size: int) -> int:
        """GPUs that replicas of at least `size` GPUs can use in this class."""
        return len(self.nodes) * size * (self.gpus_per_node // size)


@dataclass(frozen=True)
class Option:
    node_class: int
    gpus: int  # the tensor-parallel size: a power of two, at most the class's GPUs per node
    capacity: int = 1  # sessions one replica holds at the target context (1 for fixed replicas)
    quality: int = 0  # 0..QUALITY_MAX, relative capacity among the demand's options


@dataclass
class Demand:
    name: str
    options: list[Option]
    replicas: int | None = None  # exactly this many replicas ...
    sessions: int | None = None  # ... or enough replicas to hold this many sessions
    max_replicas: int = 0  # upper bound when sized by sessions
    dedicated_owner: str | None = None  # every replica is dedicated to this owner (runs on its nodes)
    reserved: dict[str, int] = field(default_factory=dict)  # owner -> replicas reserved for it
    base: dict[int, int] = field(default_factory=dict)  # node class -> replicas there in the base plan


@dataclass
class PlacementProblem:
    classes: list[NodeClass]
    demands: list[Demand]
    pool_limits: dict[str, int] = field(default_factory=dict)  # owner -> GPUs pool replicas may take


@dataclass
class PlacementSolution:
    counts: list[dict[int, int]]  # per demand: option index -> replicas
    dedicated: list[dict[int, int]]  # per demand: option index -> of those, replicas reserved for the class owner
    missing: list[int]  # per demand: replicas (fixed) or sessions (target) not placed
    reserved_missing: list[dict[str, int]]  # per demand: owner -> reserved replicas not placed on its nodes
    status: str
    objective: float
    best_bound: float
    gap: float
    wall_seconds: float
    variables: int
    moves: int


@dataclass
class _Vars:
    y: list[dict[int, cp_model.IntVar]] = field(default_factory=list)
    z: list[dict[int, cp_model.IntVar]] = field(default_factory=list)
    miss: list[cp_model.IntVar] = field(default_factory=list)
    res_miss: list[dict[str, cp_model.IntVar]] = field(default_factory=list)
    moves: list[cp_model.IntVar] = field(default_factory=list)


def _upper_bound(problem: PlacementProblem, demand: Demand, opt: Option) -> int:
    want = demand.replicas if demand.replicas is not None else demand.max_replicas
    return min(want, problem.classes[opt.node_class].slots(opt.gpus) // opt.gpus)


def _add_variables(model: cp_model.CpModel, problem: PlacementProblem) -> _Vars:
    v = _Vars()
    for d, demand in enumerate(problem.demands):
        ys: dict[int, cp_model.IntVar] = {}
        zs: dict[int, cp_model.IntVar] = {}
        for o, opt in enumerate(demand.options):
            ub = _upper_bound(problem, demand, opt)
            if ub <= 0:
                continue
            ys[o] = model.new_int_var(0, ub, f"y{d}_{o}")
            owner = problem.classes[opt.node_class].owner
            if owner is not None and demand.reserved.get(owner, 0) > 0:
                zs[o] = model.new_int_var(0, min(ub, demand.reserved[owner]), f"z{d}_{o}")
                model.add(zs[o] <= ys[o])
        v.y.append(ys)
        v.z.append(zs)
        want = demand.replicas if demand.replicas is not None else demand.sessions or 0
        v.miss.append(model.new_int_var(0, want, f"miss{d}"))
        v.res_miss.append({w: model.new_int_var(0, k, f"rm{d}_{w}") for w, k in demand.reserved.items() if k > 0})
    return v


def _add_demand_constraints(model: cp_model.CpModel, problem: PlacementProblem, v: _Vars) -> None:
    for d, demand in enumerate(problem.demands):
        ys = v.y[d]
        if demand.replicas is not None:
            model.add(sum(ys.values()) + v.miss[d] == demand.replicas)
        else:
            sessions = demand.sessions or 0
            model.add(sum(demand.options[o].capacity * y for o, y in ys.items()) + v.miss[d] >= sessions)
            model.add(sum(ys.values()) <= demand.max_replicas)
        for owner, rm in v.res_miss[d].items():
            mine = [z for o, z in v.z[d].items() if problem.classes[demand.options[o].node_class].owner == owner]
            model.add(sum(mine) + rm >= demand.reserved[owner])


def _add_capacity_constraints(model: cp_model.CpModel, problem: PlacementProblem, v: _Vars) -> None:
    per_class: dict[int, list[tuple[int, cp_model.IntVar]]] = {}
    pool_use: dict[str, list[cp_model.LinearExprT]] = {}
    for d, demand in enumerate(problem.demands):
        for o, y in v.y[d].items():
            opt = demand.options[o]
            per_class.setdefault(opt.node_class, []).append((opt.gpus, y))
            owner = problem.classes[opt.node_class].owner
            if owner is None or owner not in problem.pool_limits or demand.dedicated_owner == owner:
                continue
            z = v.z[d].get(o)
            pool_use.setdefault(owner, []).append(opt.gpus * (y - z) if z is not None else opt.gpus * y)
    for c, terms in per_class.items():
        cls = problem.classes[c]
        for size in sorted({g for g, _ in terms}):
            big = [g * y for g, y in terms if g >= size]
            model.add(sum(big) <= cls.slots(size))
    for owner, uses in pool_use.items():
        model.add(sum(uses) <= problem.pool_limits[owner])


def _add_moves(model: cp_model.CpModel, problem: PlacementProblem, v: _Vars) -> None:
    for d, demand in enumerate(problem.demands):
        for c, before in sorted(demand.base.items()):
            here = [y for o, y in v.y[d].items() if demand.options[o].node_class == c]
            mv = model.new_int_var(0, before, f"mv{d}_{c}")
            model.add(mv >= before - sum(here))
            v.moves.append(mv)
            for y in here:  # start the search from the base placement
                model.add_hint(y, before if len(here) == 1 else 0)


def _miss_weight(demand: Demand) -> int:
    if demand.replicas is not None:
        return W_MISS
    best = max((o.capacity for o in demand.options), default=1)
    return max(1, W_MISS // max(1, best))


def _objective(problem: PlacementProblem, v: _Vars) -> cp_model.LinearExprT:
    terms: list[cp_model.LinearExprT] = []
    for d, demand in enumerate(problem.demands):
        terms.append(_miss_weight(demand) * v.miss[d])
        terms.extend(W_MISS * rm for rm in v.res_miss[d].values())
        for o, y in v.y[d].items():
            opt = demand.options[o]
            terms.append((W_GPU * opt.gpus + QUALITY_MAX - min(QUALITY_MAX, max(0, opt.quality))) * y)
    terms.extend(W_MOVE * mv for mv in v.moves)
    return sum(terms)


_STATUS = {
    cp_model.OPTIMAL: "optimal",
    cp_model.FEASIBLE: "feasible",
    cp_model.INFEASIBLE: "infeasible",
    cp_model.MODEL_INVALID: "model_invalid",
    cp_model.UNKNOWN: "unknown",
}


def solve(problem: PlacementProblem, *, time_limit_s: float = 10.0, workers: int = 2) -> PlacementSolution:
    """Solve the placement. Never infeasible by construction: what does not fit shows up as `missing`."""
    started = time.perf_counter()
    model = cp_model.CpModel()
    v = _add_variables(model, problem)
    _add_demand_constraints(model, problem, v)
    _add_capacity_constraints(model, problem, v)
    _add_moves(model, problem, v)
    model.minimize(_objective(problem, v))
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = time_limit_s
    solver.parameters.num_workers = max(1, workers)
    solver.parameters.relative_gap_limit = 0.001
    code = solver.solve(model)
    status = _STATUS.get(code, "unknown")
    n_vars = len(model.proto.variables)
    if code not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        # no solution in time: nothing is placed, and every demand says so (never a silent partial plan)
        wants = [d.replicas if d.replicas is not None else d.sessions or 0 for d in problem.demands]
        return PlacementSolution([{} for _ in problem.demands], [{} for _ in problem.demands], wants,
                                 [dict(d.reserved) for d in problem.demands], status, 0.0, 0.0, 1.0,
                                 time.perf_counter() - started, n_vars, 0)
    objective, bound = solver.objective_value, solver.best_objective_bound
    return PlacementSolution(
        counts=[{o: int(solver.value(y)) for o, y in ys.items() if solver.value(y)} for ys in v.y],
        dedicated=[{o: int(solver.value(z)) for o, z in zs.items() if solver.value(z)} for zs in v.z],
        missing=[int(solver.value(m)) for m in v.miss],
        reserved_missing=[{w: int(solver.value(rm)) for w, rm in rms.items()} for rms in v.res_miss],
        status=status,
        objective=objective,
        best_bound=bound,
        gap=abs(objective - bound) / max(1.0, abs(objective)),
        wall_seconds=time.perf_counter() - started,
        variables=n_vars,
        moves=sum(int(solver.value(mv)) for mv in v.moves),
    )
