"""The ledger's benchmark script still runs end to end (on small files; its timings are not checked here)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"


def test_ledger_benchmark_runs(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    argv = [
        sys.executable,
        str(BENCH / "ledger.py"),
        "--sizes",
        "20000",
        "--runs",
        "1",
        "--report-runs",
        "1",
        "--daily",
        "20000",
    ]
    done = subprocess.run(
        [*argv, "--dir", str(tmp_path)], capture_output=True, text=True, timeout=300, check=False, env=env
    )
    assert done.returncode == 0, done.stderr
    for fmt in ("parquet", "jsonl"):
        row = next(line for line in done.stdout.splitlines() if line.startswith(f"| 20,000 | {fmt} |"))
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert len(cells) == 10 and float(cells[9]) > 0 and float(cells[2]) > 0 and float(cells[3]) > 0
        assert all(float(cpu) > 0 for cpu in cells[6].split(" / ")) and float(cells[7]) > 0
    daily = next(line for line in done.stdout.splitlines() if "(last day of 20,000)" in line)
    assert float(daily.strip("|").split("|")[3]) > 0
    assert re.search(
        r"fabric report --month 2026-11` from the rollups of 20,000 records: median \d+\.\d\d s", done.stdout
    )
