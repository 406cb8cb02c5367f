"""Admission: a tenant's per-minute limits and monthly budget, a deployment's capacity with the owner's share.

Every refusal says when to come back (`retry_after_s`): the client gets 429 with Retry-After, not a
place in vLLM's queue (seed 000: users waited up to 20 minutes there). Pool tenants are refused
while the free slots are the owner's reserve, so the owner never waits behind them; vLLM's
priority scheduler alone would not do it, as it does not preempt a full batch (vllm#40004).

The counts live in a store (`counters.py`): Redis shared by the gateway's pods, or the process's own.
A monthly budget (tokens, and a price at the price ledger's reference prices) is spent by what the
meter records of each answered request; once spent, the tenant is refused with a `budget` refusal
until the UTC month rolls over (Retry-After: the seconds until then). A budgeted tenant's request
reserves what it may spend at most (its prompt's estimate plus its `max_tokens`, or the settings'
`reserve_tokens` when it names none) against the month as it arrives, in the same count-first step as
every limit, and settles to what it really used when it ends (answered, failed or cut: `release`).
A request is admitted while the month, reservations in flight included, is below the budget: a burst
of parallel requests overshoots by at most the last admitted request's reservation (issue 39, F9).

When a deployment is saturated its slots are shared fairly: each tenant holds a fair share of the
capacity, in proportion to its allocation (`DeploymentAccess.fair_shares`: the owner's dedicated share,
the rest split among the others), among the tenants active there (requests in flight, or one sent within
2 x Retry-After + 1 s: `asking`); an idle tenant's share is lent to the active ones. A tenant over its
share takes a free slot only while the free slots are more than what the asking tenants below theirs
still miss, so a flood fills what nobody else asks for and no more.
Counted first, checked after, like every limit: it holds across pods through the same store.

When the shared store does not answer, a restricted tenant (`fail_closed`) is refused (503: no limit
or budget could be checked), and so is a budgeted tenant whose month this pod has not seen in the store
(a pod started while the store is down would count the month from 0); any other tenant is admitted on
the pod's own counters, its budget checked against the month-to-date the store last showed plus what
this pod counted since.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Literal

from llm_fabric.gateway.runtime.counters import (
    WINDOW_S,
    Arrival,
    Counters,
    Departure,
    MemoryCounters,
    Seen,
    StoreDown,
)
from llm_fabric.gateway.runtime.settings import DeploymentAccess, TenantAccess, TokenRates
from llm_fabric.token_prices import price_at

NANO = Decimal(10) ** 9

RefusalKind = Literal["rate", "capacity", "budget", "store"]


@dataclass(frozen=True)
class Refusal:
    reason: str
    retry_after_s: float
    kind: RefusalKind = "rate"

    @property
    def status(self) -> int:
        return 503 if self.kind == "store" else 429


@dataclass
class Ticket:
    tenant: str
    deployment: str
    owner: bool
    arrival: Arrival
    store: Counters
    input_tokens: int
    budgeted: bool = False  # its reservation is held against the month; `release` settles it


@dataclass(frozen=True)
class Usage:
    """What the meter records of an answered request: the engine's counts."""

    input_tokens: int
    cached_input_tokens: int
    output_tokens: int


