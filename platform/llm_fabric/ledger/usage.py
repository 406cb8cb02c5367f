"""Usage from request records: the figures the books take from them, per model, tenant and day.

The records are read once (llm_fabric.ledger.record_batches) and tallied by a compiled loop, one tally
per CPU (llm_fabric.ledger.tally, whose docstring states the invariants: integer tokens, exact sums,
exact nearest-rank percentiles, records outside the month counted but not tallied). DuckDB reads
what pyarrow cannot take as it is (JSON Lines, CSV, LiteLLM exports) and deduplicates by
`request_id`. Natural keys: (model, tenant) pairs and (model, day); dicts come back sorted by them,
so the same records give the same figures whatever order the threads read them in.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import duckdb
import numpy as np

from llm_fabric.ledger.period import Month
from llm_fabric.ledger.prompt_lengths import percentiles_by
from llm_fabric.ledger.records import RecordFormat, RecordSource, register_records
from llm_fabric.ledger.tally import (
    CACHED,
    COUNT,
    FIELDS,
    INPUT,
    OUTPUT,
    TTFT_N,
    TTFT_US,
    Ints,
    Names,
    Tally,
    load_kernel,
)

if TYPE_CHECKING:
    from llm_fabric.ledger.record_batches import Task

PERCENTILES = (50, 95, 99)
T = TypeVar("T")


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

    DuckDB reads the record files pyarrow cannot take directly, deduplicates them, and replays
    Prometheus data in tests; 1 GB keeps a 50 M-record month under 2 GB RSS.
    """
    con = duckdb.connect(":memory:")
    con.execute("SET TimeZone = 'UTC'")
    con.execute(f"SET memory_limit = '{memory_limit}'")
    con.execute(f"SET threads = {_threads()}")
    con.execute("SET preserve_insertion_order = false")
    if temp_dir is not None:
        con.execute(f"SET temp_directory = '{temp_dir}'")
    return con


def _read_ahead(batches: Iterator[T]) -> Iterator[T]:
    """`batches`, the next one read on another thread while the caller works on this one.

    For CPUs that would idle otherwise (fewer tasks than threads): decoding and tallying overlap.
    """
    with ThreadPoolExecutor(1, thread_name_prefix="ledger-read") as pool:
        pending = pool.submit(next, batches, None)
        while (batch := pending.result()) is not None:
            pending = pool.submit(next, batches, None)
            yield batch


def tally_records(tasks: list[Task], month: Month, progress: Callable[[str], None] | None = None) -> Tally:
    """Every task's records in one tally; tasks are shared out among one thread per CPU."""
    from llm_fabric.ledger.record_batches import normalise  # pyarrow: only where records are read

    load_kernel()  # here, not in each thread
    note = progress or (lambda _msg: None)
    queue: Iterator[tuple[int, Task]] = iter(enumerate(tasks, 1))
    lock = threading.Lock()
    spare_cpus = len(tasks) < _threads()
    models, tenants = Names(), Names()  # shared: every tally indexes a name alike, so merging is adding

    def tally(where: str) -> Tally:
        return Tally(month, where, models, tenants)

    def work() -> list[Tally]:
        tallies = [tally(tasks[0].where if tasks else "no request records")]
        while True:
            with lock:
                item = next(queue, None)
                if item is not None:
                    note(f"reading {item[1].where} ({item[0]} of {len(tasks)})")
            if item is None:
                return tallies
            tallies[-1].where = item[1].where
            batches = item[1].batches(spare_cpus)
            for batch in _read_ahead(batches) if spare_cpus else batches:
                if tallies[-1].full(batch.num_rows):
                    tallies.append(tally(item[1].where))
                tallies[-1].add(normalise(batch, item[1].where))
                del batch  # before the next is decoded: pyarrow reuses its buffers, still in cache

    workers = min(_threads(), len(tasks))
    if workers <= 1:
        return Tally.merge(work())
    with ThreadPoolExecutor(workers, thread_name_prefix="ledger-tally") as pool:
        parts = [pool.submit(work) for _ in range(workers)]
        return Tally.merge([t for p in parts for t in p.result()])


