"""The CLI's edge through the real `fabric` process: Ctrl-C, a closed pipe, no site repo, a mistyped command.

Exit codes: 130 for Ctrl-C (128 + SIGINT, what a shell shows), 0 for a reader that closed the pipe (so
`fabric plan | head -1` holds under `set -o pipefail`), 2 outside a site repo and for unknown commands.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from llm_fabric.ledger.store.period import Month
from tests.fixtures.ledger_synthetic import generate_records

FABRIC = str(Path(sys.executable).parent / "fabric")


def _fabric(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "FABRIC_SITE_REPO"}
    return subprocess.run([FABRIC, *args], cwd=cwd, capture_output=True, text=True, timeout=300, env=env)


def _interrupt_once_running(
    args: list[str], cwd: Path, after_import: str, ready: Callable[[], bool] = lambda: True
) -> subprocess.CompletedProcess[str]:
    """Start `fabric ARGS`, send SIGINT once it imported `after_import` (by an import statement, which Python
    reports on stderr with PYTHONPROFILEIMPORTTIME: the command is loading or running by then, with fabric's
    SIGINT handler in place) and `ready()` holds, and wait for it."""
    env = {**os.environ, "PYTHONPROFILEIMPORTTIME": "1"}
    proc = subprocess.Popen(
        [FABRIC, *args], cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    imported, lines = threading.Event(), []

    def drain() -> None:  # a full stderr pipe would stop the child
        assert proc.stderr is not None
        for line in proc.stderr:
            if line.startswith("import time:"):
                if line.split("|")[-1].strip() == after_import:
                    imported.set()
            else:
                lines.append(line)

    reader = threading.Thread(target=drain)
    reader.start()
    deadline = time.monotonic() + 120
    while not (imported.is_set() and ready()) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=120)  # what it prints on stdout before or after the signal fits in the pipe
    reader.join()
    assert proc.stdout is not None
    out = proc.stdout.read()
    return subprocess.CompletedProcess(args, proc.returncode, out, "".join(lines))


def test_ctrl_c_stops_plan_with_130_and_writes_nothing(site_repo: Path) -> None:
    done = _interrupt_once_running(["plan", "-o", "plan.json"], site_repo, "llm_fabric.cli.options")
    assert done.returncode == 130, done.stderr
    assert done.stderr.strip() == "interrupted"
    assert not (site_repo / "plan.json").exists()


def test_ctrl_c_stops_an_ingest_with_130_and_nothing_half_done(tmp_path: Path) -> None:
    store, first, second = tmp_path / "ledger.duckdb", tmp_path / "first.jsonl", tmp_path / "second.parquet"
    generate_records(first, Month.parse("2026-11"), 1_000, {"qwen3-5": (1100, 33958)}, ["a"])
    generate_records(second, Month.parse("2026-12"), 600_000, {"qwen3-5": (1100, 33958)}, ["a", "b"])
    assert _fabric("ledger", "ingest", "--store", str(store), str(first), cwd=tmp_path).returncode == 0
    before = json.loads(_fabric("ledger", "status", "--store", str(store), "--json", cwd=tmp_path).stdout)
    # once the ingest writes (its WAL exists), mostly inside a DuckDB query, which turns the KeyboardInterrupt
    # into RuntimeError('Query interrupted'); a signal after the commit finds the whole ingest stored
    wal = store.with_name(store.name + ".wal")
    args = ["ledger", "ingest", "--store", str(store), str(second)]
    done = _interrupt_once_running(args, tmp_path, "duckdb", ready=wal.exists)
    assert done.returncode == 130, done.stderr
    assert done.stderr.strip() == "interrupted"
    after = json.loads(_fabric("ledger", "status", "--store", str(store), "--json", cwd=tmp_path).stdout)
    assert after["records"] in (before["records"], before["records"] + 600_000)
    assert after == before or after["last_ingest"]["added"] == 600_000


def test_a_closed_pipe_ends_quietly_and_holds_under_pipefail(site_repo: Path) -> None:
    done = subprocess.run(
        ["bash", "-c", f"set -o pipefail; {FABRIC} plan -C {site_repo} | head -1"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Placement"
    assert done.stderr == ""


def test_outside_a_site_repo_the_error_says_how_to_name_one(tmp_path: Path) -> None:
    hint = "pass -C DIR, or set FABRIC_SITE_REPO=DIR"
    # the same words whatever the command does first: git (`--base`), the default key beside the repo
    for args in (
        ["plan"], ["nodes", "list"], ["validate"], ["plan", "--base", "main"], ["validate", "--base", "main"],
        ["nodes", "cordon", "gpu1"], ["nodes", "remediate", "--node", "gpu1", "--xid", "79"],
    ):  # fmt: skip
        done = _fabric(*args, cwd=tmp_path)
        assert done.returncode == 2, args
        assert "is not a site repo: it has no fabric.yaml" in done.stdout + done.stderr
        assert hint in done.stdout + done.stderr, args
        assert "fatal: not a git repository" not in done.stdout + done.stderr, args
    assert "┃ name" not in _fabric("nodes", "list", cwd=tmp_path).stdout  # no empty table


def test_commands_find_the_site_repo_from_a_subfolder(site_repo: Path) -> None:
    done = _fabric("validate", cwd=site_repo / "nodes")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith(f"valid: {site_repo} (")
    listed = _fabric("nodes", "list", "--json", cwd=site_repo / "tenants")
    assert "dgx-b200-01" in {row["name"] for row in json.loads(listed.stdout)}
    at_top = _fabric("validate", cwd=site_repo)
    assert at_top.stdout.startswith(f"valid: {site_repo} (")  # inside the repo's top folder too: not `valid: .`


def test_a_mistyped_command_suggests_the_closest(tmp_path: Path) -> None:
    top = _fabric("pln", cwd=tmp_path)
    assert top.returncode == 2
    assert "Error: No such command 'pln'. Did you mean 'plan'?" in top.stderr
    sub = _fabric("nodes", "lst", cwd=tmp_path)
    assert sub.returncode == 2
    assert "Error: No such command 'lst'. Did you mean 'list'?" in sub.stderr


def test_ledger_status_prints_the_last_ingest_as_a_sentence(tmp_path: Path) -> None:
    records, store = tmp_path / "r.jsonl", tmp_path / "ledger.duckdb"
    generate_records(records, Month.parse("2026-11"), 300, {"qwen3-5": (1100, 33958)}, ["a"])
    assert _fabric("ledger", "ingest", "--store", str(store), "r.jsonl", cwd=tmp_path).returncode == 0
    status = _fabric("ledger", "status", "--store", str(store), cwd=tmp_path)
    last = status.stdout.splitlines()[-1]
    assert last.startswith("  last ingest #1 at ")
    assert last.endswith(
        ": r.jsonl: 300 record(s) read, 300 added, 0 already there, 0 bad; rollups updated for 30 day(s)"
    )