def month_of(now: float) -> tuple[str, float]:
    """The UTC month of `now` (YYYY-MM) and the epoch second the next one begins."""
    at = datetime.fromtimestamp(now, UTC)
    following = datetime(at.year + at.month // 12, at.month % 12 + 1, 1, tzinfo=UTC)
    return f"{at.year:04d}-{at.month:02d}", following.timestamp()


def nano_price(usage: Usage, rates: TokenRates | None) -> int:
    """The request's price in 10^-9 of the currency, as the price ledger prices it; 0 for an unpriced deployment."""
    if rates is None:
        return 0
    price = price_at(rates, usage.input_tokens, usage.cached_input_tokens, usage.output_tokens)
    return int((price * NANO).to_integral_value(rounding=ROUND_HALF_EVEN))


@dataclass
class Admission:
    capacity_retry_s: float
    store: Counters = field(default_factory=MemoryCounters)
    stale_after_s: float = 3600.0
    currency: str = "USD"
    # the pod's own counters while the shared store is down, and the month-to-date the store last showed
    local: MemoryCounters = field(default_factory=MemoryCounters)
    _last_month: dict[str, tuple[int, int]] = field(default_factory=dict)

    def _arrival(
        self,
        call_id: str,
        tenant: str,
        deployment: str,
        owner: bool,
        tokens: int,
        now: float,
        fair_shares: dict[str, float],
        reserve: tuple[int, int] = (0, 0),
    ) -> Arrival:
        month, _ = month_of(now)
        joins = [f"tenant:{tenant}:in-flight", f"deployment:{deployment}:in-flight"]
        if owner:
            joins.append(f"deployment:{deployment}:owner")
        peeks = [] if owner else [f"deployment:{deployment}:owner"]
        marks: tuple[tuple[str, float], ...] = ()
        if fair_shares:
            joins.append(_held_by(deployment, tenant))
            # asking for its share a while after each arrival: a client refused comes back after Retry-After
            marks = ((_asking(deployment, tenant), now + 2 * self.capacity_retry_s + 1),)
            for other in sorted(set(fair_shares) - {tenant}):
                peeks += [_held_by(deployment, other), _asking(deployment, other)]
        return Arrival(
            call_id=call_id,
            joins=tuple(joins),
            peeks=tuple(peeks),
            stale_at=now + self.stale_after_s,
            minute=f"tenant:{tenant}:minute",
            second=math.floor(now),
            input_tokens=tokens,
            month=f"tenant:{tenant}:month:{month}",
            marks=marks,
            reserve_tokens=reserve[0],
            reserve_nano=reserve[1],
        )

    async def admit(
        self,
        tenant: str,
        access: TenantAccess,
        deployment: str,
        dep: DeploymentAccess,
        *,
        input_tokens: int,
        now: float,
        call_id: str,
        output_tokens: int = 0,
        rates: TokenRates | None = None,
    ) -> Ticket | Refusal:
        """`output_tokens`: the most the request may generate (its `max_tokens`), reserved with its input
        against a budgeted tenant's month until `release` settles it."""
        owner = dep.owner == tenant
        budgeted = access.tokens_per_month is not None or access.price_per_month is not None
        reserve = (0, 0)
        if budgeted:
            most = Usage(input_tokens, 0, output_tokens)
            reserve = (input_tokens + output_tokens, nano_price(most, rates))
        arrival = self._arrival(call_id, tenant, deployment, owner, input_tokens, now, dep.fair_shares, reserve)
        store: Counters = self.store
        try:
            seen = await store.arrive(arrival, now)
            if store is not self.local:
                self._last_month[arrival.month] = (seen.month_tokens, seen.month_nano)
        except StoreDown as down:
            unknown = budgeted and arrival.month not in self._last_month
            if access.fail_closed or unknown:
                why = (
                    "a restricted tenant is refused until the store answers again"
                    if access.fail_closed
                    else "this gateway has not seen the tenant's month in the store, so its budget cannot be "
                    "checked: a budgeted tenant is refused until the store answers again"
                )
                return Refusal(
                    f"the gateway cannot check tenant `{tenant}`'s limits and budget: {down}; {why}",
                    self.capacity_retry_s,
                    "store",
                )
            store = self.local
            seen = await store.arrive(arrival, now)
            tokens, nano = self._last_month[arrival.month] if budgeted else (0, 0)
            seen.month_tokens += tokens
            seen.month_nano += nano
        refusal = self._judge(tenant, access, deployment, dep, arrival, seen, now)
        if refusal is not None:
            # if the store went down meanwhile, its entries leave the sets at `stale_at`
            with contextlib.suppress(StoreDown):
                await store.withdraw(arrival)
            return refusal
        return Ticket(tenant, deployment, owner, arrival, store, input_tokens, budgeted)

    def _judge(
        self,
        tenant: str,
        access: TenantAccess,
        deployment: str,
        dep: DeploymentAccess,
        a: Arrival,
        seen: Seen,
        now: float,
    ) -> Refusal | None:
        """The first limit the request passes, with the request counted in `seen`."""
        budget = self._budget(tenant, access, seen, a, now)
        if budget is not None:
            return budget
        in_flight = seen.in_flight[a.joins[0]]
        if access.max_concurrent_requests is not None and in_flight > access.max_concurrent_requests:
            return Refusal(
                f"tenant `{tenant}` has its limit of {access.max_concurrent_requests} requests in flight",
                self.capacity_retry_s,
            )
        window = sorted(seen.window.items())
        requests = sum(v[0] for _, v in window)
        if access.requests_per_minute is not None and requests > access.requests_per_minute:
            return Refusal(
                f"tenant `{tenant}` sent its limit of {access.requests_per_minute} requests in the last minute",
                self._window_retry(window, now, requests - access.requests_per_minute, 0),
            )
        if access.input_tokens_per_minute is not None:
            used = sum(v[1] for _, v in window)
            if used > access.input_tokens_per_minute:
                return Refusal(
                    f"tenant `{tenant}` sent {used - a.input_tokens} input tokens in the last minute "
                    f"(limit {access.input_tokens_per_minute})",
                    self._window_retry(window, now, used - access.input_tokens_per_minute, 1),
                )
        if access.output_tokens_per_minute is not None:
            used = sum(v[2] for _, v in window)
            if used >= access.output_tokens_per_minute:
                return Refusal(
                    f"tenant `{tenant}` received {used} output tokens in the last minute "
                    f"(limit {access.output_tokens_per_minute})",
                    self._window_retry(window, now, used - access.output_tokens_per_minute + 1, 2),
                )
        busy = seen.in_flight[f"deployment:{deployment}:in-flight"]
        # the owner's unused reserve is held back from everyone else
        owner_busy = seen.in_flight[f"deployment:{deployment}:owner"]
        held = 0 if dep.owner == tenant else max(dep.owner_reserved - owner_busy, 0)
        if busy + held > dep.capacity:
            return Refusal(
                f"deployment `{deployment}` is full ({dep.capacity} requests at once"
                + (f", {held} of them held for its owner" if held else "")
                + ")",
                self.capacity_retry_s,
                "capacity",
            )
        return self._fair_share(tenant, deployment, dep, seen, busy)

    def _fair_share(self, tenant: str, deployment: str, dep: DeploymentAccess, seen: Seen, busy: int) -> Refusal | None:
        """Refused when the tenant holds more than its fair share and the free slots are owed to asking tenants."""
        if not dep.fair_shares:
            return None
        held = {t: seen.in_flight.get(_held_by(deployment, t), 0) for t in dep.fair_shares}
        held[tenant] = seen.in_flight[_held_by(deployment, tenant)]
        asking = {t for t in dep.fair_shares if t != tenant and seen.in_flight.get(_asking(deployment, t), 0)}
        active = {tenant} | asking | {t for t, n in held.items() if n > 0}
        weight = sum(dep.fair_shares.get(t, 0.0) for t in active)

        def share(t: str) -> float:
            if weight <= 0:
                return dep.capacity / len(active)
            return dep.capacity * dep.fair_shares.get(t, 0.0) / weight

        mine = share(tenant)
        if held[tenant] <= mine:
            return None
        owed = sum(max(share(t) - held[t], 0.0) for t in asking)
        if dep.capacity - busy >= owed:
            return None
        return Refusal(
            f"deployment `{deployment}` is full: tenant `{tenant}` holds {held[tenant] - 1} of its fair share "
            f"{_slots(mine)} (of {dep.capacity} requests at once); the free slots are held for the tenants "
            "below their share",
            self.capacity_retry_s,
            "capacity",
        )

    def _budget(self, tenant: str, access: TenantAccess, seen: Seen, a: Arrival, now: float) -> Refusal | None:
        """Refused when the month before this request (spent, and reserved by the requests in flight) is
        at the budget: this request's own reservation may take it over by at most itself."""
        month, following = month_of(now)
        until = datetime.fromtimestamp(following, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        tokens, nano = seen.month_tokens - a.reserve_tokens, seen.month_nano - a.reserve_nano
        spent = None
        if access.tokens_per_month is not None and tokens >= access.tokens_per_month:
            spent = f"{tokens} of its {access.tokens_per_month} tokens"
            if access.whole_tokens_per_month not in (None, access.tokens_per_month):
                # a store per site: each site admits its share, and the tenant knows only its whole budget
                spent = (
                    f"{tokens} of the {access.tokens_per_month} tokens that are this site's share "
                    f"of its budget of {access.whole_tokens_per_month}"
                )
        elif access.price_per_month is not None and nano >= access.price_per_month * NANO:
            price = Decimal(nano) / NANO
            spent = f"{price:.2f} of its {access.price_per_month:.2f} {self.currency}"
            if access.whole_price_per_month not in (None, access.price_per_month):
                spent = (
                    f"{price:.2f} of the {access.price_per_month:.2f} {self.currency} that are this site's share "
                    f"of its budget of {access.whole_price_per_month:.2f}"
                )
        if spent is None:
            return None
        return Refusal(
            f"tenant `{tenant}` has spent its monthly budget ({spent} in {month}): this is the budget, not a "
            f"rate limit; do not retry before {until}, when the month rolls over",
            max(following - now, 1.0),
            "budget",
        )

    @staticmethod
    def _window_retry(window: list[tuple[int, list[int]]], now: float, enough: int, measure: int) -> float:
        """Seconds until the window has dropped enough of `measure` (requests, input, output) to admit again."""
        dropped = 0
        for second, values in window:
            dropped += values[measure]
            if dropped >= enough:
                return max(second + WINDOW_S - now, 0.001)
        return float(WINDOW_S)

    async def release(
        self, ticket: Ticket, usage: Usage | None, rates: TokenRates | None = None, *, count_month: bool = True
    ) -> None:
        """The request is over: free its slots and count what it really used (None: nothing answered).

        `count_month=False`: the request's use does not join the month (its reservation is still released).
        A budgeted request's reservation settles here: the month gets what it used minus what it held."""
        held = ticket.arrival.reserve_tokens, ticket.arrival.reserve_nano
        if usage is None:
            departure = Departure(0, 0, -held[0], -held[1])
        else:
            departure = Departure(
                input_delta=usage.input_tokens - ticket.input_tokens,
                output_tokens=usage.output_tokens,
                month_tokens=(usage.input_tokens + usage.output_tokens if count_month else 0) - held[0],
                month_nano=(nano_price(usage, rates) if count_month else 0) - held[1],
            )
        try:
            await ticket.store.depart(ticket.arrival, departure)
        except StoreDown:
            # the store lost this request's use (and keeps its reservation: the month errs high, never low);
            # the pod counts the use itself meanwhile, and the meter's record keeps it for the ledger
            used = Departure(
                departure.input_delta,
                departure.output_tokens,
                departure.month_tokens + held[0],
                departure.month_nano + held[1],
            )
            await self.local.depart(ticket.arrival, used)


def _held_by(deployment: str, tenant: str) -> str:
    return f"deployment:{deployment}:tenant:{tenant}:in-flight"


def _asking(deployment: str, tenant: str) -> str:
    return f"deployment:{deployment}:tenant:{tenant}:asking"


def _slots(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:.1f}"


def retry_headers(seconds: float) -> dict[str, str]:
    """Retry-After in whole seconds (HTTP) and retry-after-ms (which the OpenAI SDKs honour first)."""
    return {"Retry-After": str(max(math.ceil(seconds), 1)), "retry-after-ms": str(max(math.ceil(seconds * 1000), 1))}
