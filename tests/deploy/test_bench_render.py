"""bench/render.py still runs, its baseline writer included (small plans; timings are not checked here)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "render.py"


@pytest.mark.parametrize("baseline", [False, True], ids=["now", "baseline"])
def test_render_benchmark_runs(baseline: bool) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    argv = [sys.executable, str(BENCH), "--runs", "1", "--replicas", "10", *(["--baseline"] if baseline else [])]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("   10 replicas: 71 objects, median"), done.stdout
