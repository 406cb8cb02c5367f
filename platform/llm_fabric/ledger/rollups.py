"""The store's daily rollups, rebuilt from its records for the days an ingest touched.

- `daily_usage`: per (day, model, tenant, site) the requests, failures, input/cached/output token sums,
  how many records stated cached tokens and TTFT, and the TTFT sum in whole microseconds;
- `daily_lengths`: per (day, model, tenant) the requests at each exact prompt length;
- `minute_tokens`: per (model, minute) the input and output token sums (the busiest minute is exact);
- `month_lengths`: per (month, model) and per (month, tenant) the requests at each prompt length,
  merged from `daily_lengths` (a month's daily rows repeat each length once per day and tenant;
  merged, a length appears once per model or tenant);
- `month_percentiles`: per (month, model) and (month, tenant) the exact nearest-rank p50/p95/p99 of
  the prompt lengths, from `month_lengths` by a running sum: the smallest length whose running count
  reaches ceil(p x n / 100). Computed once per ingest that touches the month, so a report reads a
  few rows instead of sorting millions (2.7 M `month_lengths` rows for a 50 M-record month).

Every table is a pure function of the records of its days (months), so rebuilding a day from
scratch is how a late record is added: nothing is updated in place, and a rollup never disagrees
with the records it was built from. Sums are BIGINT: a month of tokens is far below 2^63.
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


def rebuild(con: duckdb.DuckDBPyConnection, days: str) -> None:
    """Rebuild every rollup of the days in the table `days` (column `day`) and of their months."""
    touched = f"day IN (SELECT day FROM {days})"
    months = f"(SELECT DISTINCT CAST(date_trunc('month', day) AS DATE) FROM {days})"
    for table in ("daily_usage", "daily_lengths", "minute_tokens"):
        con.execute(f"DELETE FROM {table} WHERE {touched}")
    con.execute(
        f"INSERT INTO daily_usage SELECT day, model, tenant, site, {USAGE_FROM_RECORDS} "
        f"FROM records WHERE {touched} GROUP BY ALL"
    )
    con.execute(
        "INSERT INTO daily_lengths SELECT day, model, tenant, prompt_tokens, count(*) "
        f"FROM records WHERE {touched} AND prompt_tokens IS NOT NULL GROUP BY ALL"
    )
    con.execute(
        "INSERT INTO minute_tokens SELECT day, model, date_trunc('minute', ts), "
        "CAST(coalesce(sum(prompt_tokens), 0) AS BIGINT), CAST(sum(completion_tokens) AS BIGINT) "
        f"FROM records WHERE {touched} GROUP BY ALL"
    )
    con.execute(f"DELETE FROM month_lengths WHERE month IN {months}")
    for side in ("model", "tenant"):
        con.execute(
            f"INSERT INTO month_lengths SELECT CAST(date_trunc('month', day) AS DATE) AS month, '{side}', {side}, "
            "prompt_tokens, CAST(sum(requests) AS BIGINT) FROM daily_lengths "
            f"WHERE CAST(date_trunc('month', day) AS DATE) IN {months} GROUP BY ALL"
        )
    con.execute(f"DELETE FROM month_percentiles WHERE month IN {months}")
    values = ", ".join(f"({p})" for p in PERCENTILES)
    # nearest rank: the first length whose running count reaches ceil(p x n / 100), i.e. count x 100 >= p x n
    con.execute(
        "INSERT INTO month_percentiles WITH c AS (SELECT month, side, name, prompt_tokens, "
        "sum(requests) OVER (PARTITION BY month, side, name ORDER BY prompt_tokens) AS running, "
        "sum(requests) OVER (PARTITION BY month, side, name) AS n "
        f"FROM month_lengths WHERE month IN {months}) "
        f"SELECT month, side, name, p, min(prompt_tokens) FROM c, (VALUES {values}) v(p) "
        "WHERE running * 100 >= p * n GROUP BY ALL"
    )
