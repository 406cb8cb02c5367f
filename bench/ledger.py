"""The ledger store's speed and memory: `fabric ledger ingest` against DuckDB's own COPY, and
`fabric report` from the rollups.

Generates N request records once (Parquet and JSON Lines, with request ids as the gateway's meter
writes them, under --dir, reused when present), then, in fresh processes taking turns (so a change in
the shared machine's load hits both alike; peak RSS from wait4):
- copy: DuckDB reading the same file and writing the same records itself,
  `COPY (SELECT * FROM read_parquet/read_json(FILE)) TO 'out.parquet'` (the baseline);
- sql: the fair baseline, SQL_BASELINE: the ingest's work in plain DuckDB SQL (read, check, key check, the
  same rollup GROUP BYs, one transaction into a new file), as simply as a user would write it;
- ingest: `LedgerStore(new store).ingest([FILE])` (read, check, store, rollups, commit);
with --daily N, the steady state of a store: the last day of an N-record month (Parquet) ingested
into a store that holds the rest of the month (a fresh copy each run), next to the copy of that day;
and, for the largest size's Parquet store (the last ingest's, kept):
- report: `fabric report --month 2026-11 --store STORE --out DIR` as a whole command (interpreter start,
  site repo, rollups, rendering, signing) and its peak RSS.
Prints the median wall seconds of --runs, records/s, the ingest's speed as a fraction of the copy's, the
median CPU seconds (all threads; steadier than wall time when other work shares the CPUs) and their
ratio, and peak RSS.

    PYTHONPATH=platform:. .venv/bin/python bench/ledger.py --sizes 1000000 10000000 --runs 3
    PYTHONPATH=platform:. .venv/bin/python bench/ledger.py --sizes 50000000 --runs 2 --report-runs 5
    PYTHONPATH=platform:. .venv/bin/python bench/ledger.py --sizes --daily 10000000 --runs 3
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

MONTH = "2026-11"
PROFILES = {
    "qwen3-5": (1100, 33958),
    "kimi-k2-6": (2179, 99746),
    "glm-5-1": (709, 90351),
    "deepseek-v3-2": (879, 23776),
    "gpt-oss-120b": (193, 2842),
}
TENANTS = [f"tenant-{i:02d}" for i in range(20)]
READERS = {"parquet": "read_parquet('{path}')", "jsonl": "read_json('{path}', format = 'newline_delimited')"}


# The fair baseline (issue 31): the ingest's work in plain DuckDB SQL, as a user would write it: read the file,
# check each record, check the natural key, the same rollup GROUP BYs, all in one transaction into a new file
# (the generated files have no `site` column: it is NULL, as the ingest stores it).
SQL_BASELINE = """
BEGIN TRANSACTION;
CREATE TABLE records AS SELECT CAST(ts AS DATE) AS day, NULL::VARCHAR AS site, * FROM {reader}
    WHERE ts IS NOT NULL AND model IS NOT NULL AND tenant IS NOT NULL
    AND prompt_tokens BETWEEN 0 AND 2147483646 AND coalesce(completion_tokens, 0) BETWEEN 0 AND 2147483646
    AND coalesce(cached_prompt_tokens, 0) <= prompt_tokens AND coalesce(ttft_ms, 0) BETWEEN 0 AND 4000000;
SELECT count(*) = count(DISTINCT (day, request_id)) FROM records;
CREATE TABLE daily_usage AS SELECT day, model, tenant, site, count(*) AS requests,
    count(*) FILTER (WHERE status NOT IN ('ok', 'success', 'succeeded', '200')) AS failed,
    sum(prompt_tokens) AS input, sum(cached_prompt_tokens) AS cached_input, sum(completion_tokens) AS output,
    count(cached_prompt_tokens) AS cached_known, count(ttft_ms) AS ttft_n, sum(ttft_ms) AS ttft
    FROM records GROUP BY ALL;
CREATE TABLE daily_lengths AS SELECT day, model, tenant, prompt_tokens, count(*) AS requests FROM records GROUP BY ALL;
CREATE TABLE minute_tokens AS SELECT day, model, date_trunc('minute', ts) AS minute, sum(prompt_tokens) AS input,
    sum(completion_tokens) AS output FROM records GROUP BY ALL;
CREATE TABLE month_lengths AS
    SELECT date_trunc('month', day) AS month, 'model' AS side, model AS name, prompt_tokens, count(*) AS requests
    FROM records GROUP BY ALL
    UNION ALL SELECT date_trunc('month', day), 'tenant', tenant, prompt_tokens, count(*) FROM records GROUP BY ALL;
