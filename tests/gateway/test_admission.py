"""Admission arithmetic: per-minute windows, Retry-After from the window, the owner's reserve."""

from __future__ import annotations

from llm_fabric.gateway.runtime.admission import Admission, Refusal, Ticket, retry_headers
from llm_fabric.gateway.runtime.settings import DeploymentAccess, TenantAccess


def _tenant(**limits: int) -> TenantAccess:
    return TenantAccess(key_sha256=[], data_classes=["public"], **limits)


def test_requests_per_minute_and_when_to_come_back() -> None:
    gate = Admission(capacity_retry_s=5)
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
    gate = Admission(capacity_retry_s=5)
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
    gate = Admission(capacity_retry_s=3)
    dep = DeploymentAccess(capacity=4, owner="owner", owner_reserved=2)
    pool = [gate.admit(f"p{i}", _tenant(), "d", dep, input_tokens=1, now=0.0) for i in range(3)]
    assert [isinstance(t, Ticket) for t in pool] == [True, True, False]
    refusal = pool[2]
    assert isinstance(refusal, Refusal) and refusal.retry_after_s == 3 and "held for its owner" in refusal.reason
    owner = [gate.admit("owner", _tenant(), "d", dep, input_tokens=1, now=0.0) for _ in range(3)]
    assert [isinstance(t, Ticket) for t in owner] == [True, True, False]  # the deployment is full now


def test_concurrency_limit_and_release() -> None:
    gate = Admission(capacity_retry_s=2)
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
