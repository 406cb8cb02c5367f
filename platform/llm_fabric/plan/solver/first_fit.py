"""A first-fit placement on the solver's inputs: the solver's starting point (its hint), and the plan
when the solver finds nothing better within its time limit.

It places the most constrained deployments first (dedicated and reserved replicas, then those with the
least eligible room for what they ask), keeps replicas in the node classes the base plan had them in,
then fills each deployment's cheapest options (GPUs per replica, or per session for targets). It obeys
exactly the constraints of the CP-SAT model (`llm_fabric.plan.solver.placement`), so its result is a
feasible solution of that model.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from llm_fabric.plan.solver.placement_types import Demand, PlacementProblem

W_GPU = 10  # per GPU used (the same weights as the model's second stage)
QUALITY_MAX = 9
UNLIMITED = 1 << 30
COVER = 2  # the pass that rounds the LP's fractions up


def option_cost(gpus: int, quality: int, spare: bool = False) -> int:
    """What one replica costs in the GPU-economy objective: its GPUs, then less capacity than the best.
    On a released spare's nodes (`spare`) a replica costs less than one GPU anywhere else: the GPUs
    held for a fault take its replicas before lent capacity does."""
    shortfall = QUALITY_MAX - min(QUALITY_MAX, max(0, quality))
    return 1 + shortfall if spare else W_GPU * gpus + shortfall


@dataclass
class StartPoint:
    counts: list[dict[int, int]]
    dedicated: list[dict[int, int]]
    missing: list[int]
    reserved_missing: list[dict[str, int]]


@dataclass
class _Room:
    """Free GPUs per class and size (the model's packing constraints), and what each owner still lends."""

    free: list[dict[int, int]]
    lend: dict[str, int]
    sizes: list[list[int]] = field(default_factory=list)

    def fits(self, c: int, gpus: int, owner: str | None) -> bool:
        if owner is not None and self.lend[owner] < gpus:
            return False
        return all(self.free[c][t] >= gpus for t in self.sizes[c] if t <= gpus)

    def fits_many(self, c: int, gpus: int, n: int, owner: str | None) -> bool:
        """n replicas at once (the constraints are linear in the counts, so this is exact)."""
        return self.fits(c, gpus * n, owner) if n > 0 else True

    def take(self, c: int, gpus: int, owner: str | None) -> None:
        for t in self.sizes[c]:
            if t <= gpus:
                self.free[c][t] -= gpus
        if owner is not None:
            self.lend[owner] -= gpus


def _room(problem: PlacementProblem) -> _Room:
    sizes: list[set[int]] = [set() for _ in problem.classes]
    for demand in problem.demands:
        for opt in demand.options:
            sizes[opt.node_class].add(opt.gpus)
    room = _Room(
        [{t: cls.slots(t) for t in sizes[c]} for c, cls in enumerate(problem.classes)], dict(problem.pool_limits)
    )
    room.sizes = [sorted(s) for s in sizes]
    return room


def _lender(problem: PlacementProblem, demand: Demand, c: int) -> str | None:
    """The owner whose pool limit a (non-reserved) replica in class c draws on, if any."""
    owner = problem.classes[c].owner
    if owner is None or owner not in problem.pool_limits or demand.dedicated_owner == owner:
        return None
    return owner


def _order(problem: PlacementProblem) -> list[int]:
    def tightness(d: int) -> tuple[int, float]:
        demand = problem.demands[d]
        room = sum(problem.classes[o.node_class].slots(o.gpus) for o in demand.options)
        want = demand.replicas if demand.replicas is not None else demand.max_replicas
        need = max(1, want) * min((o.gpus for o in demand.options), default=1)
        rank = 2 if demand.spare else 0 if demand.dedicated_owner or demand.reserved else 1
        return (rank, room / need)  # spares last: they take only what the real replicas left

    return sorted(range(len(problem.demands)), key=tightness)


def _preference(problem: PlacementProblem, demand: Demand, guide: dict[int, float]) -> list[int]:
    """Options: the LP's first (larger fraction first), then cheapest first (per replica, or per session for
    targets); base classes before all others."""
    per_replica = demand.replicas is not None

    def key(o: int) -> tuple[bool, bool, float, float, int]:
        opt = demand.options[o]
        cost = option_cost(opt.gpus, opt.quality, problem.classes[opt.node_class].spare)
        per = cost if per_replica else cost / max(1, opt.capacity)
        x = guide.get(o)
        return (opt.node_class not in demand.base, x is None, -(x % 1) if x is not None else 0.0, per, o)

    return sorted(range(len(demand.options)), key=key)


class _Lenders(dict[int, str | None]):
    """The owner whose pool limit a replica of each option draws on, looked up when first needed."""

    def __init__(self, problem: PlacementProblem, demand: Demand) -> None:
        super().__init__()
        self.problem, self.demand = problem, demand

    def __missing__(self, o: int) -> str | None:
        self[o] = _lender(self.problem, self.demand, self.demand.options[o].node_class)
        return self[o]


@dataclass
class _Filling:
    """One demand being placed: its option order, per pass how many replicas each option may take, and
    what it holds so far."""

    demand: Demand
    prefs: list[int]
    passes: list[dict[int, int] | None]  # per pass: option -> replicas it may hold after it (None: no limit)
    lender: dict[int, str | None]
    spare: frozenset[int] = frozenset()  # options on a released spare's nodes
    placed: int = 0
    sessions: int = 0
    counts: dict[int, int] = field(default_factory=dict)
    dedicated: dict[int, int] = field(default_factory=dict)
    reserved: dict[str, int] = field(default_factory=dict)  # owner -> reserved replicas placed

    @property
    def want(self) -> int:
        return self.demand.replicas if self.demand.replicas is not None else self.demand.max_replicas

    def held(self) -> int:
        return self.sessions

    def enough(self) -> bool:
        if self.placed >= self.want:
            return True
        return self.demand.replicas is None and self.sessions >= (self.demand.sessions or 0)


def _filling(problem: PlacementProblem, demand: Demand, guide: dict[int, float]) -> _Filling:
    # passes: keep what the base plan had; the LP's counts rounded down, then up; then whatever fits
    keep = {o: demand.base[opt.node_class] for o, opt in enumerate(demand.options) if opt.node_class in demand.base}
    floor = {o: math.floor(x + 1e-6) for o, x in guide.items() if x >= 1 - 1e-6}
    ceil = {o: math.ceil(x - 1e-6) for o, x in guide.items()}
    # the LP's options first, the larger fraction first (it is rounded up first); then by cost
    prefs = _preference(problem, demand, guide)
    passes: list[dict[int, int] | None] = [keep, floor, ceil, None]
    spare = frozenset(o for o, opt in enumerate(demand.options) if problem.classes[opt.node_class].spare)
    return _Filling(demand, prefs, passes, _Lenders(problem, demand), spare)


def _put(f: _Filling, o: int, room: _Room, pool: bool) -> bool:
    opt = f.demand.options[o]
    lender = f.lender[o] if pool else None  # reserved replicas never draw on what the owner lends
    if not room.fits(opt.node_class, opt.gpus, lender):
        return False
    room.take(opt.node_class, opt.gpus, lender)
    f.counts[o] = f.counts.get(o, 0) + 1
    f.placed += 1
    f.sessions += opt.capacity
    return True


def _step(problem: PlacementProblem, f: _Filling, room: _Room, p: int) -> None:
    """One pass for one demand: its reserved replicas on the owners' nodes first, then the rest."""
    allowed = f.passes[p]
    if f.enough() or (allowed is not None and not allowed and p != COVER):
        return
    order = f.prefs if allowed is None else [o for o in f.prefs if o in allowed]
    for owner, k in sorted(f.demand.reserved.items()):
        mine = [o for o in order if problem.classes[f.demand.options[o].node_class].owner == owner]
        for o in mine:
            cap = allowed[o] - f.counts.get(o, 0) if allowed is not None else UNLIMITED
            while cap > 0 and f.reserved.get(owner, 0) < k and not f.enough() and _put(f, o, room, pool=False):
                f.dedicated[o] = f.dedicated.get(o, 0) + 1
                f.reserved[owner] = f.reserved.get(owner, 0) + 1
                cap -= 1
    if p == COVER and f.demand.replicas is None:
        _cover(f, room)
    for o in order:
        cap = allowed[o] - f.counts.get(o, 0) if allowed is not None else UNLIMITED
        while cap > 0 and not f.enough() and _put(f, o, room, pool=True):
            cap -= 1


def _cover(f: _Filling, room: _Room) -> None:
    """A session target's remainder after the LP's whole replicas: the one option that covers it cheapest."""
    rest = (f.demand.sessions or 0) - f.held()
    if rest <= 0:
        return
    room_left = f.want - f.placed
    candidates = []
    for o in f.prefs:
        opt = f.demand.options[o]
        n = -(-rest // max(1, opt.capacity))
        if n <= room_left:
            candidates.append((n * option_cost(opt.gpus, opt.quality, o in f.spare), o, n))
    for _, o, n in sorted(candidates):  # the cheapest that fits: capacity checks only until then
        opt = f.demand.options[o]
        if room.fits_many(opt.node_class, opt.gpus, n, f.lender[o]):
            for _ in range(n):
                _put(f, o, room, pool=True)
            return


def first_fit(problem: PlacementProblem, guide: list[dict[int, float]] | None = None) -> StartPoint:
    """A feasible solution of the placement model, built greedily (no optimality claim); `guide`, per
    demand the LP's fractional replicas per option, steers it toward the relaxation's optimum."""
    fills = [_filling(problem, demand, guide[d] if guide else {}) for d, demand in enumerate(problem.demands)]
    room = _room(problem)
    order = _order(problem)
    for p in range(len(fills[0].passes) if fills else 0):
        for d in order:
            _step(problem, fills[d], room, p)
    missing = [
        f.demand.replicas - sum(f.counts.values())
        if f.demand.replicas is not None
        else max(0, (f.demand.sessions or 0) - f.held())
        for f in fills
    ]
    return StartPoint(
        [f.counts for f in fills],
        [f.dedicated for f in fills],
        missing,
        [{w: k - f.reserved.get(w, 0) for w, k in f.demand.reserved.items() if k > 0} for f in fills],
    )
