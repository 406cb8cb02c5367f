"""`fabric validate`'s ledger checks: a deployment without reference prices books 0.00 (a warning, not an error)."""

from __future__ import annotations

from llm_fabric.site.loader import SiteRepo
from llm_fabric.site.validation import Finding, SiteCheck


def _unpriced_deployments(site: SiteRepo) -> list[Finding]:
    if site.ledger is None:
        return []
    path = site.root / "ledger.yaml"
    return [
        Finding(
            "warning",
            site.problem(
                path,
                ("reference_prices",),
                f"deployment `{name}` has no reference price: its usage books 0.00 in the price ledger",
                hint=f"add reference_prices.{name} (input, cached_input, output per 1M tokens) to ledger.yaml",
            ),
        )
        for name in sorted(site.deployments)
        if name not in site.ledger.reference_prices
    ]


site_checks: list[SiteCheck] = [_unpriced_deployments]
