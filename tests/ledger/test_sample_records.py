"""`fabric ledger sample`: a month of request records in the meter's format, read back by `fabric ledger ingest`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llm_fabric.cli.main import main


def _sample(site_repo: Path, out: Path, *extra: str) -> int:
    return main(
        ["ledger", "sample", "-C", str(site_repo), "--month", "2026-11", "--count", "500", "-o", str(out), *extra]
    )


def test_same_seed_same_file_other_seed_other_records(site_repo: Path, tmp_path: Path) -> None:
    a, b, c = tmp_path / "a.jsonl", tmp_path / "b.jsonl", tmp_path / "c.jsonl"
    assert _sample(site_repo, a) == 0
    assert _sample(site_repo, b) == 0
    assert _sample(site_repo, c, "--seed", "7") == 0
    assert a.read_bytes() == b.read_bytes()
    records, other = (
        [json.loads(x) for x in a.read_text().splitlines()],
        [json.loads(x) for x in c.read_text().splitlines()],
    )
    assert len(records) == len(other) == 500
    assert [r["prompt_tokens"] for r in records] != [r["prompt_tokens"] for r in other]
    assert all(r["ts"].startswith("2026-11-") for r in records)


def test_sampled_month_ingests_and_a_second_seed_adds_to_it(
    site_repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    assert _sample(site_repo, first) == 0
    assert _sample(site_repo, second, "--seed", "1") == 0
    store = str(tmp_path / "ledger.duckdb")
    capsys.readouterr()
    assert main(["ledger", "ingest", "-C", str(site_repo), "--store", store, str(first), str(second)]) == 0
    assert "1,000 record(s) added, 0 already there, 0 bad" in capsys.readouterr().out


def test_a_records_file_of_another_kind_is_refused(
    site_repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _sample(site_repo, tmp_path / "records.csv") == 2
    assert "records.csv: the records file must end in .jsonl or .parquet" in capsys.readouterr().err
    assert not (tmp_path / "records.csv").exists()
