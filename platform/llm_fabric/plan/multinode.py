"""Replicas larger than one node: whole nodes of one site that share an RDMA fabric.

A deployment goes multi-node only when no single node it may run on can hold one replica (a
8 x H100 machine and DeepSeek V3 FP8). Its candidate groups are the eligible active nodes of one
site with the same GPU model and count, the same driver branch and the same owner (a group is one
allocation), and a shared RDMA fabric: every node shows a usable (ACTIVE, LinkUp) RDMA port of the
same link layer (InfiniBand, or Ethernet for RoCE) in its enrollment facts, and, when operators label
fabrics (`fabric.llm/rdma-fabric`), the same label. The capacity model picks the layout (pipeline
stages or DP ranks across nodes) on the fewest nodes that fit; each replica takes all GPUs of its
nodes. This runs before the placement solver, which then sees these nodes as taken. The reasons a
group could not take a replica are kept, so `fabric plan` can say why a multi-node replica was or
was not possible.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from llm_fabric import wording
from llm_fabric.engine.capacity.model import CapacityEstimate
from llm_fabric.engine.capacity.parallelism import Layout
from llm_fabric.engine.recipes import Recipe
from llm_fabric.hardware.catalog import GpuCatalog
from llm_fabric.plan.sizing import contexts, deployment_estimate
from llm_fabric.site.models import Deployment, NodeManifest

FABRIC_LABEL = "fabric.llm/rdma-fabric"


@dataclass
class GroupReplica:
    deployment: str
    nodes: list[str]  # leader first
    layout: Layout
    quantization: str
    sessions: int


@dataclass
class MultiNodePlan:
    replicas: list[GroupReplica] = field(default_factory=list)
    taken: set[str] = field(default_factory=set)
    notes: dict[str, str] = field(default_factory=dict)  # deployment -> why multi-node was / was not possible
    covered: dict[str, int] = field(default_factory=dict)  # deployment -> replicas (fixed) or sessions (target)


def driver_branch(version: str) -> str:
    """The driver's major version (NVIDIA 550.54.15 -> 550): nodes of one replica must run the same branch."""
    return version.split(".", 1)[0]


def fabric_of(node: NodeManifest) -> str | None:
    """The RDMA fabric a node is on, from its facts: the link layer of its usable ports (and the operators'
    label), or None when it has no usable RDMA port."""
    layers = sorted({p.link_layer or "unknown" for p in node.host.rdma if p.usable})
    if not layers:
        return None
    name = "RoCE" if layers == ["Ethernet"] else "/".join("InfiniBand" if x == "InfiniBand" else x for x in layers)
    label = node.labels.get(FABRIC_LABEL)
    return f"{name} {label}" if label else name


def _rate(nodes: list[NodeManifest]) -> str:
    rates = sorted({p.rate_gbps for n in nodes for p in n.host.rdma if p.usable and p.rate_gbps})
    return f", {'/'.join(f'{r:g}' for r in rates)} Gb/s" if rates else ""


def _group_key(node: NodeManifest) -> tuple[str, str, int, str, str]:
    return (node.site, node.gpus.catalog_id, node.gpus.count, driver_branch(node.gpus.driver_version), node.owner)


def _size(
    dep: Deployment, recipe: Recipe, catalog: GpuCatalog, key: tuple[str, str, int, str, str], nodes: int, util: float
) -> CapacityEstimate | None:
    """The smallest multi-node replica of `dep` on up to `nodes` nodes of this group, or None."""
    gpu = catalog.get(key[1])
    per_node = key[2]
    # a sessions target ranks strategies by the GPUs the sessions need, fixed replicas by stream speed
    users = dep.target.concurrent_sessions if dep.target else 1
    target = dep.target is not None and (dep.target.itl_ms is not None or dep.target.ttft_ms is not None)
    last = None
    for n in range(2, nodes + 1):
        est = deployment_estimate(
            dep,
            recipe,
            gpu,
            n * per_node,
            dep.quantization,
            contexts(dep, recipe).sizing,
            util,
            users=users,
            gpus_per_node=per_node,
        )
        last = est
        if est.fits and est.nodes > 1 and (est.concurrency_at_target if target else est.max_concurrency):
            return est
    return last if last is not None and last.fits and last.nodes > 1 else None


