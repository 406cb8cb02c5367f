"""The ledger store through `fabric ledger ingest/status/check` and `fabric report`: one real DuckDB file,
idempotent ingest, every input format, bad records by file and line, atomicity under kill -9, late records."""

from __future__ import annotations

import csv
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import pytest

from llm_fabric.cli.main import main
from llm_fabric.errors import UsageError
from llm_fabric.ledger.store.database import LedgerStore, default_store_path
from llm_fabric.ledger.store.period import Month
from llm_fabric.ledger.store.usage import from_records, from_rollups
from llm_fabric.request_record import RequestRecord
from tests.fixtures.ledger_synthetic import generate_records

NOV = Month.parse("2026-11")
TABLES = ("records", "daily_usage", "daily_lengths", "minute_tokens", "month_lengths")


def _rows(count: int, start: datetime = NOV.start, step_s: int = 97, prefix: str = "r") -> list[RequestRecord]:
    return [
        RequestRecord(
            ts=start + timedelta(seconds=step_s * i),
            model=("qwen3-5", "glm-5-1")[i % 2],
            tenant=("muni-researchers", "cerit-sc", "ceitec-structural")[i % 3],
            site="brno" if i % 4 else None,
            prompt_tokens=(37 * i) % 9000 + 1,
            completion_tokens=i % 300,
            cached_prompt_tokens=min((11 * i) % 200, (37 * i) % 9000 + 1) if i % 5 else None,
            ttft_ms=(i % 700) / 3 if i % 6 else None,
            status=("200", "429", "200")[i % 3],
            request_id=f"{prefix}-{i}" if i % 7 else None,
        )
        for i in range(count)
    ]


def _jsonl(path: Path, rows: list[RequestRecord]) -> Path:
    path.write_text("".join(r.json_line() for r in rows))
    return path


def _snapshot(store: Path) -> dict[str, list[tuple[object, ...]]]:
    """Every table's rows, sorted (the `ingest` column left out: it names which ingest added a record)."""
    con = duckdb.connect(str(store), read_only=True)
    try:
        out = {}
        for table in TABLES:
            columns = [r[0] for r in con.execute(f"DESCRIBE {table}").fetchall() if r[0] != "ingest"]
            out[table] = sorted(con.execute(f"SELECT {', '.join(columns)} FROM {table}").fetchall(), key=repr)
        return out
    finally:
        con.close()


def test_ingest_is_idempotent_for_the_same_and_overlapping_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "ledger.duckdb"
    rows = _rows(3000)
    whole = _jsonl(tmp_path / "whole.jsonl", rows)
    assert main(["ledger", "ingest", "--store", str(store), "--json", str(whole)]) == 0
    first = json.loads(capsys.readouterr().out)
    assert (first["records"], first["added"], first["bad"], first["duplicates"]) == (3000, 3000, 0, 0)
    before = _snapshot(store)
    assert main(["ledger", "ingest", "--store", str(store), "--json", str(whole)]) == 0
    again = json.loads(capsys.readouterr().out)
    assert (again["added"], again["duplicates"], again["days"]) == (0, 3000, [])
    assert _snapshot(store) == before
    # an export overlapping the first (its second half) and going on: only the new records are added
    more = _rows(4000)
    overlap = _jsonl(tmp_path / "overlap.jsonl", more[1500:])
    assert main(["ledger", "ingest", "--store", str(store), "--json", str(overlap)]) == 0
    third = json.loads(capsys.readouterr().out)
    assert (third["added"], third["duplicates"]) == (1000, 1500)
    with LedgerStore(store, read_only=True) as ledger:
        assert ledger.status()["records"] == 4000
        assert from_rollups(ledger.con, NOV) == from_records(ledger.con, NOV)
    assert main(["ledger", "check", "--store", str(store), "--month", "2026-11"]) == 0


