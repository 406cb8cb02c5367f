"""Usage from request records, aggregated by DuckDB in three scans with small hash tables.

Profiled (EXPLAIN ANALYZE, docs/benchmarks.md, ledger section): what costs is the number of groups
a scan builds and the kind of key, not the number of aggregates; GROUPING SETS, DuckDB's map-based
`histogram` and windows over large histograms each cost more than a separate scan. So:

1. cells: GROUP BY (model, tenant, prompt-length bucket), bucket = floor(8 x fourth root of the
   length) (about 6 % wide at 1K tokens, 3 % at 100K): token sums per (model, tenant), coarse
   histograms per model and per tenant, and the smallest and largest length in each bucket.
   Groups grow with models x tenants x buckets, never with records.
2. minutes: GROUP BY (model index, minute), which DuckDB runs as a perfect hash table (direct
   array index) because both keys are small integers: per-minute peaks and per-day sums.
3. exact percentiles: the coarse histograms name the bucket that holds each p50/p95/p99 rank and
   the count below it; one scan reads only lengths inside those buckets (a range filter DuckDB
   pushes into the Parquet reader) and counts them exactly. Nearest rank: the smallest length
   whose cumulative count reaches ceil(p x n / 100), in integers.

The bucket function is monotonic (IEEE square roots are correctly rounded), so the lengths inside
a bucket's [smallest, largest] are exactly that bucket's, and the count below it is exact.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

import duckdb

from llm_fabric.errors import UsageError
from llm_fabric.ledger.period import Month
from llm_fabric.ledger.records import SUCCESS_SQL, RecordFormat, RecordSource, register_records

PERCENTILES = (50, 95, 99)
_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()


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


def _threads() -> int:
    return max(1, len(os.sched_getaffinity(0)))


def connect(temp_dir: Path | None = None, memory_limit: str = "1GB") -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB with UTC session time and a memory cap (spills to `temp_dir` beyond it).

    1 GB leaves the process (interpreter, Arrow, the perfect hash tables, which DuckDB does not
    count against the limit) under 2 GB RSS at 50 M records; one thread per CPU we may run on.
    """
    con = duckdb.connect(":memory:")
    con.execute("SET TimeZone = 'UTC'")
    con.execute(f"SET memory_limit = '{memory_limit}'")
    con.execute(f"SET threads = {_threads()}")
    con.execute("SET preserve_insertion_order = false")
    # (model index, minute of the month) needs 16 bits + a few: direct-indexed, no hashing
    con.execute("SET perfect_ht_threshold = 22")
    if temp_dir is not None:
        con.execute(f"SET temp_directory = '{temp_dir}'")
    return con


# fourth root x 8: about 6 % wide at 1K tokens, 3 % at 100K; monotonic (sqrt is correctly rounded)
_BUCKET = "floor(sqrt(sqrt(greatest(plen, 0)::DOUBLE)) * 8)::INTEGER"

# TTFT summed as DECIMAL: a float sum would depend on the order the threads add it up, and re-runs
# of a month must give the same books
_CELLS = f"""
CREATE OR REPLACE TEMP TABLE ledger_cells AS
SELECT model, tenant, {_BUCKET} AS bucket,
       count(*) AS n, count(*) FILTER (WHERE NOT ok) AS failed, count(plen) AS c,
       sum(plen)::HUGEINT AS inp, sum(cached)::HUGEINT AS cached, sum(outp)::HUGEINT AS outp,
       sum(CAST(ttft_ms AS DECIMAL(18, 3))) AS ttft_sum, count(ttft_ms) AS ttft_n, min(plen) AS lo, max(plen) AS hi
FROM month_records GROUP BY ALL
"""

_TARGETS = f"""
CREATE OR REPLACE TEMP TABLE ledger_targets AS
WITH h AS (
    SELECT 'model' AS kind, model AS k, bucket, sum(c) AS c, min(lo) AS lo, max(hi) AS hi
    FROM ledger_cells WHERE bucket IS NOT NULL GROUP BY ALL
    UNION ALL
    SELECT 'tenant', tenant, bucket, sum(c), min(lo), max(hi) FROM ledger_cells WHERE bucket IS NOT NULL GROUP BY ALL
), w AS (
    SELECT *, sum(c) OVER (PARTITION BY kind, k ORDER BY bucket ROWS UNBOUNDED PRECEDING) AS cum,
           sum(c) OVER (PARTITION BY kind, k) AS total
    FROM h
), r AS (
    SELECT kind, k, p, (p * total + 99) // 100 AS rank
    FROM (SELECT DISTINCT kind, k, total FROM w), (SELECT unnest({list(PERCENTILES)}) AS p)
)
SELECT r.kind, r.k, r.p, r.rank, arg_min(w.lo, w.bucket) AS lo, arg_min(w.hi, w.bucket) AS hi,
       arg_min(w.cum - w.c, w.bucket) AS below
FROM r JOIN w ON w.kind = r.kind AND w.k = r.k AND w.cum >= r.rank
GROUP BY ALL
"""

