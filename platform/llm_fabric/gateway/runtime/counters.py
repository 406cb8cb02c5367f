"""The counters admission decides by: in the proxy process, or in Redis shared by every gateway pod.

Admission (`admission.py`) holds the rules; a store only counts, in three steps that are each atomic:
`arrive` adds the request (to the in-flight sets it joins, to its tenant's minute window) and returns
what it sees with the request counted; `withdraw` takes a refused request out again; `depart` takes an
admitted one out and adds what it really used (tokens, price) to the window and the month. Counting
first and checking after makes a limit hold across pods without a lock: of two pods that race for the
last slot, the one counted second sees the limit passed and withdraws (at worst both withdraw; never
do both pass).

Keys (prefix: the federation): `tenant:T:in-flight`, `deployment:D:in-flight`, `deployment:D:owner`
(sorted sets of call ids, scored by when a lost request leaves them on its own), `tenant:T:minute` (a
hash of per-second fields `S:r` requests, `S:i` input tokens, `S:o` output tokens, by arrival second),
`tenant:T:month:YYYY-MM` (a hash: `tokens`, `nano`, the price in 10^-9 of the currency: what departed
requests used plus what the requests in flight reserved), which expires a month after its month ends;
for the fair shares, `deployment:D:tenant:T:in-flight` (a sorted set as
above) and `deployment:D:tenant:T:asking` (one member, scored by when the tenant's last arrival there stops
counting: until then the tenant is asking for its share).
"""

from __future__ import annotations

import contextlib
import math
import time
from dataclasses import dataclass, field
from typing import Protocol

import redis.asyncio as aioredis
from redis.exceptions import RedisError

WINDOW_S = 60
# the minute hash outlives its newest field by this much; the month's hash a month past its end
MINUTE_TTL_S = 2 * WINDOW_S
MONTH_TTL_S = 62 * 86400
# after a failure the store is not asked again for this long: each request would wait out the timeout
DOWN_FOR_S = 1.0


class StoreDown(Exception):
    """The shared store did not answer (connection refused, timeout): admission decides what that means."""


@dataclass(frozen=True)
class Arrival:
    call_id: str
    joins: tuple[str, ...]  # in-flight sets the request joins
    peeks: tuple[str, ...]  # in-flight sets only counted (the owner's, for a pool tenant's request)
    stale_at: float  # when the request leaves the sets if no callback ever comes
    minute: str  # the tenant's minute window
    second: int  # the arrival second
    input_tokens: int  # estimated at arrival, corrected at departure
    month: str  # the tenant's month hash
    marks: tuple[tuple[str, float], ...] = ()  # sets of one member that the arrival sets: (name, until when)
    # what the request may spend at most, held against the month from arrival until it settles at departure
    reserve_tokens: int = 0
    reserve_nano: int = 0


@dataclass
class Seen:
    """What the store holds with the arrival counted."""

    in_flight: dict[str, int]  # set -> members
    window: dict[int, list[int]]  # second -> [requests, input tokens, output tokens], within the minute
    month_tokens: int = 0
    month_nano: int = 0


@dataclass(frozen=True)
class Departure:
    input_delta: int  # the engine's input count minus the estimate
    output_tokens: int
    month_tokens: int  # added to the month: what the request used minus its reservation
    month_nano: int


class Counters(Protocol):
    async def arrive(self, a: Arrival, now: float) -> Seen: ...

    async def withdraw(self, a: Arrival) -> None: ...

    async def depart(self, a: Arrival, d: Departure) -> None: ...


def _window(fields: dict[str, int], now: float) -> dict[int, list[int]]:
    window: dict[int, list[int]] = {}
    for name, value in fields.items():
        second, kind = name.split(":")
        if int(second) > now - WINDOW_S:
            window.setdefault(int(second), [0, 0, 0])["rio".index(kind)] += value
    return window


@dataclass
class MemoryCounters:
    """The proxy process's own counters: one gateway pod (or a pod's fallback while Redis is down)."""

    sets: dict[str, dict[str, float]] = field(default_factory=dict)
    minutes: dict[str, dict[str, int]] = field(default_factory=dict)
    months: dict[str, list[int]] = field(default_factory=dict)

    async def arrive(self, a: Arrival, now: float) -> Seen:
        counts = {}
        for name, until in a.marks:
            self.sets[name] = {"asking": until}
        for name in (*a.joins, *a.peeks):
            members = self.sets.setdefault(name, {})
            for gone in [m for m, stale in members.items() if stale <= now]:
                del members[gone]
            if name in a.joins:
                members[a.call_id] = a.stale_at
            counts[name] = len(members)
        minute = self.minutes.setdefault(a.minute, {})
        for name in [n for n in minute if int(n.split(":")[0]) <= now - WINDOW_S]:
            del minute[name]
        minute[f"{a.second}:r"] = minute.get(f"{a.second}:r", 0) + 1
        minute[f"{a.second}:i"] = minute.get(f"{a.second}:i", 0) + a.input_tokens
        month = self.months.setdefault(a.month, [0, 0])
        month[0] += a.reserve_tokens
        month[1] += a.reserve_nano
        return Seen(counts, _window(minute, now), month[0], month[1])

    async def withdraw(self, a: Arrival) -> None:
        for name in a.joins:
            self.sets.get(name, {}).pop(a.call_id, None)
        minute = self.minutes.get(a.minute, {})
        if f"{a.second}:r" in minute:
            minute[f"{a.second}:r"] -= 1
            minute[f"{a.second}:i"] -= a.input_tokens
        month = self.months.setdefault(a.month, [0, 0])
        month[0] -= a.reserve_tokens
        month[1] -= a.reserve_nano

    async def depart(self, a: Arrival, d: Departure) -> None:
        for name in a.joins:
            self.sets.get(name, {}).pop(a.call_id, None)
        minute = self.minutes.get(a.minute, {})
        if f"{a.second}:r" in minute:  # else the minute is over: nothing left to correct
            minute[f"{a.second}:i"] += d.input_delta
            minute[f"{a.second}:o"] = minute.get(f"{a.second}:o", 0) + d.output_tokens
        month = self.months.setdefault(a.month, [0, 0])
        month[0] += d.month_tokens
        month[1] += d.month_nano


