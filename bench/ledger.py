"""Ledger aggregation speed and memory: `aggregate_records` vs plain DuckDB scan-and-aggregates.

Generates N request records (Parquet, under /tmp, reused when present), then times in fresh
subprocesses (so peak RSS is per run), taking turns:
- baseline: `SELECT model, count(*), sum(...) GROUP BY model` over 4 of the 8 columns (the issue's);
- full-width baseline: the same plus the other 4 columns the books read (timestamps, tenants, status,
  TTFT), each decoded with the cheapest aggregate that needs its values: the least work any ledger
  must do, as DuckDB does it;
- ledger: `aggregate_records` (one pass over Arrow batches, a compiled tally per CPU).
Each worker imports its engine before the clock starts (import s is printed apart). Prints the
median seconds of --runs, records/s, peak RSS, and the ledger's speed as a fraction of each baseline.

    .venv/bin/python bench/ledger.py --sizes 1000000 10000000 50000000 --runs 3
"""

from __future__ import annotations

import argparse
import os
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
BASELINES = {
    "baseline": """SELECT model, count(*), sum(prompt_tokens), sum(completion_tokens), sum(cached_prompt_tokens)
                   FROM read_parquet('{path}') GROUP BY model""",
    # each of the other columns decoded with the cheapest aggregate that needs its values (see
    # bench/ledger_floor.py: max(tenant) would cost twice as much, count(tenant) need not decode it)
    "full": """SELECT model, count(*), sum(prompt_tokens), sum(completion_tokens), sum(cached_prompt_tokens),
                      sum(ttft_ms), max(ts), sum(strlen(tenant)), sum(strlen(status))
               FROM read_parquet('{path}') GROUP BY model""",
}
KINDS = ("baseline", "full", "ledger")


def worker(kind: str, path: Path) -> None:
    began = time.perf_counter()
    if kind in BASELINES:
        import duckdb

        con = duckdb.connect(":memory:")
        con.execute(f"SET threads = {len(os.sched_getaffinity(0))}")
        imported = time.perf_counter()
        con.execute(BASELINES[kind].format(path=path)).fetchall()
    else:
        import llm_fabric.ledger.record_batches  # noqa: F401  (pyarrow, as `import duckdb` for the baselines)
        from llm_fabric.ledger.period import Month
        from llm_fabric.ledger.tally import load_kernel
        from llm_fabric.ledger.usage import aggregate_records, connect

        load_kernel()
        con = connect(Path("/tmp"))
        imported = time.perf_counter()
        usage = aggregate_records(con, [path], Month.parse(MONTH))
        assert usage is not None and usage.records_in_month > 0
    print(f"{time.perf_counter() - imported:.6f} {imported - began:.6f}")


def run_measure(kind: str, path: Path) -> tuple[float, float, float]:
    """(seconds, peak RSS in MB, import seconds) of one run in a fresh interpreter (fork/exec: wait4 has its usage)."""
    pid = os.fork()
    if pid == 0:
        fd = os.open(f"{path}.{kind}.out", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(fd, 1)
        os.execv(sys.executable, [sys.executable, __file__, "--worker", kind, str(path)])
    _, status, usage = os.wait4(pid, 0)
    if status != 0:
        raise SystemExit(f"{kind} run failed (status {status})")
    seconds, imported = (float(x) for x in Path(f"{path}.{kind}.out").read_text().split())
    return seconds, usage.ru_maxrss / 1024, imported


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--dir", type=Path, default=Path("/tmp/llm-fabric-bench"))
    parser.add_argument("--delete", action="store_true", help="Delete each generated file after its runs.")
    parser.add_argument("--worker", nargs=2, metavar=("KIND", "PATH"))
    args = parser.parse_args()
    if args.worker:
        worker(args.worker[0], Path(args.worker[1]))
        return
    from tests.fixtures.ledger_synthetic import generate_records

    from llm_fabric.ledger.period import Month

    args.dir.mkdir(parents=True, exist_ok=True)
    print(
        "| records | baseline s | full-width s | ledger s | ledger rec/s | vs baseline | vs full-width "
        "| RSS MB baseline / full / ledger | import s full / ledger |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for n in args.sizes:
        path = args.dir / f"records-{n}.parquet"
        if not path.exists():
            t = time.perf_counter()
            generate_records(path, Month.parse(MONTH), n, PROFILES, TENANTS)
            print(f"(generated {n:,} records in {time.perf_counter() - t:.1f} s)", file=sys.stderr)
        runs: dict[str, list[tuple[float, float, float]]] = {k: [] for k in KINDS}
        for _ in range(args.runs):  # taking turns, so a change in the shared machine's load hits all alike
            for kind in KINDS:
                runs[kind].append(run_measure(kind, path))
        print(
            f"({n:,} records, each run's seconds: "
            + "; ".join(f"{k} " + " ".join(f"{r[0]:.2f}" for r in v) for k, v in runs.items())
            + ")",
            file=sys.stderr,
        )
        sec = {k: statistics.median(r[0] for r in v) for k, v in runs.items()}
        rss = {k: max(r[1] for r in v) for k, v in runs.items()}
        imp = {k: statistics.median(r[2] for r in v) for k, v in runs.items()}
        print(
            f"| {n:,} | {sec['baseline']:.2f} | {sec['full']:.2f} | {sec['ledger']:.2f} | {n / sec['ledger']:,.0f} "
            f"| {sec['baseline'] / sec['ledger']:.2f} | {sec['full'] / sec['ledger']:.2f} "
            f"| {rss['baseline']:.0f} / {rss['full']:.0f} / {rss['ledger']:.0f} "
            f"| {imp['full']:.2f} / {imp['ledger']:.2f} |",
            flush=True,
        )
        if args.delete:
            path.unlink()


if __name__ == "__main__":
    main()
