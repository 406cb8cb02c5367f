"""The placement problem and its solution as plain data (no solver): node classes, sized options,
demands; see `llm_fabric.plan.solver.placement` for the model and the method."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class NodeClass:
    key: str
    nodes: tuple[str, ...]
    gpus_per_node: int
    owner: str | None = None  # set when the owner's allocation limits what the pool may take here
    spare: bool = False  # a spare's nodes released by a fault: replicas go here first (cheapest GPUs)

    def slots(self, size: int) -> int:
        """GPUs that replicas of at least `size` GPUs can use in this class."""
        return len(self.nodes) * size * (self.gpus_per_node // size)


@dataclass(frozen=True)
class Option:
    node_class: int
    gpus: int  # the tensor-parallel size: a power of two, at most the class's GPUs per node
    capacity: int = 1  # sessions one replica holds at the target context (1 for fixed replicas)
    quality: int = 0  # 0..QUALITY_MAX (first_fit), relative capacity among the demand's options


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
    spare: bool = False  # capacity held free, serving nothing: placed after every real replica (W_SPARE)


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
