"""Usage from request records: the figures the books take from them, per model, tenant and day.

Two ways to the same figures, both SQL over the store (llm_fabric.ledger.store.database):
- `from_rollups` reads the rollups (llm_fabric.ledger.store.rollups): the month's `daily_usage` rows
  (about 3,000 for 5 deployments and 20 tenants), its `minute_tokens` (~2 x 10^5) and its
  precomputed `month_percentiles` (nearest rank, by a running sum over the month's length counts).
- `from_records` reads the records themselves: grouping sets for the sums, `quantile_disc` for the
  nearest-rank percentiles, per-minute sums for the peaks. It is the oracle the rollups are tested
  against (`fabric ledger check` compares the two for a month).
Both yield the same rows to the same Python, so equal rows give byte-identical books.

Natural keys: (model, tenant) pairs and (model, day); dicts come back sorted by them. Token sums are
integers; TTFT is summed in whole microseconds, so its mean does not depend on the order of records.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

import duckdb

from llm_fabric.errors import FabricError
from llm_fabric.ledger.store.period import Month
from llm_fabric.ledger.store.rollups import PERCENTILES, USAGE_FIELDS, USAGE_FROM_RECORDS, USAGE_FROM_ROLLUP

__all__ = ["PERCENTILES", "RecordUsage", "Tokens", "UsageFigures", "from_records", "from_rollups"]


@dataclass
class Tokens:
    """Integer token counts of a group of requests."""

    requests: int = 0
    failed: int = 0
    input: int = 0
    cached_input: int = 0
    output: int = 0

    def add(self, other: Tokens) -> None:
        self.requests += other.requests
        self.failed += other.failed
        self.input += other.input
        self.cached_input += other.cached_input
        self.output += other.output

    @property
    def total(self) -> int:
        return self.input + self.output

    @property
    def input_output_ratio(self) -> float | None:
        return round(self.input / self.output, 2) if self.output else None

    @property
    def cache_hit_rate(self) -> float | None:
        return round(self.cached_input / self.input, 4) if self.input else None


@dataclass
class UsageFigures:
    """One row of the usage table (a model or a tenant)."""

    tokens: Tokens
    prompt_percentiles: dict[int, int] = field(default_factory=dict)
    percentiles_exact: bool = True
    peak_output_tokens_per_s: float | None = None
    peak_total_tokens_per_s: float | None = None
    peak_concurrent_requests: int | None = None
    max_queue_depth: int | None = None
    cache_hit_rate: float | None = None
    mean_ttft_ms: float | None = None
    source: str = "records"


@dataclass
class RecordUsage:
    by_model: dict[str, UsageFigures]
    by_tenant: dict[str, UsageFigures]
    by_model_tenant: dict[tuple[str, str], Tokens]
    daily: dict[tuple[str, date], Tokens]
    records_in_month: int
    records_outside_month: int


def _between(month: Month, column: str = "day") -> str:
    return f"{column} >= DATE '{month.first_day.isoformat()}' AND {column} < DATE '{month.next_first_day.isoformat()}'"


# grouping ids of the sums' grouping sets (DuckDB's GROUPING(model, tenant, day): 1 = not grouped by)
_SETS = "GROUPING SETS ((model), (tenant), (model, tenant), (model, day))"
_SET_NAMES = {0b001: "model_tenant", 0b010: "model_day", 0b011: "model", 0b101: "tenant"}


def _sums(con: duckdb.DuckDBPyConnection, relation: str, aggregates: str, month: Month) -> list[tuple[Any, ...]]:
    return con.execute(
        f"SELECT GROUPING(model, tenant, day), model, tenant, day, {aggregates} FROM {relation} "
        f"WHERE {_between(month)} GROUP BY {_SETS}"
    ).fetchall()


def _outside(con: duckdb.DuckDBPyConnection, query: str) -> int:
    return int(con.execute(query).fetchall()[0][0] or 0)


def _percentile_rows(con: duckdb.DuckDBPyConnection, query: str) -> dict[tuple[str, str], dict[int, int]]:
    out: dict[tuple[str, str], dict[int, int]] = {}
    for side, name, p, length in sorted(con.execute(query).fetchall()):
        out.setdefault((side, name), {})[int(p)] = int(length)
    return out


def from_rollups(con: duckdb.DuckDBPyConnection, month: Month) -> RecordUsage:
    """The month's usage from the store's rollups."""
    sums = _sums(con, "daily_usage", USAGE_FROM_ROLLUP, month)
    percentiles = _percentile_rows(
        con,
        "SELECT side, name, percentile, prompt_tokens FROM month_percentiles "
        f"WHERE month = DATE '{month.first_day.isoformat()}'",
    )
    peaks = con.execute(
        f"SELECT model, max(input + output), max(output) FROM minute_tokens WHERE {_between(month)} GROUP BY model"
    ).fetchall()
    outside = _outside(con, f"SELECT sum(requests) FROM daily_usage WHERE NOT ({_between(month)})")
    return _usage(sums, percentiles, peaks, outside)


def from_records(con: duckdb.DuckDBPyConnection, month: Month) -> RecordUsage:
    """The month's usage from the store's records, without the rollups (the oracle)."""
    sums = _sums(con, "records", USAGE_FROM_RECORDS, month)
    fractions = "[" + ", ".join(str(p / 100) for p in PERCENTILES) + "]"
    percentiles: dict[tuple[str, str], dict[int, int]] = {}
    for side in ("model", "tenant"):
        rows = con.execute(
            f"SELECT {side}, quantile_disc(prompt_tokens, {fractions}) FROM records "
            f"WHERE {_between(month)} AND prompt_tokens IS NOT NULL GROUP BY {side}"
        ).fetchall()
        for name, values in rows:
            percentiles[(side, name)] = dict(zip(PERCENTILES, (int(v) for v in values), strict=True))
    peaks = con.execute(
        "SELECT model, max(input + output), max(output) FROM (SELECT model, date_trunc('minute', ts), "
        "coalesce(sum(prompt_tokens), 0) AS input, sum(completion_tokens) AS output FROM records "
        f"WHERE {_between(month)} GROUP BY ALL) GROUP BY model"
    ).fetchall()
    outside = _outside(con, f"SELECT count(*) FROM records WHERE NOT ({_between(month)})")
    return _usage(sums, percentiles, peaks, outside)


def _tokens(row: dict[str, int]) -> Tokens:
    return Tokens(row["requests"], row["failed"], row["input"], row["cached_input"], row["output"])


def _figures(
    groups: dict[str, dict[str, int]], side: str, percentiles: dict[tuple[str, str], dict[int, int]]
) -> dict[str, UsageFigures]:
    out: dict[str, UsageFigures] = {}
    for name, row in sorted(groups.items()):
        tokens = _tokens(row)
        out[name] = UsageFigures(
            tokens=tokens,
            prompt_percentiles=percentiles.get((side, name), {}),
            cache_hit_rate=tokens.cache_hit_rate if row["cached_known"] else None,
            mean_ttft_ms=round(row["ttft_us"] / row["ttft_n"] / 1000, 1) if row["ttft_n"] else None,
        )
    return out


def _usage(
    sums: Iterable[tuple[Any, ...]],
    percentiles: dict[tuple[str, str], dict[int, int]],
    peaks: Iterable[tuple[Any, ...]],
    outside: int,
) -> RecordUsage:
    sets: dict[str, dict[Any, dict[str, int]]] = {name: {} for name in _SET_NAMES.values()}
    for grouping, model, tenant, day, *values in sums:
        row = {f: int(v) for f, v in zip(USAGE_FIELDS, values, strict=True)}
        key = {"model": model, "tenant": tenant, "model_tenant": (model, tenant), "model_day": (model, day)}
        name = _SET_NAMES[int(grouping)]
        sets[name][key[name]] = row
    by_model = _figures(sets["model"], "model", percentiles)
    for model, total, output in peaks:
        if model in by_model:
            by_model[model].peak_total_tokens_per_s = round(int(total) / 60, 1)
            by_model[model].peak_output_tokens_per_s = round(int(output) / 60, 1)
    return RecordUsage(
        by_model=by_model,
        by_tenant=_figures(sets["tenant"], "tenant", percentiles),
        by_model_tenant={k: _tokens(v) for k, v in sorted(sets["model_tenant"].items())},
        daily={k: _tokens(v) for k, v in sorted(sets["model_day"].items())},
        records_in_month=sum(row["requests"] for row in sets["model"].values()),
        records_outside_month=outside,
    )


def checked_usage(con: duckdb.DuckDBPyConnection, month: Month, store: Path) -> RecordUsage:
    """The month's figures from the raw records, which must equal its rollups' (else a FabricError)."""
    rollups, records = from_rollups(con, month), from_records(con, month)
    if rollups != records:
        raise FabricError(
            f"{store}: the rollups of {month} differ from its records",
            hint="report this as a bug; the records are intact, and ingesting the month's files into a new "
            "store (--store NEW) builds its rollups afresh",
        )
    return records
