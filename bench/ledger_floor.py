"""What the ledger's speed target asks of one CPU: the work split into its parts, single-threaded.

`bench/ledger.py` compares whole runs on every CPU. This splits them, each part in a fresh process on
one thread, so the parts add up (core-seconds):
- duckdb-baseline: the issue's baseline query (4 of the 8 columns) on one DuckDB thread;
- duckdb-8-columns: DuckDB reading all 8 columns the books need, with the cheapest aggregate that
  makes it decode each (a sum per number, the sum of the string lengths per string; `count(model)`
  is cheaper but need not decode the strings, `min(model)` costs twice as much): no ledger work;
- duckdb-to-arrow: DuckDB handing the 8 columns over as Arrow batches, the way a tally could take them;
- pyarrow-decode: pyarrow decoding the 8 columns into Arrow batches (as record_batches does), no tally;
- tally: the compiled tally alone, over batches decoded (and touched) before the clock starts.
The last lines give the best ratio to the baseline that each way of reading allows on N CPUs if
nothing else cost anything: baseline / (read + tally). For duckdb-8-columns that is a bound no ledger
reaches: the tally cannot read DuckDB's vectors where they are, only what duckdb-to-arrow hands over.
Run on a file bench/ledger.py generated:

    .venv/bin/python bench/ledger_floor.py /tmp/llm-fabric-bench/records-10000000.parquet --runs 5
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

MONTH = "2026-11"
COLUMNS = ["ts", "model", "tenant", "prompt_tokens", "completion_tokens", "cached_prompt_tokens", "ttft_ms", "status"]
QUERIES = {
    "duckdb-baseline": """SELECT model, count(*), sum(prompt_tokens), sum(completion_tokens),
                                 sum(cached_prompt_tokens) FROM read_parquet('{path}') GROUP BY model""",
    "duckdb-8-columns": """SELECT count(*), sum(prompt_tokens), sum(completion_tokens), sum(cached_prompt_tokens),
                                  sum(ttft_ms), max(ts), sum(strlen(model)), sum(strlen(tenant)),
                                  sum(strlen(status))
                           FROM read_parquet('{path}')""",
}
PARTS = (*QUERIES, "duckdb-to-arrow", "pyarrow-decode", "tally")


def _one_thread_duckdb() -> Any:
    import duckdb

    con = duckdb.connect(":memory:")
    con.execute("SET threads = 1")
    return con


def part(kind: str, path: Path) -> float:
    """Seconds of one part on one thread (imports and set-up before the clock)."""
    if kind in QUERIES:
        con = _one_thread_duckdb()
        began = time.perf_counter()
        con.execute(QUERIES[kind].format(path=path)).fetchall()
        return time.perf_counter() - began
    if kind == "duckdb-to-arrow":
        con = _one_thread_duckdb()
        began = time.perf_counter()
        for _batch in con.sql(f"SELECT {', '.join(COLUMNS)} FROM read_parquet('{path}')").to_arrow_reader(1 << 18):
            pass
        return time.perf_counter() - began
    import pyarrow.parquet as pq

    file = pq.ParquetFile(path, read_dictionary=["model", "tenant", "status"], memory_map=True)
    if kind == "pyarrow-decode":
        began = time.perf_counter()
        for _batch in file.iter_batches(batch_size=1 << 18, columns=COLUMNS, use_threads=False):
            pass
        return time.perf_counter() - began
    from llm_fabric.ledger.period import Month
    from llm_fabric.ledger.record_batches import BATCH, normalise
    from llm_fabric.ledger.tally import Names, Tally, load_kernel

    load_kernel()
    batches = [normalise(b, str(path)) for b in file.iter_batches(batch_size=BATCH, columns=COLUMNS, use_threads=False)]
    tally = Tally(Month.parse(MONTH), str(path), Names(), Names())
    began = time.perf_counter()
    for columns in batches:
        tally.add(columns)
    return time.perf_counter() - began


def run_part(kind: str, path: Path) -> float:
    pid = os.fork()
    if pid == 0:
        out = os.open(f"{path}.{kind}.floor", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(out, 1)
        os.execv(sys.executable, [sys.executable, __file__, "--part", kind, str(path)])
    _, status = os.waitpid(pid, 0)
    if status != 0:
        raise SystemExit(f"{kind} failed (status {status})")
    return float(Path(f"{path}.{kind}.floor").read_text())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("path", type=Path)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--cpus", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument("--part", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.part:
        print(f"{part(args.part, args.path):.6f}")
        return
    runs: dict[str, list[float]] = {k: [] for k in PARTS}
    for _ in range(args.runs):  # taking turns, as bench/ledger.py does
        for kind in PARTS:
            runs[kind].append(run_part(kind, args.path))
    sec = {k: statistics.median(v) for k, v in runs.items()}
    print(f"{args.path.name}, one thread each, median of {args.runs} runs:")
    for kind in PARTS:
        print(f"  {kind:18s} {sec[kind]:.3f} s  (runs {' '.join(f'{s:.3f}' for s in runs[kind])})")
    base = sec["duckdb-baseline"]
    for reader in ("duckdb-8-columns", "duckdb-to-arrow", "pyarrow-decode"):
        work = sec[reader] + sec["tally"]
        print(
            f"  best ratio reading with {reader} + tally: {base:.3f} / {work:.3f} = {base / work:.2f}"
            f" (the same on {args.cpus} CPUs if they share the work perfectly)"
        )
    print(f"  DuckDB's 8-column scan alone: {base / sec['duckdb-8-columns']:.2f} of the baseline's speed")


if __name__ == "__main__":
    main()
