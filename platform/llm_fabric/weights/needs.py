"""Which checkpoints a plan needs: the one each planned replica loads (the plan records it with the replica)."""

from __future__ import annotations

from llm_fabric.documents import suggest
from llm_fabric.errors import UsageError
from llm_fabric.plan.document import Plan
from llm_fabric.site.loader import SiteRepo


def check_site(site: SiteRepo, site_id: str | None) -> None:
    if site_id is not None and site_id not in site.config.sites:
        known = sorted(site.config.sites)
        guess = suggest(site_id, known)
        raise UsageError(
            f"unknown site `{site_id}`",
            hint=f"did you mean `{guess}`?" if guess else f"known sites: {', '.join(known)}",
        )


def needed_checkpoints(
    site: SiteRepo, plan: Plan, site_id: str | None = None, *, node: str | None = None
) -> dict[str, list[str]]:
    """Checkpoint repo id -> the deployments whose replicas (at `site_id`, on `node`, or anywhere) load it."""
    check_site(site, site_id)
    if plan.federation != site.config.federation.name:
        raise UsageError(
            f"the plan is of federation `{plan.federation}`, "
            f"the site repo {site.root} is `{site.config.federation.name}`",
            hint=f"plan this site repo: `fabric plan -C {site.root} -o plan.json`",
        )
    needed: dict[str, set[str]] = {}
    for replica in plan.replicas:
        if (site_id is not None and replica.site != site_id) or (node is not None and node not in replica.nodes):
            continue
        needed.setdefault(replica.checkpoint, set()).add(replica.deployment)
    return {name: sorted(deps) for name, deps in sorted(needed.items())}
