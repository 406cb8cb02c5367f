"""The store's rollups: sums over its records per day and per month, kept up to date by each ingest.

- `daily_usage`: per (day, model, tenant, site) the requests, failures, input/cached/output token sums,
  how many records stated cached tokens and TTFT, and the TTFT sum in whole microseconds;
- `daily_lengths`: per (day, model, tenant) the requests at each exact prompt length;
- `minute_tokens`: per (model, minute) the input and output token sums (the busiest minute is exact);
- `month_lengths`: per (month, model) and per (month, tenant) the requests at each prompt length
  (the month's records counted once per model and once per tenant);
- `month_percentiles`: per (month, model) and (month, tenant) the exact nearest-rank p50/p95/p99 of
  the prompt lengths, from `month_lengths` by a running sum: the smallest length whose running count
  reaches ceil(p x n / 100). Computed once per ingest that touches the month, so a report reads a
  few rows instead of sorting millions (2.7 M `month_lengths` rows for a 50 M-record month).

Every column but the keys is a count or an integer sum over the records of its row's key, and the
store only ever adds records (llm_fabric.ledger.store.database), so `add` keeps each table equal to what it
would be if rebuilt from all the records: it aggregates the records an ingest adds and inserts those
rows where their day (month) had none; where it had rows (a late record), it merges them in (MERGE
INTO): a key the table holds gets the new sums added, a new key its row. Nothing else changes: a late
record touches only rows of its day and its month. Sums are BIGINT: a month of tokens is far below
2^63. `fabric ledger check` recomputes a month from the records and compares.
"""

from __future__ import annotations

import duckdb

SCHEMA = """
CREATE TABLE IF NOT EXISTS daily_usage (
    day DATE NOT NULL, model VARCHAR NOT NULL, tenant VARCHAR NOT NULL, site VARCHAR,
    requests BIGINT NOT NULL, failed BIGINT NOT NULL, input BIGINT NOT NULL, cached_input BIGINT NOT NULL,
    output BIGINT NOT NULL, cached_known BIGINT NOT NULL, ttft_n BIGINT NOT NULL, ttft_us BIGINT NOT NULL);
CREATE TABLE IF NOT EXISTS daily_lengths (
    day DATE NOT NULL, model VARCHAR NOT NULL, tenant VARCHAR NOT NULL, prompt_tokens BIGINT NOT NULL,
    requests BIGINT NOT NULL);
CREATE TABLE IF NOT EXISTS minute_tokens (
    day DATE NOT NULL, model VARCHAR NOT NULL, minute TIMESTAMP NOT NULL, input BIGINT NOT NULL,
    output BIGINT NOT NULL);
CREATE TABLE IF NOT EXISTS month_lengths (
    month DATE NOT NULL, side VARCHAR NOT NULL, name VARCHAR NOT NULL, prompt_tokens BIGINT NOT NULL,
    requests BIGINT NOT NULL);
CREATE TABLE IF NOT EXISTS month_percentiles (
    month DATE NOT NULL, side VARCHAR NOT NULL, name VARCHAR NOT NULL, percentile INTEGER NOT NULL,
    prompt_tokens BIGINT NOT NULL);
"""
PERCENTILES = (50, 95, 99)
_BUCKET = 1024  # prompt lengths per bucket of the percentile search

# the aggregates of daily_usage over records, and of a coarser grouping over daily_usage rows
USAGE_FROM_RECORDS = (
    "count(*) AS requests, count(*) FILTER (WHERE NOT ok) AS failed, "
    "CAST(coalesce(sum(prompt_tokens), 0) AS BIGINT) AS input, "
    "CAST(coalesce(sum(cached_prompt_tokens), 0) AS BIGINT) AS cached_input, "
    "CAST(coalesce(sum(completion_tokens), 0) AS BIGINT) AS output, count(cached_prompt_tokens) AS cached_known, "
    "count(ttft_us) AS ttft_n, CAST(coalesce(sum(ttft_us), 0) AS BIGINT) AS ttft_us"
)
USAGE_FIELDS = ("requests", "failed", "input", "cached_input", "output", "cached_known", "ttft_n", "ttft_us")
USAGE_FROM_ROLLUP = ", ".join(f"CAST(sum({f}) AS BIGINT) AS {f}" for f in USAGE_FIELDS)