def plan_multi_node(
    deployments: list[tuple[Deployment, Recipe]],
    nodes: list[NodeManifest],
    eligible: Callable[[Deployment, NodeManifest], bool],
    fits_one_node: Callable[[Deployment, NodeManifest], bool],
    catalog: GpuCatalog,
    util: float,
    base_nodes: dict[str, list[list[str]]],
) -> MultiNodePlan:
    """Multi-node replicas for the deployments no single node can hold; nodes kept from `base_nodes`
    (deployment -> node lists of its multi-node replicas in the base plan) when they are still a group."""
    out = MultiNodePlan()
    active = sorted((n for n in nodes if n.status == "active"), key=lambda n: n.name)
    for dep, recipe in deployments:
        mine = [n for n in active if eligible(dep, n)]
        if not mine or any(fits_one_node(dep, n) for n in mine):
            continue
        _place(out, dep, recipe, mine, catalog, util, base_nodes.get(dep.name, []))
    return out


def _place(
    out: MultiNodePlan,
    dep: Deployment,
    recipe: Recipe,
    mine: list[NodeManifest],
    catalog: GpuCatalog,
    util: float,
    before: list[list[str]],
) -> None:
    groups: dict[tuple[str, str, int, str, str], list[NodeManifest]] = {}
    for node in mine:
        if node.name not in out.taken:
            groups.setdefault(_group_key(node), []).append(node)
    reasons: list[str] = []
    placed: list[str] = []
    wanted = dep.replicas if dep.target is None else None
    sessions_wanted = dep.target.concurrent_sessions if dep.target is not None else 0
    done = 0
    for key, members in sorted(groups.items()):
        nodes = wording.count(len(members), "node")
        where = f"{nodes} of {key[2]} x {key[1]} at {key[0]} (driver {key[3]}, owner {key[4]})"
        no_fabric = [n.name for n in members if fabric_of(n) is None]
        fabrics: dict[str, list[NodeManifest]] = {}
        for node in members:
            name = fabric_of(node)
            if name is not None:
                fabrics.setdefault(name, []).append(node)
        if no_fabric:
            reasons.append(f"{', '.join(no_fabric)}: no usable RDMA port (InfiniBand or RoCE) in the enrollment facts")
        if not fabrics:
            continue
        for fabric, on_fabric in sorted(fabrics.items()):
            est = _size(dep, recipe, catalog, key, len(on_fabric), util)
            if est is None:
                reasons.append(
                    f"{where} on {fabric}: {len(on_fabric)} node(s) cannot hold one replica"
                    + (" (one node alone is no multi-node replica)" if len(on_fabric) < 2 else "")
                )
                continue
            n = est.nodes
            per_replica = est.concurrency_at_target if est.latency_target else est.max_concurrency
            free = _ordered(on_fabric, before)
            while len(free) >= n and not _enough(done, wanted, sessions_wanted):
                group, free = free[:n], free[n:]
                out.replicas.append(GroupReplica(dep.name, group, est.layout, est.quantization, int(per_replica or 0)))
                out.taken.update(group)
                rate = _rate([n for n in on_fabric if n.name in group])
                placed.append(f"{'+'.join(group)} ({est.layout.describe()}, {fabric}{rate})")
                done += 1 if wanted is not None else int(per_replica or 0)
            if not _enough(done, wanted, sessions_wanted) and len(free) < n:
                reasons.append(f"{where} on {fabric}: {len(free)} free node(s) left, a replica needs {n}")
    out.covered[dep.name] = done
    if placed:
        note = f"multi-node: no single node holds a replica; placed {len(placed)} on " + "; ".join(placed)
        if reasons and not _enough(done, wanted, sessions_wanted):
            note += ". Not more, because: " + "; ".join(reasons)
        out.notes[dep.name] = note
    else:
        out.notes[dep.name] = "multi-node not possible: " + ("; ".join(reasons) or "no group of nodes qualifies")


def _enough(done: int, wanted: int | None, sessions: int) -> bool:
    return done >= wanted if wanted is not None else done >= sessions


def _ordered(nodes: list[NodeManifest], before: list[list[str]]) -> list[str]:
    """Node names, the base plan's groups first and in their order, so replicas keep their nodes."""
    names = [n.name for n in nodes]
    kept = [name for group in before if all(x in names for x in group) for name in group]
    return kept + [name for name in names if name not in kept]
