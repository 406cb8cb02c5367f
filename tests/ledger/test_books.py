"""The books' arithmetic from ledger.yaml inputs (seed 000) and token counts chosen by hand."""

from __future__ import annotations

from datetime import date
from decimal import Decimal
from pathlib import Path

from llm_fabric.ledger.report.books import cents, draw_up, hardware_share, price_tokens
from llm_fabric.ledger.store.period import Month
from llm_fabric.ledger.store.usage import Tokens
from llm_fabric.site.loader import load_site
from llm_fabric.site.models import CommercialReference, HardwareCost, LedgerConfig, TokenPrices

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "cerit-sc"


def _config(**kw: object) -> LedgerConfig:
    base: dict[str, object] = {
        "reference_prices": {
            "kimi-k2-6": TokenPrices(input=Decimal("0.60"), cached_input=Decimal("0.15"), output=Decimal("2.50"))
        },
        "hardware": [
            HardwareCost(node="a", capex=Decimal(500000), in_service=date(2025, 9, 1)),
            HardwareCost(node="b", capex=Decimal(500000), in_service=date(2026, 1, 15)),
        ],
        "commercial_reference": CommercialReference(
            name="sonnet", prices=TokenPrices(input=Decimal(3), cached_input=Decimal("0.30"), output=Decimal(15))
        ),
    }
    base.update(kw)
    return LedgerConfig.model_validate(base)


def test_seed_000_operations_ledger_is_33333_a_month() -> None:
    books = draw_up(_config(), Month.parse("2026-11"), {})
    assert cents(books.operations_ledger) == Decimal("33333.33")
    # the example site repo carries the same figures
    site = load_site(EXAMPLE)
    assert site.ledger is not None
    assert cents(draw_up(site.ledger, Month.parse("2026-11"), {}).operations_ledger) == Decimal("33333.33")


def test_recovery_is_price_over_operations() -> None:
    # 10 G uncached input, 2 G cached, 1 G output at 0.60 / 0.15 / 2.50 per million
    tokens = Tokens(requests=1, input=12_000_000_000, cached_input=2_000_000_000, output=1_000_000_000)
    books = draw_up(_config(), Month.parse("2026-11"), {"kimi-k2-6": tokens})
    assert books.price_ledger == Decimal(6000 + 300 + 2500)
    assert books.recovery is not None and round(books.recovery, 6) == Decimal("0.264000")  # 8,800 / 33,333.33
    assert cents(books.subsidy) == Decimal("24533.33")
    # commercial: 10 G x 3 + 2 G x 0.30 + 1 G x 15 with cache pricing; 12 G x 3 + 15 000 without
    assert books.institutional_with_cache == Decimal(30000 + 600 + 15000)
    assert books.institutional_without_cache == Decimal(36000 + 15000)
    assert cents(books.savings) == Decimal(45600) - Decimal("33333.33")


def test_unpriced_model_is_listed_not_guessed() -> None:
    books = draw_up(_config(), Month.parse("2026-11"), {"mystery": Tokens(input=1_000_000, output=1)})
    assert books.unpriced == ["mystery"] and books.price_ledger == 0


def test_hardware_is_pro_rata_by_day_and_stops_after_amortisation() -> None:
    config = _config(amortisation_months=12)
    mid = HardwareCost(node="m", capex=Decimal(360000), in_service=date(2026, 11, 16))  # 15 of 30 days
    share = hardware_share(mid, config, Month.parse("2026-11"))
    assert share.days_in_service == 15 and share.monthly == Decimal(360000) * Decimal("1.2") / 12 / 2
    old = HardwareCost(node="o", capex=Decimal(360000), in_service=date(2025, 11, 1))  # fully written off
    assert hardware_share(old, config, Month.parse("2026-11")).monthly == 0


def test_cached_input_defaults_to_input_price() -> None:
    prices = TokenPrices(input=Decimal(1), output=Decimal(2))
    assert price_tokens(Tokens(input=3_000_000, cached_input=1_000_000, output=1_000_000), prices) == Decimal(5)
