"""The books: price, operations, institutional and contributor ledgers, and the reconciliation.

Money is Decimal throughout and rounded to cents only when shown; tokens are integers.
Seed 000's arithmetic is the reference: two DGX at $500,000, +20 % overhead, over 36 months is
$33,333.33 a month; recovery is the price ledger divided by the operations ledger.
"""

from __future__ import annotations

import calendar
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import ROUND_HALF_EVEN, Decimal

from llm_fabric.ledger.store.period import Month
from llm_fabric.ledger.store.usage import Tokens
from llm_fabric.site.loader import SiteRepo
from llm_fabric.site.models import HardwareCost, LedgerConfig, TokenPrices
from llm_fabric.token_prices import price_at

CENT = Decimal("0.01")


def cents(value: Decimal) -> Decimal:
    return value.quantize(CENT, rounding=ROUND_HALF_EVEN)


def price_tokens(tokens: Tokens, prices: TokenPrices, *, cache_pricing: bool = True) -> Decimal:
    """What `tokens` cost at `prices` (per million); cached input at its own rate when `cache_pricing`."""
    cached = tokens.cached_input if cache_pricing else 0
    return price_at(prices, tokens.input, cached, tokens.output)


@dataclass
class HardwareShare:
    node: str
    capex: Decimal
    days_in_service: int
    monthly: Decimal


def _months_after(start: date, months: int) -> date:
    total = start.month - 1 + months
    year, month = start.year + total // 12, total % 12 + 1
    return date(year, month, min(start.day, calendar.monthrange(year, month)[1]))


def hardware_share(
    hw: HardwareCost, config: LedgerConfig, month: Month, until: datetime | None = None
) -> HardwareShare:
    """The month's share of one machine: capex x (1 + overhead) / amortisation months, pro rata by day.

    With `until` inside the month (a month in progress) only the days begun by then count.
    """
    end_of_life = _months_after(hw.in_service, config.amortisation_months)
    elapsed = month.days if until is None else month.days_until(until)
    days = [d for d in elapsed if hw.in_service <= d < end_of_life]
    full = hw.capex * (1 + config.overhead_pct / Decimal(100)) / Decimal(config.amortisation_months)
    return HardwareShare(hw.node, hw.capex, len(days), full * Decimal(len(days)) / Decimal(len(month.days)))


@dataclass
class PriceLine:
    deployment: str
    tokens: Tokens
    reference: Decimal | None
    commercial_with_cache: Decimal
    commercial_without_cache: Decimal


@dataclass
class Books:
    currency: str
    lines: list[PriceLine]
    hardware: list[HardwareShare]
    unpriced: list[str] = field(default_factory=list)

    @property
    def price_ledger(self) -> Decimal:
        return sum((line.reference or Decimal(0) for line in self.lines), Decimal(0))

    @property
    def operations_ledger(self) -> Decimal:
        return sum((h.monthly for h in self.hardware), Decimal(0))

    @property
    def institutional_with_cache(self) -> Decimal:
        return sum((line.commercial_with_cache for line in self.lines), Decimal(0))

    @property
    def institutional_without_cache(self) -> Decimal:
        return sum((line.commercial_without_cache for line in self.lines), Decimal(0))

    @property
    def recovery(self) -> Decimal | None:
        ops = self.operations_ledger
        return self.price_ledger / ops if ops else None

    @property
    def subsidy(self) -> Decimal:
        """What the federation absorbs: operations cost not recovered at reference prices."""
        return self.operations_ledger - self.price_ledger

    @property
    def savings(self) -> Decimal:
        """What the institution saves against the commercial reference (with cache-read pricing)."""
        return self.institutional_with_cache - self.operations_ledger

    def summary(self) -> dict[str, object]:
        recovery = self.recovery
        return {
            "currency": self.currency,
            "price_ledger": float(cents(self.price_ledger)),
            "operations_ledger": float(cents(self.operations_ledger)),
            "recovery": round(float(recovery), 4) if recovery is not None else None,
            "subsidy": float(cents(self.subsidy)),
            "institutional_with_cache": float(cents(self.institutional_with_cache)),
            "institutional_without_cache": float(cents(self.institutional_without_cache)),
            "savings": float(cents(self.savings)),
            "unpriced_models": list(self.unpriced),
        }


def draw_up(config: LedgerConfig, month: Month, usage: Mapping[str, Tokens], until: datetime | None = None) -> Books:
    """The month's books from per-deployment token counts and ledger.yaml (prices applied now).

    `until`: the report's time; in a month in progress operations are prorated to the days begun by then.
    """
    commercial = config.commercial_reference.prices
    lines: list[PriceLine] = []
    unpriced: list[str] = []
    for name in sorted(usage):
        tokens = usage[name]
        prices = config.reference_prices.get(name)
        if prices is None:
            unpriced.append(name)
        lines.append(
            PriceLine(
                deployment=name,
                tokens=tokens,
                reference=price_tokens(tokens, prices) if prices is not None else None,
                commercial_with_cache=price_tokens(tokens, commercial),
                commercial_without_cache=price_tokens(tokens, commercial, cache_pricing=False),
            )
        )
    hardware = [hardware_share(hw, config, month, until) for hw in sorted(config.hardware, key=lambda h: h.node)]
    return Books(config.currency, lines, hardware, unpriced)


@dataclass
class ContributorLine:
    owner: str
    contributed_gpus: int
    dedicated_gpus: int
    pooled_gpus: int
    lend_surplus: bool
    dedicated_deployments: list[str]
    dedicated_usage: Tokens
    lent_usage: dict[str, Tokens]
    pool_usage: Tokens
    served_on_hardware: Tokens | None
    dedicated_value: Decimal
    lent_value: Decimal


def contributor_ledger(
    site: SiteRepo,
    config: LedgerConfig,
    by_model_tenant: Mapping[tuple[str, str], Tokens],
    served_by_owner: Mapping[str, Tokens] | None,
) -> list[ContributorLine]:
    """Per contributing group: its dedicated usage, the dedicated capacity others used, its pool usage."""
    out: list[ContributorLine] = []
    for owner in sorted(t for t, tenant in site.tenants.items() if tenant.contributor):
        tenant = site.tenants[owner]
        mine = sorted(d for d, dep in site.deployments.items() if dep.dedicated_for == owner)
        dedicated, pool = Tokens(), Tokens()
        lent: dict[str, Tokens] = {}
        dedicated_value = lent_value = Decimal(0)
        for (model, user), tokens in sorted(by_model_tenant.items()):
            prices = config.reference_prices.get(model)
            value = price_tokens(tokens, prices) if prices is not None else Decimal(0)
            if model in mine and user == owner:
                dedicated.add(tokens)
                dedicated_value += value
            elif model in mine:
                lent.setdefault(user, Tokens()).add(tokens)
                lent_value += value
            elif user == owner:
                pool.add(tokens)
        contributed = site.contributed_gpus(owner)
        dedicated_gpus = tenant.dedicated.gpus if tenant.dedicated else 0
        out.append(
            ContributorLine(
                owner=owner,
                contributed_gpus=contributed,
                dedicated_gpus=dedicated_gpus,
                pooled_gpus=contributed - dedicated_gpus,
                lend_surplus=tenant.dedicated.lend_surplus if tenant.dedicated else True,
                dedicated_deployments=mine,
                dedicated_usage=dedicated,
                lent_usage=lent,
                pool_usage=pool,
                served_on_hardware=(served_by_owner or {}).get(owner) if served_by_owner is not None else None,
                dedicated_value=dedicated_value,
                lent_value=lent_value,
            )
        )
    return out
