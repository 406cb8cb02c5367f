"""The compiled tally against a plain reference: Parquet read directly and through DuckDB, row groups
shared among threads, dictionaries in other orders per row group, tallies split and merged, bad values."""

from __future__ import annotations

import json
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llm_fabric.errors import UsageError
from llm_fabric.ledger import tally, usage
from llm_fabric.ledger.period import Month
from llm_fabric.ledger.record_batches import parquet_tasks
from llm_fabric.ledger.records import register_records
from llm_fabric.ledger.usage import RecordUsage, aggregate_records, connect

NOV = Month.parse("2026-11")
Row = dict[str, object]


def _rows(count: int, seed: int = 7) -> list[Row]:
    """Records over November (and a few outside it), lengths on both sides of tally.DENSE, some failures."""
    rows: list[Row] = []
    state = seed
    for i in range(count):
        state = (state * 6364136223846793005 + 1442695040888963407) % 2**64
        r = state >> 11
        minute = r % (31 * 1440) - 600  # some before and after the month
        rows.append(
            {
                "ts": NOV.start + timedelta(minutes=minute, seconds=r % 60),
                "model": f"m{r % 3}",
                "tenant": f"t{(r >> 8) % 7}",
                "prompt_tokens": [5, 300, 4095, 4096, 4097, 70_000, 1_000_000][(r >> 16) % 7] + (r >> 20) % 50,
                "completion_tokens": (r >> 24) % 900,
                "cached_prompt_tokens": (r >> 30) % 200,
                "ttft_ms": None if i % 11 == 0 else ((r >> 34) % 5000) / 7,
                "status": ["ok", "error", "200", "Success", "503"][(r >> 40) % 5],
            }
        )
    return rows


