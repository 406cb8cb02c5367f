"""The SGLang stand-in speaks SGLang where the fabric looks: priority polarity, the bounded queue, the custom
logit processor switch and the sglang:* metric names; and the gateway's hooks give the owner the lead on it."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from llm_fabric.engine.request_hooks import request_fields
from tests.fixtures.sglang_standin import (
    NO_CUSTOM_PROCESSOR,
    PREEMPTED,
    QUEUE_FULL,
    SglangStandin,
    StandinOptions,
)


@pytest.fixture
def standin_factory() -> Iterator[Any]:
    started: list[SglangStandin] = []

    def make(**options: Any) -> SglangStandin:
        options.setdefault("enable_custom_logit_processor", True)  # as the fabric starts SGLang
        standin = SglangStandin(StandinOptions(served_model_name="glm-5-1", **options)).start()
        started.append(standin)
        return standin

    yield make
    for standin in started:
        standin.stop()


def post(url: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(
        f"{url}/v1/chat/completions", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def chat(name: str, tokens: int = 2, **extra: Any) -> dict[str, Any]:
    return {
        "model": "glm-5-1",
        "messages": [{"role": "user", "content": f"hello from {name}"}],
        "max_tokens": tokens,
        "user": name,
    } | extra


def _send_while_busy(standin: SglangStandin, bodies: list[dict[str, Any]]) -> list[tuple[int, dict[str, Any]]]:
    """A long request holds the only slot; `bodies` arrive in order meanwhile and queue."""
    results: list[tuple[int, dict[str, Any]]] = [(0, {})] * len(bodies)
    blocker = threading.Thread(target=post, args=(standin.base_url, chat("blocker", tokens=40)))
    blocker.start()
    while standin.scheduler.running == 0:
        time.sleep(0.005)

    def send(i: int) -> None:
        results[i] = post(standin.base_url, bodies[i])

    threads = []
    for i in range(len(bodies)):
        thread = threading.Thread(target=send, args=(i,))
        thread.start()
        threads.append(thread)
        while len(standin.scheduler.waiting) < i + 1 and thread.is_alive():  # arrival order is the list order
            time.sleep(0.005)
    for thread in [blocker, *threads]:
        thread.join(30)
    return results


@pytest.mark.parametrize("low_values_first", [True, False])
def test_the_owner_goes_first_with_the_gateways_priorities(standin_factory: Any, low_values_first: bool) -> None:
    standin = standin_factory(
        max_running=1, priority_scheduling=True, low_priority_values_first=low_values_first, seconds_per_token=0.02
    )
    bodies = []
    for name, owner in (("pool-1", False), ("pool-2", False), ("owner-1", True), ("owner-2", True)):
        fields = request_fields("sglang", owner=owner, low_values_first=low_values_first)
        bodies.append(chat(name, **fields))
    results = _send_while_busy(standin, bodies)
    assert [status for status, _ in results] == [200] * 4
    assert standin.started == ["blocker", "owner-1", "owner-2", "pool-1", "pool-2"]


def test_sglangs_default_polarity_would_put_the_pool_first(standin_factory: Any) -> None:
    """Why the fabric passes --schedule-low-priority-values-first: vLLM's numbers on SGLang's default."""
    standin = standin_factory(max_running=1, priority_scheduling=True, seconds_per_token=0.02)
    bodies = [chat("pool", **request_fields("vllm", owner=False)), chat("owner", **request_fields("vllm", owner=True))]
    _send_while_busy(standin, bodies)
    assert standin.started == ["blocker", "pool", "owner"]


def test_a_full_queue_rejects_and_priority_evicts_the_least_preferred(standin_factory: Any) -> None:
    standin = standin_factory(
        max_running=1, max_queued=1, priority_scheduling=True, low_priority_values_first=True, seconds_per_token=0.02
    )
    pool = chat("pool", **request_fields("sglang", owner=False))
    owner = chat("owner", **request_fields("sglang", owner=True))
    another_pool = chat("pool-2", **request_fields("sglang", owner=False))
    results = _send_while_busy(standin, [pool, owner])
    assert results[0][0] == 503 and results[0][1]["message"] == PREEMPTED  # the owner took the pool's place
    assert results[1][0] == 200
    results = _send_while_busy(standin, [another_pool, chat("pool-3", **request_fields("sglang", owner=False))])
    assert results[1][0] == 503 and results[1][1]["message"] == QUEUE_FULL  # not better: the newcomer goes


def test_custom_logit_processors_need_the_flag(standin_factory: Any) -> None:
    guarded = request_fields("sglang", owner=None)
    status, answer = post(standin_factory(enable_custom_logit_processor=False).base_url, chat("a", **guarded))
    assert (status, answer["message"]) == (400, NO_CUSTOM_PROCESSOR)
    status, answer = post(standin_factory().base_url, chat("a", **guarded))
    assert status == 200 and answer["usage"]["completion_tokens"] == 2


def test_metrics_carry_sglangs_names(standin_factory: Any) -> None:
    standin = standin_factory(enable_cache_report=True)
    _, first = post(standin.base_url, chat("same prefix", tokens=3))
    _, second = post(standin.base_url, chat("same prefix", tokens=3))
    assert "prompt_tokens_details" in first["usage"]
    assert second["usage"]["prompt_tokens_details"]["cached_tokens"] == second["usage"]["prompt_tokens"] - 1
    with urllib.request.urlopen(f"{standin.base_url}/metrics", timeout=10) as response:
        text = response.read().decode()
    samples = [s for f in text_string_to_metric_families(text) for s in f.samples]
    names = {s.name for s in samples}
    for name in (
        "sglang:prompt_tokens_total",
        "sglang:generation_tokens_total",
        "sglang:cached_tokens_total",
        "sglang:num_requests_total",
        "sglang:num_aborted_requests_total",
        "sglang:num_queue_reqs",
        "sglang:num_running_reqs",
        "sglang:token_usage",
        "sglang:time_to_first_token_seconds_bucket",
    ):
        assert name in names, name
    assert {s.labels["model_name"] for s in samples if s.name.startswith("sglang:")} == {"glm-5-1"}
    assert sum(s.value for s in samples if s.name == "sglang:generation_tokens_total") == 6
    streaming = {s.labels["is_streaming"] for s in samples if s.name == "sglang:num_requests_total"}
    assert streaming == {"false", "true"}  # SGLang's label; the series exist (at 0) before any request
