"""`fabric exporter`: pool and ledger figures for Prometheus, with prometheus-client.

Pool figures (GPUs per owner/site/tier/model, dedicated vs pooled) come from the site repo;
month-to-date tokens and books come from the same `build_report` as `fabric report`, refreshed at
most every `refresh_s` seconds (a scrape never waits for more than one refresh). Names follow
Prometheus conventions so that `promtool check metrics` is clean.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector, CollectorRegistry

from llm_fabric.errors import FabricError
from llm_fabric.ledger.report.build import ReportInputs, build_report, record_usage, report_inputs
from llm_fabric.ledger.report.month_report import MonthReport
from llm_fabric.ledger.store.period import Month
from llm_fabric.ledger.tenant_month import TenantMonth, tenant_month_metrics, tenant_months
from llm_fabric.site.loader import SiteRepo

LEDGERS = (
    "price_ledger",
    "operations_ledger",
    "institutional_with_cache",
    "institutional_without_cache",
    "subsidy",
    "savings",
)


class FabricCollector(Collector):
    def __init__(
        self,
        site: SiteRepo,
        inputs: ReportInputs | None,
        *,
        refresh_s: float = 60.0,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.site = site
        self.inputs = inputs
        self.refresh_s = refresh_s
        self.clock = clock
        self._lock = threading.Lock()
        self._report: MonthReport | None = None
        self._tenants: dict[str, TenantMonth] = {}
        self._refreshed = 0.0
        self._ok = True

    def _current_report(self) -> MonthReport | None:
        if self.inputs is None:
            return None
        with self._lock:
            if self._report is None or time.monotonic() - self._refreshed >= self.refresh_s:
                now = self.clock()
                # it serves no statement figure: no month of up series and git history read each refresh
                month = Month(now.year, now.month)
                inputs = ReportInputs(**{**self.inputs.__dict__, "month": month, "now": now, "statement": False})
                try:
                    self._report = build_report(self.site, inputs)
                    month = Month(now.year, now.month)
                    self._tenants = tenant_months(self.site, record_usage(inputs, month)[0], month)
                    self._ok = True
                except FabricError:
                    self._ok = False  # keep serving the last good figures; the gauge below says so
                self._refreshed = time.monotonic()
            return self._report

    def _pool(self) -> Iterator[GaugeMetricFamily]:
        gpus = GaugeMetricFamily(
            "fabric_pool_gpus",
            "GPUs enrolled in the pool, by owner, site, tier and model.",
            labels=["owner", "site", "tier", "gpu_model", "status"],
        )
        counts: dict[tuple[str, ...], int] = {}
        for node in self.site.nodes.values():
            key: tuple[str, ...] = (node.owner, node.site, node.tier, node.gpus.catalog_id, node.status)
            counts[key] = counts.get(key, 0) + node.gpus.count
        for labels, count in sorted(counts.items()):
            gpus.add_metric(list(labels), count)
        yield gpus
        alloc = GaugeMetricFamily(
            "fabric_pool_allocation_gpus",
            "Active GPUs of each contributor, dedicated to it or pooled (lent to everyone).",
            labels=["owner", "allocation"],
        )
        for name, tenant in sorted(self.site.tenants.items()):
            if not tenant.contributor:
                continue
            contributed = self.site.contributed_gpus(name)
            dedicated = tenant.dedicated.gpus if tenant.dedicated else 0
            alloc.add_metric([name, "dedicated"], dedicated)
            alloc.add_metric([name, "pooled"], contributed - dedicated)
        yield alloc

    def _books(self, report: MonthReport) -> Iterator[GaugeMetricFamily]:
        tokens = GaugeMetricFamily(
            "fabric_month_tokens", "Tokens this month so far, by model and kind.", labels=["model", "kind"]
        )
        requests = GaugeMetricFamily("fabric_month_requests", "Requests this month so far, by model.", labels=["model"])
        for row in report.usage_by_model:
            tokens.add_metric([row.name, "input"], row.input_tokens)
            tokens.add_metric([row.name, "cached_input"], row.cached_input_tokens)
            tokens.add_metric([row.name, "output"], row.output_tokens)
            requests.add_metric([row.name], row.requests)
        yield tokens
        yield requests
        books = report.books
        money = GaugeMetricFamily(
            "fabric_ledger_month_to_date",
            "The books this month so far, in the ledger currency.",
            labels=["ledger", "currency"],
        )
        for name in LEDGERS:
            money.add_metric([name, report.currency], getattr(books, name))
        yield money
        if books.recovery is not None:
            yield GaugeMetricFamily(
                "fabric_ledger_recovery_ratio", "Price ledger divided by operations ledger.", value=books.recovery
            )

    def collect(self) -> Iterator[GaugeMetricFamily]:
        yield from self._pool()
        report = self._current_report()
        if report is not None:
            yield from self._books(report)
            yield from tenant_month_metrics(self._tenants.values())
        if self.inputs is not None:
            yield GaugeMetricFamily(
                "fabric_exporter_refresh_ok",
                "1 when the last refresh of the month's figures succeeded.",
                value=int(self._ok),
            )


def build_registry(site: SiteRepo, inputs: ReportInputs | None, refresh_s: float = 60.0) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(FabricCollector(site, inputs, refresh_s=refresh_s))
    return registry


def exporter_inputs(
    site: SiteRepo,
    site_root: Path,
    *,
    records: tuple[Path, ...],
    records_format: str,
    prometheus_url: str | None,
    plan: Path | None,
    store: Path | None,
) -> ReportInputs | None:
    """What the exporter reports its books from: the given records, else the ledger store (when the site has a
    ledger.yaml and the store exists), with Prometheus when given; None: nothing to draw books from (pools only)."""
    from llm_fabric.ledger.store.database import site_store  # DuckDB: only where a store may be read

    ledger_store = None if records or site.ledger is None else site_store(site_root, store)
    if not (records or prometheus_url or (ledger_store is not None and ledger_store.is_file())):
        return None
    return report_inputs(
        month=None,
        records=records,
        records_format=records_format,
        prometheus_url=prometheus_url,
        plan=plan,
        store=ledger_store,
    )
