"""Ctrl-C at any moment of a `fabric` run ends it with 130 and one line, never a traceback.

The window that used to print one is the CLI's own import (click, rich, the command table: a few
tenths of a second), before `main.run` has installed its handler. The signal is sent at a spread of
delays across that window; each run must end interrupted (130, "interrupted") or, when the signal came
before the interpreter had its handler, killed by it; no run may print a traceback.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# what the console script runs (pyproject's [project.scripts]), started the same way
ENTRY = "import sys; from llm_fabric.cli.entry import run; sys.argv[0] = 'fabric'; run()"


def test_the_console_script_starts_at_the_quiet_entry() -> None:
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {"fabric": "llm_fabric.cli.entry:run"}
    # in a child: importing the entry installs its handler, which this test process must not get
    same = "import llm_fabric.cli.entry as e, llm_fabric.errors as r; print(e.EXIT_INTERRUPTED == r.EXIT_INTERRUPTED)"
    assert subprocess.run([sys.executable, "-c", same], capture_output=True, text=True, check=True).stdout == "True\n"


def test_ctrl_c_during_start_up_prints_no_traceback(tmp_path: Path) -> None:
    interrupted = 0
    for delay in (0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.6):
        proc = subprocess.Popen(
            [sys.executable, "-c", ENTRY, "plan", "-C", str(tmp_path)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        assert "Traceback" not in err, f"SIGINT after {delay} s:\n{err}"
        assert proc.returncode in (130, -signal.SIGINT, 2), f"SIGINT after {delay} s: rc {proc.returncode}\n{err}"
        if proc.returncode == 130:
            assert err.strip().endswith("interrupted"), err
            interrupted += 1
    assert interrupted >= 3  # most delays fall inside the run, not before the interpreter's handler
