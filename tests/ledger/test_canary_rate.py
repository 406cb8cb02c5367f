"""The month's canary pass rate per deployment, from the prober's series in the real Prometheus, and
in `fabric report --prometheus` beside the books."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from contextlib import redirect_stdout
from datetime import UTC, datetime, timedelta
from pathlib import Path

from llm_fabric.cli.main import main
from llm_fabric.init import init_site
from llm_fabric.ledger.store.canary_rate import canary_pass_rates
from llm_fabric.ledger.store.period import Month
from llm_fabric.ledger.store.promapi import PrometheusClient
from tests.fixtures.prometheus import PrometheusServer

STEP = 300  # the prober's series at one sample every five minutes


def _history(month: Month) -> str:
    """qwen3-5: replica 0 passes all month, replica 1 fails the first quarter; glm-5-1 fails the last half.
    A failing sample just before the month begins must not count."""
    start = int(month.start.timestamp()) + 150
    end = int(month.end.timestamp())
    times = list(range(start, end, STEP))
    lines = ["# TYPE fabric_canary_replica_pass gauge"]

    def series(deployment: str, replica: str, value: Callable[[int], int]) -> None:
        labels = f'site="brno",deployment="{deployment}",replica="{replica}",node="dgx-b300-01"'
        lines.append(f"fabric_canary_replica_pass{{{labels}}} 0 {start - 2 * STEP}")
        lines.extend(f"fabric_canary_replica_pass{{{labels}}} {value(i)} {t}" for i, t in enumerate(times))

    quarter, half = len(times) // 4, len(times) // 2
    series("qwen3-5", "0", lambda i: 1)
    series("qwen3-5", "1", lambda i: 0 if i < quarter else 1)
    series("glm-5-1", "0", lambda i: 1 if i < half else 0)
    return "\n".join(lines) + "\n"


def test_the_pass_rate_is_the_share_of_the_months_runs_the_replicas_passed(
    prometheus_factory: Callable[..., PrometheusServer], tmp_path: Path
) -> None:
    now = datetime.now(UTC)
    last = (now.replace(day=1) - timedelta(days=1)).date()
    month = Month(last.year, last.month)
    prom = prometheus_factory(backfill=[_history(month)])
    rates = canary_pass_rates(PrometheusClient(prom.url), month, now)
    assert set(rates) == {"qwen3-5", "glm-5-1"}
    assert abs(rates["qwen3-5"] - 0.875) < 0.002  # (1 + 0.75) / 2
    assert abs(rates["glm-5-1"] - 0.5) < 0.002

    repo = init_site(tmp_path / "site", "cerit-sc").root
    out = io.StringIO()
    with redirect_stdout(out):
        code = main(
            [
                "report",
                "-C",
                str(repo),
                "--month",
                str(month),
                "--prometheus",
                prom.url,
                "--out",
                str(tmp_path / "report"),
                "--json",
            ]
        )
    assert code == 0
    report = json.loads(out.getvalue())
    assert report["canary_pass_rate"] == rates
    # beside the books, in the pages people read
    markdown = (tmp_path / "report" / "report.md").read_text()
    assert "## Canary pass rate" in markdown
    assert f"| qwen3-5 | {rates['qwen3-5'] * 100:.1f} % |" in markdown
    assert (
        f'<td>glm-5-1</td><td class="n">{rates["glm-5-1"] * 100:.1f} %</td>'
        in (tmp_path / "report" / "report.html").read_text()
    )
