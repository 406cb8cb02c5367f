"""The month's report as one `MonthReport` document of figures: every output file is rendered from it.

`build_report` gathers usage (records and/or Prometheus), draws up the books, reconciles the
two sources and lists what is missing; it never fills a gap. Its tables are ordered by their
natural keys and `MonthReport.as_json()` (the JSON-able dict the renderers read) sorts its keys, so
the same inputs give the same bytes (but `generated_at`). `report_inputs` turns what a command is
given (a month as text, a plan document's path) into the `ReportInputs` it reads.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

from llm_fabric import wording
from llm_fabric.errors import UsageError
from llm_fabric.ledger.report.books import Books, ContributorLine, contributor_ledger, draw_up
from llm_fabric.ledger.report.month_report import MonthReport, money, token_row
from llm_fabric.ledger.report.statement import StatementInputs, contributor_statement
from llm_fabric.ledger.store.canary_rate import canary_pass_rates
from llm_fabric.ledger.store.engine_up import engine_up
from llm_fabric.ledger.store.engine_usage import EngineModel, EngineUsage, engine_usage
from llm_fabric.ledger.store.period import Month
from llm_fabric.ledger.store.promapi import PrometheusClient
from llm_fabric.ledger.store.records import RecordFormat, record_format
from llm_fabric.ledger.store.usage import PERCENTILES, RecordUsage, Tokens, UsageFigures
from llm_fabric.plan.document import load_plan
from llm_fabric.site.loader import SiteRepo
from llm_fabric.site.models import LedgerConfig


@dataclass(frozen=True)
class ReportInputs:
    month: Month | None  # None: the exporter, which reports the month it runs in
    records: list[Path]  # ingested into a temporary store, in place of `store`
    records_format: RecordFormat = "auto"
    prometheus_url: str | None = None
    replica_owners: Mapping[tuple[str, str], str] | None = None
    replica_gpus: Mapping[tuple[str, str], int] | None = None  # (deployment, index) -> GPUs, from the plan
    now: datetime | None = None
    temp_dir: Path | None = None
    store: Path | None = None  # the ledger store, read when no `records` are given and it exists
    from_records: bool = False  # compute from the stored records, not the rollups (the oracle; same figures)
    statement: bool = True  # the contributor's statement (the exporter, which serves none of it, leaves it out)


def replica_owners(plan_path: Path | None) -> dict[tuple[str, str], str] | None:
    """Which node owner each replica (deployment, index) of the plan document runs on; None without a plan."""
    if plan_path is None:
        return None
    plan = load_plan(plan_path)
    return {(r.deployment, str(r.index)): r.owner for r in plan.replicas}


def replica_gpus(plan_path: Path | None) -> dict[tuple[str, str], int] | None:
    """How many GPUs each replica (deployment, index) of the plan document holds; None without a plan."""
    if plan_path is None:
        return None
    plan = load_plan(plan_path)
    return {(r.deployment, str(r.index)): len(r.gpu_indices) for r in plan.replicas}


def report_inputs(
    *,
    month: str | None,
    records: Sequence[Path],
    records_format: str,
    prometheus_url: str | None,
    plan: Path | None,
    store: Path | None,
) -> ReportInputs:
    """A report's inputs as a command names them: the month as text, the plan document as a path."""
    return ReportInputs(
        month=Month.parse(month) if month is not None else None,
        records=list(records),
        records_format=record_format(records_format),
        prometheus_url=prometheus_url,
        replica_owners=replica_owners(plan),
        replica_gpus=replica_gpus(plan),
        store=store,
    )


@dataclass(frozen=True)
class RecordOrigin:
    """Where the records came from, for the report's `sources` and its data gaps."""

    files: list[Path]  # given files (a temporary store), else empty
    store: Path | None
    bad: int = 0
    bad_listed: tuple[str, ...] = ()
    merged: tuple[dict[str, Any], ...] = ()  # duplicates merged on the month's days: file, reason, records


def _usage_row(name: str, fig: UsageFigures) -> dict[str, Any]:
    row = {"name": name, "source": fig.source, **token_row(fig.tokens)}
    for p in PERCENTILES:
        row[f"prompt_p{p}"] = fig.prompt_percentiles.get(p)
    row.update(
        percentiles="exact" if fig.percentiles_exact else "approximate (histogram)",
        peak_output_tokens_per_s=fig.peak_output_tokens_per_s,
        peak_total_tokens_per_s=fig.peak_total_tokens_per_s,
        peak_concurrent_requests=fig.peak_concurrent_requests,
        max_queue_depth=fig.max_queue_depth,
        cache_hit_rate=fig.cache_hit_rate,
        mean_ttft_ms=fig.mean_ttft_ms,
    )
    return row


