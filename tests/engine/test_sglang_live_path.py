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
from pathlib import Path

import pytest

from llm_fabric.loadtest.burst import plan_burst, send_burst, write_records
from llm_fabric.site.loader import load_site
from tests.engine.live import counter_totals, run_report, scrape_replica, wait_scraped
from tests.fixtures.prometheus import PrometheusServer
from tests.fixtures.sglang_standin import QUEUE_FULL, SglangStandin, StandinOptions

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
        return counter_totals(response.read().decode(), COUNTERS)


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
    prom, node, month = scrape_replica(prometheus_factory, site_repo, standin.base_url, DEPLOYMENT, "sglang")
    site = load_site(site_repo)
    before = engine_counters(standin.base_url)
    wait_scraped(prom, DEPLOYMENT, COUNTERS, before)

    assert turned_away(standin, 3) == [QUEUE_FULL] * 3
    planned = plan_burst(
        COUNT, p50=128, p95=640, tenants=sorted(site.tenants), max_prompt_tokens=900, max_output_tokens=24, seed=8
    )
    records = send_burst(standin.base_url, DEPLOYMENT, planned, deployment=DEPLOYMENT, concurrency=1)
    records_path = write_records(tmp_path / "requests.jsonl", records)
    after = engine_counters(standin.base_url)
    wait_scraped(prom, DEPLOYMENT, COUNTERS, after)

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
    assert reconciled["records_input_tokens"] == sum(r.prompt_tokens or 0 for r in records)