_MONTH = "CAST(date_trunc('month', day) AS DATE)"
_LENGTHS = "prompt_tokens, count(*) AS requests FROM {src} WHERE prompt_tokens IS NOT NULL GROUP BY ALL"
# per table: the column an ingest touches it by, its summed columns, and its rows for the records of {src}
_TABLES: dict[str, tuple[str, tuple[str, ...], str]] = {
    "daily_usage": (
        "day",
        USAGE_FIELDS,
        f"SELECT day, model, tenant, site, {USAGE_FROM_RECORDS} FROM {{src}} GROUP BY ALL",
    ),
    "daily_lengths": ("day", ("requests",), f"SELECT day, model, tenant, {_LENGTHS}"),
    "minute_tokens": (
        "day",
        ("input", "output"),
        "SELECT day, model, date_trunc('minute', ts) AS minute, CAST(coalesce(sum(prompt_tokens), 0) AS BIGINT) "
        "AS input, CAST(sum(completion_tokens) AS BIGINT) AS output FROM {src} GROUP BY ALL",
    ),
    "month_lengths": (
        "month",
        ("requests",),
        f"SELECT {_MONTH} AS month, 'model' AS side, model AS name, {_LENGTHS} "
        f"UNION ALL SELECT {_MONTH} AS month, 'tenant' AS side, tenant AS name, {_LENGTHS}",
    ),
}


def add(con: duckdb.DuckDBPyConnection, added: str) -> None:
    """Add the records of `added` (a table or subquery of stored columns, just added to `records`) to every
    rollup."""
    # a day (month) has rollup rows iff it has records, and then daily_usage rows: the small table says which
    held = {
        "day": f"SELECT 1 FROM daily_usage WHERE day IN (SELECT DISTINCT day FROM {added})",
        "month": f"SELECT 1 FROM daily_usage WHERE {_MONTH} IN (SELECT DISTINCT {_MONTH} FROM {added})",
    }
    late = {
        scope: bool(con.execute(f"SELECT count(*) FROM ({q} LIMIT 1)").fetchall()[0][0]) for scope, q in held.items()
    }
    for table, (scope, sums, rows) in _TABLES.items():
        new = rows.format(src=added)
        if not late[scope]:
            con.execute(f"INSERT INTO {table} BY NAME {new}")
            continue
        # a day (month) that had rows: a key it had gets the new sums added, a key it lacked its new row
        same = " AND ".join(f"t.{k} IS NOT DISTINCT FROM n.{k}" for k in _columns(con, table) if k not in sums)
        # materialised first: merging from the aggregate itself took 6x longer (DuckDB 2.0.0, 10 M-record month)
        con.execute(f"CREATE OR REPLACE TEMP TABLE late_rows AS {new}")
        con.execute(
            f"MERGE INTO {table} t USING late_rows n ON ({same}) "
            f"WHEN MATCHED THEN UPDATE SET {', '.join(f'{v} = t.{v} + n.{v}' for v in sums)} "
            "WHEN NOT MATCHED THEN INSERT BY NAME"
        )
        con.execute("DROP TABLE late_rows")
    _percentiles(con, f"SELECT DISTINCT {_MONTH} FROM {added}")


def _columns(con: duckdb.DuckDBPyConnection, table: str) -> list[str]:
    return [str(r[0]) for r in con.execute(f"DESCRIBE {table}").fetchall()]


def _percentiles(con: duckdb.DuckDBPyConnection, months: str) -> None:
    """Recompute `month_percentiles` of the months that `months` (a SELECT of months) lists.

    Nearest rank: the first length whose running count reaches ceil(p x n / 100), i.e. count x 100 >= p x n.
    A running sum over all of a month's length counts costs a sort of millions of rows (10x this), so it
    runs twice over little: over the counts per `_BUCKET` lengths, which finds the bucket holding the rank
    and the count below it, then over the lengths of that one bucket."""
    con.execute(f"DELETE FROM month_percentiles WHERE month IN ({months})")
    values = ", ".join(f"({p})" for p in PERCENTILES)
    lengths = f"month_lengths WHERE month IN ({months})"
    group = "PARTITION BY month, side, name"
    con.execute(
        "INSERT INTO month_percentiles WITH "
        f"buckets AS (SELECT month, side, name, prompt_tokens // {_BUCKET} AS bucket, sum(requests) AS requests "
        f"FROM {lengths} GROUP BY ALL), "
        f"running AS (SELECT *, sum(requests) OVER ({group} ORDER BY bucket) AS upto, "
        f"sum(requests) OVER ({group}) AS n FROM buckets), "
        "found AS (SELECT month, side, name, p, n, min(bucket) AS bucket, arg_min(upto - requests, bucket) AS below "
        f"FROM running, (VALUES {values}) v(p) WHERE upto * 100 >= p * n GROUP BY ALL), "
        "inside AS (SELECT f.month, f.side, f.name, p, n, below, l.prompt_tokens, "
        f"sum(l.requests) OVER (PARTITION BY f.month, f.side, f.name, p ORDER BY l.prompt_tokens) AS upto "
        f"FROM found f JOIN (SELECT * FROM {lengths}) l ON l.month = f.month AND l.side = f.side "
        f"AND l.name = f.name AND l.prompt_tokens // {_BUCKET} = f.bucket) "
        "SELECT month, side, name, p, min(prompt_tokens) FROM inside WHERE (below + upto) * 100 >= p * n GROUP BY ALL"
    )
