"""Admission arithmetic on the process's own counters: per-minute windows, Retry-After from the window, the
owner's reserve. The same rules over Redis, across two real proxies, are in test_shared_counters.py."""

from __future__ import annotations

import itertools
from typing import Any

from tests.fixtures.own_loop import run

from llm_fabric.gateway.runtime.admission import Admission, Refusal, Ticket, Usage, retry_headers
from llm_fabric.gateway.runtime.settings import DeploymentAccess, TenantAccess

_ids = itertools.count()


def _tenant(**limits: int) -> TenantAccess:
    return TenantAccess(key_sha256=[], data_classes=["public"], **limits)


class _Gate:
    """Admission driven synchronously, one call id per request."""

    def __init__(self, capacity_retry_s: float) -> None:
        self.admission = Admission(capacity_retry_s)

    def admit(self, *args: Any, **kwargs: Any) -> Ticket | Refusal:
        return run(self.admission.admit(*args, **kwargs, call_id=f"c{next(_ids)}"))

    def release(self, ticket: Ticket, *, input_tokens: int | None, output_tokens: int) -> None:
        used = Usage(input_tokens, 0, output_tokens) if input_tokens is not None else None
        run(self.admission.release(ticket, used))


def test_requests_per_minute_and_when_to_come_back() -> None:
    gate = _Gate(capacity_retry_s=5)
    dep = DeploymentAccess(capacity=100)
    access = _tenant(requests_per_minute=2)
    for t in (0.0, 10.0):
        ticket = gate.admit("a", access, "d", dep, input_tokens=1, now=t)
        assert isinstance(ticket, Ticket)
        gate.release(ticket, input_tokens=1, output_tokens=1)
    refused = gate.admit("a", access, "d", dep, input_tokens=1, now=20.0)
    assert isinstance(refused, Refusal)
    assert refused.retry_after_s == 40.0  # the request at t=0 leaves the window at t=60
    assert isinstance(gate.admit("a", access, "d", dep, input_tokens=1, now=60.5), Ticket)


def test_input_and_output_tokens_per_minute() -> None:
    gate = _Gate(capacity_retry_s=5)
    dep = DeploymentAccess(capacity=100)
    access = _tenant(input_tokens_per_minute=1000, output_tokens_per_minute=500)
    first = gate.admit("a", access, "d", dep, input_tokens=600, now=0.0)
    assert isinstance(first, Ticket)
    assert isinstance(gate.admit("a", access, "d", dep, input_tokens=600, now=1.0), Refusal)  # 1200 > 1000
    gate.release(first, input_tokens=300, output_tokens=500)  # the engine's counts replace the estimate
    second = gate.admit("a", access, "d", dep, input_tokens=600, now=2.0)
    assert isinstance(second, Refusal)  # 300 + 600 fits, but 500 output tokens used the whole output budget
    assert "output tokens" in second.reason and second.retry_after_s == 58.0


def test_the_owners_reserve_refuses_the_pool_first() -> None:
    gate = _Gate(capacity_retry_s=3)
    dep = DeploymentAccess(capacity=4, owner="owner", owner_reserved=2)
    pool = [gate.admit(f"p{i}", _tenant(), "d", dep, input_tokens=1, now=0.0) for i in range(3)]
    assert [isinstance(t, Ticket) for t in pool] == [True, True, False]
    refusal = pool[2]
    assert isinstance(refusal, Refusal) and refusal.retry_after_s == 3 and "held for its owner" in refusal.reason
    owner = [gate.admit("owner", _tenant(), "d", dep, input_tokens=1, now=0.0) for _ in range(3)]
    assert [isinstance(t, Ticket) for t in owner] == [True, True, False]  # the deployment is full now


def test_concurrency_limit_and_release() -> None:
    gate = _Gate(capacity_retry_s=2)
    dep = DeploymentAccess(capacity=10)
    access = _tenant(max_concurrent_requests=1)
    ticket = gate.admit("a", access, "d", dep, input_tokens=1, now=0.0)
    assert isinstance(ticket, Ticket)
    assert isinstance(gate.admit("a", access, "d", dep, input_tokens=1, now=0.1), Refusal)
    gate.release(ticket, input_tokens=None, output_tokens=0)
    assert isinstance(gate.admit("a", access, "d", dep, input_tokens=1, now=0.2), Ticket)