CREATE TABLE month_percentiles AS SELECT month, side, name,
    quantile_disc(prompt_tokens, [0.5, 0.95, 0.99]) AS p FROM month_lengths GROUP BY ALL;
COMMIT;
"""


def worker(kind: str, path: Path, store: Path) -> None:
    """One timed run; prints its wall and CPU seconds (all threads; imports before the clock)."""
    if kind == "sql":
        import duckdb

        for old in (store, store.with_name(store.name + ".wal")):
            old.unlink(missing_ok=True)
        began, cpu = time.perf_counter(), time.process_time()
        con = duckdb.connect(str(store))
        con.execute("SET TimeZone = 'UTC'")
        con.execute(SQL_BASELINE.format(reader=READERS[path.suffix[1:]].format(path=path)))
        con.close()
        print(f"{time.perf_counter() - began:.6f} {time.process_time() - cpu:.6f}")
        return
    if kind == "copy":
        import duckdb

        con = duckdb.connect(":memory:")
        out = store.with_suffix(".copy.parquet")
        began, cpu = time.perf_counter(), time.process_time()
        con.execute(f"COPY (SELECT * FROM {READERS[path.suffix[1:]].format(path=path)}) TO '{out}' (FORMAT parquet)")
        print(f"{time.perf_counter() - began:.6f} {time.process_time() - cpu:.6f}")
        out.unlink()
        return
    from llm_fabric.ledger.store.database import LedgerStore

    if kind == "ingest":  # "daily": into the store as the parent left it
        for old in (store, store.with_name(store.name + ".wal")):
            old.unlink(missing_ok=True)
    began, cpu = time.perf_counter(), time.process_time()
    with LedgerStore(store) as ledger:
        result = ledger.ingest([path])
    seconds, cpu = time.perf_counter() - began, time.process_time() - cpu
    assert result.added > 0 and result.bad == 0, result
    print(f"{seconds:.6f} {cpu:.6f}")


def _timed(argv: list[str], out: Path) -> tuple[float, float]:
    """(wall seconds, peak RSS MB) of a fresh process; its stdout goes to `out`."""
    began = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(fd, 1)
        os.execv(argv[0], argv)
    _, status, usage = os.wait4(pid, 0)
    wall = time.perf_counter() - began
    if status != 0:
        raise SystemExit(f"{' '.join(argv)} failed (status {status})")
    return wall, usage.ru_maxrss / 1024


def run_measure(kind: str, path: Path, store: Path) -> tuple[float, float, float]:
    """(wall seconds and CPU seconds as the worker measured them, peak RSS MB) of one run."""
    out = store.with_suffix(f".{kind}.out")
    _wall, rss = _timed([sys.executable, __file__, "--worker", kind, str(path), str(store)], out)
    wall, cpu = (float(x) for x in out.read_text().split())
    return wall, cpu, rss


def report_runs(store: Path, site: Path, out: Path, runs: int) -> list[tuple[float, float]]:
    code = "from llm_fabric.cli.main import run; run()"
    argv = [sys.executable, "-c", code, "report", "-C", str(site), "--month", MONTH, "--store", str(store)]
    return [_timed([*argv, "--out", str(out)], out.with_suffix(".log")) for _ in range(runs)]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="*", default=[1_000_000, 10_000_000])
    parser.add_argument("--daily", type=int, metavar="N", help="also the last day of an N-record month")
    parser.add_argument("--formats", nargs="+", default=["parquet", "jsonl"], choices=list(READERS))
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--report-runs", type=int, default=5)
    parser.add_argument("--dir", type=Path, default=Path("/tmp/llm-fabric-bench"))
    parser.add_argument("--worker", nargs=3, metavar=("KIND", "PATH", "STORE"))
    args = parser.parse_args()
    if args.worker:
        worker(args.worker[0], Path(args.worker[1]), Path(args.worker[2]))
        return
    from tests.fixtures.ledger_synthetic import generate_records

    from llm_fabric.init import init_site
    from llm_fabric.ledger.store.period import Month

    args.dir.mkdir(parents=True, exist_ok=True)
    print(
        "| records | format | copy s | ingest s | ingest rec/s | ingest / copy speed | CPU s copy / ingest "
        "| CPU ratio | RSS MB copy / ingest | ingest / plain-SQL speed |"
    )
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    store = args.dir / "bench.ledger.duckdb"

    def generated(n: int, fmt: str) -> Path:
        path = args.dir / f"ledger-{n}.{fmt}"
        if not path.exists():
            began = time.perf_counter()
            generate_records(path, Month.parse(MONTH), n, PROFILES, TENANTS, request_ids=True)
            print(f"(generated {path} in {time.perf_counter() - began:.1f} s)", file=sys.stderr)
        return path

    for n in args.sizes:
        for fmt in args.formats:
            path = generated(n, fmt)
            _measure(f"{n:,}", fmt, n, path, store, args.runs)
            if fmt == "parquet" and n == max(args.sizes) and args.report_runs:
                kept = args.dir / f"month-{n}.ledger.duckdb"
                shutil.copyfile(store, kept)
                site = args.dir / "site"
                if not site.exists():
                    init_site(site, "cerit-sc")
                reports = report_runs(kept, site, args.dir / "report-out", args.report_runs)
                walls = " ".join(f"{w:.2f}" for w, _ in reports)
                print(
                    f"\n`fabric report --month {MONTH}` from the rollups of {n:,} records: median "
                    f"{statistics.median(w for w, _ in reports):.2f} s wall (runs: {walls}), "
                    f"peak RSS {max(r for _, r in reports):.0f} MB\n",
                    flush=True,
                )
    if args.daily:
        _daily(generated(args.daily, "parquet"), args.daily, store, args.runs)
    for leftover in (store, store.with_name(store.name + ".wal")):
        leftover.unlink(missing_ok=True)


def _measure(label: str, fmt: str, n: int, path: Path, store: Path, count: int, before: Path | None = None) -> None:
    """Copy and ingest of `path` (n records) taking turns, `count` times; prints the table row. With `before`,
    each ingest goes into a fresh copy of that store."""
    runs: dict[str, list[tuple[float, float, float]]] = {"copy": [], "sql": [], "ingest": []}
    loads = []
    for _ in range(count):  # taking turns
        loads.append(os.getloadavg()[0])
        runs["copy"].append(run_measure("copy", path, store))
        if before is None:  # the baseline builds a new store; the daily run has no plain-SQL twin
            runs["sql"].append(run_measure("sql", path, store.with_suffix(".sql.duckdb")))
        if before is not None:
            store.with_name(store.name + ".wal").unlink(missing_ok=True)
            shutil.copyfile(before, store)
        runs["ingest"].append(run_measure("ingest" if before is None else "daily", path, store))
    each = "; ".join(f"{k} " + " ".join(f"{r[0]:.2f}" for r in v) for k, v in runs.items())
    print(
        f"({label} {fmt}, each run's seconds: {each}; load average {min(loads):.1f}-{max(loads):.1f})",
        file=sys.stderr,
        flush=True,
    )
    sec = {k: statistics.median(r[0] for r in v) for k, v in runs.items() if v}
    cpu = {k: statistics.median(r[1] for r in v) for k, v in runs.items() if v}
    rss = {k: max(r[2] for r in v) for k, v in runs.items() if v}
    fair = f"{sec['sql'] / sec['ingest']:.2f}" if "sql" in sec else "-"
    print(
        f"| {label} | {fmt} | {sec['copy']:.2f} | {sec['ingest']:.2f} | {n / sec['ingest']:,.0f} "
        f"| {sec['copy'] / sec['ingest']:.2f} | {cpu['copy']:.2f} / {cpu['ingest']:.2f} "
        f"| {cpu['copy'] / cpu['ingest']:.2f} | {rss['copy']:.0f} / {rss['ingest']:.0f} | {fair} |",
        flush=True,
    )


def _daily(month: Path, n: int, store: Path, count: int) -> None:
    """The last day of the n-record month (Parquet) into a store holding its other days."""
    import duckdb

    folder = month.parent
    base, day = folder / f"ledger-{n}-but-last-day.parquet", folder / f"ledger-{n}-last-day.parquet"
    if not day.exists():
        con = duckdb.connect(":memory:")
        con.execute("SET TimeZone = 'UTC'")
        last = con.execute(f"SELECT CAST(max(ts) AS DATE) FROM read_parquet('{month}')").fetchall()[0][0]
        for target, where in ((base, f"ts < DATE '{last}'"), (day, f"ts >= DATE '{last}'")):
            con.execute(f"COPY (SELECT * FROM read_parquet('{month}') WHERE {where}) TO '{target}' (FORMAT parquet)")
    held = folder / f"but-last-day-{n}.ledger.duckdb"
    if not held.exists():
        run_measure("ingest", base, store)
        shutil.copyfile(store, held)
    records = int(duckdb.connect(":memory:").execute(f"SELECT count(*) FROM read_parquet('{day}')").fetchall()[0][0])
    _measure(f"{records:,} (last day of {n:,})", "parquet", records, day, store, count, before=held)


if __name__ == "__main__":
    main()
