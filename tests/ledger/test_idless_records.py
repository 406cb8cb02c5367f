"""Records without a request id (a LiteLLM or nginx export at second resolution): identical requests in one
file are distinct requests, keyed by their content and occurrence number in the file (issue 31 point 1).

A generated month of 20,000 records, 400 of them exact repeats of the line before (the same tenant asking the
same short thing twice in one second), through the real `fabric ledger ingest` and `fabric report`: the
totals are exact, ingesting again or an overlapping export adds nothing, and every report format says how
many records were merged as duplicates and why, per file.
"""

from __future__ import annotations

import csv
import io
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from tests.fixtures.cli import fabric

COUNT = 20_000
REPEAT_EVERY = 50  # every 50th record is the previous line again, byte for byte
HEADER = ["startTime", "completionStartTime", "model_group", "team_id", "prompt_tokens", "completion_tokens", "status"]
SAME_CONTENT_STORED = "no request id; same content and occurrence in its file as a stored record"


def _rows() -> list[list[str]]:
    start = datetime(2026, 11, 1, tzinfo=UTC)
    step = (30 * 86400) // COUNT  # spread over the month, whole seconds
    rows: list[list[str]] = []
    for i in range(COUNT):
        if i % REPEAT_EVERY == REPEAT_EVERY - 1:
            rows.append(list(rows[-1]))
            continue
        t = start + timedelta(seconds=step * i)
        first = t + timedelta(milliseconds=120)
        tenant = ("muni-researchers", "cerit-sc", "ceitec-structural")[i % 3]
        rows.append([f"{t:%Y-%m-%dT%H:%M:%SZ}", f"{first:%Y-%m-%dT%H:%M:%S.%fZ}", "qwen3-5", tenant,
                     str(20 + i % 7), str(3 + i % 5), "success"])  # fmt: skip
    return rows


def _write(path: Path, rows: list[list[str]]) -> None:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(HEADER)
    writer.writerows(rows)
    path.write_text(buffer.getvalue())


def test_identical_idless_records_in_one_file_are_all_counted(site_repo: Path, tmp_path: Path) -> None:
    rows = _rows()
    assert len({tuple(r) for r in rows}) == COUNT - COUNT // REPEAT_EVERY  # the shape the issue measured
    export = tmp_path / "spend-logs.csv"
    _write(export, rows)
    prompt = sum(int(r[4]) for r in rows)
    output = sum(int(r[5]) for r in rows)

    done = fabric("ledger", "ingest", "-C", str(site_repo), "--json", str(export))
    assert done.returncode == 0, done.stderr
    first = json.loads(done.stdout)
    assert (first["records"], first["added"], first["duplicates"]) == (COUNT, COUNT, 0)
    assert first["merged_duplicates"] == []

    # the same file again, and an overlapping export (its second half, with the same multiplicity): nothing new
    again = json.loads(fabric("ledger", "ingest", "-C", str(site_repo), "--json", str(export)).stdout)
    assert (again["added"], again["duplicates"]) == (0, COUNT)
    assert again["merged_duplicates"] == [{"file": str(export), "reason": SAME_CONTENT_STORED, "records": COUNT}]
    overlap = tmp_path / "second-half.csv"
    _write(overlap, rows[COUNT // 2 :])
    later = json.loads(fabric("ledger", "ingest", "-C", str(site_repo), "--json", str(overlap)).stdout)
    assert (later["added"], later["duplicates"]) == (0, COUNT // 2)

    out = tmp_path / "report"
    done = fabric("report", "-C", str(site_repo), "--month", "2026-11", "--out", str(out))
    assert done.returncode == 0, done.stderr
    report = json.loads((out / "report.json").read_text())
    totals = report["totals"]
    assert (totals["requests"], totals["input_tokens"], totals["output_tokens"]) == (COUNT, prompt, output)
    merged = report["sources"]["records"]["merged_duplicates"]
    assert merged == [
        {"file": "second-half.csv", "reason": SAME_CONTENT_STORED, "records": COUNT // 2},
        {"file": "spend-logs.csv", "reason": SAME_CONTENT_STORED, "records": COUNT},
    ]
    said = f"10,000 in second-half.csv ({SAME_CONTENT_STORED}); 20,000 in spend-logs.csv ({SAME_CONTENT_STORED})"
    assert f"Duplicates merged (counted once): {said}" in (out / "report.md").read_text()
    assert f"Duplicates merged (counted once): {said}" in (out / "report.html").read_text()
    table = list(csv.DictReader(io.StringIO((out / "merged_duplicates.csv").read_text())))
    assert [(r["file"], r["records"]) for r in table] == [("second-half.csv", "10000"), ("spend-logs.csv", "20000")]


def test_a_report_from_files_counts_identical_lines_and_says_none_merged(site_repo: Path, tmp_path: Path) -> None:
    rows = _rows()[:1000]
    export = tmp_path / "spend-logs.csv"
    _write(export, rows)
    out = tmp_path / "report"
    done = fabric("report", "-C", str(site_repo), "--month", "2026-11", "--requests", str(export), "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert json.loads((out / "report.json").read_text())["totals"]["requests"] == 1000
    assert "Duplicates merged (counted once): none." in (out / "report.md").read_text()
