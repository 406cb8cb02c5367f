"""The placement on plain inputs: how many replicas of each deployment go to each class of
interchangeable nodes; the method that solves it (the CP-SAT model itself is `placement_model`).

Scale comes from symmetry: nodes alike for every rule form one node class (see
`llm_fabric.plan.planning.node_classes`), and the model counts replicas per (deployment, option), an
option being one class and one tensor-parallel size. It never has a boolean per GPU. Replicas stay
inside one node (tensor parallelism within one NVLink domain); with power-of-two replica sizes, a class
of k nodes of G GPUs can hold a set of replicas exactly when, for every size t, the GPUs of the replicas
of size >= t fit in k * t * floor(G / t) (divisible sizes pack largest-first), so per-node packing is
left to `llm_fabric.plan.solver.packing`.

Objective, lexicographic, in two stages: first meet every target (the shortfall, replicas or sessions,
normalised per deployment: when targets cannot all be met this maximises the capacity served) and keep
replicas where the base plan had them; then, with that first objective held at the value found, use the
fewest GPUs (the rest stays with the pool) and prefer the options with more capacity per replica.

Method: the LP relaxation (`relaxation`) bounds each stage and guides a first-fit start (`first_fit`);
a stage whose start meets its bound is proven, otherwise CP-SAT solves it from that start (the
GPU-economy stage to 0.1 %, or, on a model over SMALL_MODEL variables, not at all when the start is
within 1 %). Beyond LARGE_MODEL variables the LP runs on the coarse problem (`aggregation`) and CP-SAT
is skipped. The gap reported is that of the first stage not proven optimal, relative to its own
objective, so a dominating missed-replica weight neither hides a poor GPU economy nor inflates the gap
of a good plan.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from llm_fabric.plan.solver.aggregation import Coarse, coarsen, refine_guide
from llm_fabric.plan.solver.first_fit import StartPoint, first_fit, option_cost
from llm_fabric.plan.solver.placement_model import PlacementModel, count_variables, upper_bound
from llm_fabric.plan.solver.placement_types import Demand, NodeClass, Option, PlacementProblem, PlacementSolution
from llm_fabric.plan.solver.relaxation import Relaxation, relax

__all__ = ["Demand", "NodeClass", "Option", "PlacementProblem", "PlacementSolution", "solve"]

W_MISS = 1_000_000  # per replica (or replica-equivalent of sessions) not placed
W_MOVE = 1_000  # per replica taken away from a class it ran on in the base plan
W_SPARE = 10_000  # per spare not held: never at a replica's cost, worth a few moves
FIRST_STAGE_SHARE = 0.7  # of the time limit; the GPU-economy stage gets the rest
GAP_LIMIT = 0.001  # relative: the GPU-economy stage is optimal this close to its bound
GAP_ACCEPT = 0.01  # ... and, on a model over SMALL_MODEL variables, good enough without a CP-SAT run
SMALL_MODEL = 2_000
LARGE_MODEL = 50_000  # variables; beyond: coarse LP bound and LP-guided first-fit, no CP-SAT


def _miss_weight(demand: Demand) -> int:
    if demand.spare:
        return W_SPARE
    if demand.replicas is not None:
        return W_MISS
    best = max((o.capacity for o in demand.options), default=1)
    return max(1, W_MISS // max(1, best))


def _moves(problem: PlacementProblem, p: StartPoint) -> int:
    out = 0
    for d, demand in enumerate(problem.demands):
        for c, before in demand.base.items():
            here = sum(n for o, n in p.counts[d].items() if demand.options[o].node_class == c)
            out += max(0, before - here)
    return out


def _first_value(problem: PlacementProblem, p: StartPoint) -> int:
    """Targets missed (weighted per deployment), reservations missed, replicas moved."""
    missed = sum(_miss_weight(demand) * p.missing[d] for d, demand in enumerate(problem.demands))
    return missed + W_MISS * sum(sum(r.values()) for r in p.reserved_missing) + W_MOVE * _moves(problem, p)


def _second_value(problem: PlacementProblem, p: StartPoint) -> int:
    """GPU economy: the GPUs of every replica, then its capacity short of the best option's."""
    return sum(
        option_cost(
            demand.options[o].gpus, demand.options[o].quality, problem.classes[demand.options[o].node_class].spare
        )
        * n
        for demand, counts in zip(problem.demands, p.counts, strict=True)
        for o, n in counts.items()
    )


@dataclass
class _Stage:
    point: StartPoint
    value: int
    bound: float
    proven: bool
    by_solver: bool = False

    @property
    def gap(self) -> float:
        return max(0.0, self.value - self.bound) / max(1.0, abs(self.value))