_EXACT = """
WITH hits AS (
    SELECT model, tenant, plen, count(*) AS n FROM month_records WHERE {ranges} GROUP BY ALL
), keyed AS (
    SELECT 'model' AS kind, model AS k, plen, sum(n) AS n FROM hits GROUP BY ALL
    UNION ALL
    SELECT 'tenant', tenant, plen, sum(n) FROM hits GROUP BY ALL
), j AS (
    SELECT t.kind, t.k, t.p, t.rank, keyed.plen,
           t.below + sum(keyed.n) OVER (PARTITION BY t.kind, t.k, t.p ORDER BY keyed.plen
                                        ROWS UNBOUNDED PRECEDING) AS cum
    FROM ledger_targets t JOIN keyed ON keyed.kind = t.kind AND keyed.k = t.k AND keyed.plen BETWEEN t.lo AND t.hi
    WHERE t.lo < t.hi
)
SELECT kind, k, p, min(plen) FILTER (WHERE cum >= rank) FROM j GROUP BY ALL
UNION ALL
SELECT kind, k, p, lo FROM ledger_targets WHERE lo = hi
"""

_MINUTES = """
WITH m AS (
    SELECT idx, epoch_us(ts) // 60000000 AS minute, count(*) AS n, count(*) FILTER (WHERE NOT ok) AS failed,
           sum(plen) AS inp, sum(cached) AS cached, sum(outp) AS outp
    FROM month_records JOIN ledger_models USING (model) GROUP BY ALL
)
SELECT model, minute // 1440 AS day, sum(n), sum(failed), sum(inp)::HUGEINT, sum(cached)::HUGEINT,
       sum(outp)::HUGEINT, max(outp), max(inp + outp)
FROM m JOIN ledger_models USING (idx) GROUP BY ALL ORDER BY ALL
"""


def _month_records(con: duckdb.DuckDBPyConnection, source: RecordSource, month: Month) -> None:
    """`month_records`: the month's rows, renamed; a table when deduplication would otherwise run per scan."""
    start, end = (f"TIMESTAMP '{t:%Y-%m-%d %H:%M:%S}'" for t in (month.start, month.end))
    select = (
        "SELECT model, tenant, ts, prompt_tokens AS plen, completion_tokens AS outp, "
        f"coalesce(cached_prompt_tokens, 0) AS cached, ttft_ms, {SUCCESS_SQL} AS ok "
        f"FROM records WHERE ts >= {start} AND ts < {end}"
    )
    kind = "TABLE" if source.deduplicated else "VIEW"
    con.execute(f"CREATE OR REPLACE TEMP {kind} month_records AS {select}")


def _int(value: object) -> int:
    """DuckDB's integers and HUGEINT sums arrive as int; NULL (no rows) as None."""
    return value if isinstance(value, int) else 0


Pairs = dict[tuple[str, str], Tokens]
PairTimes = dict[tuple[str, str], tuple[float, int]]


def _cells(con: duckdb.DuckDBPyConnection) -> tuple[Pairs, PairTimes]:
    """Token sums and TTFT (sum, count) per (model, tenant), from the cells table."""
    rows = con.execute(
        "SELECT model, tenant, sum(n), sum(failed), sum(inp), sum(cached), sum(outp), sum(ttft_sum), sum(ttft_n) "
        "FROM ledger_cells GROUP BY ALL ORDER BY ALL"
    ).fetchall()
    pairs: Pairs = {}
    ttft: PairTimes = {}
    for model, tenant, *nums in rows:
        key = (str(model), str(tenant))
        pairs[key] = Tokens(*(_int(v) for v in nums[:5]))
        ttft[key] = (float(nums[5] or 0.0), _int(nums[6]))
    return pairs, ttft


def _merge_ranges(rows: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for lo, hi in sorted(rows):
        if merged and lo <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], hi))
        else:
            merged.append((lo, hi))
    return merged


