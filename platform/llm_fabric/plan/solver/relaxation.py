"""The linear relaxation of the placement model (OR-tools GLOP): a lower bound for each objective stage,
and fractional replica counts that guide the first-fit start toward where the optimum puts replicas.

Same variables and constraints as the CP-SAT model (`llm_fabric.plan.solver.placement`), continuous, plus
the whole-replica (Chvatal-Gomory) cuts for session targets. The LP of a 1,000-node federation solves in
a fraction of a second where CP-SAT needs seconds of presolve before its own LP bound appears.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ortools.linear_solver import pywraplp

from llm_fabric.plan.solver.first_fit import option_cost

if TYPE_CHECKING:
    from llm_fabric.plan.solver.placement_types import Demand, PlacementProblem

Terms = list[tuple[pywraplp.Variable, float]]


@dataclass
class Relaxation:
    solver: pywraplp.Solver
    y: list[dict[int, pywraplp.Variable]] = field(default_factory=list)
    first: Terms = field(default_factory=list)  # targets missed, replicas moved
    second: Terms = field(default_factory=list)  # GPU economy
    held: pywraplp.Constraint | None = None
    time_limit: Callable[[], float] | None = None  # seconds left for each solve
    solved_at: tuple[float, float | None] | None = None  # (hold, second bound) of the last second-stage solve

    def _solve(self, terms: Terms) -> float | None:
        objective = self.solver.Objective()
        objective.Clear()
        for x, w in terms:
            objective.SetCoefficient(x, w)
        objective.SetMinimization()
        if self.time_limit is not None:
            left = self.time_limit()
            if left <= 0:
                return None
            self.solver.SetTimeLimit(int(left * 1000))
        if self.solver.Solve() != pywraplp.Solver.OPTIMAL:
            return None
        return float(objective.Value())

    def first_bound(self) -> float | None:
        return self._solve(self.first)

    def hold_first(self, at_most: float) -> None:
        """Hold the first objective at `at_most` (a float tolerance above it) for `second_bound`."""
        if self.held is None:
            self.held = self.solver.Constraint(-self.solver.infinity(), self.solver.infinity())
            for x, w in self.first:
                self.held.SetCoefficient(x, w)
        self.held.SetUb(at_most + 1e-6 * max(1.0, at_most))

    def second_bound(self) -> float | None:
        """The GPU-economy bound under `hold_first` (the fractional counts stay readable through `guide`)."""
        hold = self.held.ub() if self.held is not None else self.solver.infinity()
        if self.solved_at is None or self.solved_at[0] != hold:  # same hold as last time: same bound
            self.solved_at = (hold, self._solve(self.second))
        return self.solved_at[1]

    def guide(self) -> list[dict[int, float]]:
        return [{o: y.solution_value() for o, y in ys.items() if y.solution_value() > 1e-6} for ys in self.y]


def _row(solver: pywraplp.Solver, lo: float, hi: float, terms: Terms) -> None:
    # coefficient by coefficient: the natural API (`Sum`, `>=`) costs seconds at 10,000 variables
    row = solver.Constraint(lo, hi)
    for x, w in terms:
        row.SetCoefficient(x, w)


def _demand_rows(
    lp: Relaxation, problem: PlacementProblem, demand: Demand, weight: int, w_miss: int, ub: dict[int, int]
) -> dict[int, pywraplp.Variable]:
    s, inf = lp.solver, lp.solver.infinity()
    ys = {o: s.NumVar(0, k, "") for o, k in ub.items() if k > 0}
    want = demand.replicas if demand.replicas is not None else demand.sessions or 0
    miss = s.NumVar(0, want, "")
    lp.first.append((miss, weight))
    if demand.replicas is not None:
        _row(s, want, want, [*((y, 1.0) for y in ys.values()), (miss, 1.0)])
    else:
        caps = {o: demand.options[o].capacity for o in ys}
        _row(s, want, inf, [*((y, float(caps[o])) for o, y in ys.items()), (miss, 1.0)])
        _row(s, -inf, demand.max_replicas, [(y, 1.0) for y in ys.values()])
        for c in sorted(set(caps.values()), reverse=True)[:4]:  # whole replicas (Chvatal-Gomory)
            _row(s, -(-want // c), inf, [*((y, float(-(-caps[o] // c))) for o, y in ys.items()), (miss, 1.0)])
    for owner, k in demand.reserved.items():
        if k > 0:  # replicas reserved on the owner's own nodes
            rm = s.NumVar(0, k, "")
            lp.first.append((rm, w_miss))
            mine = [y for o, y in ys.items() if problem.classes[demand.options[o].node_class].owner == owner]
            _row(s, k, inf, [*((y, 1.0) for y in mine), (rm, 1.0)])
    for o, y in ys.items():
        opt = demand.options[o]
        lp.second.append((y, option_cost(opt.gpus, opt.quality, problem.classes[opt.node_class].spare)))
    return ys


def relax(
    problem: PlacementProblem, weights: list[int], w_miss: int, w_move: int, upper: list[dict[int, int]]
) -> Relaxation | None:
    """The LP of the model; `weights` per demand for a missed unit, `upper` per demand the option bounds.

    The pool limit leaves out the replicas of a deployment that the owner reserves (the model counts
    only the reserved part as the owner's): a looser constraint, so still a lower bound."""
    solver = pywraplp.Solver.CreateSolver("GLOP")
    if solver is None:
        return None
    lp = Relaxation(solver)
    inf = solver.infinity()
    per_class: dict[int, list[tuple[int, pywraplp.Variable]]] = {}
    pool: dict[str, Terms] = {}
    for d, demand in enumerate(problem.demands):
        ys = _demand_rows(lp, problem, demand, weights[d], w_miss, upper[d])
        lp.y.append(ys)
        for o, y in ys.items():
            opt = demand.options[o]
            per_class.setdefault(opt.node_class, []).append((opt.gpus, y))
            owner = problem.classes[opt.node_class].owner
            if owner in problem.pool_limits and demand.dedicated_owner != owner and not demand.reserved.get(owner):
                pool.setdefault(owner or "", []).append((y, float(opt.gpus)))
        for c, before in demand.base.items():
            mv = solver.NumVar(0, before, "")
            lp.first.append((mv, w_move))
            here = [(y, 1.0) for o, y in ys.items() if demand.options[o].node_class == c]
            _row(solver, before, inf, [(mv, 1.0), *here])
    for c, terms in per_class.items():
        cls = problem.classes[c]
        for size in sorted({g for g, _ in terms}):
            _row(solver, -inf, cls.slots(size), [(y, float(g)) for g, y in terms if g >= size])
    for owner, pterms in pool.items():
        _row(solver, -inf, problem.pool_limits[owner], pterms)
    return lp
