"""Ledger aggregation speed and memory: `aggregate_records` vs a plain DuckDB scan-and-aggregate.

Generates N request records (Parquet, under /tmp, reused when present), then times in fresh
subprocesses (so peak RSS is per run): the baseline `SELECT model, count(*), sum(...) GROUP BY
model` over the same file, and the ledger's aggregation (three scans: sums and coarse
histograms, per-minute peaks, exact percentiles inside the histogram buckets). Runs alternate
baseline/ledger. Prints records/s, the median of --runs, peak RSS, and the ratio.

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
PROFILES = {"qwen3-5": (1100, 33958), "kimi-k2-6": (2179, 99746), "glm-5-1": (709, 90351),
            "deepseek-v3-2": (879, 23776), "gpt-oss-120b": (193, 2842)}
TENANTS = [f"tenant-{i:02d}" for i in range(20)]
BASELINE = """SELECT model, count(*), sum(prompt_tokens), sum(completion_tokens), sum(cached_prompt_tokens)
              FROM read_parquet('{path}') GROUP BY model"""


def worker(kind: str, path: Path) -> None:
    from llm_fabric.ledger.period import Month
    from llm_fabric.ledger.usage import aggregate_records, connect

    con = connect(Path("/tmp"))
    start = time.perf_counter()
    if kind == "baseline":
        con.execute(BASELINE.format(path=path)).fetchall()
    else:
        usage = aggregate_records(con, [path], Month.parse(MONTH))
        assert usage is not None and usage.records_in_month > 0
    print(f"{time.perf_counter() - start:.6f}")


def run_measure(kind: str, path: Path) -> tuple[float, float]:
    """(seconds, peak RSS in MB) of one run in a fresh interpreter (fork/exec so wait4 gives its rusage)."""
    pid = os.fork()
    if pid == 0:
        fd = os.open(f"{path}.{kind}.out", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(fd, 1)
        os.execv(sys.executable, [sys.executable, __file__, "--worker", kind, str(path)])
    _, status, usage = os.wait4(pid, 0)
    if status != 0:
        raise SystemExit(f"{kind} run failed (status {status})")
    seconds = float(Path(f"{path}.{kind}.out").read_text().strip())
    return seconds, usage.ru_maxrss / 1024


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
    from llm_fabric.ledger.period import Month
    from llm_fabric.ledger.synthetic import generate_records

    args.dir.mkdir(parents=True, exist_ok=True)
    print("| records | baseline s | ledger s | baseline rec/s | ledger rec/s | ratio | baseline RSS MB "
          "| ledger RSS MB |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for n in args.sizes:
        path = args.dir / f"records-{n}.parquet"
        if not path.exists():
            t = time.perf_counter()
            generate_records(path, Month.parse(MONTH), n, PROFILES, TENANTS)
            print(f"(generated {n:,} records in {time.perf_counter() - t:.1f} s)", file=sys.stderr)
        base: list[tuple[float, float]] = []
        ours: list[tuple[float, float]] = []
        for _ in range(args.runs):  # interleaved, so a change in the shared machine's load hits both alike
            base.append(run_measure("baseline", path))
            ours.append(run_measure("ledger", path))
        b, o = statistics.median(s for s, _ in base), statistics.median(s for s, _ in ours)
        print(f"| {n:,} | {b:.2f} | {o:.2f} | {n / b:,.0f} | {n / o:,.0f} | {b / o:.2f} | "
              f"{max(r for _, r in base):.0f} | {max(r for _, r in ours):.0f} |", flush=True)
        if args.delete:
            path.unlink()


if __name__ == "__main__":
    main()
