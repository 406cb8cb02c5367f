"""The live path: the real vLLM (tiny model, qwen3.5 recipe) -> the real Prometheus -> `fabric report`.

Prometheus scrapes the engine's own /metrics with the labels the serving PodMonitor would add
(deployment, replica, owner, site, node: here as the scrape's static labels). A known burst goes
to the engine; its request records are written as a gateway would. The report of the current
month must then hold exactly what the engine's counters rose by, and the records' percentiles.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from llm_fabric.engine.process import LocalEngine
from llm_fabric.loadtest.burst import lognormal_lengths, nearest_rank, plan_burst, send_burst, write_records
from llm_fabric.site.loader import load_site
from tests.engine.live import counter_totals, run_report, scrape_replica, wait_scraped
from tests.fixtures.engine import ENGINE_RECIPE, get_text
from tests.fixtures.prometheus import PrometheusServer

pytestmark = [pytest.mark.engine, pytest.mark.slow]

DEPLOYMENT = "qwen3-5"  # the cerit-sc deployment of the qwen3.5 recipe
COUNT, P50, P95 = 40, 128, 640  # 40 requests: 40 * 50 % and 40 * 95 % are whole ranks
MAX_PROMPT, MAX_OUTPUT = 900, 24  # the stand-in engine's max-model-len is 1024
COUNTERS = {
    "input": "vllm:prompt_tokens_total",
    "output": "vllm:generation_tokens_total",
    "requests": "vllm:request_success_total",
}


def engine_counters(engine: LocalEngine) -> dict[str, int]:
    """The engine's own counters (summed over their series), read from its /metrics with Prometheus' parser."""
    return counter_totals(get_text(engine, "/metrics"), COUNTERS)


def test_engine_counters_reach_the_report_through_prometheus(
    tiny_engine: LocalEngine,
    prometheus_factory: Callable[..., PrometheusServer],
    site_repo: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    prom, node, month = scrape_replica(prometheus_factory, site_repo, tiny_engine.base_url, DEPLOYMENT, "vllm")
    site = load_site(site_repo)
    # the first scraped sample is where the month's count starts: no traffic until Prometheus holds it
    before = engine_counters(tiny_engine)
    wait_scraped(prom, DEPLOYMENT, COUNTERS, before)

    tenants = sorted(site.tenants)
    planned = plan_burst(
        COUNT, p50=P50, p95=P95, tenants=tenants, max_prompt_tokens=MAX_PROMPT, max_output_tokens=MAX_OUTPUT, seed=8
    )
    records = send_burst(tiny_engine.base_url, ENGINE_RECIPE, planned, deployment=DEPLOYMENT, concurrency=4)
    records_path = write_records(tmp_path / "requests.jsonl", records)
    after = engine_counters(tiny_engine)
    wait_scraped(prom, DEPLOYMENT, COUNTERS, after)

    # the burst is what was planned: byte-level prompts are as long as their text, outputs as max_tokens
    assert [r.prompt_tokens for r in records] == [p.planned_prompt_tokens for p in planned]
    assert [r.completion_tokens for r in records] == [p.max_tokens for p in planned]
    lengths = lognormal_lengths(COUNT, P50, P95, maximum=MAX_PROMPT)
    assert (nearest_rank(lengths, 50), nearest_rank(lengths, 95)) == (P50, P95)
    rise = {key: after[key] - before[key] for key in COUNTERS}
    assert rise == {"input": sum(lengths), "output": sum(p.max_tokens for p in planned), "requests": COUNT}

    common = ["--site-repo", str(site_repo), "--month", str(month), "--prometheus", prom.url]
    engine_only = run_report([*common, "--out", str(tmp_path / "engine-only")], capsys)
    row = {r["name"]: r for r in engine_only["usage_by_model"]}[DEPLOYMENT]  # type: ignore[index, union-attr]
    assert (row["input_tokens"], row["output_tokens"], row["requests"]) == (rise["input"], rise["output"], COUNT)
    assert row["source"] == "prometheus"
    served = {c["owner"]: c["served_on_hardware"] for c in engine_only["contributors"]}  # type: ignore[union-attr]
    assert served[node.owner]["input_tokens"] == rise["input"]  # the owner label of the scrape reached the books

    both = run_report([*common, "--requests", str(records_path), "--out", str(tmp_path / "both")], capsys)
    row = {r["name"]: r for r in both["usage_by_model"]}[DEPLOYMENT]  # type: ignore[index, union-attr]
    assert (row["input_tokens"], row["output_tokens"], row["requests"]) == (rise["input"], rise["output"], COUNT)
    assert (row["prompt_p50"], row["prompt_p95"], row["percentiles"]) == (P50, P95, "exact")
    assert row["source"] == "records + prometheus"
    reconciled = {r["model"]: r for r in both["reconciliation"]}[DEPLOYMENT]  # type: ignore[index, union-attr]
    assert reconciled["engine_input_tokens"] == reconciled["records_input_tokens"] == rise["input"]
    assert reconciled["engine_output_tokens"] == reconciled["records_output_tokens"] == rise["output"]
    assert reconciled["drift_pct"] == 0 and not reconciled["warning"]
    assert (tmp_path / "both" / "report.md").is_file()
