"""The report from a real Prometheus: live scraping of a replay exporter, and a backfilled month."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from llm_fabric.errors import UsageError
from llm_fabric.ledger.report.build import ReportInputs, build_report
from llm_fabric.ledger.store.period import Month
from llm_fabric.site.loader import SiteRepo, load_site
from tests.fixtures.ledger_replay import ReplayServer, load_series, openmetrics_history
from tests.fixtures.ledger_synthetic import generate_records
from tests.fixtures.prometheus import PrometheusServer, free_port, scrape_job


def report_json(site: SiteRepo, inputs: ReportInputs) -> dict[str, Any]:
    """The report as its JSON document: what report.json holds."""
    return build_report(site, inputs).as_json()


PROFILES = {"qwen3-5": (1100, 33958), "kimi-k2-6": (2179, 99746), "gpt-oss-120b": (193, 2842)}
TENANTS = ["muni-researchers", "ceitec-structural", "fnusa-clinical"]


def _by_model(report: dict[str, object], key: str) -> dict[str, int]:
    return {row["name"]: row[key] for row in report["usage_by_model"]}  # type: ignore[index, union-attr]


def _query_until(prom: PrometheusServer, expr: str, at: float, want: float, timeout: float = 30.0) -> None:
    """Poll an instant query evaluated at `at` (not at the wall clock) until it returns `want`."""
    deadline = time.monotonic() + timeout
    result: list[dict[str, object]] = []
    while time.monotonic() < deadline:
        result = prom.query(expr, at=at)
        if result and float(result[0]["value"][1]) == want:  # type: ignore[index]
            return
        time.sleep(0.25)
    raise AssertionError(f"`{expr}` at {at} did not reach {want} within {timeout}s; last {result}\n{prom.log_tail()}")


def test_live_replay_totals_match_the_records(
    prometheus_factory: Callable[..., PrometheusServer], site_repo: Path, tmp_path: Path
) -> None:
    # A fixed month, whatever the wall clock says: the replay stamps its samples 01:00, 01:01, ...
    # on the month's first day, Prometheus scrapes them live, and the report's `now` is injected.
    month = Month.parse("2026-10")
    records = tmp_path / "requests.jsonl"
    models = sorted(PROFILES)
    records.write_text(
        "".join(
            json.dumps(
                {
                    "ts": f"{month.start + timedelta(seconds=5 * i):%Y-%m-%dT%H:%M:%SZ}",
                    "model": models[i % 3],
                    "tenant": TENANTS[i % 2],
                    "prompt_tokens": 37 * i % 5000 + 1,
                    "completion_tokens": i % 97 + 1,
                    "cached_prompt_tokens": 11 * i % 200,
                    "status": "ok",
                }
            )
            + "\n"
            for i in range(600)
        )
    )
    site = load_site(site_repo)
    t0, t1 = month.start.timestamp(), month.end.timestamp()
    steps, first, step_s = 20, t0 + 3600, 60.0
    port = free_port()
    replay = ReplayServer(
        load_series(site, [records], t0, t1, steps), steps, 1.0, port, sample_times=(first, step_s)
    ).start()
    # the scrape's own `up` series is written at the real time: older samples need the out-of-order window
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "scrape_configs": [scrape_job("vllm", [f"127.0.0.1:{port}"])],
        "storage": {"tsdb": {"out_of_order_time_window": "3650d"}},
    }
    now = month.end + timedelta(days=3)
    try:
        prom = prometheus_factory(config=config)
        from_records = report_json(site, ReportInputs(month, [records], now=now))
        want = _by_model(from_records, "input_tokens")
        _query_until(prom, "sum(vllm:prompt_tokens_total)", first + steps * step_s + 30, sum(want.values()))
        engine_only = report_json(site, ReportInputs(month, [], prometheus_url=prom.url, now=now))
        both = report_json(site, ReportInputs(month, [records], prometheus_url=prom.url, now=now))
    finally:
        replay.stop()
    assert _by_model(engine_only, "input_tokens") == want
    assert _by_model(engine_only, "output_tokens") == _by_model(from_records, "output_tokens")
    assert {row["name"]: row["percentiles"] for row in engine_only["usage_by_model"]} == dict.fromkeys(
        want, "approximate (histogram)"
    )
    assert all(row["drift_pct"] == 0 and not row["warning"] for row in both["reconciliation"])
    assert len(both["reconciliation"]) == len(want)
    owners = {c["owner"]: c["served_on_hardware"] for c in both["contributors"]}
    served = sum(v["input_tokens"] for v in owners.values() if v)
    assert served == sum(want.values())  # every replayed series carries its node's owner
    # the engine saw only the first day: the report says so instead of filling the rest
    for model in want:
        assert f"Prometheus: `{model}` has no engine samples on 2026-10-02..31" in both["data_gaps"]
    assert not any("not over" in g for g in both["data_gaps"])


def test_backfilled_month_states_missing_days(
    prometheus_factory: Callable[..., PrometheusServer], site_repo: Path, tmp_path: Path
) -> None:
    month = Month.parse("2026-10")
    records = tmp_path / "october.parquet"
    generate_records(records, month, 20_000, PROFILES, TENANTS)
    site = load_site(site_repo)
    t0, t1 = month.start.timestamp(), month.end.timestamp()
    steps = 31 * 4  # a sample every 6 hours
    series = load_series(site, [records], t0, t1, steps)
    cutoff = datetime(2026, 10, 21, tzinfo=UTC).timestamp()  # the engines' history stops after the 20th
    text = "\n".join(
        line
        for line in openmetrics_history(series, t0, t1, steps).splitlines()
        if line.startswith("#") or float(line.rsplit(" ", 1)[1]) < cutoff
    )
    prom = prometheus_factory(backfill=[text + "\n"])
    report = report_json(site, ReportInputs(month, [records], prometheus_url=prom.url))
    cut_step = 20 * 4  # steps completed before the cutoff
    assert {r["model"]: r["engine_input_tokens"] for r in report["reconciliation"]} == {
        m: s.counters["prompt_tokens"][cut_step - 1] for m, s in series.items()
    }
    assert all(r["warning"] for r in report["reconciliation"])  # 11 days missing: far over 1 % drift
    for model in PROFILES:
        assert f"Prometheus: `{model}` has no engine samples on 2026-10-21..31" in report["data_gaps"]
    assert not any("not over" in g for g in report["data_gaps"])


def test_unreachable_prometheus_names_the_url(site_repo: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    site = load_site(site_repo)
    with pytest.raises(UsageError, match=f"Prometheus at {url} is unreachable after 3 attempts"):
        report_json(site, ReportInputs(Month.parse("2026-10"), [], prometheus_url=url))


class _Gauges:
    """vLLM's two queue gauges for two replicas on /metrics, as plain text (vLLM's names keep their colons:
    prometheus-client would offer Prometheus 3 the underscore-escaped names)."""

    def __init__(self) -> None:
        self.values: dict[tuple[str, str], float] = {
            (g, r): 0.0 for g in ("num_requests_running", "num_requests_waiting") for r in ("0", "1")
        }
        gauges = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = gauges.text().encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                return

        self.httpd = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def text(self) -> str:
        lines = []
        for (gauge, replica), value in sorted(self.values.items()):
            labels = f'deployment="qwen3-5",model_name="qwen3.5",replica="{replica}"'
            lines.append(f"vllm:{gauge}{{{labels}}} {value}")
        return "\n".join(lines) + "\n"

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


def test_live_peak_concurrency_and_queue_depth_from_the_engine_gauges(
    prometheus_factory: Callable[..., PrometheusServer], site_repo: Path
) -> None:
    """A burst of a few seconds on two replicas' `vllm:num_requests_running`/`waiting`, scraped live: the
    report's peak concurrency and queue depth are the burst's, not the 30-second grid's zeros around it."""
    gauges = _Gauges()
    try:
        prom = prometheus_factory(scrape_configs=[scrape_job("vllm", [f"127.0.0.1:{gauges.httpd.server_port}"])])
        prom.wait_for("vllm:num_requests_running", predicate=lambda r: len(r) == 2)
        gauges.values.update(
            {("num_requests_running", "0"): 7, ("num_requests_running", "1"): 2, ("num_requests_waiting", "0"): 3}
        )
        prom.wait_for("max(vllm:num_requests_running)", predicate=lambda r: bool(r) and r[0]["value"][1] == "7")
        gauges.values.update(dict.fromkeys(gauges.values, 0.0))
        prom.wait_for("max(vllm:num_requests_running)", predicate=lambda r: bool(r) and r[0]["value"][1] == "0")
        now = datetime.now(UTC) + timedelta(seconds=1)
        report = report_json(
            load_site(site_repo), ReportInputs(Month(now.year, now.month), [], prometheus_url=prom.url, now=now)
        )
    finally:
        gauges.stop()
    row = next(r for r in report["usage_by_model"] if r["name"] == "qwen3-5")
    # the busiest replica's own maximum at least; both replicas' sum when a grid step caught the burst
    assert row["peak_concurrent_requests"] in (7, 9)
    assert row["max_queue_depth"] == 3