@dataclass
class _Run:
    """One solve: the problem, the deadline, and the CP-SAT model once a stage needs it."""

    problem: PlacementProblem
    deadline: float
    workers: int
    variables: int = 0  # of the CP-SAT model, counted once
    cp: PlacementModel | None = None

    def left(self) -> float:
        return self.deadline - time.perf_counter()

    @property
    def large(self) -> bool:
        """Too large for CP-SAT within seconds: relaxed through the coarse problem, no CP-SAT stage."""
        return self.variables > LARGE_MODEL

    def model(self) -> PlacementModel:
        if self.cp is None:
            self.cp = PlacementModel(self.problem, [_miss_weight(d) for d in self.problem.demands], W_MISS, W_MOVE)
        return self.cp


def _lp_start(run: _Run) -> tuple[Relaxation | None, float | None, StartPoint]:
    """The LP relaxation with the first stage's bound, and the first-fit start guided by its fractions.
    A large model is relaxed through its coarse problem (`aggregation`): still a lower bound."""
    problem = run.problem
    coarse: Coarse | None = coarsen(problem) if run.large else None
    lp_problem = coarse.problem if coarse is not None else problem
    upper = [
        {o: upper_bound(lp_problem, d, o) for o in range(len(demand.options))}
        for d, demand in enumerate(lp_problem.demands)
    ]
    lp = relax(lp_problem, [_miss_weight(d) for d in lp_problem.demands], W_MISS, W_MOVE, upper)
    if lp is not None:
        lp.time_limit = lambda: run.left()
    b1 = lp.first_bound() if lp is not None else None
    guide = None
    if lp is not None and b1 is not None:
        lp.hold_first(b1)
        if lp.second_bound() is not None:
            guide = lp.guide() if coarse is None else refine_guide(problem, coarse, lp.guide())
    return lp, b1, first_fit(problem, guide)


def _first_stage(run: _Run, start: StartPoint, b1: float | None) -> _Stage:
    """Targets and stability: proven by the LP when the start reaches its bound, else CP-SAT from the start."""
    value = _first_value(run.problem, start)
    if b1 is not None and value <= b1 + 0.5:
        return _Stage(start, value, b1, True)
    if run.large:
        return _Stage(start, value, min(b1 or 0.0, value), False)
    point, bound, proven = run.model().minimise(
        run.model().first, start, run.left() * FIRST_STAGE_SHARE, run.workers, 0.0
    )
    bound = max(bound, b1 or 0.0)
    if point is None or _first_value(run.problem, point) > value:
        return _Stage(start, value, min(bound, value), False)
    found = _first_value(run.problem, point)
    return _Stage(point, found, min(bound, found), proven, True)


def _second_stage(run: _Run, one: _Stage, lp: Relaxation | None) -> _Stage:
    """The GPU economy with the first objective held: proven by the LP when the start is close enough."""
    bound = None
    if lp is not None:
        lp.hold_first(one.value)
        bound = lp.second_bound()
    value = _second_value(run.problem, one.point)
    stage = _Stage(one.point, value, min(bound or 0.0, value), False)
    # a small model is always worth CP-SAT's proof; a large one only when the start is not already close
    small = run.variables <= SMALL_MODEL
    if run.large or (bound is not None and (stage.gap <= GAP_LIMIT or (stage.gap <= GAP_ACCEPT and not small))):
        stage.proven = stage.gap <= GAP_LIMIT
        return stage
    cp = run.model()
    cp.hold(cp.first, one.value)  # the second stage may not undo the first
    point, cp_bound, proven = cp.minimise(cp.second, one.point, run.left(), run.workers, GAP_LIMIT)
    stage.bound = max(stage.bound, min(cp_bound, value))
    if point is not None and _second_value(run.problem, point) <= value:
        found = _second_value(run.problem, point)
        stage = _Stage(point, found, min(stage.bound, found), proven, True)
    stage.proven = stage.proven or stage.gap <= GAP_LIMIT
    return stage


def solve(problem: PlacementProblem, *, time_limit_s: float = 10.0, workers: int = 2) -> PlacementSolution:
    """Solve the placement. Never infeasible by construction: what does not fit shows up as `missing`."""
    started = time.perf_counter()
    run = _Run(problem, started + time_limit_s, workers, count_variables(problem))
    lp, b1, start = _lp_start(run)
    one = _first_stage(run, start, b1)
    two = _second_stage(run, one, lp)
    improved = one.proven or one.by_solver or two.by_solver  # else: nothing vouches for the first-fit start
    p = two.point
    return PlacementSolution(
        counts=p.counts,
        dedicated=p.dedicated,
        missing=p.missing,
        reserved_missing=p.reserved_missing,
        status="optimal" if one.proven and two.proven else "feasible" if improved else "first-fit",
        objective=float(one.value + two.value),
        best_bound=one.bound + (two.bound if one.proven else 0.0),
        gap=one.gap if not one.proven else two.gap,
        wall_seconds=time.perf_counter() - started,
        variables=run.variables,
        moves=_moves(problem, p),
    )