def _from_engine(model: EngineModel) -> UsageFigures:
    return UsageFigures(
        tokens=model.tokens,
        prompt_percentiles=model.prompt_percentiles,
        percentiles_exact=False,
        peak_output_tokens_per_s=model.peak_output_tokens_per_s,
        peak_concurrent_requests=model.peak_concurrent_requests,
        max_queue_depth=model.max_queue_depth,
        cache_hit_rate=model.cache_hit_rate,
        source="prometheus",
    )


def merge_models(records: RecordUsage | None, engine: EngineUsage | None) -> dict[str, UsageFigures]:
    """Per model: records where they exist (exact, per tenant), else engine counters; engine peaks added."""
    out: dict[str, UsageFigures] = dict(records.by_model) if records else {}
    for name, model in (engine.by_model if engine else {}).items():
        if name not in out:
            out[name] = _from_engine(model)
            continue
        fig = out[name]
        fig.source = "records + prometheus"
        fig.peak_concurrent_requests = model.peak_concurrent_requests
        fig.max_queue_depth = model.max_queue_depth
        if fig.cache_hit_rate is None:
            fig.cache_hit_rate = model.cache_hit_rate
    return dict(sorted(out.items()))


def _ranges(days: list[date]) -> str:
    """2026-11-03..05, 2026-11-09: consecutive days folded into ranges."""
    parts: list[tuple[int, int]] = []
    for day in sorted(days):
        if parts and parts[-1][1] == day.toordinal() - 1:
            parts[-1] = (parts[-1][0], day.toordinal())
        else:
            parts.append((day.toordinal(), day.toordinal()))
    text = []
    for first, last in parts:
        a, b = date.fromordinal(first), date.fromordinal(last)
        text.append(a.isoformat() if a == b else f"{a.isoformat()}..{b.day:02d}")
    return ", ".join(text)


def data_gaps(
    month: Month,
    now: datetime,
    records: RecordUsage | None,
    engine: EngineUsage | None,
    origin: RecordOrigin | None = None,
) -> list[str]:
    elapsed = month.days_until(now)
    gaps: list[str] = []
    if now < month.end:
        gaps.append(
            f"partial month: the month is not over, figures cover {month.first_day.isoformat()} to "
            f"{now:%Y-%m-%d %H:%M} UTC; operations are prorated to {len(elapsed)} of {len(month.days)} days"
        )
    if records is None:
        gaps.append("no request records given: per-tenant figures and exact percentiles are unavailable")
    else:
        days = {d for (_, d) in records.daily}
        if missing := [d for d in elapsed if d not in days]:
            gaps.append(f"request records: no records at all on {_ranges(missing)}")
        for model in sorted(records.by_model):
            have = {d for (m, d) in records.daily if m == model}
            if lost := [d for d in elapsed if d not in have and d in days]:
                gaps.append(f"request records: `{model}` has no records on {_ranges(lost)}")
        if records.records_outside_month and origin is not None and origin.files:
            gaps.append(
                f"request records: {wording.count(records.records_outside_month, 'record')} "
                f"outside {month} were left out"
            )
        if origin is not None and origin.bad:
            shown = "; ".join(origin.bad_listed[:5])
            gaps.append(f"request records: {origin.bad} bad record(s) left out ({shown})")
    if engine is None:
        gaps.append("no Prometheus given: peak concurrency, queue depth and the reconciliation are unavailable")
    else:
        for model, fig in sorted(engine.by_model.items()):
            if missing := [d for d in elapsed if d not in fig.days_with_data]:
                gaps.append(f"Prometheus: `{model}` has no engine samples on {_ranges(missing)}")
        if records is not None:
            for model in sorted(set(records.by_model) - set(engine.by_model)):
                gaps.append(f"`{model}` appears in the request records but not in Prometheus")
            for model in sorted(set(engine.by_model) - set(records.by_model)):
                gaps.append(f"`{model}` appears in Prometheus but not in the request records (engine figures used)")
        if engine.series_without_owner:
            count = len(engine.series_without_owner)
            gaps.append(f"Prometheus: {count} series carry no owner label or planned replica")
    return gaps


