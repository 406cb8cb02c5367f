"""Usage from request records, aggregated by DuckDB in one scan of the files.

One GROUP BY with two grouping sets reads the records once: (model, tenant, minute) gives token
sums, daily series and per-minute peaks; (model, tenant, prompt length) gives a histogram with
one bin per distinct length, from which percentiles are exact (nearest rank) while memory grows
with distinct lengths, not with records. Everything after the scan works on that small table.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

import duckdb

from llm_fabric.errors import UsageError
from llm_fabric.ledger.period import Month
from llm_fabric.ledger.records import SUCCESS_SQL, RecordFormat, RecordSource, register_records

PERCENTILES = (50, 95, 99)


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
    source: RecordSource
    by_model: dict[str, UsageFigures]
    by_tenant: dict[str, UsageFigures]
    by_model_tenant: dict[tuple[str, str], Tokens]
    daily: dict[tuple[str, date], Tokens]
    records_in_month: int
    records_outside_month: int


def connect(temp_dir: Path | None = None, memory_limit: str = "1GB") -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB with UTC session time and a memory cap (spills to `temp_dir` beyond it)."""
    con = duckdb.connect(":memory:")
    con.execute("SET TimeZone = 'UTC'")
    con.execute(f"SET memory_limit = '{memory_limit}'")
    con.execute("SET preserve_insertion_order = false")
    if temp_dir is not None:
        con.execute(f"SET temp_directory = '{temp_dir}'")
    return con


_AGG = f"""
CREATE OR REPLACE TEMP TABLE agg AS
SELECT model, tenant, date_trunc('minute', ts) AS minute, prompt_tokens AS plen,
       GROUPING(minute, plen) AS gid,
       count(*) AS n,
       count(*) FILTER (WHERE NOT {SUCCESS_SQL}) AS failed,
       sum(prompt_tokens)::HUGEINT AS inp,
       sum(coalesce(cached_prompt_tokens, 0))::HUGEINT AS cached,
       sum(completion_tokens)::HUGEINT AS outp,
       sum(ttft_ms) AS ttft_sum, count(ttft_ms) AS ttft_n
FROM records
WHERE ts >= CAST($start AS TIMESTAMP) AND ts < CAST($end AS TIMESTAMP)
GROUP BY GROUPING SETS ((model, tenant, minute), (model, tenant, plen))
"""
MINUTES = 1  # gid of the (model, tenant, minute) set: plen is the aggregated-away column
LENGTHS = 2  # gid of the (model, tenant, prompt length) set


def _tokens(row: tuple[object, ...]) -> Tokens:
    n, failed, inp, cached, outp = (int(v or 0) for v in row[:5])  # type: ignore[call-overload]
    return Tokens(n, failed, inp, cached, outp)


def _sum_by(con: duckdb.DuckDBPyConnection, key: str) -> dict[tuple[object, ...], tuple[Tokens, float | None]]:
    rows = con.execute(
        f"SELECT {key}, sum(n), sum(failed), sum(inp), sum(cached), sum(outp), sum(ttft_sum), sum(ttft_n) "
        f"FROM agg WHERE gid = {MINUTES} GROUP BY ALL ORDER BY ALL"
    ).fetchall()
    width = key.count(",") + 1
    out: dict[tuple[object, ...], tuple[Tokens, float | None]] = {}
    for row in rows:
        ttft_sum, ttft_n = row[width + 5], row[width + 6]
        mean = round(float(ttft_sum) / int(ttft_n), 1) if ttft_n else None
        out[tuple(row[:width])] = (_tokens(row[width:]), mean)
    return out


def _percentiles(con: duckdb.DuckDBPyConnection, key: str) -> dict[str, dict[int, int]]:
    picks = ", ".join(f"min(plen) FILTER (WHERE cum >= ceil({p / 100} * total)) AS p{p}" for p in PERCENTILES)
    rows = con.execute(
        f"""
        WITH h AS (SELECT {key} AS k, plen, sum(n) AS c FROM agg WHERE gid = {LENGTHS} GROUP BY ALL),
             c AS (SELECT k, plen, sum(c) OVER (PARTITION BY k ORDER BY plen) AS cum,
                          sum(c) OVER (PARTITION BY k) AS total FROM h)
        SELECT k, {picks} FROM c GROUP BY k ORDER BY k
        """
    ).fetchall()
    return {str(r[0]): {p: int(v) for p, v in zip(PERCENTILES, r[1:], strict=True) if v is not None} for r in rows}


def _peaks(con: duckdb.DuckDBPyConnection) -> dict[str, tuple[float, float]]:
    rows = con.execute(
        f"""
        SELECT model, max(o) / 60.0, max(t) / 60.0 FROM (
            SELECT model, minute, sum(outp) AS o, sum(inp + outp) AS t FROM agg WHERE gid = {MINUTES} GROUP BY ALL
        ) GROUP BY model ORDER BY model
        """
    ).fetchall()
    return {str(r[0]): (round(float(r[1]), 1), round(float(r[2]), 1)) for r in rows}


def _figures(
    sums: dict[tuple[object, ...], tuple[Tokens, float | None]],
    pct: dict[str, dict[int, int]],
    has_cached: bool,
) -> dict[str, UsageFigures]:
    out: dict[str, UsageFigures] = {}
    for (name,), (tokens, ttft) in sums.items():
        out[str(name)] = UsageFigures(
            tokens=tokens,
            prompt_percentiles=pct.get(str(name), {}),
            cache_hit_rate=tokens.cache_hit_rate if has_cached else None,
            mean_ttft_ms=ttft,
        )
    return out


def aggregate_records(
    con: duckdb.DuckDBPyConnection,
    paths: list[Path],
    month: Month,
    fmt: RecordFormat = "auto",
    progress: Callable[[str], None] | None = None,
) -> RecordUsage | None:
    """The month's usage from the record files (None without files)."""
    source = register_records(con, paths, fmt)
    if source is None:
        return None
    note = progress or (lambda _msg: None)
    note(f"scanning {len(paths)} record file(s)")
    params = {"start": month.start.strftime("%Y-%m-%d %H:%M:%S"), "end": month.end.strftime("%Y-%m-%d %H:%M:%S")}
    try:
        con.execute(_AGG, params)
        total_row = con.execute("SELECT count(*) FROM records").fetchone()
    except duckdb.Error as exc:
        names = ", ".join(str(p) for p in paths)
        raise UsageError(f"request records ({names}) could not be read: {exc}", hint="see docs/ledger.md") from exc
    note("aggregating")
    by_model = _figures(_sum_by(con, "model"), _percentiles(con, "model"), source.has_cached)
    for model, (peak_out, peak_total) in _peaks(con).items():
        by_model[model].peak_output_tokens_per_s = peak_out
        by_model[model].peak_total_tokens_per_s = peak_total
    by_tenant = _figures(_sum_by(con, "tenant"), _percentiles(con, "tenant"), source.has_cached)
    pairs = {(str(k[0]), str(k[1])): t for k, (t, _) in _sum_by(con, "model, tenant").items()}
    daily = {(str(k[0]), k[1]): t for k, (t, _) in _sum_by(con, "model, CAST(minute AS DATE)").items()}
    in_month = sum(f.tokens.requests for f in by_model.values())
    total = int(total_row[0]) if total_row else 0
    return RecordUsage(source, by_model, by_tenant, pairs, daily, in_month, total - in_month)  # type: ignore[arg-type]
