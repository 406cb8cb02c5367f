"""Records naming a tenant or a model the site repo does not know are counted and listed, not booked silently.

Real `fabric ledger ingest` into the store, then `fabric report` from it (processes, real DuckDB).
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.fixtures.cli import fabric


def _record(i: int, model: str, tenant: str) -> str:
    return json.dumps(
        {"ts": f"2026-11-{1 + i % 28:02d}T10:00:00Z", "model": model, "tenant": tenant, "prompt_tokens": 100,
         "completion_tokens": 10, "status": "ok", "request_id": f"r{i}"}
    )  # fmt: skip


def test_unknown_tenants_and_models_are_counted_and_listed(site_repo: Path, tmp_path: Path) -> None:
    lines = [_record(i, "qwen3-5", "muni-researchers") for i in range(50)]
    lines += [_record(100 + i, "qwen3-5", "ghost-lab") for i in range(7)]  # a tenant the site does not know
    lines += [_record(200 + i, "llama-9000", "muni-researchers") for i in range(3)]  # nor this deployment
    records = tmp_path / "requests.jsonl"
    records.write_text("\n".join(lines) + "\n")
    assert fabric("ledger", "ingest", "-C", str(site_repo), str(records)).returncode == 0

    out = tmp_path / "report"
    done = fabric("report", "-C", str(site_repo), "--month", "2026-11", "--out", str(out))
    assert done.returncode == 0, done.stderr
    report = json.loads((out / "report.json").read_text())
    unknown = report["unknown_in_records"]
    assert [(r["name"], r["requests"]) for r in unknown["tenants"]] == [("ghost-lab", 7)]
    assert [(r["name"], r["requests"]) for r in unknown["models"]] == [("llama-9000", 3)]
    gaps = "\n".join(report["data_gaps"])
    assert "7 record(s) name a tenant the site repo does not know: `ghost-lab` (7)" in gaps
    assert "3 record(s) name a model (deployment) the site repo does not know: `llama-9000` (3)" in gaps
    assert "ghost-lab" in (out / "report.md").read_text()
    # still counted: the tokens were served
    assert report["totals"]["requests"] == 60


def test_a_clean_month_lists_nothing(site_repo: Path, tmp_path: Path) -> None:
    records = tmp_path / "requests.jsonl"
    records.write_text("\n".join(_record(i, "qwen3-5", "cerit-sc") for i in range(5)) + "\n")
    out = tmp_path / "report"
    done = fabric("report", "-C", str(site_repo), "--month", "2026-11", "--requests", str(records), "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert json.loads((out / "report.json").read_text())["unknown_in_records"] == {"models": [], "tenants": []}
