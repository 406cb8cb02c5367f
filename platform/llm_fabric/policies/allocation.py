"""Allocation: what each contributor gave, what it keeps for itself, and what it lends to the pool.

A dedicated allocation is a share of the owner's own contribution (GPUs, or replicas of a deployment)
that its traffic gets first. The rest of its hardware is lent to the pool when lending is on (the
distribution's default). With lending off, an owner holding a dedicated allocation keeps all of its
hardware; an owner without one contributed it to the pool outright.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from llm_fabric.site.loader import SiteRepo
from llm_fabric.site.models import AllocationPolicy, PolicySet


@dataclass(frozen=True)
class OwnerShare:
    owner: str
    contributed: int
    dedicated_gpus: int
    reserved_replicas: dict[str, int] = field(default_factory=dict)
    lends: bool = True
    lend_surplus: bool = True
    out_of_service: int = 0  # GPUs of its cordoned nodes: still contributed, serving nothing for now

    @property
    def enrolled(self) -> int:
        """GPUs contributed and not retired, in service or not: what a dedicated allocation is judged by."""
        return self.contributed + self.out_of_service

    @property
    def dedicated_unbacked(self) -> int:
        """Dedicated GPUs no in-service GPU of the owner stands behind: the allocation's shortfall."""
        return max(0, self.dedicated_gpus - self.contributed)

    @property
    def pool_limit(self) -> int:
        """GPUs of this owner that pool (non-dedicated) replicas may take."""
        return max(0, self.contributed - self.dedicated_gpus) if self.lends else 0


def allocation_policy(policies: PolicySet) -> AllocationPolicy:
    return policies.allocation or AllocationPolicy()


def owner_shares(site: SiteRepo, policies: PolicySet) -> dict[str, OwnerShare]:
    lending = allocation_policy(policies).lending
    owners = {n.owner for n in site.nodes.values()} | {t.name for t in site.tenants.values() if t.contributor}
    contributed = dict.fromkeys(owners, 0)  # one pass over the nodes (SiteRepo.contributed_gpus is per owner)
    out_of_service = dict.fromkeys(owners, 0)
    for node in site.nodes.values():
        if node.status == "active":
            contributed[node.owner] += node.gpus.count
        elif node.status == "cordoned":
            out_of_service[node.owner] += node.gpus.count
    out: dict[str, OwnerShare] = {}
    for owner in sorted(owners):
        tenant = site.tenants.get(owner)
        dedicated = tenant.dedicated if tenant is not None else None
        out[owner] = OwnerShare(
            owner=owner,
            contributed=contributed[owner],
            dedicated_gpus=dedicated.gpus if dedicated else 0,
            reserved_replicas=dict(dedicated.replicas) if dedicated else {},
            lends=lending or dedicated is None,
            lend_surplus=dedicated.lend_surplus if dedicated else True,
            out_of_service=out_of_service[owner],
        )
    return out
