"""May a deployment's replica run on a node, as far as policy goes? Every refusal is said in words.

Hardware fit (memory, native quantization, tensor parallelism) is the capacity model's business and
lives in `llm_fabric.plan.sizing`; this module holds the rules an operator writes: sovereignty,
tiers, dedicated allocations and lending, and the deployment's own placement constraints.
"""

from __future__ import annotations

from dataclasses import dataclass

from llm_fabric.policies.allocation import OwnerShare
from llm_fabric.policies.sovereignty import site_refusals
from llm_fabric.site.loader import SiteRepo
from llm_fabric.site.models import Deployment, NodeManifest, PolicySet, TierPolicy


@dataclass(frozen=True)
class ModelFacts:
    """What the tier rule needs to know about a deployment's model."""

    small: bool
    total_params_b: float


def tier_refusal(node: NodeManifest, dep: Deployment, facts: ModelFacts | None, tiers: TierPolicy) -> str | None:
    if node.tier != "limited":
        return None
    if facts is None:
        return f"node `{node.name}` is limited-tier and the size of recipe `{dep.recipe}` is unknown"
    if not facts.small:
        return f"node `{node.name}` is limited-tier and takes only models marked small; `{dep.recipe}` is not"
    if facts.total_params_b > tiers.limited_max_total_params_b:
        return (
            f"node `{node.name}` is limited-tier and takes models up to {tiers.limited_max_total_params_b:g}B "
            f"parameters; `{dep.recipe}` has {facts.total_params_b:g}B"
        )
    return None


def placement_refusals(dep: Deployment, node: NodeManifest) -> list[str]:
    out: list[str] = []
    if node.status != "active":
        out.append(f"node `{node.name}` is {node.status}")
    if dep.placement.nodes and node.name not in dep.placement.nodes:
        out.append(f"`{dep.name}` is pinned to {', '.join(dep.placement.nodes)}")
    if dep.placement.sites and node.site not in dep.placement.sites:
        out.append(f"`{dep.name}` may run only at sites {', '.join(dep.placement.sites)}")
    if dep.placement.gpu_models and node.gpus.catalog_id not in dep.placement.gpu_models:
        out.append(
            f"`{dep.name}` asks for {', '.join(dep.placement.gpu_models)} GPUs; "
            f"node `{node.name}` has {node.gpus.catalog_id}"
        )
    return out


def node_refusals(
    site: SiteRepo,
    policies: PolicySet,
    dep: Deployment,
    node: NodeManifest,
    facts: ModelFacts | None,
    share: OwnerShare | None,
) -> list[str]:
    """Every reason a replica of `dep` may not run on `node` (empty: it may)."""
    out = placement_refusals(dep, node)
    spec = site.config.sites.get(node.site)
    if spec is None:
        out.append(f"node `{node.name}` is at unknown site `{node.site}`")
    else:
        out.extend(site_refusals(policies, dep.data_classes, node.site, spec))
    refusal = tier_refusal(node, dep, facts, policies.tiers or TierPolicy())
    if refusal:
        out.append(refusal)
    if dep.dedicated_for is not None:
        if node.owner != dep.dedicated_for:
            out.append(
                f"`{dep.name}` is dedicated to `{dep.dedicated_for}` and runs on its hardware; "
                f"node `{node.name}` belongs to `{node.owner}`"
            )
    elif share is not None and share.pool_limit == 0 and dep.name not in share.reserved_replicas:
        out.append(f"`{node.owner}` lends none of its GPUs to the pool (all dedicated, or lending is off)")
    return out