class RedisCounters:
    """Counters in Redis, shared by every gateway pod that names the same URL and prefix."""

    def __init__(self, url: str, prefix: str, *, timeout_s: float) -> None:
        self.url = url
        self.prefix = prefix
        self._client = aioredis.Redis.from_url(
            url, socket_timeout=timeout_s, socket_connect_timeout=timeout_s, decode_responses=True
        )
        self._down_until = 0.0

    def key(self, name: str) -> str:
        return self.prefix + name

    async def _run(self, pipe: aioredis.client.Pipeline) -> list[object]:
        if time.monotonic() < self._down_until:
            raise StoreDown(f"the counter store at {self.url} did not answer a moment ago")
        try:
            return list(await pipe.execute())
        except (RedisError, OSError) as exc:
            self._down_until = time.monotonic() + DOWN_FOR_S
            raise StoreDown(f"the counter store at {self.url} does not answer: {exc}") from exc

    async def arrive(self, a: Arrival, now: float) -> Seen:
        pipe = self._client.pipeline(transaction=True)
        names = (*a.joins, *a.peeks)
        for name, until in a.marks:
            pipe.zadd(self.key(name), {"asking": until})
            pipe.expire(self.key(name), max(math.ceil(until - now), 0) + 1)  # the hooks' clock may be shifted
        at = 2 * len(a.marks)
        for name in names:
            pipe.zremrangebyscore(self.key(name), "-inf", now)
            if name in a.joins:
                pipe.zadd(self.key(name), {a.call_id: a.stale_at})
            pipe.zcard(self.key(name))
        minute = self.key(a.minute)
        pipe.hincrby(minute, f"{a.second}:r", 1)
        pipe.hincrby(minute, f"{a.second}:i", a.input_tokens)
        pipe.expire(minute, MINUTE_TTL_S)
        pipe.hgetall(minute)
        # the reservation joins the month in the same transaction: parallel arrivals see each other's
        pipe.hincrby(self.key(a.month), "tokens", a.reserve_tokens)
        pipe.hincrby(self.key(a.month), "nano", a.reserve_nano)
        pipe.expire(self.key(a.month), MONTH_TTL_S)
        replies = await self._run(pipe)
        counts = {}
        for name in names:
            at += 2 if name in a.joins else 1
            counts[name] = int(str(replies[at]))
            at += 1
        fields = {str(k): int(v) for k, v in dict(replies[-4]).items()}  # type: ignore[call-overload]
        tokens, nano = replies[-3], replies[-2]
        stale = [n for n in fields if int(n.split(":")[0]) <= now - WINDOW_S]
        if len(stale) >= WINDOW_S // 2:  # old seconds leave the hash now and then (the sums skip them anyway)
            with contextlib.suppress(RedisError, OSError):
                await self._client.hdel(minute, *stale)
        return Seen(counts, _window(fields, now), int(str(tokens)), int(str(nano)))

    async def withdraw(self, a: Arrival) -> None:
        pipe = self._client.pipeline(transaction=True)
        for name in a.joins:
            pipe.zrem(self.key(name), a.call_id)
        pipe.hincrby(self.key(a.minute), f"{a.second}:r", -1)
        pipe.hincrby(self.key(a.minute), f"{a.second}:i", -a.input_tokens)
        pipe.hincrby(self.key(a.month), "tokens", -a.reserve_tokens)
        pipe.hincrby(self.key(a.month), "nano", -a.reserve_nano)
        await self._run(pipe)

    async def depart(self, a: Arrival, d: Departure) -> None:
        pipe = self._client.pipeline(transaction=True)
        for name in a.joins:
            pipe.zrem(self.key(name), a.call_id)
        minute = self.key(a.minute)
        pipe.hincrby(minute, f"{a.second}:i", d.input_delta)
        pipe.hincrby(minute, f"{a.second}:o", d.output_tokens)
        pipe.expire(minute, MINUTE_TTL_S)
        month = self.key(a.month)
        pipe.hincrby(month, "tokens", d.month_tokens)
        pipe.hincrby(month, "nano", d.month_nano)
        pipe.expire(month, MONTH_TTL_S)
        await self._run(pipe)

    async def close(self) -> None:
        await self._client.aclose()
