"""A tenant's month-to-date against its monthly budgets, from the ledger (`fabric tenants show`, the exporter).

The tokens are the records' (what the gateways' meters wrote and `fabric ledger ingest` stored, or the
records given to the exporter), priced per deployment at ledger.yaml's reference prices with the one
formula the price ledger and the gateway's budgets share (`llm_fabric.token_prices`). The gateway
enforces its own live counts (docs/gateway.md); these figures lag them by what is not yet ingested.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from pathlib import Path

from prometheus_client.core import GaugeMetricFamily

from llm_fabric import names as N
from llm_fabric.ledger.store.period import Month
from llm_fabric.ledger.store.usage import RecordUsage
from llm_fabric.site.loader import SiteRepo
from llm_fabric.token_prices import price_at


@dataclass(frozen=True)
class TenantMonth:
    tenant: str
    month: str
    requests: int
    tokens: int  # input + output, as tokens_per_month counts them
    price: Decimal  # at the reference prices; deployments without one count nothing
    currency: str
    tokens_budget: int | None
    price_budget: Decimal | None

    def describe(self) -> str:
        tokens = f"{self.tokens:,} tokens" + (f" of {self.tokens_budget:,}" if self.tokens_budget else "")
        price = f"{self.price:.2f} {self.currency}" + (f" of {self.price_budget:.2f}" if self.price_budget else "")
        return f"{self.month}: {self.requests:,} requests, {tokens}, {price}"


def tenant_months(site: SiteRepo, usage: RecordUsage | None, month: Month) -> dict[str, TenantMonth]:
    """Every tenant of the site repo, with what the records of `month` say it used (nothing: zeros)."""
    prices = site.ledger.reference_prices if site.ledger is not None else {}
    currency = site.ledger.currency if site.ledger is not None else "USD"
    spent: dict[str, tuple[int, int, Decimal]] = {}
    for (model, tenant), tokens in (usage.by_model_tenant if usage else {}).items():
        requests, total, price = spent.get(tenant, (0, 0, Decimal(0)))
        rates = prices.get(model)
        if rates is not None:
            price += price_at(rates, tokens.input, tokens.cached_input, tokens.output)
        spent[tenant] = (requests + tokens.requests, total + tokens.total, price)
    nothing = (0, 0, Decimal(0))
    return {
        name: TenantMonth(
            name,
            str(month),
            *spent.get(name, nothing),
            currency=currency,
            tokens_budget=tenant.limits.tokens_per_month,
            price_budget=tenant.limits.price_per_month,
        )
        for name, tenant in sorted(site.tenants.items())
    }


def month_to_date(site: SiteRepo, site_root: Path, now: datetime, store: Path | None = None) -> dict[str, TenantMonth]:
    """The month of `now` from the site's ledger store; empty when there is no store yet (nothing ingested)."""
    from llm_fabric.ledger.store.database import LedgerStore, site_store  # DuckDB: only where a store is read
    from llm_fabric.ledger.store.usage import from_rollups

    if site.ledger is None and store is None:
        return {}
    path = site_store(site_root, store)
    if not path.is_file():
        return {}
    month = Month(now.year, now.month)
    with LedgerStore(path, read_only=True, memory_limit="1GB") as opened:
        return tenant_months(site, from_rollups(opened.con, month), month)


def tenant_month_metrics(months: Iterable[TenantMonth]) -> Iterator[GaugeMetricFamily]:
    """`fabric exporter`'s gauges of each tenant's month so far and its budgets."""
    tokens = GaugeMetricFamily(
        N.TENANT_MONTH_TOKENS_METRIC, "Input + output tokens of each tenant this month so far.", labels=["tenant"]
    )
    price = GaugeMetricFamily(
        N.TENANT_MONTH_PRICE_METRIC,
        "Each tenant's tokens this month so far at the reference prices, in the ledger currency.",
        labels=["tenant", "currency"],
    )
    tokens_budget = GaugeMetricFamily(
        N.TENANT_BUDGET_TOKENS_METRIC, "Each tenant's tokens_per_month (tenants that have one).", labels=["tenant"]
    )
    price_budget = GaugeMetricFamily(
        N.TENANT_BUDGET_PRICE_METRIC,
        "Each tenant's price_per_month in the ledger currency (tenants that have one).",
        labels=["tenant", "currency"],
    )
    for month in months:
        tokens.add_metric([month.tenant], month.tokens)
        price.add_metric([month.tenant, month.currency], float(month.price))
        if month.tokens_budget is not None:
            tokens_budget.add_metric([month.tenant], month.tokens_budget)
        if month.price_budget is not None:
            price_budget.add_metric([month.tenant, month.currency], float(month.price_budget))
    yield from (tokens, price, tokens_budget, price_budget)
