"""Whether each engine replica was up, minute by minute over a month, from Prometheus's `up` series.

The serving PodMonitor relabels every engine target with `deployment`, `replica`, `owner`, `site`
and `node`, so `up{deployment!=""}` is one series per replica (docs/deploy.md). The raw samples are
read a day at a time (range selectors: no sample is skipped) and laid on a one-minute grid from the
month's start: a replica is up at a minute when the latest sample at or before it, no older than
Prometheus's 5-minute lookback, is 1 (what an instant query at that minute would answer). A minute
with no sample at all (the target gone, the node unreachable) is not up.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from llm_fabric.ledger.store.period import Month
from llm_fabric.ledger.store.promapi import PrometheusClient

UP_SELECTOR = 'up{deployment!=""}'
MINUTE = 60
LOOKBACK_S = 300  # Prometheus's default query lookback: a sample answers for 5 minutes


@dataclass(frozen=True)
class ReplicaKey:
    node: str
    deployment: str
    replica: str


@dataclass
class EngineUp:
    """Per replica, one byte per minute of the month (1: up); `minutes` is the grid's length."""

    minutes: int
    start: datetime
    replicas: dict[ReplicaKey, bytearray] = field(default_factory=dict)

    def up_minutes(self, key: ReplicaKey) -> int:
        return sum(self.replicas[key])


def month_minutes(month: Month, until: datetime) -> int:
    """Minutes of the month begun by `until` (all of them for a past month)."""
    end = min(month.end, until)
    return max(0, math.ceil((end - month.start).total_seconds() / MINUTE))


def _lay(grid: bytearray, start: float, samples: list[tuple[float, float]]) -> None:
    """Mark the minutes each sample answers for (until the next sample, at most the lookback) up or not."""
    for i, (ts, value) in enumerate(samples):
        until = ts + LOOKBACK_S
        if i + 1 < len(samples):
            until = min(until, samples[i + 1][0])
        first = max(0, math.ceil((ts - start) / MINUTE))
        last = min(len(grid), math.ceil((until - start) / MINUTE))
        if first < last:
            grid[first:last] = (b"\x01" if value == 1 else b"\x00") * (last - first)


def engine_up(
    client: PrometheusClient, month: Month, *, until: datetime, progress: Callable[[str], None] | None = None
) -> EngineUp:
    """Every engine replica's up minutes over the month (to `until` in a month in progress)."""
    minutes = month_minutes(month, until)
    end_of_grid = month.start + timedelta(minutes=minutes)
    samples: dict[ReplicaKey, dict[float, float]] = {}
    for day in month.days_until(until):
        start = datetime(day.year, day.month, day.day, tzinfo=UTC)
        # the first day reaches back one lookback: a sample just before midnight answers for 00:00
        begin = start - timedelta(seconds=LOOKBACK_S) if day == month.first_day else start
        end = min(start + timedelta(days=1), end_of_grid)
        seconds = int((end - begin).total_seconds())
        if seconds <= 0:
            continue
        if progress is not None:
            progress(f"engine up {day.isoformat()}")
        for item in client.query(f"{UP_SELECTOR}[{seconds}s]", end - timedelta(milliseconds=1)):
            labels = item["metric"]
            key = ReplicaKey(labels.get("node", ""), labels["deployment"], labels.get("replica", ""))
            samples.setdefault(key, {}).update({float(t): float(v) for t, v in item.get("values", [])})
    out = EngineUp(minutes, month.start)
    for key in sorted(samples, key=lambda k: (k.node, k.deployment, k.replica)):
        grid = bytearray(minutes)
        _lay(grid, month.start.timestamp(), sorted(samples[key].items()))
        out.replicas[key] = grid
    return out
