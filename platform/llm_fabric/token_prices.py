"""What tokens cost at prices per million: the one formula the price ledger and the gateway's budgets share.

Foundation (no feature imports): the gateway's hooks run in LiteLLM's venv and may import only this
layer, and the ledger's books (`ledger.report.books.price_tokens`) price with the same function, so a
tenant's price budget is spent exactly as the month's price ledger books it.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Protocol

MILLION = Decimal(1_000_000)


class Rates(Protocol):
    """Prices per million tokens: the site repo's `TokenPrices`, the hook settings' `TokenRates`."""

    @property
    def input(self) -> Decimal: ...

    @property
    def cached_input(self) -> Decimal | None: ...

    @property
    def output(self) -> Decimal: ...


def price_of(
    input_tokens: int,
    cached_input_tokens: int,
    output_tokens: int,
    *,
    input_rate: Decimal,
    cached_input_rate: Decimal | None,
    output_rate: Decimal,
) -> Decimal:
    """Uncached input at `input_rate`, cached input at its own rate (default: the input rate), output at its
    rate; rates per million tokens."""
    cached_rate = cached_input_rate if cached_input_rate is not None else input_rate
    uncached = Decimal(input_tokens - cached_input_tokens) * input_rate
    return (uncached + Decimal(cached_input_tokens) * cached_rate + Decimal(output_tokens) * output_rate) / MILLION


def price_at(rates: Rates, input_tokens: int, cached_input_tokens: int, output_tokens: int) -> Decimal:
    """`price_of` at `rates`."""
    return price_of(
        input_tokens,
        cached_input_tokens,
        output_tokens,
        input_rate=rates.input,
        cached_input_rate=rates.cached_input,
        output_rate=rates.output,
    )