def test_jsonl_parquet_and_litellm_exports_give_the_same_usage(tmp_path: Path) -> None:
    rows = _rows(500)
    jsonl = _jsonl(tmp_path / "meter.jsonl", rows)
    parquet = tmp_path / "meter.parquet"
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    con.execute(
        f"COPY (SELECT CAST(ts AS TIMESTAMP) AS ts, * EXCLUDE (ts) FROM read_json('{jsonl}', "
        f"format = 'newline_delimited')) TO '{parquet}' (FORMAT parquet)"
    )
    # the same requests as LiteLLM's spend log, once as JSON Lines and once as CSV
    spend = []
    for r in rows:
        start = r.ts
        spend.append(
            {
                "request_id": r.request_id or f"anon-{len(spend)}",
                "startTime": f"{start:%Y-%m-%dT%H:%M:%S.%f}Z",
                "completionStartTime": f"{start + timedelta(milliseconds=r.ttft_ms):%Y-%m-%dT%H:%M:%S.%f}Z"
                if r.ttft_ms is not None
                else "",
                "model": f"hosted_vllm/{r.model}",
                "model_group": r.model,
                "team_id": r.tenant,
                "user": "someone",
                "prompt_tokens": r.prompt_tokens,
                "completion_tokens": r.completion_tokens,
                "spend": 0.0,
                "status": "success" if r.status in ("ok", "200") else "failure",
                "metadata": json.dumps(
                    {"usage_object": {"prompt_tokens_details": {"cached_tokens": r.cached_prompt_tokens}}}
                ),
            }
        )
    spend_jsonl = tmp_path / "spend.jsonl"
    spend_jsonl.write_text("".join(json.dumps(s) + "\n" for s in spend))
    spend_csv = tmp_path / "spend.csv"
    with spend_csv.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(spend[0]))
        writer.writeheader()
        writer.writerows(spend)
    usages = []
    for files in ([jsonl], [parquet], [spend_jsonl], [spend_csv]):
        with LedgerStore(None) as store:
            result = store.ingest(files)
            assert (result.added, result.bad) == (500, 0), files
            usages.append(from_rollups(store.con, NOV))
    assert usages[0] == usages[1]
    assert usages[2] == usages[3]
    meter, litellm = usages[0], usages[2]
    for name, fig in meter.by_model.items():
        other = litellm.by_model[name]
        assert (fig.tokens.requests, fig.tokens.input, fig.tokens.output) == (
            other.tokens.requests,
            other.tokens.input,
            other.tokens.output,
        )
        assert fig.prompt_percentiles == other.prompt_percentiles
        assert fig.tokens.failed == other.tokens.failed


def test_bad_records_are_counted_and_located_and_strict_adds_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = [r.json_line() for r in _rows(4)]
    lines = [
        good[0],
        '{"ts": "2026-11-02T00:00:00Z", "model": "a",\n',  # cut off
        "\n",
        good[1],
        json.dumps({**json.loads(good[2]), "prompt_tokens": -5}) + "\n",
        json.dumps({**json.loads(good[2]), "completion_tokens": 1.5}) + "\n",
        json.dumps({**json.loads(good[2]), "ts": "yesterday"}) + "\n",
        json.dumps({**json.loads(good[2]), "ttft_ms": 9e9}) + "\n",
        json.dumps({k: v for k, v in json.loads(good[3]).items() if k != "model"}) + "\n",
        "[1, 2]\n",
        good[3],
        json.dumps({**json.loads(good[2]), "prompt_tokens": 10, "cached_prompt_tokens": 11}) + "\n",
    ]
    path = tmp_path / "mixed.jsonl"
    path.write_text("".join(lines))
    store = tmp_path / "ledger.duckdb"
    assert main(["ledger", "ingest", "--store", str(store), "--strict", str(path)]) == 2
    assert "8 bad request record(s); nothing was ingested (--strict)" in capsys.readouterr().err
    assert not LedgerStore(store, read_only=True).status()["records"]
    # 8 of 11 bad is above the default max_bad_pct (1 %): nothing is stored, the share is named
    assert main(["ledger", "ingest", "--store", str(store), str(path)]) == 2
    assert "8 of 11 request records (72.73 %) are bad, more than max_bad_pct = 1 %" in capsys.readouterr().err
    assert not LedgerStore(store, read_only=True).status()["records"]
    assert main(["ledger", "ingest", "--store", str(store), "--max-bad-pct", "80", str(path)]) == 0
    out = capsys.readouterr().out
    assert "3 record(s) added, 0 already there, 8 bad (of 11 read from 1 file(s))" in out
    for line, why in (
        (2, "not a JSON object"),
        (5, "prompt_tokens = -5 is not a whole number from 0 to 2147483647"),
        (6, "completion_tokens = 1.5 is not a whole number"),
        (7, "ts yesterday is not a time (RFC 3339"),
        (8, "ttft_ms = 9000000000.0 is not a number of milliseconds from 0 to 4000000"),
        (9, "model is missing"),
        (10, "not a JSON object"),
        (12, "cached_prompt_tokens = 11 is more than prompt_tokens = 10"),
    ):
        assert f"bad record: {path}:{line}: {why}" in out


