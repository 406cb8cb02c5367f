"""Turn replica counts per node class into nodes and GPU indices.

Each replica takes an aligned block of GPUs (start divisible by its size), so a 4-GPU replica on an
8-GPU node gets 0-3 or 4-7: on machines whose GPUs pair up over NVLink bridges rather than one
switch, aligned blocks are the ones that share links. Replicas the base plan had in a class keep
their node and GPUs when those are still free; the rest go largest-first to the first node with an
aligned block (divisible sizes pack perfectly that way, which is what the placement model counts on).
"""

from __future__ import annotations

from dataclasses import dataclass

from llm_fabric.errors import FabricError


@dataclass(frozen=True)
class Request:
    """One replica to seat in a class, and where it sat in the base plan (if it did)."""

    key: tuple[str, int]  # (deployment, ordinal within the deployment's requests)
    gpus: int
    base_node: str | None = None
    base_gpus: tuple[int, ...] = ()


@dataclass(frozen=True)
class Seat:
    node: str
    gpu_indices: tuple[int, ...]


def _aligned_block(free: list[bool], size: int) -> tuple[int, ...] | None:
    for start in range(0, len(free) - size + 1, size):
        if all(free[start : start + size]):
            return tuple(range(start, start + size))
    return None


def _take(free: list[bool], block: tuple[int, ...]) -> None:
    for i in block:
        free[i] = False


def _pack(
    nodes: tuple[str, ...], gpus_per_node: int, requests: list[Request], keep_base: bool
) -> dict[tuple[str, int], Seat] | None:
    free = {n: [True] * gpus_per_node for n in nodes}
    seats: dict[tuple[str, int], Seat] = {}
    rest: list[Request] = []
    for req in sorted(requests, key=lambda r: -r.gpus):
        block = req.base_gpus
        node_free = free.get(req.base_node or "")
        if (
            keep_base
            and node_free is not None
            and len(block) == req.gpus
            and all(0 <= i < gpus_per_node and node_free[i] for i in block)
        ):
            _take(node_free, block)
            seats[req.key] = Seat(req.base_node or "", block)
        else:
            rest.append(req)
    # per size, the first node that may still hold an aligned block of it: GPUs are only ever taken, and a
    # node without a free aligned block of t GPUs has none of 2t, so the scan never looks back
    cursor: dict[int, int] = {}
    for req in rest:  # still largest first: `sorted` above is stable
        seat = None
        if keep_base and req.base_node is not None and req.base_node in free:
            found = _aligned_block(free[req.base_node], req.gpus)
            if found is not None:
                _take(free[req.base_node], found)
                seat = Seat(req.base_node, found)
        i = cursor.get(req.gpus, 0)
        while seat is None and i < len(nodes):
            found = _aligned_block(free[nodes[i]], req.gpus)
            if found is not None:
                _take(free[nodes[i]], found)
                seat = Seat(nodes[i], found)
            else:
                i += 1
        cursor[req.gpus] = i
        if seat is None:
            return None
        seats[req.key] = seat
    return seats


def pack_class(nodes: tuple[str, ...], gpus_per_node: int, requests: list[Request]) -> dict[tuple[str, int], Seat]:
    """Seats for every request; keeps base seats where it can, else repacks the class from scratch."""
    seats = _pack(nodes, gpus_per_node, requests, keep_base=True)
    if seats is None:
        seats = _pack(nodes, gpus_per_node, requests, keep_base=False)
    if seats is None:
        raise FabricError(
            f"internal error: {len(requests)} replicas do not pack into {len(nodes)} nodes of {gpus_per_node} GPUs",
            hint="this is a bug in the placement model; please report it with the site repo",
        )
    return seats
