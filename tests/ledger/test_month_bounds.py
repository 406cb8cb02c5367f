"""`fabric report` for a month not begun (refused), a month in progress (partial, operations prorated,
said in every format), recovery in percent, and deployments without reference prices (warned by the
report and by `fabric validate`). The month is computed from today's date, so the real clock is used."""

from __future__ import annotations

import calendar
import html
import json
from datetime import UTC, datetime
from pathlib import Path

from llm_fabric.ledger.store.period import Month
from tests.fixtures.cli import fabric, git
from tests.fixtures.ledger_synthetic import generate_records

PROFILES = {"qwen3-5": (1100, 33958), "glm-5-1": (709, 90351)}
TENANTS = ["ceitec-structural", "muni-researchers"]
FULL_MONTH_OPERATIONS = 2 * 500_000 * 1.2 / 36  # examples/cerit-sc/ledger.yaml: two DGX, +20 %, 36 months


def _site(tmp_path: Path, month: Month) -> tuple[Path, Path]:
    site = tmp_path / "site"
    assert fabric("init", str(site), "--example", "cerit-sc").returncode == 0
    records = tmp_path / f"requests-{month}.jsonl"
    generate_records(records, month, 2_000, PROFILES, TENANTS)
    return site, records


def _this_month() -> tuple[Month, datetime]:
    now = datetime.now(UTC)
    return Month(now.year, now.month), now


def test_a_month_not_begun_is_refused(tmp_path: Path) -> None:
    this, _ = _this_month()
    nxt = Month(this.year + this.month // 12, this.month % 12 + 1)
    site, records = _site(tmp_path, this)
    out = tmp_path / "report"
    done = fabric("report", "-C", str(site), "--month", str(nxt), "--requests", str(records), "--out", str(out))
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"month {nxt} has not begun: it begins on {nxt.first_day.isoformat()}" in done.stderr
    assert not out.exists()


def test_a_month_in_progress_is_partial_with_operations_prorated(tmp_path: Path) -> None:
    this, now = _this_month()
    site, records = _site(tmp_path, this)
    out = tmp_path / "report"
    done = fabric("report", "-C", str(site), "--month", str(this), "--requests", str(records), "--out", str(out))
    assert done.returncode == 0, done.stderr
    days = calendar.monthrange(this.year, this.month)[1]
    said = f"operations are prorated to {now.day} of {days} days"
    expected = round(FULL_MONTH_OPERATIONS * now.day / days, 2)
    report = json.loads((out / "report.json").read_text())
    assert report["books"]["operations_ledger"] == expected
    assert any(g.startswith("partial month:") and said in g for g in report["data_gaps"])
    assert said in done.stdout and f"operations {expected:,.2f}" in done.stdout
    assert said in (out / "report.md").read_text() and said in html.unescape((out / "report.html").read_text())
    # recovery: a percentage on the CLI as in report.md
    recovery = f"{report['books']['recovery'] * 100:.1f} %"
    assert f"recovery {recovery}," in done.stdout
    assert f"| Recovery (price / operations) | {recovery} |" in (out / "report.md").read_text()


def test_unpriced_deployment_is_warned_by_validate_and_report(tmp_path: Path) -> None:
    month = Month.parse("2026-10")
    site, records = _site(tmp_path, month)
    ledger = site / "ledger.yaml"
    lines = ledger.read_text().splitlines(keepends=True)
    start = next(i for i, line in enumerate(lines) if line.startswith("  glm-5-1:"))
    end = next(i for i in range(start + 1, len(lines)) if not lines[i].startswith("    "))
    ledger.write_text("".join(lines[:start] + lines[end:]))
    git(site, "commit", "-qam", "glm-5-1: no reference price yet")

    checked = fabric("validate", "-C", str(site))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "warnings (1):" in checked.stdout
    assert "deployment `glm-5-1` has no reference price: its usage books 0.00 in the price ledger" in checked.stdout
    as_json = json.loads(fabric("validate", "-C", str(site), "--json").stdout)
    assert [w["message"] for w in as_json["warnings"]] == [
        "deployment `glm-5-1` has no reference price: its usage books 0.00 in the price ledger"
    ]

    out = tmp_path / "report"
    done = fabric("report", "-C", str(site), "--month", str(month), "--requests", str(records), "--out", str(out))
    assert done.returncode == 0, done.stderr
    said = "no reference price for `glm-5-1` in ledger.yaml: their usage books 0.00 in the price ledger"
    assert said in done.stdout
    assert said in (out / "report.md").read_text()
    assert said in html.unescape((out / "report.html").read_text())
    assert any(said in g for g in json.loads((out / "report.json").read_text())["data_gaps"])