def _reference(rows: list[Row]) -> dict[str, object]:
    """Every figure the tally gives, computed record by record in plain Python."""
    inside = [r for r in rows if NOV.start <= r["ts"] < NOV.end]  # type: ignore[operator]
    sums: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0, 0, 0, 0])
    lengths: dict[str, list[int]] = defaultdict(list)
    minutes: dict[tuple[str, int], int] = defaultdict(int)
    ttft: dict[str, list[float]] = defaultdict(list)
    for r in inside:
        m, t = str(r["model"]), str(r["tenant"])
        ok = str(r["status"]).lower() in ("ok", "success", "succeeded") or str(r["status"]).startswith("2")
        s = sums[(m, t)]
        for i, v in enumerate((1, int(not ok), r["prompt_tokens"], r["cached_prompt_tokens"], r["completion_tokens"])):
            s[i] += int(v)  # type: ignore[call-overload]
        lengths[m].append(int(r["prompt_tokens"]))  # type: ignore[call-overload]
        lengths[t].append(int(r["prompt_tokens"]))  # type: ignore[call-overload]
        minute = int((r["ts"] - NOV.start).total_seconds() // 60)  # type: ignore[operator]
        minutes[(m, minute)] += int(r["prompt_tokens"]) + int(r["completion_tokens"])  # type: ignore[call-overload]
        if r["ttft_ms"] is not None:
            ttft[m].append(round(float(r["ttft_ms"]) * 1000))  # type: ignore[arg-type]

    def nearest(values: list[int]) -> dict[int, int]:
        ordered = sorted(values)
        return {p: ordered[-(-p * len(ordered) // 100) - 1] for p in (50, 95, 99)}

    return {
        "pairs": {k: tuple(v) for k, v in sums.items()},
        "percentiles": {k: nearest(v) for k, v in lengths.items()},
        "peaks": {m: round(max(v for (mm, _), v in minutes.items() if mm == m) / 60, 1) for m, _ in minutes},
        "ttft": {m: round(sum(ttft[m]) / len(ttft[m]) / 1000, 1) if ttft[m] else None for m, _ in minutes},
        "outside": len(rows) - len(inside),
    }


def _figures(result: RecordUsage) -> dict[str, object]:
    return {
        "pairs": {
            k: (v.requests, v.failed, v.input, v.cached_input, v.output) for k, v in result.by_model_tenant.items()
        },
        "percentiles": {
            **{k: f.prompt_percentiles for k, f in result.by_model.items()},
            **{k: f.prompt_percentiles for k, f in result.by_tenant.items()},
        },
        "peaks": {k: f.peak_total_tokens_per_s for k, f in result.by_model.items()},
        "ttft": {k: f.mean_ttft_ms for k, f in result.by_model.items()},
        "outside": result.records_outside_month,
    }


def _parquet(path: Path, rows: list[Row], row_group: int) -> Path:
    table = pa.Table.from_pylist(
        rows,
        schema=pa.schema(
            [
                ("ts", pa.timestamp("ms")),
                ("model", pa.string()),
                ("tenant", pa.string()),
                ("prompt_tokens", pa.int32()),
                ("completion_tokens", pa.int64()),
                ("cached_prompt_tokens", pa.int64()),
                ("ttft_ms", pa.float64()),
                ("status", pa.string()),
            ]
        ),
    )
    pq.write_table(table, path, row_group_size=row_group)
    return path


def _jsonl(path: Path, rows: list[Row]) -> Path:
    def text(ts: object) -> object:
        return ts.strftime("%Y-%m-%dT%H:%M:%SZ") if isinstance(ts, datetime) else ts

    path.write_text("".join(json.dumps({**r, "ts": text(r["ts"])}) + "\n" for r in rows))
    return path


def test_parquet_read_directly_in_threads_matches_reference_and_duckdb(tmp_path: Path) -> None:
    rows = _rows(6000)
    for r in rows:
        r["ts"] = r["ts"].replace(tzinfo=None)  # type: ignore[attr-defined]
    parquet = _parquet(tmp_path / "r.parquet", rows, row_group=700)  # 9 row groups for 2+ threads
    con = connect()
    source = register_records(con, [parquet])
    assert source is not None and len(parquet_tasks(source) or []) == 9
    direct = aggregate_records(connect(), [parquet], NOV)
    via_duckdb = aggregate_records(connect(), [_jsonl(tmp_path / "r.jsonl", rows)], NOV)
    assert direct is not None and via_duckdb is not None
    for r in rows:
        r["ts"] = r["ts"].replace(tzinfo=UTC)  # type: ignore[attr-defined]
    want = _reference(rows)
    assert _figures(direct) == want
    assert _figures(via_duckdb) == want
    assert direct.daily == via_duckdb.daily and direct.by_tenant == via_duckdb.by_tenant


def test_row_groups_with_other_names_and_orders_merge_by_name(tmp_path: Path) -> None:
    """Each row group's dictionary has its own names in its own order; tallies are merged by name."""
    start = datetime(2026, 11, 3, tzinfo=UTC)
    groups = [[("zeta", "t9"), ("alpha", "t1")], [("alpha", "t5"), ("mid", "t1")], [("mid", "t9"), ("zeta", "t5")]]
    rows = [
        {
            "ts": start + timedelta(hours=g),
            "model": m,
            "tenant": t,
            "prompt_tokens": 10 * (g + 1),
            "completion_tokens": 1,
            "cached_prompt_tokens": 0,
            "ttft_ms": 1.0,
            "status": "ok",
        }
        for g, pairs in enumerate(groups)
        for m, t in pairs
    ]
    result = aggregate_records(connect(), [_parquet(tmp_path / "g.parquet", rows, row_group=2)], NOV)
    assert result is not None
    assert list(result.by_model) == ["alpha", "mid", "zeta"]
    assert {k: v.input for k, v in result.by_model_tenant.items()} == {
        ("alpha", "t1"): 10,
        ("alpha", "t5"): 20,
        ("mid", "t1"): 20,
        ("mid", "t9"): 30,
        ("zeta", "t5"): 30,
        ("zeta", "t9"): 10,
    }
    assert result.by_tenant["t1"].prompt_percentiles == {50: 10, 95: 20, 99: 20}


def test_a_full_tally_is_split_and_merged_without_loss(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rows = _rows(3000, seed=3)
    path = _jsonl(tmp_path / "r.jsonl", rows)
    whole = aggregate_records(connect(), [path], NOV)
    monkeypatch.setattr(tally, "MAX_ROWS", 500)  # a new tally every 500 records
    monkeypatch.setattr(tally, "MAX_BATCH", 400)
    monkeypatch.setattr("llm_fabric.ledger.record_batches.BATCH", 400)
    split = aggregate_records(connect(), [path], NOV)
    assert whole is not None and split is not None
    assert _figures(split) == _figures(whole) and split.daily == whole.daily


def test_many_names_and_very_long_prompts_widen_the_keys(tmp_path: Path) -> None:
    """Past 128 names or a length of 2^24 the long-length keys turn 64-bit, mid-run, without loss."""
    rows = _rows(4000, seed=11)
    for i, r in enumerate(rows):
        r["ts"] = r["ts"].replace(tzinfo=None)  # type: ignore[attr-defined]
        if i >= 2000:  # the first row groups stay within 32-bit keys, the later ones do not
            r["tenant"] = f"t{i % 150}"
            if i % 97 == 0:
                r["prompt_tokens"] = 20_000_000 + i
    result = aggregate_records(connect(), [_parquet(tmp_path / "wide.parquet", rows, row_group=500)], NOV)
    assert result is not None
    for r in rows:
        r["ts"] = r["ts"].replace(tzinfo=UTC)  # type: ignore[attr-defined]
    assert _figures(result) == _reference(rows)
    assert max(p for f in result.by_tenant.values() for p in f.prompt_percentiles.values()) > 1 << 24


def _tally_of(rows: list[Row], path: Path) -> tally.Tally:
    """One tally of its own (own name registries), as a caller outside tally_records would make."""
    from llm_fabric.ledger.record_batches import normalise

    part = tally.Tally(NOV, str(path))
    for batch in pq.ParquetFile(_parquet(path, rows, row_group=300)).iter_batches(batch_size=300):
        part.add(normalise(batch, str(path)))
    return part


def test_tallies_with_their_own_registries_merge_by_name(tmp_path: Path) -> None:
    """Tallies that do not share registries (other name orders, 32- and 64-bit keys) are re-indexed."""
    rows = _rows(1500, seed=5)
    for r in rows:
        r["ts"] = r["ts"].replace(tzinfo=None)  # type: ignore[attr-defined]
    rows[1200]["prompt_tokens"] = 30_000_000  # the third part's keys are 64-bit, the others' 32-bit
    parts = [
        _tally_of(list(reversed(rows[:600])), tmp_path / "a.parquet"),
        _tally_of(rows[600:1000], tmp_path / "b.parquet"),
        _tally_of(rows[1000:], tmp_path / "c.parquet"),
    ]
    assert [p.long.shift for p in parts] == [24, 24, 32]
    assert parts[0].models.names != parts[1].models.names or parts[0].tenants.names != parts[1].tenants.names
    merged = tally.Tally.merge(parts)
    source = usage.RecordSource(files=[], formats=["fabric"], has_cached=True, has_ttft=True, deduplicated=False)
    result = usage._usage(merged, source, NOV)
    for r in rows:
        r["ts"] = r["ts"].replace(tzinfo=UTC)  # type: ignore[attr-defined]
    assert _figures(result) == _reference(rows)


def test_missing_values(tmp_path: Path) -> None:
    """A missing prompt length counts 0 tokens and no length; a missing TTFT is left out of the mean."""
    base = {"ts": "2026-11-04T10:00:00Z", "model": "a", "tenant": "t", "completion_tokens": 1, "status": "ok"}
    rows = [
        {**base, "prompt_tokens": 100, "ttft_ms": 10.0},
        {**base, "prompt_tokens": None, "ttft_ms": None},
        {**base, "prompt_tokens": 300, "ttft_ms": 30.0},
    ]
    result = aggregate_records(connect(), [_jsonl(tmp_path / "m.jsonl", rows)], NOV)
    assert result is not None
    a = result.by_model["a"]
    assert (a.tokens.requests, a.tokens.input) == (3, 400)
    assert a.prompt_percentiles == {50: 100, 95: 300, 99: 300}
    assert a.mean_ttft_ms == 20.0


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("prompt_tokens", -3, r"prompt_tokens = -3 in a request record"),
        ("completion_tokens", 2**31, r"completion_tokens = 2147483648"),
        ("ttft_ms", 9e9, r"ttft_ms = 9000000000.0"),
    ],
)
def test_out_of_range_values_are_named(tmp_path: Path, field: str, value: object, message: str) -> None:
    row: Row = {
        "ts": "2026-11-04T10:00:00Z",
        "model": "a",
        "tenant": "t",
        "prompt_tokens": 5,
        "completion_tokens": 1,
        "ttft_ms": 1.0,
        "status": "ok",
        field: value,
    }
    path = _jsonl(tmp_path / "bad.jsonl", [row])
    with pytest.raises(UsageError, match=message) as err:
        aggregate_records(connect(), [path], NOV)
    assert "bad.jsonl" in str(err.value)


def test_a_record_without_a_model_is_an_error_naming_the_row_group(tmp_path: Path) -> None:
    rows = [
        {
            "ts": datetime(2026, 11, 2),
            "model": None,
            "tenant": "t",
            "prompt_tokens": 1,
            "completion_tokens": 1,
            "cached_prompt_tokens": 0,
            "ttft_ms": 1.0,
            "status": "ok",
        }
    ]
    path = _parquet(tmp_path / "nomodel.parquet", rows, row_group=10)
    with pytest.raises(UsageError, match=r"nomodel.parquet \(row group 1 of 1\): 1 request record\(s\) have no model"):
        aggregate_records(connect(), [path], NOV)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(count=st.integers(1, 2500), seed=st.integers(0, 2**32), row_group=st.integers(40, 900))
def test_any_split_into_row_groups_gives_the_reference(tmp_path: Path, count: int, seed: int, row_group: int) -> None:
    rows = _rows(count, seed)
    for r in rows:
        r["ts"] = r["ts"].replace(tzinfo=None)  # type: ignore[attr-defined]
    result = aggregate_records(connect(), [_parquet(tmp_path / f"h{seed}.parquet", rows, row_group)], NOV)
    assert result is not None
    for r in rows:
        r["ts"] = r["ts"].replace(tzinfo=UTC)  # type: ignore[attr-defined]
    assert _figures(result) == _reference(rows)


def test_threads_follow_the_cpus_we_may_use(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(usage.os, "sched_getaffinity", lambda _pid: {0, 1, 2})
    assert usage._threads() == 3


def test_success_statuses_agree_with_the_sql_rule() -> None:
    """record_batches._success (the tally) and records.SUCCESS_SQL (DuckDB readers) say the same."""
    from llm_fabric.ledger.record_batches import _success
    from llm_fabric.ledger.records import SUCCESS_SQL

    statuses = ["ok", "OK", "success", "Succeeded", "200", "204", "2xx", "20", "2000", "500", "error", "", "failure"]
    con = connect()
    con.execute("CREATE TABLE s (status VARCHAR)")
    con.executemany("INSERT INTO s VALUES (?)", [[x] for x in statuses])
    sql = dict(con.execute(f"SELECT status, {SUCCESS_SQL} FROM s").fetchall())
    assert {x: _success(x) for x in statuses} == sql
    assert _success(None) is False
