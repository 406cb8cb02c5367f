"""Who may use the gateway: each tenant's key hashes, limits, budget share and allowed model groups.

A tenant may use the groups `DEPLOYMENT@CLASS` of its data classes (its relays' groups are the gateway's,
never a key's); its classes are ranked most sensitive first, the first its default. The routing
(`gateway.routing`) made the groups.
"""

from __future__ import annotations

from dataclasses import dataclass

from llm_fabric.gateway.budgets import budget_share, tenant_budget
from llm_fabric.gateway.routing import entry_classes, group_name
from llm_fabric.gateway.runtime.settings import GroupAccess, TenantAccess
from llm_fabric.site.loader import SiteRepo
from llm_fabric.site.models import PolicySet, Tenant


@dataclass(frozen=True)
class Access:
    """Each tenant's access at one gateway, and the notes on tenants that cannot use it yet (no key)."""

    tenants: dict[str, TenantAccess]
    notes: list[str]


def tenant_access(site: SiteRepo, policies: PolicySet, site_id: str, groups: dict[str, GroupAccess]) -> Access:
    """The access of every tenant of the site repo at the gateway of `site_id`, which routes `groups`."""
    tenants: dict[str, TenantAccess] = {}
    notes: list[str] = []
    admits = {s: set(entry_classes(site, policies, s)) for s in site.config.gateway_sites()}
    for name, tenant in sorted(site.tenants.items()):
        share = budget_share(site, site_id, [s for s, classes in admits.items() if classes & set(tenant.data_classes)])
        allow: dict[str, dict[str, str]] = {}
        for group, spec in groups.items():
            if spec.data_class in tenant.data_classes and group == group_name(spec.deployment, spec.data_class):
                allow.setdefault(spec.deployment, {})[spec.data_class] = group
        lim = tenant.limits
        budget = tenant_budget(policies, tenant, share)
        tenants[name] = TenantAccess(
            key_sha256=[k.sha256 for k in tenant.keys],
            data_classes=_ranked_classes(site, tenant),
            requests_per_minute=lim.requests_per_minute,
            input_tokens_per_minute=lim.input_tokens_per_minute,
            output_tokens_per_minute=lim.output_tokens_per_minute,
            max_concurrent_requests=lim.max_concurrent_requests,
            groups=allow,
            tokens_per_month=budget.tokens_per_month,
            price_per_month=budget.price_per_month,
            whole_tokens_per_month=budget.whole_tokens_per_month,
            whole_price_per_month=budget.whole_price_per_month,
            fail_closed=budget.fail_closed,
            key_expiry=budget.key_expiry,
        )
        if not tenant.keys:
            notes.append(f"tenant `{name}` has no key: `fabric tenants key issue {name} -C {site.root}`")
    return Access(tenants=tenants, notes=notes)


def _ranked_classes(site: SiteRepo, tenant: Tenant) -> list[str]:
    ranks = {name: dc.rank for name, dc in site.config.data_classes.items()}
    return sorted(tenant.data_classes, key=lambda c: (-ranks.get(c, 0), c))
