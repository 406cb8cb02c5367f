"""The live path for SGLang: the SGLang stand-in -> the real Prometheus -> `fabric report`.

As `test_live_path.py` does for the real vLLM: Prometheus scrapes the engine's /metrics with the
labels the serving PodMonitor adds, a known burst goes to the engine, and the report of the current
month must hold what the engine's sglang:* counters rose by. SGLang counts aborted requests among
its finished ones: a few requests are turned away by a full queue (503), and the books must count
only those served. The report's reconciliation compares the engine with the request records.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from llm_fabric.cli.main import main
from llm_fabric.engine.local.sglang_standin import QUEUE_FULL, SglangStandin, StandinOptions
from llm_fabric.engine.local.traffic import plan_burst, send_burst, write_records
from llm_fabric.ledger.period import Month
from llm_fabric.site.loader import load_site
from tests.fixtures.prometheus import PrometheusServer, scrape_job

pytestmark = [pytest.mark.slow]

DEPLOYMENT = "glm-5-1"  # a cerit-sc deployment, served here by SGLang
COUNT = 40
HOLD_TOKENS = 3000  # 3 s at the stand-in's 1 ms per token: long enough to turn three requests away
COUNTERS = {
    "input": "sglang:prompt_tokens_total",
    "output": "sglang:generation_tokens_total",
    "finished": "sglang:num_requests_total",
    "aborted": "sglang:num_aborted_requests_total",
}


@pytest.fixture
def standin() -> Iterator[SglangStandin]:
    engine = SglangStandin(
        StandinOptions(
            served_model_name=DEPLOYMENT,
            max_running=1,
            max_queued=0,
            enable_cache_report=True,
            seconds_per_token=0.001,
        )
    ).start()
    yield engine
    engine.stop()


def engine_counters(url: str) -> dict[str, int]:
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as response:
        text = response.read().decode()
    totals = dict.fromkeys(COUNTERS, 0.0)
    names = {name: key for key, name in COUNTERS.items()}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name in names:
                totals[names[sample.name]] += sample.value
    return {key: int(value) for key, value in totals.items()}


def wait_scraped(prom: PrometheusServer, counters: dict[str, int], timeout: float = 60) -> None:
    def scraped(name: str) -> float | None:
        result = prom.query(f'sum(max_over_time({name}{{deployment="{DEPLOYMENT}"}}[1m]))')
        return float(result[0]["value"][1]) if result else None

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(scraped(COUNTERS[key]) == value for key, value in counters.items()):
            time.sleep(2.5)
            return
        time.sleep(0.5)
    raise AssertionError(f"Prometheus never scraped {counters}:\n{prom.log_tail()}")


def turned_away(standin: SglangStandin, count: int) -> list[str]:
    """While a long request holds the only slot (no queue), `count` more are refused with 503."""
    url = standin.base_url
    body = {"model": DEPLOYMENT, "prompt": "hold", "max_tokens": 1}
    messages = []
    holder = threading.Thread(target=_post, args=(url, body | {"max_tokens": HOLD_TOKENS}))
    holder.start()
    while standin.scheduler.running == 0:
        time.sleep(0.005)
    for _ in range(count):
        try:
            _post(url, body)
        except urllib.error.HTTPError as exc:
            messages.append(json.loads(exc.read())["message"])
    holder.join(30)
    return messages


def _post(url: str, body: dict[str, object]) -> None:
    request = urllib.request.Request(
        f"{url}/v1/completions", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        response.read()


def test_sglang_counters_reach_the_report_through_prometheus(
    standin: SglangStandin,
    prometheus_factory: Callable[..., PrometheusServer],
    site_repo: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    now = datetime.now(UTC)
    month = Month(now.year, now.month)
    if month.end - now < timedelta(minutes=15):
        pytest.skip("the month ends within 15 minutes: the burst could straddle two months")
    site = load_site(site_repo)
    node = sorted(site.nodes.values(), key=lambda n: n.name)[0]
    labels = {
        "deployment": DEPLOYMENT,
        "replica": f"{DEPLOYMENT}-0",
        "owner": node.owner,
        "site": node.site,
        "node": node.name,
    }
    target = standin.base_url.removeprefix("http://")
    prom = prometheus_factory(
        scrape_configs=[scrape_job("sglang", [target], static_configs=[{"targets": [target], "labels": labels}])]
    )
    before = engine_counters(standin.base_url)
    wait_scraped(prom, before)

    assert turned_away(standin, 3) == [QUEUE_FULL] * 3
    planned = plan_burst(
        COUNT, p50=128, p95=640, tenants=sorted(site.tenants), max_prompt_tokens=900, max_output_tokens=24, seed=8
    )
    records = send_burst(standin.base_url, DEPLOYMENT, planned, deployment=DEPLOYMENT, concurrency=1)
    records_path = write_records(tmp_path / "requests.jsonl", records)
    after = engine_counters(standin.base_url)
    wait_scraped(prom, after)

    rise = {key: after[key] - before[key] for key in COUNTERS}
    served = COUNT + 1  # the burst and the request that held the slot; the three turned away are aborted
    assert (rise["finished"], rise["aborted"]) == (served + 3, 3)
    assert rise["input"] == sum(p.planned_prompt_tokens for p in planned) + len("hold")  # aborted: no tokens
    assert rise["output"] == sum(p.max_tokens for p in planned) + HOLD_TOKENS

    common = ["--site-repo", str(site_repo), "--month", str(month), "--prometheus", prom.url]
    engine_only = run_report([*common, "--out", str(tmp_path / "engine-only")], capsys)
    row = {r["name"]: r for r in engine_only["usage_by_model"]}[DEPLOYMENT]
    assert (row["input_tokens"], row["output_tokens"], row["requests"]) == (rise["input"], rise["output"], served)
    assert row["source"] == "prometheus"
    served_on = {c["owner"]: c["served_on_hardware"] for c in engine_only["contributors"]}
    assert served_on[node.owner]["input_tokens"] == rise["input"]  # the owner label of the scrape reached the books

    both = run_report([*common, "--requests", str(records_path), "--out", str(tmp_path / "both")], capsys)
    reconciled = {r["model"]: r for r in both["reconciliation"]}[DEPLOYMENT]
    assert reconciled["engine_input_tokens"] == rise["input"]
    assert reconciled["engine_output_tokens"] == rise["output"]
    assert reconciled["records_input_tokens"] == sum(r["prompt_tokens"] for r in records)


def run_report(args: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    capsys.readouterr()
    assert main(["report", *args, "--json"]) == 0, capsys.readouterr().err
    report: dict[str, Any] = json.loads(capsys.readouterr().out)
    return report
