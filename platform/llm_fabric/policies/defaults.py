"""The policies in force for a site: the distribution's defaults (`policies/*.yaml`) with the site repo's
own policy files layered over them, in file-name order. A later file's sovereignty rules replace an
earlier one's per data class, its spares per GPU model and deployment; its allocation and tiers
replace the earlier ones whole.
"""

from __future__ import annotations

from llm_fabric.distribution import data_path
from llm_fabric.documents import read_yaml, validate_document
from llm_fabric.site.loader import SiteRepo
from llm_fabric.site.models import PolicySet, SparePolicy


def merge_policies(base: PolicySet, overlay: PolicySet) -> PolicySet:
    sovereignty = dict(base.sovereignty)
    sovereignty.update(overlay.sovereignty)
    return PolicySet(
        sovereignty=sovereignty,
        allocation=overlay.allocation or base.allocation,
        tiers=overlay.tiers or base.tiers,
        spares=_merge_spares(base.spares, overlay.spares),
    )


def _merge_spares(base: SparePolicy | None, overlay: SparePolicy | None) -> SparePolicy | None:
    """Per GPU model and per deployment, as sovereignty is per data class: a later file's `none` wins."""
    if base is None or overlay is None:
        return overlay or base
    return SparePolicy(
        gpu_models=base.gpu_models | overlay.gpu_models, deployments=base.deployments | overlay.deployments
    )


def load_default_policies() -> PolicySet:
    merged = PolicySet()
    for path in sorted(data_path("policies").glob("*.yaml")):
        merged = merge_policies(merged, validate_document(read_yaml(path), PolicySet))
    return merged


def effective_policies(site: SiteRepo) -> PolicySet:
    """The distribution's default policies with the site's files layered over them (sorted by file name)."""
    merged = load_default_policies()
    for _, overlay in sorted(site.site_policies.items()):
        merged = merge_policies(merged, overlay)
    return merged