def test_a_file_with_no_good_record_is_an_error_that_stores_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = tmp_path / "good.jsonl"
    good.write_text("".join(r.json_line() for r in _rows(3)))
    wrong = tmp_path / "plan.json"  # what a nightly job pointed at the wrong file reads
    wrong.write_text(json.dumps({"plan": [1, 2]}, indent=2) + "\n")
    store = tmp_path / "ledger.duckdb"
    assert main(["ledger", "ingest", "--store", str(store), "--max-bad-pct", "100", str(good), str(wrong)]) == 2
    err = capsys.readouterr().err
    assert f"{wrong}: none of its 6 record(s) is a valid request record; nothing was ingested" in err
    assert "is it the right file?" in err and f"{wrong}:1: not a JSON object" in err
    assert not LedgerStore(store, read_only=True).status()["records"]


def test_max_bad_pct_comes_from_ledger_yaml(
    site_repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "some-bad.jsonl"
    path.write_text("".join(r.json_line() for r in _rows(9)) + "not json\n")  # 1 of 10 bad
    ledger_yaml = site_repo / "ledger.yaml"
    ledger_yaml.write_text(ledger_yaml.read_text() + "max_bad_pct: 10\n")
    assert main(["ledger", "ingest", "-C", str(site_repo), str(path)]) == 0
    assert "9 record(s) added, 0 already there, 1 bad (of 10 read" in capsys.readouterr().out
    ledger_yaml.write_text(ledger_yaml.read_text().replace("max_bad_pct: 10", "max_bad_pct: 5"))
    again = tmp_path / "again.jsonl"
    again.write_text("".join(r.json_line() for r in _rows(9, prefix="s", step_s=31)) + "not json\n")
    assert main(["ledger", "ingest", "-C", str(site_repo), str(again)]) == 2
    assert "1 of 10 request records (10.00 %) are bad, more than max_bad_pct = 5 %" in capsys.readouterr().err


ROLLUPS = ("daily_usage", "daily_lengths", "minute_tokens", "month_lengths", "month_percentiles")


def _rollups(con: duckdb.DuckDBPyConnection) -> dict[str, list[tuple[object, ...]]]:
    return {t: con.execute(f"SELECT * FROM {t} ORDER BY ALL").fetchall() for t in ROLLUPS}


def test_a_late_record_changes_only_its_day_and_month(tmp_path: Path) -> None:
    """A late record lands on a day (and month) whose rollups a first ingest built: they become what one
    ingest of both files builds, and no other day's rows change."""
    store = tmp_path / "ledger.duckdb"
    month, late_file = _jsonl(tmp_path / "month.jsonl", _rows(2000, step_s=1200)), tmp_path / "late.jsonl"
    with LedgerStore(store) as ledger:
        first = ledger.ingest([month])
        assert len(first.days) == 28  # 2000 x 20 minutes from November 1st
        rows_before = ledger.con.execute(
            "SELECT * FROM daily_usage WHERE day <> DATE '2026-11-05' ORDER BY ALL"
        ).fetchall()
        months_before = ledger.con.execute("SELECT count(*) FROM month_lengths").fetchall()
        # the prompt length, model and tenant of a record of November 1st: its month rows are summed, not added
        late = _rows(1, start=datetime(2026, 11, 5, 13, 0, tzinfo=UTC), prefix="late")
        result = ledger.ingest([_jsonl(late_file, late)])
        assert (result.added, result.days) == (1, ["2026-11-05"])
        assert ledger.con.execute("SELECT days FROM ingests ORDER BY ingest DESC LIMIT 1").fetchall() == [(1,)]
        assert (
            rows_before
            == ledger.con.execute("SELECT * FROM daily_usage WHERE day <> DATE '2026-11-05' ORDER BY ALL").fetchall()
        )
        assert ledger.con.execute("SELECT count(*) FROM month_lengths").fetchall() == months_before
        assert from_rollups(ledger.con, NOV) == from_records(ledger.con, NOV)
        after_late = _rollups(ledger.con)
    with LedgerStore(None) as at_once:
        at_once.ingest([month, late_file])
        assert _rollups(at_once.con) == after_late


_INGEST = """
import sys
from pathlib import Path
from llm_fabric.ledger.store.database import LedgerStore
with LedgerStore(Path(sys.argv[1])) as store:
    store.ingest([Path(sys.argv[2])], progress=lambda msg: print(msg, flush=True))
print("committed", flush=True)
"""


def test_a_killed_ingest_leaves_the_store_as_it_was(tmp_path: Path) -> None:
    """kill -9 at each stage of a real ingest (reading, natural keys, rollups, commit), each time from the same
    store: afterwards it holds what it held before or, if the kill came after the commit, the whole ingest."""
    store, pristine = tmp_path / "ledger.duckdb", tmp_path / "pristine.duckdb"
    first = tmp_path / "first.parquet"
    generate_records(first, NOV, 50_000, {"qwen3-5": (1100, 33958), "glm-5-1": (709, 90351)}, ["a", "b"])
    with LedgerStore(pristine) as ledger:
        ledger.ingest([first])
    before = _snapshot(pristine)
    second = tmp_path / "second.parquet"
    generate_records(second, Month.parse("2026-12"), 400_000, {"qwen3-5": (1100, 33958)}, ["a", "c"])
    shutil.copyfile(pristine, store)
    with LedgerStore(store) as ledger:
        assert ledger.ingest([second]).added == 400_000
    after = _snapshot(store)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    outcome = {}
    for stage in ("reading", "checking natural keys", "updating the rollups", "committing"):
        for leftover in (store, store.with_name(store.name + ".wal")):
            leftover.unlink(missing_ok=True)  # a killed run's WAL belongs to its own file, not the copy
        shutil.copyfile(pristine, store)
        proc = subprocess.Popen(
            [sys.executable, "-c", _INGEST, str(store), str(second)], stdout=subprocess.PIPE, text=True, env=env
        )
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith(stage):
                os.kill(proc.pid, signal.SIGKILL)
                break
        assert proc.wait() == -signal.SIGKILL, f"the ingest ended before it printed {stage!r}"
        state = _snapshot(store)
        assert state in (before, after), f"killed while {stage!r}: the store holds part of the ingest"
        outcome[stage] = "as before" if state == before else "committed"
    # the kills well before the commit must have found the store as it was
    assert outcome["reading"] == outcome["checking natural keys"] == outcome["updating the rollups"] == "as before"


def test_one_writer_at_a_time(tmp_path: Path) -> None:
    store = tmp_path / "ledger.duckdb"
    holder = LedgerStore(store)
    try:
        script = (
            "import sys; from pathlib import Path; from llm_fabric.errors import UsageError; "
            "from llm_fabric.ledger.store.database import LedgerStore\n"
            "try:\n    LedgerStore(Path(sys.argv[1]), wait_s=0.5)\n"
            "except UsageError as exc:\n    sys.exit(exc.render())"
        )
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        started = time.monotonic()
        done = subprocess.run([sys.executable, "-c", script, str(store)], capture_output=True, text=True, env=env)
        assert done.returncode != 0 and "another `fabric ledger ingest` may be writing it" in done.stderr
        assert time.monotonic() - started < 30
    finally:
        holder.close()


def test_the_store_lives_beside_the_site_repo_unless_ledger_yaml_says_where(
    site_repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    records = _jsonl(tmp_path / "r.jsonl", _rows(50))
    assert main(["ledger", "ingest", "-C", str(site_repo), str(records)]) == 0
    default = default_store_path(site_repo)
    assert default.is_file() and default.parent == site_repo.resolve().parent
    assert main(["ledger", "status", "-C", str(site_repo), "--json"]) == 0
    capsys.readouterr()
    ledger_yaml = site_repo / "ledger.yaml"
    ledger_yaml.write_text(ledger_yaml.read_text() + "store: ../stores/fabric.duckdb\n")
    assert main(["ledger", "ingest", "-C", str(site_repo), str(records)]) == 0
    assert (tmp_path / "stores" / "fabric.duckdb").is_file() or (
        site_repo.parent / "stores" / "fabric.duckdb"
    ).is_file()
    ledger_yaml.write_text(ledger_yaml.read_text().replace("../stores/fabric.duckdb", "data/ledger.duckdb"))
    assert main(["ledger", "ingest", "-C", str(site_repo), str(records)]) == 2
    err = capsys.readouterr().err
    assert "ledger.yaml" in err and "store" in err and "is inside the site repo" in err


def test_report_from_the_store_and_from_requests_agree(site_repo: Path, tmp_path: Path) -> None:
    records = tmp_path / "october.parquet"
    generate_records(records, Month.parse("2026-10"), 20_000, {"qwen3-5": (1100, 33958)}, ["muni-researchers"])
    store = tmp_path / "ledger.duckdb"
    assert main(["ledger", "ingest", "--store", str(store), str(records)]) == 0
    args = ["report", "-C", str(site_repo), "--month", "2026-10"]
    assert main([*args, "--store", str(store), "--out", str(tmp_path / "a")]) == 0
    assert main([*args, "--requests", str(records), "--out", str(tmp_path / "b")]) == 0
    for name in ("usage_by_model.csv", "usage_by_tenant.csv", "daily.csv", "ledgers.csv", "contributors.csv"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    assert "ledger store ledger.duckdb" in (tmp_path / "a" / "report.md").read_text()


def test_no_store_and_no_records_is_a_usage_error(site_repo: Path, tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no ledger store at"):
        LedgerStore(tmp_path / "none.duckdb", read_only=True)
    args = ["report", "-C", str(site_repo), "--month", "2026-10", "--out", str(tmp_path / "o")]
    assert main([*args, "--store", str(tmp_path / "none.duckdb")]) == 2


def test_bad_lines_deep_in_a_large_file_are_located_exactly(tmp_path: Path) -> None:
    """Line numbers hold across DuckDB's parallel reading of a large file (blank lines counted)."""
    good = [r.json_line() for r in _rows(300_000, step_s=8)]
    good[1000] = "\n"
    good[150_000] = '{"ts": "2026-11-20T00:00:00Z", "model": "m", "tenant": "t", "prompt_tokens": "many"}\n'
    good[299_998] = "{not json\n"
    path = tmp_path / "large.jsonl"
    path.write_text("".join(good))
    with LedgerStore(None) as store:
        result = store.ingest([path])
    assert [(b.line, b.problem) for b in result.bad_listed] == [
        (150_001, "prompt_tokens = many is not a whole number from 0 to 2147483647"),
        (299_999, "not a JSON object (malformed, or not {...})"),
    ]
    assert (result.records, result.added, result.bad) == (299_999, 299_997, 2)


def test_exporter_serves_the_month_to_date_from_the_store(
    site_repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    now = datetime.now(UTC)
    rows = _rows(40, start=datetime(now.year, now.month, 1, tzinfo=UTC), step_s=1)
    store = tmp_path / "ledger.duckdb"
    assert main(["ledger", "ingest", "--store", str(store), str(_jsonl(tmp_path / "now.jsonl", rows))]) == 0
    capsys.readouterr()
    assert main(["exporter", "-C", str(site_repo), "--store", str(store), "--once"]) == 0
    text = capsys.readouterr().out
    qwen = sum(r.prompt_tokens or 0 for r in rows if r.model == "qwen3-5")
    assert f'fabric_month_tokens{{kind="input",model="qwen3-5"}} {float(qwen)}' in text
    assert 'fabric_month_requests{model="glm-5-1"} 20.0' in text
    assert "fabric_exporter_refresh_ok 1.0" in text


def test_the_gateway_meters_records_ingest_as_they_are(tmp_path: Path) -> None:
    """Written by the real meter (issue 15's gateway), extra columns and 429 rejections included."""
    from llm_fabric.gateway.runtime.meter import Meter

    path = tmp_path / "meter"
    start = NOV.start.timestamp()
    meter = Meter(path, clock=lambda: start)
    for i in range(6):
        meter.write(
            RequestRecord(
                ts=datetime.fromtimestamp(start + 60 * i, UTC),
                model="qwen3-5",
                tenant="muni-researchers",
                status="429" if i % 3 == 0 else "200",
                request_id=f"gw-{i}",
                prompt_tokens=0 if i % 3 == 0 else 100 * i,
                completion_tokens=0 if i % 3 == 0 else i,
                site="brno",
                data_class="public",
                prompt="not stored by the ledger",
            )
        )
    with LedgerStore(None) as store:
        assert (store.ingest([path]).added, store.ingest([path]).added) == (6, 0)
        usage = from_rollups(store.con, NOV)
        assert store.con.execute("SELECT DISTINCT site FROM records").fetchall() == [("brno",)]
    qwen = usage.by_model["qwen3-5"].tokens
    assert (qwen.requests, qwen.failed, qwen.input, qwen.output) == (6, 2, 1200, 12)


def test_the_meters_folder_ingests_once_a_day_file_and_the_open_day_again_adds_only_new_records(
    tmp_path: Path,
) -> None:
    """The gateway's folder of day files (issue 15): a closed day and the open one, ingested as a folder, twice."""
    from llm_fabric.gateway.runtime.meter import Meter

    now = [NOV.start.timestamp() + 86_400 - 30]  # 30 s before the end of 1 November
    folder = tmp_path / "records"
    meter = Meter(folder, writer="fabric-gateway-7d9f", clock=lambda: now[0])

    def request(i: int) -> None:
        meter.write(
            RequestRecord(
                ts=datetime.fromtimestamp(now[0] - 15, UTC),
                model="qwen3-5",
                tenant="muni-researchers",
                status="200",
                request_id=f"gw-{i}",
                prompt_tokens=100,
                completion_tokens=6,
            )
        )
        now[0] += 20

    for i in range(3):  # the third arrives before midnight and is written after it: the next day's file
        request(i)
    (folder / "lost+found").mkdir()  # what a volume's root holds: not a record file
    days = sorted(p.name for p in folder.iterdir() if p.is_file())
    assert days == ["requests-2026-11-01.fabric-gateway-7d9f.jsonl", "requests-2026-11-02.fabric-gateway-7d9f.jsonl"]
    closed = (folder / days[0]).read_bytes()
    with LedgerStore(None) as store:
        first = store.ingest([folder])
        assert (first.added, first.duplicates, len(first.files)) == (3, 0, 2)
        for i in range(3, 5):
            request(i)
        assert (folder / days[0]).read_bytes() == closed  # a closed day never changes
        again = store.ingest([folder])
        assert (again.added, again.duplicates, again.bad) == (2, 3, 0)
        # the arrival day books the request: two on 1 November, the one written after midnight included
        booked = store.con.execute("SELECT day, count(*) FROM records GROUP BY day ORDER BY day").fetchall()
        assert [(str(d), n) for d, n in booked] == [("2026-11-01", 3), ("2026-11-02", 2)]
        # a copy taken while the meter writes may end in half a line: a bad record now, the whole one next time
        open_day = folder / days[1]
        whole = open_day.read_bytes()
        request(5)
        line = open_day.read_bytes()[len(whole) :]
        open_day.write_bytes(whole + line[:40])
        cut = store.ingest([folder])
        assert (cut.added, cut.bad, cut.duplicates) == (0, 1, 5)
        open_day.write_bytes(whole + line)
        assert store.ingest([folder]).added == 1
