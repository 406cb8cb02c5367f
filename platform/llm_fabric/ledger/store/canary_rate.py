"""A deployment's canary pass rate for a month, from the prober's series in Prometheus.

`fabric_canary_replica_pass` is 1 while a replica passes its canary prompts and 0 while it fails
(live.canary, scraped from the prober once a minute). Averaged over the month (up to now) per
replica, then over the deployment's replicas: the share of the month's canary runs its replicas
passed. A deployment the prober never asked has no rate (absent, not 0).
"""

from __future__ import annotations

from datetime import datetime

from llm_fabric.ledger.store.period import Month
from llm_fabric.ledger.store.promapi import PrometheusClient
from llm_fabric.names import CANARY_PASS_METRIC


def pass_rate_query(seconds: int) -> str:
    return f"avg by (deployment) (avg_over_time({CANARY_PASS_METRIC}[{seconds}s]))"


def canary_pass_rates(client: PrometheusClient, month: Month, now: datetime) -> dict[str, float]:
    """deployment -> the month's canary pass rate (0..1), over the month up to `now`."""
    end = min(month.end, now)
    seconds = int((end - month.start).total_seconds())
    if seconds < 60:
        return {}
    rates: dict[str, float] = {}
    for row in client.query(pass_rate_query(seconds), end):
        name = row.get("metric", {}).get("deployment")
        if name:
            rates[str(name)] = round(float(row["value"][1]), 4)
    return dict(sorted(rates.items()))
