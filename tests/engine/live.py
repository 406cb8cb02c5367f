"""What the live-path tests share, for either engine: scraping a replica as the serving PodMonitor would,
reading an engine's counters, waiting for Prometheus to hold them, and running `fabric report`."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from llm_fabric.cli.main import main
from llm_fabric.ledger.store.period import Month
from llm_fabric.site.loader import load_site
from llm_fabric.site.models import NodeManifest
from tests.fixtures.prometheus import PrometheusServer, scrape_job


def scrape_replica(
    prometheus_factory: Callable[..., PrometheusServer], site_repo: Path, base_url: str, deployment: str, job: str
) -> tuple[PrometheusServer, NodeManifest, Month]:
    """A Prometheus scraping the engine at `base_url` with the PodMonitor's labels (replica 0 of `deployment`
    on the site's first node); skipped when the month ends within 15 minutes (a burst could straddle two)."""
    now = datetime.now(UTC)
    month = Month(now.year, now.month)
    if month.end - now < timedelta(minutes=15):
        pytest.skip("the month ends within 15 minutes: the burst could straddle two months")
    node = sorted(load_site(site_repo).nodes.values(), key=lambda n: n.name)[0]
    labels = {
        "deployment": deployment,
        "replica": f"{deployment}-0",
        "owner": node.owner,
        "site": node.site,
        "node": node.name,
    }
    target = base_url.removeprefix("http://")
    prom = prometheus_factory(
        scrape_configs=[scrape_job(job, [target], static_configs=[{"targets": [target], "labels": labels}])]
    )
    return prom, node, month


def counter_totals(metrics_text: str, counters: dict[str, str]) -> dict[str, int]:
    """key -> the counter named in `counters` (full sample name), summed over its series."""
    totals = dict.fromkeys(counters, 0.0)
    names = {name: key for key, name in counters.items()}
    for family in text_string_to_metric_families(metrics_text):
        for sample in family.samples:
            if sample.name in names:
                totals[names[sample.name]] += sample.value
    return {key: int(value) for key, value in totals.items()}


def wait_scraped(
    prom: PrometheusServer, deployment: str, counters: dict[str, str], values: dict[str, int], timeout: float = 60
) -> None:
    """Until Prometheus' newest samples hold these counter values (then one more scrape)."""

    def scraped(name: str) -> float | None:
        result = prom.query(f'sum(max_over_time({name}{{deployment="{deployment}"}}[1m]))')
        return float(result[0]["value"][1]) if result else None

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(scraped(counters[key]) == value for key, value in values.items()):
            time.sleep(2.5)
            return
        time.sleep(0.5)
    raise AssertionError(f"Prometheus never scraped {values}:\n{prom.log_tail()}")


def run_report(args: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    capsys.readouterr()
    assert main(["report", *args, "--json"]) == 0, capsys.readouterr().err
    report: dict[str, Any] = json.loads(capsys.readouterr().out)
    return report
