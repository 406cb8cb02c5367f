"""The meter writes the foundation's request records (llm_fabric.request_record), site and data class included."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest
from pydantic import ValidationError

from llm_fabric.gateway.runtime.meter import Meter
from llm_fabric.request_record import RequestRecord


def test_a_records_status_is_the_http_status_the_client_got() -> None:
    """One spelling: `200`, `429`; the older `ok` is read by the ledger but never written."""
    assert RequestRecord(ts=datetime.now(UTC), model="m", tenant="t", status="429").status == "429"
    with pytest.raises(ValidationError, match="status") as caught:
        RequestRecord(ts=datetime.now(UTC), model="m", tenant="t", status="ok")
    assert "pattern" in str(caught.value)


def test_lines_from_many_threads_never_interleave(tmp_path: Path) -> None:
    meter = Meter(tmp_path / "records", clock=lambda: 1_796_000_000)

    def write(n: int) -> None:
        for i in range(200):
            meter.write(
                RequestRecord(
                    ts=datetime.fromtimestamp(1_796_000_000 + i, UTC),
                    model="qwen3-5",
                    tenant=f"t{n}",
                    status="200",
                    request_id=f"{n}-{i}",
                    prompt="x" * 2000,
                )
            )

    threads = [threading.Thread(target=write, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    day_file = tmp_path / "records" / "requests-2026-11-30.jsonl"  # the UTC day of the clock
    assert [p.name for p in (tmp_path / "records").iterdir()] == [day_file.name]
    rows = [json.loads(line) for line in day_file.read_text().splitlines()]
    assert len(rows) == 800 and len({r["request_id"] for r in rows}) == 800
    assert rows[0]["ts"].endswith("Z")


def test_a_refusal_is_booked_without_a_prompt_length(tmp_path: Path) -> None:
    """A 429 used no tokens and has no prompt length: the month's prompt p50 is the served requests' own."""
    from llm_fabric.ledger.store.database import LedgerStore

    meter = Meter(tmp_path / "records", clock=lambda: 1_796_000_000)
    for i in range(3):
        ts = datetime.fromtimestamp(1_796_000_000 + i, UTC)
        meter.write(RequestRecord(ts=ts, model="m", tenant="t", prompt_tokens=100, status="200", request_id=f"ok-{i}"))
        meter.write(RequestRecord(ts=ts, model="m", tenant="t", status="429", request_id=f"refused-{i}"))
    rows = [json.loads(line) for line in (tmp_path / "records" / "requests-2026-11-30.jsonl").read_text().splitlines()]
    assert [r["prompt_tokens"] for r in rows] == [100, None] * 3
    with LedgerStore(None) as store:
        result = store.ingest([tmp_path / "records"])
        assert (result.added, result.bad) == (6, 0)
        p50 = store.con.execute(
            "SELECT prompt_tokens FROM month_percentiles WHERE side = 'model' AND percentile = 50"
        ).fetchall()
        failed = store.con.execute("SELECT sum(requests), sum(failed), sum(input) FROM daily_usage").fetchall()
    assert p50 == [(100,)]
    assert failed == [(6, 3, 300)]
