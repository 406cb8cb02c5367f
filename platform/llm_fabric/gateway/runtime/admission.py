"""Admission: a tenant's per-minute limits and a deployment's capacity with the owner's reserved share.

Every refusal says when to come back (`retry_after_s`): the client gets 429 with Retry-After, not a
place in vLLM's queue (seed 000: users waited up to 20 minutes there). Pool tenants are refused
while the free slots are the owner's reserve, so the owner never waits behind them; vLLM's
priority scheduler alone would not do it, as it does not preempt a full batch (vllm#40004).

State lives in the proxy process: with several proxy replicas each enforces its own share.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

from llm_fabric.gateway.runtime.settings import DeploymentAccess, TenantAccess

WINDOW_S = 60.0


@dataclass(frozen=True)
class Refusal:
    reason: str
    retry_after_s: float


@dataclass
class _Use:
    at: float
    input_tokens: int
    output_tokens: int


@dataclass
class _TenantState:
    window: deque[_Use] = field(default_factory=deque)
    in_flight: int = 0


@dataclass
class _DeploymentState:
    in_flight: int = 0
    owner_in_flight: int = 0


@dataclass(frozen=True)
class Ticket:
    tenant: str
    deployment: str
    owner: bool
    use: _Use


class Admission:
    def __init__(self, capacity_retry_s: float) -> None:
        self.capacity_retry_s = capacity_retry_s
        self._tenants: dict[str, _TenantState] = {}
        self._deployments: dict[str, _DeploymentState] = {}

    def _expire(self, state: _TenantState, now: float) -> None:
        while state.window and state.window[0].at <= now - WINDOW_S:
            state.window.popleft()

    def _window_retry(self, state: _TenantState, now: float, enough: int, measure: str) -> float:
        """Seconds until the window has dropped enough of `measure` (requests or tokens) to admit again."""
        dropped = 0
        for use in state.window:
            dropped += 1 if measure == "requests" else getattr(use, measure)
            if dropped >= enough:
                return max(use.at + WINDOW_S - now, 0.001)
        return WINDOW_S

    def admit(
        self,
        tenant: str,
        access: TenantAccess,
        deployment: str,
        dep: DeploymentAccess,
        *,
        input_tokens: int,
        now: float,
    ) -> Ticket | Refusal:
        state = self._tenants.setdefault(tenant, _TenantState())
        self._expire(state, now)
        if access.max_concurrent_requests is not None and state.in_flight >= access.max_concurrent_requests:
            return Refusal(
                f"tenant `{tenant}` has {state.in_flight} requests in flight, its limit", self.capacity_retry_s
            )
        if access.requests_per_minute is not None and len(state.window) >= access.requests_per_minute:
            over = len(state.window) - access.requests_per_minute + 1
            return Refusal(
                f"tenant `{tenant}` sent {len(state.window)} requests in the last minute, its limit",
                self._window_retry(state, now, over, "requests"),
            )
        if access.input_tokens_per_minute is not None:
            used = sum(u.input_tokens for u in state.window)
            if used + input_tokens > access.input_tokens_per_minute:
                need = used + input_tokens - access.input_tokens_per_minute
                return Refusal(
                    f"tenant `{tenant}` sent {used} input tokens in the last minute "
                    f"(limit {access.input_tokens_per_minute})",
                    self._window_retry(state, now, need, "input_tokens"),
                )
        if access.output_tokens_per_minute is not None:
            used = sum(u.output_tokens for u in state.window)
            if used >= access.output_tokens_per_minute:
                need = used - access.output_tokens_per_minute + 1
                return Refusal(
                    f"tenant `{tenant}` received {used} output tokens in the last minute "
                    f"(limit {access.output_tokens_per_minute})",
                    self._window_retry(state, now, need, "output_tokens"),
                )
        dstate = self._deployments.setdefault(deployment, _DeploymentState())
        owner = dep.owner == tenant
        # the owner's unused reserve is held back from everyone else
        held = 0 if owner else max(dep.owner_reserved - dstate.owner_in_flight, 0)
        if dstate.in_flight + held >= dep.capacity:
            return Refusal(
                f"deployment `{deployment}` is full ({dstate.in_flight} of {dep.capacity} requests"
                + (f", {held} held for its owner" if held else "")
                + ")",
                self.capacity_retry_s,
            )
        use = _Use(now, input_tokens, 0)
        state.window.append(use)
        state.in_flight += 1
        dstate.in_flight += 1
        dstate.owner_in_flight += owner
        return Ticket(tenant, deployment, owner, use)

    def release(self, ticket: Ticket, *, input_tokens: int | None, output_tokens: int) -> None:
        """The request is over: free its slots and count the tokens it really used."""
        if input_tokens is not None:
            ticket.use.input_tokens = input_tokens
        ticket.use.output_tokens = output_tokens
        state = self._tenants[ticket.tenant]
        state.in_flight -= 1
        dstate = self._deployments[ticket.deployment]
        dstate.in_flight -= 1
        dstate.owner_in_flight -= ticket.owner


def retry_headers(seconds: float) -> dict[str, str]:
    """Retry-After in whole seconds (HTTP) and retry-after-ms (which the OpenAI SDKs honour first)."""
    return {"Retry-After": str(max(math.ceil(seconds), 1)), "retry-after-ms": str(max(math.ceil(seconds * 1000), 1))}
