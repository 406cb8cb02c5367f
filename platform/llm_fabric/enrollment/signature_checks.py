"""`fabric validate`: every node manifest must be trusted (llm_fabric.trust.sites.untrusted_nodes).

Unsigned or altered manifests, keys outside keys/ and replays of a retired node's old manifest are
policy violations (exit 3): a federation cannot place workloads on hardware claims that nobody with
the enrollment key vouched for. With `validate --base`, the keys are the base revision's.
"""

from __future__ import annotations

from llm_fabric.errors import UsageError
from llm_fabric.site.loader import SiteRepo
from llm_fabric.site.validation import Finding, SiteCheck
from llm_fabric.trust.sites import Keys, untrusted_nodes


def check_node_signatures(site: SiteRepo, keys: Keys | None = None) -> list[Finding]:
    """Findings for untrusted nodes under `keys` (default: the repo's own keys/)."""
    if not site.nodes:
        return []
    try:
        problems = untrusted_nodes(site, keys)
    except UsageError as exc:
        return [Finding("config", site.problem(site.root / "keys", (), exc.message, exc.hint))]
    return [Finding("policy", p) for p in problems]


site_checks: list[SiteCheck] = [check_node_signatures]  # run by validate with its trust root
