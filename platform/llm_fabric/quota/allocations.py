"""Dedicated allocations as Kueue (v1beta2) objects.

- a ResourceFlavor per GPU product and owner (node labels `fabric.llm/gpu-model` + `fabric.llm/owner`);
- one Cohort per federation that holds the pooled GPUs (contributed minus dedicated) as its own quota;
- a ClusterQueue per tenant whose nominalQuota is its dedicated GPUs on its own hardware, with
  lendingLimit/borrowingLimit from the allocation policy and the tenant's `lend_surplus`;
- a `<federation>-pool` ClusterQueue (no quota of its own) for the replicas that serve the pool;
- a LocalQueue per ClusterQueue in the serving namespace (what the serving workloads' queue label names);
  those are namespaced, so the serving stack (which owns the namespace) applies them.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from llm_fabric.kube import labels as L
from llm_fabric.kube.manifests import Bundle, Manifest
from llm_fabric.kube.sites import active_nodes
from llm_fabric.policies.defaults import effective_policies
from llm_fabric.site.models import AllocationPolicy, Tenant
from llm_fabric.trust.sites import TrustedSite

KUEUE_API = "kueue.x-k8s.io/v1beta2"


@dataclass(frozen=True)
class Flavor:
    name: str
    gpu_model: str
    owner: str
    resource: str
    contributed: int


@dataclass(frozen=True)
class Allocation:
    """How one site's GPUs split: per flavor, dedicated GPUs per tenant; the rest is pooled."""

    flavors: list[Flavor]
    dedicated: dict[str, dict[str, int]]  # tenant -> flavor -> GPUs

    def pooled(self, flavor: Flavor) -> int:
        return flavor.contributed - sum(d.get(flavor.name, 0) for d in self.dedicated.values())


def pool_queue_name(site: TrustedSite) -> str:
    return L.dns_name(site.config.federation.name, "pool")


def dedicated_gpus(site: TrustedSite, tenant: Tenant) -> int:
    """GPUs a tenant's dedicated allocation takes: its `gpus`, or what its reserved replicas need if more."""
    if tenant.dedicated is None:
        return 0
    replica_gpus = sum(
        count * (site.deployments[dep].tensor_parallel_size or 1)
        for dep, count in tenant.dedicated.replicas.items()
        if dep in site.deployments
    )
    return max(tenant.dedicated.gpus, replica_gpus)


def split_allocation(site: TrustedSite, site_id: str) -> Allocation:
    contributed: dict[tuple[str, str, str], int] = defaultdict(int)
    for node in active_nodes(site, site_id):
        key = (node.gpus.catalog_id, node.owner, L.GPU_RESOURCE[node.gpus.vendor])
        contributed[key] += node.gpus.count
    flavors = [
        Flavor(L.dns_name(model, owner), model, owner, resource, count)
        for (model, owner, resource), count in sorted(contributed.items())
    ]
    dedicated: dict[str, dict[str, int]] = {}
    for name, tenant in sorted(site.tenants.items()):
        # a tenant's dedicated share comes out of its own hardware; a site takes what its nodes hold
        wanted = dedicated_gpus(site, tenant) - _taken_elsewhere(site, site_id, tenant)
        share: dict[str, int] = {}
        for flavor in flavors:
            if flavor.owner == name and wanted > 0:
                share[flavor.name] = min(wanted, flavor.contributed)
                wanted -= share[flavor.name]
        dedicated[name] = share
    return Allocation(flavors, dedicated)


def _taken_elsewhere(site: TrustedSite, site_id: str, tenant: Tenant) -> int:
    """Dedicated GPUs already met by the tenant's nodes at sites sorted before this one."""
    earlier = sorted(s for s in site.config.sites if s < site_id)
    held = sum(
        n.gpus.count
        for n in site.nodes.values()
        if n.owner == tenant.name and n.status == "active" and n.site in earlier
    )
    return min(held, dedicated_gpus(site, tenant))


def queue_names(site: TrustedSite) -> list[str]:
    """ClusterQueues (and their LocalQueues): one per tenant, plus the pool's."""
    return [*sorted(site.tenants), pool_queue_name(site)]


