"""Request records with statistics known in advance: exact percentiles, tenants, natural keys, adapter."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llm_fabric.errors import UsageError
from llm_fabric.ledger.period import Month
from llm_fabric.ledger.usage import aggregate_records, connect

NOV = Month.parse("2026-11")


def _write(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _known(tmp_path: Path) -> Path:
    # model a: prompts 1..100 (p50 50, p95 95, p99 99 by nearest rank); model b: 1000 x 10 tokens
    rows: list[dict[str, object]] = []
    for i in range(1, 101):
        rows.append({"ts": f"2026-11-{i % 30 + 1:02d}T12:00:00+02:00", "model": "a",
                     "tenant": "t1" if i <= 60 else "t2", "prompt_tokens": i, "completion_tokens": 2,
                     "cached_prompt_tokens": i // 2,
                     "ttft_ms": 100.0, "status": "ok" if i % 25 else "error"})
    for _ in range(1000):
        rows.append({"ts": "2026-11-30T23:59:59Z", "model": "b", "tenant": "t2", "prompt_tokens": 10,
                     "completion_tokens": 1, "status": "200"})
    rows.append({"ts": "2026-12-01T00:00:00Z", "model": "a", "tenant": "t1", "prompt_tokens": 7,
                 "completion_tokens": 1, "status": "ok"})  # next month: left out, and counted as such
    return _write(tmp_path / "known.jsonl", rows)


def test_exact_percentiles_and_totals(tmp_path: Path) -> None:
    usage = aggregate_records(connect(), [_known(tmp_path)], NOV)
    assert usage is not None
    a = usage.by_model["a"]
    assert a.prompt_percentiles == {50: 50, 95: 95, 99: 99}
    assert (a.tokens.requests, a.tokens.failed, a.tokens.input, a.tokens.output) == (100, 4, 5050, 200)
    assert a.tokens.cached_input == sum(i // 2 for i in range(1, 101))
    assert a.mean_ttft_ms == 100.0
    assert usage.by_model["b"].prompt_percentiles == {50: 10, 95: 10, 99: 10}
    assert usage.by_tenant["t1"].tokens.input == sum(range(1, 61))
    assert usage.by_model_tenant[("a", "t2")].input == sum(range(61, 101))
    assert usage.records_outside_month == 1 and usage.records_in_month == 1100
    # 1000 requests x 11 tokens in the last minute of the month
    assert usage.by_model["b"].peak_total_tokens_per_s == round(11000 / 60, 1)


def test_duplicate_request_ids_count_once(tmp_path: Path) -> None:
    row = {"ts": "2026-11-05T00:00:00Z", "model": "a", "tenant": "t", "prompt_tokens": 5, "completion_tokens": 1,
           "status": "ok", "request_id": "r-1"}
    first = _write(tmp_path / "one.jsonl", [row, {**row, "request_id": "r-2"}])
    again = _write(tmp_path / "two.jsonl", [row])
    usage = aggregate_records(connect(), [first, again], NOV)
    assert usage is not None and usage.by_model["a"].tokens.requests == 2


def test_missing_column_names_file_and_column(tmp_path: Path) -> None:
    bad = _write(tmp_path / "bad.jsonl", [{"ts": "2026-11-05T00:00:00Z", "model": "a", "prompt_tokens": 1,
                                           "completion_tokens": 1, "status": "ok"}])
    with pytest.raises(UsageError, match=r"bad.jsonl: request records lack column\(s\) tenant"):
        aggregate_records(connect(), [bad], NOV)


def test_litellm_spend_log_adapter(tmp_path: Path) -> None:
    rows = [
        {"request_id": "x1", "startTime": "2026-11-02T10:00:00.000Z", "completionStartTime": "2026-11-02T10:00:00.250Z",
         "model": "hosted_vllm/qwen", "model_group": "qwen3-5", "team_id": "muni-researchers", "user": "",
         "prompt_tokens": 1200, "completion_tokens": 80, "spend": 0.0, "status": "success",
         "metadata": json.dumps({"usage_object": {"prompt_tokens_details": {"cached_tokens": 1000}}})},
        {"request_id": "x2", "startTime": "2026-11-02T11:00:00Z", "model": "qwen3-5", "model_group": "",
         "team_id": None, "user": "alice", "prompt_tokens": 300, "completion_tokens": 20, "status": "failure",
         "metadata": "{}"},
    ]
    usage = aggregate_records(connect(), [_write(tmp_path / "spend.jsonl", rows)], NOV)
    assert usage is not None
    q = usage.by_model["qwen3-5"]
    assert (q.tokens.requests, q.tokens.failed, q.tokens.input, q.tokens.cached_input) == (2, 1, 1500, 1000)
    assert set(usage.by_tenant) == {"muni-researchers", "alice"}
    assert q.mean_ttft_ms == 250.0
