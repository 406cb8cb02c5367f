"""Config time: what the hooks need for shared counters, monthly budgets and key lifetimes (docs/gateway.md).

A tenant's `tokens_per_month` and `price_per_month` are the federation's. How the sites share them
follows from where they count:
- one store (`gateway.counters.url`, the operator's Redis, named by every site's gateway): each site's
  gateway enforces the whole budget against the one month-to-date;
- a store per site (`gateway.counters: {}`, a Redis rendered at each gateway site, or no store with
  one replica): each site enforces its share (`gateway.budget_shares`, default equal shares of the
  gateway sites), so the sites together never admit more than the budget and no request waits on
  another site's store.
A tenant with a class that may not leave the federation (`external_fallback: false`) is restricted:
its requests are refused while the store is down (`fail_closed`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from decimal import ROUND_DOWN, Decimal

from llm_fabric.gateway.runtime.settings import CounterSettings, TokenRates
from llm_fabric.policies.sovereignty import external_fallback_allowed
from llm_fabric.site.loader import SiteRepo
from llm_fabric.site.models import GatewayConfig, PolicySet, Tenant

COUNTERS_NAME = "fabric-gateway-counters"  # the rendered Redis's StatefulSet and Service
COUNTERS_PORT = 6379
CENT = Decimal("0.01")


def one_store(gw: GatewayConfig) -> bool:
    """Whether every site's gateway counts in the same store (the operator's Redis)."""
    return gw.counters is not None and gw.counters.url is not None


def budget_share(site: SiteRepo, site_id: str, entry_sites: list[str]) -> float:
    """The part of a tenant's monthly budget the gateway at `site_id` may admit.

    `entry_sites`: the gateway sites where any of the tenant's data classes may enter. By default the
    budget is split equally among those, not among every gateway site: a tenant whose data may enter
    only at Brno gets its whole budget there, not a half it could never spend elsewhere."""
    gw = site.config.gateway or GatewayConfig()
    if one_store(gw):
        return 1.0
    if gw.budget_shares:
        return gw.budget_shares.get(site_id, 0.0)
    return 1.0 / len(entry_sites) if site_id in entry_sites else 0.0


@dataclass(frozen=True)
class TenantBudget:
    """A tenant's budget at one gateway site: its share of the monthly budgets, restricted or not, key expiry."""

    tokens_per_month: int | None
    price_per_month: Decimal | None
    whole_tokens_per_month: int | None  # the tenant's whole budget, of which the above is this site's share
    whole_price_per_month: Decimal | None
    fail_closed: bool
    key_expiry: dict[str, datetime]


def tenant_budget(policies: PolicySet, tenant: Tenant, share: float) -> TenantBudget:
    """The tenant's budget at a site that may admit `share` of it."""
    lim = tenant.limits
    price = None
    if lim.price_per_month is not None:
        price = (lim.price_per_month * Decimal(str(share))).quantize(CENT, rounding=ROUND_DOWN)
    return TenantBudget(
        tokens_per_month=math.floor(lim.tokens_per_month * share) if lim.tokens_per_month is not None else None,
        price_per_month=price,
        whole_tokens_per_month=lim.tokens_per_month,
        whole_price_per_month=lim.price_per_month,
        fail_closed=not external_fallback_allowed(policies, tenant.data_classes),
        key_expiry={k.id: k.expires_at for k in tenant.keys if k.expires_at is not None},
    )


@dataclass(frozen=True)
class StoreSettings:
    """The hooks' counter store, the ledger's currency and reference prices, the stale timeout."""

    counters: CounterSettings
    currency: str
    prices: dict[str, TokenRates]
    stale_after_s: float


def store_settings(site: SiteRepo, counters_url: str | None) -> StoreSettings:
    """The store settings of a gateway that counts at `counters_url` (`gateway.endpoints` chooses it)."""
    gw = site.config.gateway or GatewayConfig()
    ledger = site.ledger
    prices = {
        name: TokenRates(input=p.input, cached_input=p.cached_input, output=p.output)
        for name, p in sorted((ledger.reference_prices if ledger else {}).items())
    }
    return StoreSettings(
        counters=CounterSettings(url=counters_url, prefix=f"fabric:{site.config.federation.name}:"),
        currency=ledger.currency if ledger else "USD",
        prices=prices,
        # a request LiteLLM has not answered after its timeout never will: its slot is free a minute later
        stale_after_s=float(gw.request_timeout_s + 60),
    )