def _percentiles(con: duckdb.DuckDBPyConnection) -> dict[tuple[str, str], dict[int, int]]:
    """Exact nearest-rank percentiles per ('model' | 'tenant', name)."""
    con.execute(_TARGETS)
    spans = con.execute("SELECT DISTINCT lo, hi FROM ledger_targets WHERE lo < hi").fetchall()
    ranges = " OR ".join(f"plen BETWEEN {int(lo)} AND {int(hi)}" for lo, hi in _merge_ranges(spans)) or "false"
    out: dict[tuple[str, str], dict[int, int]] = {}
    for kind, name, p, value in con.execute(_EXACT.format(ranges=ranges)).fetchall():
        if value is not None:
            out.setdefault((str(kind), str(name)), {})[int(p)] = int(value)
    return {key: dict(sorted(v.items())) for key, v in out.items()}


def _minutes(con: duckdb.DuckDBPyConnection) -> tuple[dict[tuple[str, date], Tokens], dict[str, tuple[float, float]]]:
    """Per-day sums and per-minute peaks (tokens/s) per model."""
    con.execute(
        "CREATE OR REPLACE TEMP TABLE ledger_models AS SELECT model, (row_number() OVER (ORDER BY model) - 1)::INTEGER "
        "AS idx FROM (SELECT DISTINCT model FROM ledger_cells WHERE model IS NOT NULL)"
    )
    daily: dict[tuple[str, date], Tokens] = {}
    peaks: dict[str, tuple[int, int]] = {}
    for model, day, *nums in con.execute(_MINUTES).fetchall():
        daily[(str(model), date.fromordinal(_EPOCH_ORDINAL + int(day)))] = Tokens(*(_int(v) for v in nums[:5]))
        out, total = peaks.get(str(model), (0, 0))
        peaks[str(model)] = (max(out, _int(nums[5])), max(total, _int(nums[6])))
    return daily, {m: (round(o / 60, 1), round(t / 60, 1)) for m, (o, t) in peaks.items()}


def _figures(
    sums: dict[str, Tokens], ttft: dict[str, tuple[float, int]], pct: dict[str, dict[int, int]], has_cached: bool
) -> dict[str, UsageFigures]:
    out: dict[str, UsageFigures] = {}
    for name in sorted(sums):
        tokens, (ttft_sum, ttft_n) = sums[name], ttft[name]
        out[name] = UsageFigures(
            tokens=tokens,
            prompt_percentiles=pct.get(name, {}),
            cache_hit_rate=tokens.cache_hit_rate if has_cached else None,
            mean_ttft_ms=round(ttft_sum / ttft_n, 1) if ttft_n else None,
        )
    return out


def _roll_up(pairs: Pairs, ttft: PairTimes, side: int) -> tuple[dict[str, Tokens], dict[str, tuple[float, int]]]:
    sums: dict[str, Tokens] = {}
    times: dict[str, tuple[float, int]] = {}
    for key, tokens in pairs.items():
        sums.setdefault(key[side], Tokens()).add(tokens)
        total, count = times.get(key[side], (0.0, 0))
        times[key[side]] = (total + ttft[key][0], count + ttft[key][1])
    return sums, times


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
    try:
        _month_records(con, source, month)
        note(f"scanning {len(paths)} record file(s): sums and histograms")
        con.execute(_CELLS)
        total_row = con.execute("SELECT count(*) FROM records").fetchone()
        note("scanning: per-minute peaks")
        daily, peaks = _minutes(con)
        note("scanning: exact percentiles")
        pct = _percentiles(con)
        pairs, ttft = _cells(con)
    except duckdb.Error as exc:
        names = ", ".join(str(p) for p in paths)
        raise UsageError(f"request records ({names}) could not be read: {exc}", hint="see docs/ledger.md") from exc
    by_model = _figures(*_roll_up(pairs, ttft, 0), {k: v for (kind, k), v in pct.items() if kind == "model"},
                        source.has_cached)
    for model, (peak_out, peak_total) in peaks.items():
        by_model[model].peak_output_tokens_per_s = peak_out
        by_model[model].peak_total_tokens_per_s = peak_total
    by_tenant = _figures(*_roll_up(pairs, ttft, 1), {k: v for (kind, k), v in pct.items() if kind == "tenant"},
                         source.has_cached)
    in_month = sum(t.requests for t in pairs.values())
    total = int(total_row[0]) if total_row else 0
    return RecordUsage(source, by_model, by_tenant, dict(sorted(pairs.items())), dict(sorted(daily.items())),
                       in_month, total - in_month)