def reconciliation(
    records: RecordUsage | None, engine: EngineUsage | None, threshold_pct: Decimal
) -> list[dict[str, Any]]:
    if records is None or engine is None:
        return []
    rows = []
    for model in sorted(set(records.by_model) & set(engine.by_model)):
        rec, eng = records.by_model[model].tokens, engine.by_model[model].tokens
        drift = round((rec.total - eng.total) / eng.total * 100, 3) if eng.total else None
        rows.append(
            {
                "model": model,
                "records_input_tokens": rec.input,
                "engine_input_tokens": eng.input,
                "records_output_tokens": rec.output,
                "engine_output_tokens": eng.output,
                "drift_pct": drift,
                "warning": drift is None or abs(Decimal(str(drift))) > threshold_pct,
            }
        )
    return rows


def _contributor_row(line: ContributorLine) -> dict[str, Any]:
    return {
        "owner": line.owner,
        "contributed_gpus": line.contributed_gpus,
        "dedicated_gpus": line.dedicated_gpus,
        "pooled_gpus": line.pooled_gpus,
        "lend_surplus": line.lend_surplus,
        "dedicated_deployments": line.dedicated_deployments,
        "dedicated_usage": token_row(line.dedicated_usage),
        "dedicated_value": money(line.dedicated_value),
        "lent_to": {user: token_row(t) for user, t in sorted(line.lent_usage.items())},
        "lent_value": money(line.lent_value),
        "pool_usage": token_row(line.pool_usage),
        "served_on_hardware": token_row(line.served_on_hardware) if line.served_on_hardware else None,
    }


def _books_section(books: Books) -> dict[str, Any]:
    return {
        **books.summary(),
        "price_lines": [
            {
                "model": line.deployment,
                "reference": money(line.reference),
                "commercial_with_cache": money(line.commercial_with_cache),
                "commercial_without_cache": money(line.commercial_without_cache),
            }
            for line in books.lines
        ],
        "hardware": [
            {
                "node": h.node,
                "capex": money(h.capex),
                "days_in_service": h.days_in_service,
                "monthly": money(h.monthly),
            }
            for h in books.hardware
        ],
    }


def _ledger_config(site: SiteRepo) -> LedgerConfig:
    if site.ledger is None:
        raise UsageError(f"{site.root}/ledger.yaml is missing", hint="copy one from examples/cerit-sc/ledger.yaml")
    return site.ledger


def record_usage(
    inputs: ReportInputs, month: Month, progress: Callable[[str], None] | None = None
) -> tuple[RecordUsage | None, RecordOrigin | None]:
    """The month's usage from the rollups of a temporary store of `inputs.records`, else of the ledger store."""
    from llm_fabric.ledger.store.database import LedgerStore, merged_in_month  # DuckDB: only where records are read
    from llm_fabric.ledger.store.usage import from_records, from_rollups

    usage_of = from_records if inputs.from_records else from_rollups
    if inputs.records:
        with LedgerStore(None, temp_dir=inputs.temp_dir) as store:
            result = store.ingest(inputs.records, inputs.records_format, progress=progress)
            listed = tuple(str(b.as_problem()) for b in result.bad_listed)
            merged = tuple(m.as_dict() for m in merged_in_month(store.con, month.first_day, month.next_first_day))
            return usage_of(store.con, month), RecordOrigin(inputs.records, None, result.bad, listed, merged)
    if inputs.store is None or not inputs.store.is_file():
        return None, None
    with LedgerStore(inputs.store, read_only=True, memory_limit="1GB", temp_dir=inputs.temp_dir) as store:
        merged = tuple(m.as_dict() for m in merged_in_month(store.con, month.first_day, month.next_first_day))
        return usage_of(store.con, month), RecordOrigin([], inputs.store, merged=merged)


def unknown_in_records(site: SiteRepo, records: RecordUsage | None) -> dict[str, list[dict[str, Any]]]:
    """Models and tenants the records name but the site repo does not know, with what they used.

    A gateway of another configuration, a deleted deployment or a typo in an export: their usage is
    in the tables (the tokens were served), and listed here and in the data gaps, never booked silently.
    """
    if records is None:
        return {"models": [], "tenants": []}
    models = {n: f for n, f in records.by_model.items() if n not in site.deployments}
    tenants = {n: f for n, f in records.by_tenant.items() if n not in site.tenants}
    return {
        "models": [{"name": n, **token_row(f.tokens)} for n, f in sorted(models.items())],
        "tenants": [{"name": n, **token_row(f.tokens)} for n, f in sorted(tenants.items())],
    }


def _unknown_gaps(unknown: dict[str, list[dict[str, Any]]]) -> list[str]:
    gaps = []
    for kind, what in (("models", "a model (deployment)"), ("tenants", "a tenant")):
        rows = unknown[kind]
        if rows:
            total = sum(int(r["requests"]) for r in rows)
            listed = ", ".join(f"`{r['name']}` ({r['requests']:,})" for r in rows[:10])
            gaps.append(
                f"request records: {total:,} record(s) name {what} the site repo does not know: {listed}; "
                "counted in the usage tables, listed under unknown_in_records"
                + ("; no reference price applies to them" if kind == "models" else "")
            )
    return gaps