def build_local_queues(site: TrustedSite, namespace: str) -> list[Bundle]:
    return [Bundle("local-queues", namespace, [_local_queue(name, namespace) for name in queue_names(site)])]


def build_allocations(site: TrustedSite, site_id: str) -> list[Bundle]:
    alloc = split_allocation(site, site_id)
    policy = effective_policies(site).allocation or AllocationPolicy()
    cohort = site.config.federation.name
    bundles = [Bundle("gpu-flavors", "flavors", [_flavor(f) for f in alloc.flavors])]
    bundles.append(Bundle("cohort", cohort, [_cohort(cohort, alloc)]))
    for name, tenant in sorted(site.tenants.items()):
        lend = policy.lending and (tenant.dedicated is None or tenant.dedicated.lend_surplus)
        queue = _cluster_queue(name, cohort, alloc, alloc.dedicated[name], lend=lend, borrow=policy.borrowing)
        queue["metadata"]["labels"] = _labels(name) | {L.OWNER: name}
        bundles.append(Bundle("tenant-queue", name, [queue]))
    pool = pool_queue_name(site)
    bundles.append(Bundle("tenant-queue", pool, [_cluster_queue(pool, cohort, alloc, {}, lend=False, borrow=True)]))
    return bundles


def _labels(instance: str) -> dict[str, str]:
    return L.common_labels("allocations", instance)


def _flavor(flavor: Flavor) -> Manifest:
    return {
        "apiVersion": KUEUE_API,
        "kind": "ResourceFlavor",
        "metadata": {"name": flavor.name, "labels": _labels(flavor.name)},
        "spec": {"nodeLabels": {L.GPU_MODEL: flavor.gpu_model, L.OWNER: flavor.owner}},
    }


def _groups(alloc: Allocation, quota: dict[str, int], extra: dict[str, int]) -> list[dict[str, object]]:
    """Resource groups (one per GPU resource name) listing every flavor, `quota[flavor]` GPUs each."""
    by_resource: dict[str, list[Flavor]] = defaultdict(list)
    for flavor in alloc.flavors:
        by_resource[flavor.resource].append(flavor)
    groups: list[dict[str, object]] = []
    for resource, flavors in sorted(by_resource.items()):
        entries = []
        for flavor in flavors:
            limits: dict[str, object] = {"name": resource, "nominalQuota": quota.get(flavor.name, 0)}
            limits.update({key: value if value >= 0 else quota.get(flavor.name, 0) for key, value in extra.items()})
            entries.append({"name": flavor.name, "resources": [limits]})
        groups.append({"coveredResources": [resource], "flavors": entries})
    return groups


def _cohort(name: str, alloc: Allocation) -> Manifest:
    pooled = {f.name: alloc.pooled(f) for f in alloc.flavors}
    return {
        "apiVersion": KUEUE_API,
        "kind": "Cohort",
        "metadata": {"name": name, "labels": _labels(name)},
        "spec": {"resourceGroups": _groups(alloc, pooled, {})},
    }


def _cluster_queue(
    name: str, cohort: str, alloc: Allocation, quota: dict[str, int], *, lend: bool, borrow: bool
) -> Manifest:
    # -1 means "the flavor's nominal quota": lend all of the idle dedicated share, or none of it
    extra = {"lendingLimit": -1 if lend else 0}
    if not borrow:
        extra["borrowingLimit"] = 0
    return {
        "apiVersion": KUEUE_API,
        "kind": "ClusterQueue",
        "metadata": {"name": name, "labels": _labels(name)},
        "spec": {
            "cohortName": cohort,
            "namespaceSelector": {},
            "queueingStrategy": "BestEffortFIFO",
            "preemption": {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"},
            "resourceGroups": _groups(alloc, quota, extra),
        },
    }


def _local_queue(name: str, namespace: str) -> Manifest:
    return {
        "apiVersion": KUEUE_API,
        "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": namespace, "labels": _labels(name)},
        "spec": {"clusterQueue": name},
    }