def test_retry_headers_in_seconds_and_milliseconds() -> None:
    assert retry_headers(0.2) == {"Retry-After": "1", "retry-after-ms": "200"}
    assert retry_headers(40.0) == {"Retry-After": "40", "retry-after-ms": "40000"}


def test_a_spent_token_budget_refuses_until_the_month_rolls_over() -> None:
    gate = _Gate(capacity_retry_s=2)
    dep = DeploymentAccess(capacity=10)
    access = _tenant(tokens_per_month=100)
    end_of_november = 1_796_083_200.0 - 30  # 2026-11-30T23:59:30Z
    ticket = gate.admit("a", access, "d", dep, input_tokens=1, now=end_of_november)
    assert isinstance(ticket, Ticket)
    gate.release(ticket, input_tokens=70, output_tokens=30)  # the engine's counts: 100, the whole budget
    refused = gate.admit("a", access, "d", dep, input_tokens=1, now=end_of_november + 1)
    assert isinstance(refused, Refusal) and refused.kind == "budget" and refused.status == 429
    assert "spent its monthly budget (100 of its 100 tokens in 2026-11)" in refused.reason
    assert "this is the budget, not a rate limit" in refused.reason and "2026-12-01T00:00:00Z" in refused.reason
    assert refused.retry_after_s == 29.0  # until midnight UTC
    assert isinstance(gate.admit("a", access, "d", dep, input_tokens=1, now=end_of_november + 31), Ticket)


def test_a_price_budget_is_spent_at_the_price_ledgers_prices() -> None:
    from decimal import Decimal

    from llm_fabric.gateway.runtime.settings import TokenRates
    from llm_fabric.ledger.report.books import price_tokens
    from llm_fabric.ledger.store.usage import Tokens
    from llm_fabric.site.models import TokenPrices

    rates = TokenRates(input=Decimal("0.26"), cached_input=Decimal("0.052"), output=Decimal("1.56"))
    gate = _Gate(capacity_retry_s=2)
    dep = DeploymentAccess(capacity=10)
    access = _tenant().model_copy(update={"price_per_month": Decimal("1.00")})
    now = 1_796_083_200.0 + 3600
    ticket = gate.admit("a", access, "d", dep, input_tokens=1, now=now)
    assert isinstance(ticket, Ticket)
    used = Usage(input_tokens=3_000_000, cached_input_tokens=1_000_000, output_tokens=200_000)
    run(gate.admission.release(ticket, used, rates))
    # what the ledger books for the same tokens: 2,000,000 x 0.26 + 1,000,000 x 0.052 + 200,000 x 1.56, per million
    tokens = Tokens(input=3_000_000, cached_input=1_000_000, output=200_000)
    booked = price_tokens(tokens, TokenPrices(**rates.model_dump()))
    assert booked == Decimal("0.884")
    second = gate.admit("a", access, "d", dep, input_tokens=1, now=now + 1)
    assert isinstance(second, Ticket)  # 0.884 of 1.00 spent
    run(gate.admission.release(second, used, rates))
    refused = gate.admit("a", access, "d", dep, input_tokens=1, now=now + 2)
    assert isinstance(refused, Refusal) and refused.kind == "budget"
    assert "spent its monthly budget (1.77 of its 1.00 USD in 2026-12)" in refused.reason


def test_a_site_share_of_a_budget_is_named_with_the_whole_budget() -> None:
    # issue 41 point 10: "(21 of its 15 tokens)" where the tenant set 30 and this site's share is 15
    gate = _Gate(capacity_retry_s=2)
    dep = DeploymentAccess(capacity=10)
    access = _tenant(tokens_per_month=15, whole_tokens_per_month=30)
    ticket = gate.admit("a", access, "d", dep, input_tokens=1, now=1_796_083_200.0 - 60)
    assert isinstance(ticket, Ticket)
    gate.release(ticket, input_tokens=20, output_tokens=1)
    refused = gate.admit("a", access, "d", dep, input_tokens=1, now=1_796_083_200.0 - 59)
    assert isinstance(refused, Refusal) and refused.kind == "budget"
    assert (
        "spent its monthly budget (21 of the 15 tokens that are this site's share of its budget of 30 in 2026-11)"
    ) in refused.reason
