"""Room for a surge replica: free GPUs (or a held spare) where a deployment may run, booked once.

A surge runs beside the replica it stands in for, so during the change it needs GPUs that nothing else
holds: no replica of the new plan, no replica of the base plan (those keep running until their wave),
no held spare (unless it is the spare being used) and no other surge. The node must be one the planner
itself would give the deployment (`PlanContext.eligible`: placement constraints, the sites its data
classes may be at, tiers, dedicated owners), of the replica's GPU model; a pool replica on an owner's
node counts against what the owner lends to the pool, so a surge never eats a dedicated allocation.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from llm_fabric.plan.document import Plan, ReplicaPlacement, SpareHold
from llm_fabric.plan.planning import PlanContext
from llm_fabric.site.models import NodeManifest
from llm_fabric.trust.sites import TrustedSite


@dataclass
class Room:
    """The GPUs taken on each node while the change runs, and the pool GPUs each owner still lends."""

    site: TrustedSite
    plan: Plan
    ctx: PlanContext
    taken: dict[str, set[int]] = field(default_factory=dict)
    pool_left: dict[str, int] = field(default_factory=dict)
    spares: list[SpareHold] = field(default_factory=list)

    @classmethod
    def of(cls, site: TrustedSite, base_plan: Plan, plan: Plan) -> Room:
        room = cls(site, plan, PlanContext.of(site))
        for r in [*base_plan.replicas, *plan.replicas]:
            for node in r.nodes:
                room.taken.setdefault(node, set()).update(r.gpu_indices)
        held = [h for h in plan.spares if h.state == "held" and h.node]
        # a base replica still running on a spare's GPUs (the change moved it away) keeps them until its wave
        room.spares = [h for h in held if not room.taken.get(h.node or "", set()) & set(h.gpu_indices)]
        for h in held:
            room.taken.setdefault(h.node or "", set()).update(h.gpu_indices)
        room.pool_left = {o: a.lent_gpus - a.used_by_pool_gpus for o, a in plan.owners.items()}
        return room

    def _fits(self, replica: ReplicaPlacement, node: NodeManifest) -> bool:
        dep = self.site.deployments.get(replica.deployment)
        if dep is None or node.status != "active" or node.gpus.catalog_id != replica.gpu_model:
            return False
        if replica.dedicated_for is not None and node.owner != replica.dedicated_for:
            return False
        return self.ctx.eligible(dep, node)

    def _pool_allows(self, replica: ReplicaPlacement, node: NodeManifest) -> bool:
        if replica.dedicated_for == node.owner:  # the owner's own traffic on its own GPUs
            return True
        return self.pool_left.get(node.owner, 0) >= len(replica.gpu_indices)

    def _book(self, replica: ReplicaPlacement, node: NodeManifest, gpus: list[int], pool: bool) -> ReplicaPlacement:
        self.taken.setdefault(node.name, set()).update(gpus)
        if pool and replica.dedicated_for != node.owner and node.owner in self.pool_left:
            self.pool_left[node.owner] -= len(gpus)
        return replica.model_copy(
            update={"node": node.name, "site": node.site, "owner": node.owner, "gpu_indices": gpus}
        )

    def _candidates(self, replica: ReplicaPlacement) -> list[NodeManifest]:
        # the replica's own site first (closest to its clients and its cache), then by name: deterministic
        nodes = [n for n in self.site.nodes.values() if self._fits(replica, n)]
        return sorted(nodes, key=lambda n: (n.site != replica.site, n.name))

    def surge(self, replica: ReplicaPlacement) -> tuple[ReplicaPlacement, Literal["free", "spare"]] | None:
        """Where a surge of `replica` (its new configuration) can run, booked; None: nowhere.

        Free GPUs first: a spare used for a rollout leaves the pool without its fault cover meanwhile."""
        if replica.worker_nodes:  # a multi-node replica takes whole nodes; no surge is sought for it
            return None
        want = len(replica.gpu_indices)
        candidates = self._candidates(replica)
        for node in candidates:
            free = [g for g in range(node.gpus.count) if g not in self.taken.get(node.name, set())]
            if len(free) >= want and self._pool_allows(replica, node):
                return self._book(replica, node, free[:want], pool=True), "free"
        eligible = {n.name: n for n in candidates}
        for hold in self.spares:
            seat = eligible.get(hold.node or "")
            if seat is None or hold.gpu_model != replica.gpu_model or len(hold.gpu_indices) < want:
                continue
            if hold.scope == "deployment" and hold.name != replica.deployment:
                continue
            self.spares.remove(hold)  # one surge per spare; its GPUs are already held back from the pool
            return self._book(replica, seat, sorted(hold.gpu_indices)[:want], pool=False), "spare"
        return None
