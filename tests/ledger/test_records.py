"""Request records with statistics known in advance: exact percentiles, tenants, natural keys, adapter.

Each file goes through the real path, ingested into a store (in memory) and read from its rollups; every
figure is also computed from the stored records without the rollups, and the two must agree."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llm_fabric.errors import UsageError
from llm_fabric.ledger.store.database import LedgerStore
from llm_fabric.ledger.store.period import Month
from llm_fabric.ledger.store.usage import RecordUsage, from_records, from_rollups

NOV = Month.parse("2026-11")


def aggregate(paths: list[Path], month: Month = NOV) -> RecordUsage:
    with LedgerStore(None) as store:
        store.ingest(paths)
        usage = from_rollups(store.con, month)
        assert usage == from_records(store.con, month)
        return usage


def _write(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _known(tmp_path: Path) -> Path:
    # model a: prompts 1..100 (p50 50, p95 95, p99 99 by nearest rank); model b: 1000 x 10 tokens
    rows: list[dict[str, object]] = []
    for i in range(1, 101):
        rows.append(
            {
                "ts": f"2026-11-{i % 30 + 1:02d}T12:00:00+02:00",
                "model": "a",
                "tenant": "t1" if i <= 60 else "t2",
                "prompt_tokens": i,
                "completion_tokens": 2,
                "cached_prompt_tokens": i // 2,
                "ttft_ms": 100.0,
                "status": "ok" if i % 25 else "error",
            }
        )
    for k in range(1000):
        rows.append(
            {
                "ts": "2026-11-30T23:59:59Z",
                "model": "b",
                "tenant": "t2",
                "prompt_tokens": 10,
                "completion_tokens": 1,
                "status": "200",
                "request_id": f"b-{k}",  # 1000 requests alike but for their ids: 1000 records
            }
        )
    rows.append(
        {
            "ts": "2026-12-01T00:00:00Z",
            "model": "a",
            "tenant": "t1",
            "prompt_tokens": 7,
            "completion_tokens": 1,
            "status": "ok",
        }
    )  # next month: left out, and counted as such
    return _write(tmp_path / "known.jsonl", rows)


def test_exact_percentiles_and_totals(tmp_path: Path) -> None:
    usage = aggregate([_known(tmp_path)])
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
    row = {
        "ts": "2026-11-05T00:00:00Z",
        "model": "a",
        "tenant": "t",
        "prompt_tokens": 5,
        "completion_tokens": 1,
        "status": "ok",
        "request_id": "r-1",
    }
    first = _write(tmp_path / "one.jsonl", [row, {**row, "request_id": "r-2"}])
    again = _write(tmp_path / "two.jsonl", [row])
    usage = aggregate([first, again])
    assert usage is not None and usage.by_model["a"].tokens.requests == 2


def test_a_record_without_tenant_is_bad_and_a_parquet_file_without_the_column_an_error(tmp_path: Path) -> None:
    row = {"ts": "2026-11-05T00:00:00Z", "model": "a", "prompt_tokens": 1, "completion_tokens": 1, "status": "ok"}
    bad = _write(tmp_path / "bad.jsonl", [{**row, "tenant": "t"}, row])
    with LedgerStore(None) as store:
        result = store.ingest([bad])
    assert (result.added, result.bad) == (1, 1)
    assert [str(b.as_problem()) for b in result.bad_listed] == [f"{bad}:2: tenant is missing"]
    parquet = tmp_path / "bad.parquet"
    con = duckdb.connect()
    con.execute(f"COPY (SELECT 'a' AS model, TIMESTAMP '2026-11-05' AS ts, 1 AS prompt_tokens) TO '{parquet}'")
    with pytest.raises(UsageError, match=r"bad.parquet: request records lack column\(s\) tenant, completion_tokens"):
        aggregate([parquet])


def test_litellm_spend_log_adapter(tmp_path: Path) -> None:
    rows = [
        {
            "request_id": "x1",
            "startTime": "2026-11-02T10:00:00.000Z",
            "completionStartTime": "2026-11-02T10:00:00.250Z",
            "model": "hosted_vllm/qwen",
            "model_group": "qwen3-5",
            "team_id": "muni-researchers",
            "user": "",
            "prompt_tokens": 1200,
            "completion_tokens": 80,
            "spend": 0.0,
            "status": "success",
            "metadata": json.dumps({"usage_object": {"prompt_tokens_details": {"cached_tokens": 1000}}}),
        },
        {
            "request_id": "x2",
            "startTime": "2026-11-02T11:00:00Z",
            "model": "qwen3-5",
            "model_group": "",
            "team_id": None,
            "user": "alice",
            "prompt_tokens": 300,
            "completion_tokens": 20,
            "status": "failure",
            "metadata": "{}",
        },
    ]
    usage = aggregate([_write(tmp_path / "spend.jsonl", rows)])
    assert usage is not None
    q = usage.by_model["qwen3-5"]
    assert (q.tokens.requests, q.tokens.failed, q.tokens.input, q.tokens.cached_input) == (2, 1, 1500, 1000)
    assert set(usage.by_tenant) == {"muni-researchers", "alice"}
    assert q.mean_ttft_ms == 250.0


_row = st.tuples(
    st.sampled_from(["m1", "m2", "m3"]),
    st.sampled_from(["ta", "tb"]),
    st.one_of(st.integers(0, 40), st.integers(1, 300_000), st.sampled_from([1000, 1001, 65_536, 4_000_000])),
    st.integers(0, 43_199),  # minute of November
    st.integers(1, 500),
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(_row, min_size=1, max_size=300))
def test_aggregates_match_a_plain_python_reference(tmp_path: Path, rows: list[tuple[str, str, int, int, int]]) -> None:
    """Exact nearest-rank percentiles, sums, minute peaks and days from JSON Lines, against plain Python."""
    path = _write(
        tmp_path / "h.jsonl",
        [
            {
                "ts": f"{NOV.start + timedelta(minutes=minute, seconds=7):%Y-%m-%dT%H:%M:%SZ}",
                "model": m,
                "tenant": t,
                "prompt_tokens": plen,
                "completion_tokens": out,
                "status": "ok",
                "request_id": f"h-{i}",  # rows alike are distinct requests
            }
            for i, (m, t, plen, minute, out) in enumerate(rows)
        ],
    )
    usage = aggregate([path])
    assert usage is not None

    def nearest_rank(values: list[int]) -> dict[int, int]:
        ordered = sorted(values)
        return {p: ordered[(p * len(ordered) + 99) // 100 - 1] for p in (50, 95, 99)}

    for side, figures in ((0, usage.by_model), (1, usage.by_tenant)):
        keys = {r[side] for r in rows}
        assert set(figures) == keys
        for key in keys:
            mine = [r for r in rows if r[side] == key]
            assert figures[key].prompt_percentiles == nearest_rank([r[2] for r in mine]), key
            assert figures[key].tokens.input == sum(r[2] for r in mine)
    for model, fig in usage.by_model.items():
        per_minute: dict[int, int] = {}
        for m, _t, plen, minute, out in rows:
            if m == model:
                per_minute[minute] = per_minute.get(minute, 0) + plen + out
        assert fig.peak_total_tokens_per_s == round(max(per_minute.values()) / 60, 1)
    days = {(m, (NOV.start + timedelta(minutes=minute)).date()) for m, _t, _p, minute, _o in rows}
    assert set(usage.daily) == days
    assert sum(t.requests for t in usage.daily.values()) == len(rows)


def test_nearest_rank_for_every_request_count_up_to_120(tmp_path: Path) -> None:
    """One model per count n: n distinct lengths spread over many buckets; the ranks ceil(p x n / 100)."""
    rows: list[dict[str, object]] = []
    for n in range(1, 121):
        lengths = [(i * 7919) % 200_003 for i in range(1, n + 1)]  # distinct, unsorted, 7919 .. 200,002
        rows += [
            {
                "ts": "2026-11-03T10:00:00Z",
                "model": f"n{n:03d}",
                "tenant": "t",
                "prompt_tokens": x,
                "completion_tokens": 1,
                "status": "ok",
            }
            for x in lengths
        ]
    usage = aggregate([_write(tmp_path / "ranks.jsonl", rows)])
    assert usage is not None
    for n in range(1, 121):
        ordered = sorted((i * 7919) % 200_003 for i in range(1, n + 1))
        want = {p: ordered[-(-p * n // 100) - 1] for p in (50, 95, 99)}
        assert usage.by_model[f"n{n:03d}"].prompt_percentiles == want, n


def test_record_files_written_before_the_one_schema_still_ingest(tmp_path: Path) -> None:
    """Lines as the meter (ts in ms, `200`/`429`, data class and prompt) and `fabric engine burst` (`ok`, µs)
    wrote them before both wrote llm_fabric.request_record: read as they were, each status booked alike."""
    meter = tmp_path / "requests-2026-11-05.jsonl"
    meter.write_text(
        '{"ts": "2026-11-05T10:00:00.123Z", "model": "a", "tenant": "t", "prompt_tokens": 40, "completion_tokens": 4,'
        ' "status": "200", "request_id": "gw-1", "site": "brno", "data_class": "public", "prompt": "hi"}\n'
        '{"ts": "2026-11-05T10:00:01.000Z", "model": "a", "tenant": "t", "prompt_tokens": null,'
        ' "completion_tokens": 0, "status": "429", "request_id": "gw-2"}\n'
    )
    burst = tmp_path / "burst.jsonl"
    burst.write_text(
        '{"cached_prompt_tokens": 16, "completion_tokens": 6, "model": "a", "prompt_tokens": 60,'
        ' "request_id": "cmpl-1", "status": "ok", "tenant": "t", "ts": "2026-11-05T11:00:00.000001Z",'
        ' "ttft_ms": 12.5}\n'
    )
    usage = aggregate([meter, burst])
    tokens = usage.by_model["a"].tokens
    assert (tokens.requests, tokens.failed, tokens.input, tokens.cached_input, tokens.output) == (3, 1, 100, 16, 10)
    assert usage.by_model["a"].prompt_percentiles[50] == 40  # the refusal has no prompt length
