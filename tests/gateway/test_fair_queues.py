"""Fair queues: a saturated deployment shares its slots in proportion to the tenants' allocations
(docs/gateway.md, "Fair shares"). A flood by one tenant and steady traffic by another, through the real
admission: on the process's own counters over many allocations (a property), and over a real redis-server
with two admissions standing in for two gateway pods."""

from __future__ import annotations

import itertools
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from tests.fixtures.own_loop import run
from tests.fixtures.redis_server import redis_server

from llm_fabric.gateway.runtime.admission import Admission, Refusal, Ticket
from llm_fabric.gateway.runtime.counters import Counters, MemoryCounters, RedisCounters
from llm_fabric.gateway.runtime.settings import DeploymentAccess, TenantAccess

OPEN = TenantAccess(key_sha256=[], data_classes=["public"])
RETRY_S = 2.0
_ids = itertools.count()


async def _flood_and_steady(
    gates: list[Admission], dep: DeploymentAccess, *, demand: int, duration: int, ticks: int
) -> list[int]:
    """Each tick (a second) the requests `duration` ticks old finish, then `flood` sends as many requests as
    the deployment has slots, before `steady` tops itself up to `demand` in flight (the flood is always
    first at a freed slot). The pods take turns. Returns steady's requests in flight after each tick."""
    running: list[tuple[int, Ticket]] = []
    held: list[int] = []
    for tick in range(ticks):
        for ticket in [t for end, t in running if end <= tick]:
            await gates[0].release(ticket, None)
        running = [(end, t) for end, t in running if end > tick]
        mine = sum(1 for _, t in running if t.tenant == "steady")
        wanted = [("flood", dep.capacity), ("steady", demand - mine)]
        for tenant, count in wanted:
            for _ in range(count):
                gate = gates[next(_ids) % len(gates)]
                got = await gate.admit(
                    tenant, OPEN, "d", dep, input_tokens=1, now=float(tick), call_id=f"c{next(_ids)}"
                )
                if isinstance(got, Ticket):
                    running.append((tick + duration, got))
        held.append(sum(1 for _, t in running if t.tenant == "steady"))
    return held


@settings(max_examples=60, deadline=None)
@given(
    capacity=st.integers(2, 24),
    steady_weight=st.integers(1, 6),
    flood_weight=st.integers(1, 6),
    demand_part=st.floats(0.1, 1.0),
    duration=st.integers(1, 4),
)
def test_a_flood_does_not_take_the_steady_tenants_share(
    capacity: int, steady_weight: int, flood_weight: int, demand_part: float, duration: int
) -> None:
    total = steady_weight + flood_weight
    shares = {"steady": capacity * steady_weight / total, "flood": capacity * flood_weight / total}
    dep = DeploymentAccess(capacity=capacity, fair_shares=shares)
    demand = max(round(capacity * demand_part), 1)
    held = run(_flood_and_steady([Admission(RETRY_S)], dep, demand=demand, duration=duration, ticks=12 * duration + 10))
    settled = held[2 * duration + 2 :]
    # what steady asks for, up to its allocation, it holds (one slot less at worst, at the tick a slot
    # frees before the flood arrives)
    owed = min(demand, shares["steady"])
    assert sum(settled) / len(settled) >= owed - 1, (held, owed)
    assert min(settled) >= int(owed) - 1, (held, owed)


def test_the_refusal_names_the_share_and_an_idle_share_is_lent() -> None:
    dep = DeploymentAccess(capacity=4, fair_shares={"steady": 2.0, "flood": 2.0})
    gate = Admission(RETRY_S)

    def admit(tenant: str, now: float) -> Ticket | Refusal:
        return run(gate.admit(tenant, OPEN, "d", dep, input_tokens=1, now=now, call_id=f"c{next(_ids)}"))

    flood = [admit("flood", 0.0) for _ in range(4)]
    assert all(isinstance(t, Ticket) for t in flood)  # steady is idle: its share is lent
    assert isinstance(admit("steady", 0.0), Refusal)  # full; steady now waits for a slot
    last = flood[3]
    assert isinstance(last, Ticket)
    run(gate.release(last, None))
    refused = admit("flood", 1.0)
    assert isinstance(refused, Refusal) and refused.kind == "capacity" and refused.status == 429
    assert refused.reason == (
        "deployment `d` is full: tenant `flood` holds 3 of its fair share 2 (of 4 requests at once); "
        "the free slots are held for the tenants below their share"
    )
    assert isinstance(admit("steady", 1.0), Ticket)
    # once steady no longer asks (its mark lapsed after 2 x Retry-After + 1 s), the flood borrows again
    first = flood[0]
    assert isinstance(first, Ticket)
    run(gate.release(first, None))
    assert isinstance(admit("flood", 1.0 + 2 * RETRY_S + 1.5), Ticket)


def test_fair_shares_hold_across_two_pods_on_a_real_redis(tmp_path: Path) -> None:
    with redis_server(tmp_path / "redis") as server:

        async def two_pods() -> list[int]:
            stores: list[Counters] = [
                RedisCounters(server.url(), "fair:", timeout_s=1.0),
                RedisCounters(server.url(), "fair:", timeout_s=1.0),
            ]
            pods = [Admission(RETRY_S, store=s, local=MemoryCounters()) for s in stores]
            dep = DeploymentAccess(capacity=6, fair_shares={"steady": 2.0, "flood": 4.0})
            try:
                return await _flood_and_steady(pods, dep, demand=4, duration=2, ticks=20)
            finally:
                for s in stores:
                    assert isinstance(s, RedisCounters)
                    await s.close()

        held = run(two_pods())
    # steady asks for 4 of 6 slots; its share is 2: the flood, through either pod, never holds it below
    assert min(held[4:]) >= 2, held