def _tokens(cells: Ints) -> list[Tokens]:
    """Tokens of each group of cells summed to [group, ok, field] (ok 0 = failed), in one numpy pass."""
    total = cells.sum(axis=1)
    table = np.stack([total[:, COUNT], cells[:, 0, COUNT], total[:, INPUT], total[:, CACHED], total[:, OUTPUT]], 1)
    return [Tokens(*row) for row in table.tolist()]


def _figures(
    names: list[str], cells: Ints, percentiles: list[dict[int, int]], has_cached: bool, has_ttft: bool
) -> dict[str, UsageFigures]:
    """UsageFigures per name (in name order) from its cells summed to [name, ok, field] and its percentiles."""
    out: dict[str, UsageFigures] = {}
    tokens = _tokens(cells)
    ttft_n, ttft_us = cells[:, :, TTFT_N].sum(axis=1).tolist(), cells[:, :, TTFT_US].sum(axis=1).tolist()
    for i, name in sorted(enumerate(names), key=lambda pair: pair[1]):
        if not tokens[i].requests:
            continue
        out[name] = UsageFigures(
            tokens=tokens[i],
            prompt_percentiles=percentiles[i],
            cache_hit_rate=tokens[i].cache_hit_rate if has_cached else None,
            mean_ttft_ms=round(ttft_us[i] / ttft_n[i] / 1000, 1) if has_ttft and ttft_n[i] else None,
        )
    return out


def _usage(tally: Tally, source: RecordSource, month: Month) -> RecordUsage:
    models, tenants = tally.models.names, tally.tenants.names
    cells = tally.cells[: len(models), : len(tenants)]  # [model, tenant, day, ok, field]
    with ThreadPoolExecutor(2, thread_name_prefix="ledger-lengths") as pool:  # numba and numpy, without the GIL
        by_model_pct, by_tenant_pct = pool.map(
            percentiles_by,
            (tally.model_lengths[: len(models)], tally.tenant_lengths[: len(tenants)]),
            (tally.long, tally.long),
            (0, 1),
            (PERCENTILES, PERCENTILES),
        )
    by_model = _figures(models, cells.sum(axis=(1, 2)), by_model_pct, source.has_cached, source.has_ttft)
    by_tenant = _figures(tenants, cells.sum(axis=(0, 2)), by_tenant_pct, source.has_cached, source.has_ttft)
    for i, model in enumerate(models):
        if model in by_model:
            fig = by_model[model]
            fig.peak_output_tokens_per_s = round(int(tally.minute_output[i].max()) / 60, 1)
            fig.peak_total_tokens_per_s = round(int((tally.minute_input[i] + tally.minute_output[i]).max()) / 60, 1)
    days = cells.shape[2]
    pair_tokens = _tokens(cells.sum(axis=2).reshape(len(models) * len(tenants), 2, FIELDS))
    pairs = {(models[k // len(tenants)], tenants[k % len(tenants)]): t for k, t in enumerate(pair_tokens) if t.requests}
    day_tokens = _tokens(cells.sum(axis=1).reshape(len(models) * days, 2, FIELDS))
    daily = {
        (models[k // days], month.first_day + timedelta(days=k % days)): t
        for k, t in enumerate(day_tokens)
        if t.requests
    }
    return RecordUsage(
        source,
        by_model,
        by_tenant,
        dict(sorted(pairs.items())),
        dict(sorted(daily.items())),
        tally.rows - tally.rows_outside,
        tally.rows_outside,
    )


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
    from llm_fabric.ledger.record_batches import duckdb_task, parquet_tasks

    tasks = parquet_tasks(source) or [duckdb_task(con, source)]
    tally = tally_records(tasks, month, progress)
    if progress:
        progress("exact percentiles and peaks")
    return _usage(tally, source, month)
