"""The ledger's benchmark scripts still run end to end (on a small file; their timings are not checked here)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"


def _run(*args: str) -> str:
    done = subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_ledger_benchmark_and_its_floor_run(tmp_path: Path) -> None:
    table = _run(str(BENCH / "ledger.py"), "--sizes", "20000", "--runs", "1", "--dir", str(tmp_path))
    row = next(line for line in table.splitlines() if line.startswith("| 20,000 |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert len(cells) == 9 and all(float(c) > 0 for c in cells[1:4])  # three medians in seconds

    floor = _run(str(BENCH / "ledger_floor.py"), str(tmp_path / "records-20000.parquet"), "--runs", "1")
    for part in ("duckdb-baseline", "duckdb-8-columns", "duckdb-to-arrow", "pyarrow-decode", "tally"):
        assert re.search(rf"^  {part} +\d+\.\d{{3}} s", floor, re.MULTILINE), floor
    assert len(re.findall(r"best ratio reading with [\w-]+ \+ tally: .* = \d\.\d\d", floor)) == 3
