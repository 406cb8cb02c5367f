"""Which site of the federation a stack deploys to, and what of the site repo belongs to it."""

from __future__ import annotations

from llm_fabric.documents import suggest
from llm_fabric.errors import UsageError
from llm_fabric.site.loader import SiteRepo
from llm_fabric.site.models import NodeManifest


def resolve_site(site: SiteRepo, wanted: str | None) -> str:
    """The site id to deploy; without one, the repo's only site (several sites need a choice)."""
    known = sorted(site.config.sites)
    if wanted is None:
        if len(known) == 1:
            return known[0]
        raise UsageError(
            f"the site repo has {len(known)} sites ({', '.join(known)}); say which cluster to deploy",
            hint=f"pass --site {known[0]} (or another of them); in a Pulumi stack: pulumi config set site {known[0]}",
        )
    if wanted not in site.config.sites:
        guess = suggest(wanted, known)
        raise UsageError(
            f"unknown site `{wanted}`",
            hint=f"did you mean `{guess}`?" if guess else f"known sites: {', '.join(known)}",
        )
    return wanted


def active_nodes(site: SiteRepo, site_id: str) -> list[NodeManifest]:
    """Nodes that take work at the site: cordoned and retired ones get no new quota or replicas."""
    return sorted((n for n in site.nodes.values() if n.site == site_id and n.status == "active"), key=lambda n: n.name)