def _unpriced_gaps(unpriced: list[str], deployments: set[str]) -> list[str]:
    """Deployments of the site repo used this month without reference prices (unknown models are listed apart)."""
    names = [n for n in unpriced if n in deployments]
    if not names:
        return []
    listed = ", ".join(f"`{n}`" for n in names)
    return [
        f"no reference price for {listed} in ledger.yaml: their usage books 0.00 in the price ledger "
        "(add reference_prices for them)"
    ]


def build_report(site: SiteRepo, inputs: ReportInputs, progress: Callable[[str], None] | None = None) -> MonthReport:
    """Every figure of the month's report (see docs/ledger.md for each key)."""
    config = _ledger_config(site)
    has_store = inputs.store is not None and inputs.store.is_file()
    if not inputs.records and not has_store and not inputs.prometheus_url:
        where = f" (no ledger store at {inputs.store})" if inputs.store is not None else ""
        raise UsageError(
            f"no usage data given{where}",
            hint=f"ingest records (`fabric ledger ingest -C {site.root} FILE`), "
            "or pass --requests FILE and/or --prometheus URL",
        )
    if inputs.month is None:
        raise UsageError("no month given", hint="pass --month YYYY-MM")
    now = inputs.now or datetime.now(UTC)
    month = inputs.month
    month.require_begun(now)
    records, origin = record_usage(inputs, month, progress)
    engine = None
    up = None
    canary: dict[str, float] = {}
    if inputs.prometheus_url:
        client = PrometheusClient(inputs.prometheus_url)
        engine = engine_usage(client, month, now=now, owners=inputs.replica_owners, progress=progress)
        up = engine_up(client, month, until=now, progress=progress) if inputs.statement else None
        canary = canary_pass_rates(client, month, now)
    models = merge_models(records, engine)
    books = draw_up(config, month, {name: fig.tokens for name, fig in models.items()}, now)
    pairs = records.by_model_tenant if records else {}
    served: dict[str, Tokens] | None = None
    if engine is not None:
        served = {}
        for (owner, _model), tokens in engine.by_owner_model.items():
            served.setdefault(owner, Tokens()).add(tokens)
    daily = records.daily if records else (engine.daily if engine else {})
    total = Tokens()
    for fig in models.values():
        total.add(fig.tokens)
    unknown = unknown_in_records(site, records)
    statement, statement_gaps = (
        contributor_statement(
            site,
            config,
            StatementInputs(month, now, up, records.by_model_tenant if records else None, inputs.replica_gpus or {}),
        )
        if inputs.statement
        else ([], [])
    )
    return MonthReport.model_validate(
        {
            "federation": site.config.federation.display_name,
            "month": str(month),
            "generated_at": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "currency": config.currency,
            "commercial_reference": config.commercial_reference.name,
            "sources": {
                "records": None
                if records is None
                else {
                    "files": [p.name for p in origin.files] if origin else [],
                    "store": origin.store.name if origin and origin.store else None,
                    "bad_records": origin.bad if origin else 0,
                    "merged_duplicates": [{**m, "file": Path(m["file"]).name} for m in origin.merged] if origin else [],
                    "records_in_month": records.records_in_month,
                    "records_outside_month": records.records_outside_month,
                },
                "prometheus": None
                if engine is None
                else {
                    "url": engine.url,
                    "covered_until": f"{engine.covered_until:%Y-%m-%dT%H:%M:%SZ}",
                },
            },
            "totals": token_row(total),
            "usage_by_model": [_usage_row(n, f) for n, f in models.items()],
            "usage_by_tenant": [_usage_row(n, f) for n, f in sorted((records.by_tenant if records else {}).items())],
            "daily": [{"day": d.isoformat(), "model": m, **token_row(t)} for (m, d), t in sorted(daily.items())],
            "books": _books_section(books),
            "contributors": [_contributor_row(c) for c in contributor_ledger(site, config, pairs, served)],
            "statement": statement,
            "reconciliation": reconciliation(records, engine, config.drift_warning_pct),
            "drift_warning_pct": float(config.drift_warning_pct),
            "unknown_in_records": unknown,
            "data_gaps": data_gaps(month, now, records, engine, origin)
            + _unpriced_gaps(books.unpriced, set(site.deployments))
            + _unknown_gaps(unknown)
            + statement_gaps,
            "canary_pass_rate": canary,
        }
    )
