"""The meter's records are the ledger's record schema (llm_fabric.ledger.records), plus site and data class."""

from __future__ import annotations

import json
import threading
from pathlib import Path

from llm_fabric.gateway.meter import Meter, MeterRecord, utc_timestamp
from llm_fabric.ledger import records


def test_every_column_of_the_ledger_schema_is_a_meter_field() -> None:
    fields = set(MeterRecord.model_fields)
    assert set(records.REQUIRED) <= fields
    assert set(records.OPTIONAL) <= fields
    required = {n for n, f in MeterRecord.model_fields.items() if f.is_required()}
    assert required <= set(records.REQUIRED) | {"request_id"}


def test_lines_from_many_threads_never_interleave(tmp_path: Path) -> None:
    meter = Meter(tmp_path / "records", clock=lambda: 1_796_000_000)

    def write(n: int) -> None:
        for i in range(200):
            meter.write(
                MeterRecord(
                    ts=utc_timestamp(1_796_000_000 + i),
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
