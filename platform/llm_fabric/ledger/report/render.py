"""Render the report dict as report.md, report.html (with SVG charts) and CSV tables."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

from llm_fabric.basemodel import FabricModel
from llm_fabric.ledger.report import charts
from llm_fabric.ledger.report.month_report import MonthReport, NodeStatementRow, OwnerReport


def _num(value: float | int | None) -> str:
    if value is None:
        return "n/a"
    return f"{value:,.0f}" if float(value).is_integer() or abs(value) >= 100 else f"{value:,.1f}"


def _money(value: float | None) -> str:
    return "n/a" if value is None else f"{value:,.2f}"


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value * 100:.1f} %"


def _ratio(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f}x"


def _drift(value: float | None) -> str:
    return "n/a" if value is None else f"{value:+.2f} %"


def _hours(value: float | None) -> str:
    return "n/a" if value is None else f"{value:,.2f}"


def _tokens(row: dict[str, Any] | None) -> str:
    """A token row's input + output tokens."""
    return "n/a" if row is None else _num(int(row["input_tokens"]) + int(row["output_tokens"]))


def _env() -> Environment:
    env = Environment(
        loader=PackageLoader("llm_fabric.ledger.report", "templates"),
        undefined=StrictUndefined,
        autoescape=select_autoescape(["html"]),
        keep_trailing_newline=True,
        trim_blocks=False,
    )
    env.filters.update(num=_num, money=_money, pct=_pct, ratio=_ratio, drift=_drift, hours=_hours, tokens=_tokens)
    return env


def _context(report: MonthReport) -> dict[str, Any]:
    # the templates read the serialized document: what report.json says is what the pages say
    data = report.as_json()
    return {**data, "commercial": report.commercial_reference}


def render_markdown(report: MonthReport) -> str:
    return _env().get_template("report.md.j2").render(r=_context(report))


def _charts(report: MonthReport) -> dict[str, str]:
    models = report.usage_by_model
    names = [m.name for m in models]
    books = report.books
    days = sorted({row.day for row in report.daily})
    per_day = {d: 0 for d in days}
    for row in report.daily:
        per_day[row.day] += row.input_tokens + row.output_tokens
    return {
        "ledgers": charts.bar_chart(
            f"The three ledgers ({report.currency})",
            ["price", "operations", "institutional"],
            [("this month", [books.price_ledger, books.operations_ledger, books.institutional_with_cache])],
        ),
        "tokens": charts.bar_chart(
            "Tokens per model",
            names,
            [
                ("input (uncached)", [m.input_tokens - m.cached_input_tokens for m in models]),
                ("cached input", [m.cached_input_tokens for m in models]),
                ("output", [m.output_tokens for m in models]),
            ],
        ),
        "ratio": charts.bar_chart(
            "Input vs output",
            names,
            [("input", [m.input_tokens for m in models]), ("output", [m.output_tokens for m in models])],
            log=True,
        ),
        "percentiles": charts.bar_chart(
            "Prompt tokens: p50 vs p95",
            names,
            [("p50", [m.prompt_p50 or 0 for m in models]), ("p95", [m.prompt_p95 or 0 for m in models])],
            log=True,
        ),
        "daily": charts.line_chart(
            "Daily tokens (input + output)", [d[5:] for d in days], [("all models", [per_day[d] for d in days])]
        ),
    }


def render_html(report: MonthReport) -> str:
    return _env().get_template("report.html.j2").render(r=_context(report), charts=_charts(report))


def render_owner_markdown(report: OwnerReport) -> str:
    return _env().get_template("owner.md.j2").render(r=report.as_json())


def render_owner_html(report: OwnerReport) -> str:
    return _env().get_template("owner.html.j2").render(r=report.as_json())


def render_json(report: MonthReport | OwnerReport) -> str:
    return json.dumps(report.as_json(), indent=2, sort_keys=True) + "\n"


def _csv(models: Sequence[FabricModel]) -> str:
    rows = [m.model_dump(mode="json") for m in models]
    if not rows:
        return ""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: json.dumps(v, sort_keys=True) if isinstance(v, dict | list) else v for k, v in row.items()})
    return buffer.getvalue()


class _Figure(FabricModel):
    figure: str
    value: str | float | None


class _LentLine(FabricModel):
    """One row of statement_lent.csv: what `tenant` used of `node` (lent by its owner) and its value."""

    node: str
    owner: str
    tenant: str
    requests: int
    input_tokens: int
    cached_input_tokens: int
    output_tokens: int
    value: float | None


def statement_csvs(statement: Sequence[NodeStatementRow]) -> dict[str, str]:
    """The contributor's statement: a row per node, and a row per (node, tenant it was lent to)."""
    lent = [
        _LentLine(
            node=n.node,
            owner=n.owner,
            tenant=tenant,
            requests=row.requests,
            input_tokens=row.input_tokens,
            cached_input_tokens=row.cached_input_tokens,
            output_tokens=row.output_tokens,
            value=row.value,
        )
        for n in statement
        for tenant, row in n.lent_to.items()
    ]
    return {"statement.csv": _csv(statement), "statement_lent.csv": _csv(lent)}


def render_csvs(report: MonthReport) -> dict[str, str]:
    books = report.books
    figures = books.model_dump(mode="json")
    summary = [_Figure(figure=k, value=v) for k, v in sorted(figures.items()) if not isinstance(v, list)]
    return {
        "usage_by_model.csv": _csv(report.usage_by_model),
        "usage_by_tenant.csv": _csv(report.usage_by_tenant),
        "daily.csv": _csv(report.daily),
        "price_ledger.csv": _csv(books.price_lines),
        "operations_ledger.csv": _csv(books.hardware),
        "ledgers.csv": _csv(summary),
        "contributors.csv": _csv(report.contributors),
        "reconciliation.csv": _csv(report.reconciliation),
        "merged_duplicates.csv": _csv(report.sources.records.merged_duplicates if report.sources.records else []),
        **statement_csvs(report.statement),
    }
