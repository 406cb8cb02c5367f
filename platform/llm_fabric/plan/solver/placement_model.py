"""The CP-SAT model of the placement (`llm_fabric.plan.solver.placement`): integer replica counts per
(deployment, node class) under the packing, pool-limit and reservation constraints; the two objective
stages; hints from a feasible point and the read-back of the solver's answer. Built only when a stage
needs CP-SAT: the LP-guided start is often already proven good enough.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ortools.sat.python import cp_model
from ortools.sat.python.cp_model import LinearExpr

from llm_fabric.plan.solver.first_fit import StartPoint, option_cost

if TYPE_CHECKING:
    from llm_fabric.plan.solver.placement_types import NodeClass, Option, PlacementProblem

Objective = tuple[list[cp_model.IntVar], list[int]]


@dataclass
class _Vars:
    y: list[dict[int, cp_model.IntVar]] = field(default_factory=list)
    z: list[dict[int, cp_model.IntVar]] = field(default_factory=list)
    miss: list[cp_model.IntVar] = field(default_factory=list)
    res_miss: list[dict[str, cp_model.IntVar]] = field(default_factory=list)
    moves: list[cp_model.IntVar] = field(default_factory=list)
    move_of: list[tuple[int, int]] = field(default_factory=list)  # (demand, node class) of each move variable


def upper_bound(problem: PlacementProblem, d: int, o: int) -> int:
    demand = problem.demands[d]
    opt = demand.options[o]
    want = demand.replicas if demand.replicas is not None else demand.max_replicas
    return min(want, problem.classes[opt.node_class].slots(opt.gpus) // opt.gpus)


def count_variables(problem: PlacementProblem) -> int:
    """The model's size without building it: counts, reserved counts, misses, reservations, moves."""
    n = 0
    for demand in problem.demands:
        want = demand.replicas if demand.replicas is not None else demand.max_replicas
        reserved = {w for w, k in demand.reserved.items() if k > 0}
        for opt in demand.options:
            cls = problem.classes[opt.node_class]
            if want > 0 and len(cls.nodes) * (cls.gpus_per_node // opt.gpus) > 0:  # upper_bound > 0
                n += 2 if cls.owner in reserved else 1
        n += 1 + len(reserved) + len(demand.base)
    return n


def _add_variables(model: cp_model.CpModel, problem: PlacementProblem) -> _Vars:
    v = _Vars()
    for d, demand in enumerate(problem.demands):
        ys: dict[int, cp_model.IntVar] = {}
        zs: dict[int, cp_model.IntVar] = {}
        for o, opt in enumerate(demand.options):
            ub = upper_bound(problem, d, o)
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
            model.add(LinearExpr.sum([*ys.values(), v.miss[d]]) == demand.replicas)
        else:
            caps = [demand.options[o].capacity for o in ys]
            model.add(LinearExpr.weighted_sum([*ys.values(), v.miss[d]], [*caps, 1]) >= (demand.sessions or 0))
            model.add(LinearExpr.sum(list(ys.values())) <= demand.max_replicas)
        for owner, rm in v.res_miss[d].items():
            mine = [z for o, z in v.z[d].items() if problem.classes[demand.options[o].node_class].owner == owner]
            model.add(LinearExpr.sum([*mine, rm]) >= demand.reserved[owner])


def _binding_sizes(cls: NodeClass, sizes: set[int]) -> list[int]:
    """Sizes whose packing constraint is not implied by a smaller size's (always so for power-of-two nodes:
    then only the smallest size present binds, and the class is one GPU count)."""
    out: list[int] = []
    for size in sorted(sizes):
        if not out or cls.slots(size) < min(cls.slots(t) for t in out):
            out.append(size)
    return out


def _add_capacity_constraints(model: cp_model.CpModel, problem: PlacementProblem, v: _Vars) -> None:
    per_class: dict[int, list[tuple[int, cp_model.IntVar]]] = {}
    pool_use: dict[str, tuple[list[cp_model.IntVar], list[int]]] = {}
    for d, demand in enumerate(problem.demands):
        for o, y in v.y[d].items():
            opt = demand.options[o]
            per_class.setdefault(opt.node_class, []).append((opt.gpus, y))
            owner = problem.classes[opt.node_class].owner
            if owner is None or owner not in problem.pool_limits or demand.dedicated_owner == owner:
                continue
            ys, coeffs = pool_use.setdefault(owner, ([], []))
            ys.append(y)
            coeffs.append(opt.gpus)
            z = v.z[d].get(o)
            if z is not None:  # reserved replicas run on the owner's own share
                ys.append(z)
                coeffs.append(-opt.gpus)
    for c, terms in per_class.items():
        cls = problem.classes[c]
        for size in _binding_sizes(cls, {g for g, _ in terms}):
            big = [(g, y) for g, y in terms if g >= size]
            model.add(LinearExpr.weighted_sum([y for _, y in big], [g for g, _ in big]) <= cls.slots(size))
    for owner, (ys, coeffs) in pool_use.items():
        model.add(LinearExpr.weighted_sum(ys, coeffs) <= problem.pool_limits[owner])


def _add_moves(model: cp_model.CpModel, problem: PlacementProblem, v: _Vars) -> None:
    for d, demand in enumerate(problem.demands):
        for c, before in sorted(demand.base.items()):
            here = [y for o, y in v.y[d].items() if demand.options[o].node_class == c]
            mv = model.new_int_var(0, before, f"mv{d}_{c}")
            model.add(LinearExpr.sum([mv, *here]) >= before)
            v.moves.append(mv)
            v.move_of.append((d, c))


def _cost(problem: PlacementProblem, opt: Option) -> int:
    return option_cost(opt.gpus, opt.quality, problem.classes[opt.node_class].spare)


class PlacementModel:
    """The CP-SAT model with its two objectives: `first` (weights per missed unit, reservation, move) and
    `second` (GPU economy)."""

    def __init__(self, problem: PlacementProblem, miss_weights: list[int], w_miss: int, w_move: int) -> None:
        self.problem = problem
        self.model = cp_model.CpModel()
        self.v = _add_variables(self.model, problem)
        _add_demand_constraints(self.model, problem, self.v)
        _add_capacity_constraints(self.model, problem, self.v)
        _add_moves(self.model, problem, self.v)
        v = self.v
        rms = [rm for r in v.res_miss for rm in r.values()]
        weights = [*miss_weights, *[w_miss] * len(rms), *[w_move] * len(v.moves)]
        self.first: Objective = ([*v.miss, *rms, *v.moves], weights)
        ys = [(d, o, y) for d, yd in enumerate(v.y) for o, y in yd.items()]
        self.second: Objective = (
            [y for _, _, y in ys],
            [_cost(problem, problem.demands[d].options[o]) for d, o, _ in ys],
        )

    def hold(self, objective: Objective, at_most: int) -> None:
        self.model.add(LinearExpr.weighted_sum(*objective) <= at_most)

    def _hint(self, p: StartPoint) -> None:
        self.model.clear_hints()  # type: ignore[no-untyped-call]  # OR-tools ships it without annotations
        v = self.v
        for d in range(len(self.problem.demands)):
            for o, y in v.y[d].items():
                self.model.add_hint(y, p.counts[d].get(o, 0))
            for o, z in v.z[d].items():
                self.model.add_hint(z, p.dedicated[d].get(o, 0))
            self.model.add_hint(v.miss[d], p.missing[d])
            for w, rm in v.res_miss[d].items():
                self.model.add_hint(rm, p.reserved_missing[d].get(w, 0))
        for mv, (d, c) in zip(v.moves, v.move_of, strict=True):
            demand = self.problem.demands[d]
            here = sum(n for o, n in p.counts[d].items() if demand.options[o].node_class == c)
            self.model.add_hint(mv, max(0, demand.base[c] - here))

    def _read(self, solver: cp_model.CpSolver) -> StartPoint:
        v = self.v
        return StartPoint(
            counts=[{o: int(solver.value(y)) for o, y in ys.items() if solver.value(y)} for ys in v.y],
            dedicated=[{o: int(solver.value(z)) for o, z in zs.items() if solver.value(z)} for zs in v.z],
            missing=[int(solver.value(m)) for m in v.miss],
            reserved_missing=[{w: int(solver.value(rm)) for w, rm in rms.items()} for rms in v.res_miss],
        )

    def minimise(
        self, objective: Objective, start: StartPoint, time_s: float, workers: int, gap_limit: float
    ) -> tuple[StartPoint | None, float, bool]:
        """The solver's best point (None: none in time), its bound on the objective, and whether it is proven."""
        self._hint(start)
        self.model.minimize(LinearExpr.weighted_sum(*objective))
        solver = cp_model.CpSolver()
        solver.parameters.max_time_in_seconds = max(0.05, time_s)
        solver.parameters.num_workers = max(1, workers)
        solver.parameters.relative_gap_limit = gap_limit
        # probing dominated presolve (seconds at 1,000 nodes); the LP-heavy worker proves bounds the default misses
        solver.parameters.cp_model_probing_level = 0
        solver.parameters.subsolvers.extend(["max_lp", "default_lp"])
        code = solver.solve(self.model)
        if code not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            return None, 0.0, False
        # every objective term is non-negative: 0 is a bound when the solver's is below it
        return self._read(solver), max(0.0, solver.best_objective_bound), code == cp_model.OPTIMAL
