"""The gateway's attack tests (issue 39): each reproduces a finding with the requests an attacker, or a bad
moment, would send, through real LiteLLM proxies (`fabric gateway run`) and a real redis-server.

F9: a budgeted tenant's parallel burst stays within its budget plus one request's reservation, and a
gateway started while Redis is down refuses a budgeted tenant instead of counting the month from 0.
F10: a tenant key reaches only the inference routes; LiteLLM's health and admin routes take the master key.
F11: an engine stream that dies midway ends in an error event, not `[DONE]`, and is metered as `cut`.
F1 (two sites): a relay is believed only with its entry site's signature; the serving site applies the
tenant's own limits and budget and meters the relay under the entry's request id.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import load_pem_private_key
from tests.fixtures.gateway_site import Backend
from tests.fixtures.redis_server import redis_server
from tests.gateway.conftest import (
    TEST_PEER_KEY,
    Gateway,
    relay_keys,
    relaying_sites,
    require_gateway,
    running_gateway,
)
from tests.gateway.test_shared_counters import Pods, counted_site, hi, settled, two_pods

from llm_fabric.gateway.runtime.relay import RELAY_HEADER, Assertion, sign
from llm_fabric.gateway.runtime.settings import COUNTERS_URL_ENV


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pods]:
    """Two pods of brno's gateway counting in one redis-server, in front of a recording backend."""
    with two_pods(tmp_path_factory.mktemp("attacks")) as started:
        yield started


def _get(url: str, path: str, key: str) -> tuple[int, Any]:
    request = urllib.request.Request(url + path)
    request.add_header("Authorization", f"Bearer {key}")
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


def _tokens(row: dict[str, Any]) -> int:
    return int(row.get("prompt_tokens") or 0) + int(row.get("completion_tokens") or 0)


# F9 ---------------------------------------------------------------------------------------------------


def test_a_parallel_burst_stays_within_the_budget_plus_one_reservation(site: Pods) -> None:
    """12 parallel requests of a 25-token tenant, through both pods: once the month with the reservations in
    flight reaches the budget, the rest are refused (issue 39 found all 12 served: 8,064 tokens)."""
    text = hi("budgeted") + " sleep:1"  # 3 words: the backend answers 8 prompt + 3 completion tokens

    def send(i: int) -> tuple[int, Any]:
        status, _, body = (site.a if i % 2 else site.b).chat("budgeted", "qwen3-5", text, max_tokens=3)
        return status, body

    with ThreadPoolExecutor(max_workers=12) as pool:
        answers = list(pool.map(send, range(12)))
    served = [b for s, b in answers if s == 200]
    refused = [b for s, b in answers if s != 200]
    assert 1 <= len(served) <= 3, [s for s, _ in answers]
    assert all(b["error"]["type"] == "budget_exceeded" for b in refused), refused
    settled("budgeted", 12, site.a, site.b)
    rows = [r for g in (site.a, site.b) for r in g.rows() if r["tenant"] == "budgeted" and r["status"] == "200"]
    spent = sum(_tokens(r) for r in rows)
    reservation = len(text) // 4 + 1 + 3  # the gateway's estimate of the prompt, plus max_tokens
    assert spent <= 25 + reservation, spent
    # the reservations settled to what was used: the month the next refusal names is what the meters hold
    status, _, body = site.a.chat("budgeted", "qwen3-5", hi("budgeted"), max_tokens=3)
    assert status == 429 and f"({spent} of its 25 tokens in " in body["error"]["message"], body


def test_a_request_without_max_tokens_holds_the_recipes_cap_until_it_settles(site: Pods) -> None:
    """No max_tokens: the request reserves the recipe's (qwen3-5: 32768) while it runs, so a second one is
    refused meanwhile; once the first settles to its 11 tokens, the 15-token budget admits again."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        first = pool.submit(site.a.chat, "rolling", "qwen3-5", hi("rolling") + " sleep:2 held")
        time.sleep(1)
        status, _, body = site.b.chat("rolling", "qwen3-5", hi("rolling"))
        assert status == 429 and body["error"]["type"] == "budget_exceeded", body
        assert first.result()[0] == 200
    (served,) = [r for r in site.a.backends["brno"].served() if "held" in r["text"]]
    assert served["body"]["max_tokens"] == 32768  # what it reserved is what it could have used
    settled("rolling", 2, site.a, site.b)
    assert site.b.chat("rolling", "qwen3-5", hi("rolling"))[0] == 200  # 11 of 15 spent: admitted


def test_a_gateway_started_while_redis_is_down_refuses_a_budgeted_tenant(site: Pods) -> None:
    site.redis.stop()
    try:
        env = {COUNTERS_URL_ENV: site.redis.url()}
        with running_gateway(site.repo, site.plan, site.root / "c", site.endpoints, [], env=env) as url:
            cold = Gateway(url, site.keys, site.root / "c" / "records", site.repo, site.plan, site.a.backends)
            status, headers, body = cold.chat("federated", "qwen3-5", hi("federated"))
            assert status == 503, body
            assert body["error"]["type"] == "service_unavailable"
            message = body["error"]["message"]
            assert "the gateway cannot check tenant `federated`'s limits and budget" in message
            assert "this gateway has not seen the tenant's month in the store" in message
            assert "retry-after" in headers
            assert cold.chat("open-public", "qwen3-5", hi("open-public"))[0] == 200  # no budget: own counters
    finally:
        site.redis.start()
    time.sleep(1.5)  # the pods ask the store again a second after it failed


# F10 --------------------------------------------------------------------------------------------------


def test_a_tenant_key_reaches_only_the_inference_routes(site: Pods) -> None:
    key = site.keys["muni-researchers"]
    before = len(site.a.backends["brno"].served())
    for path in ("/health", "/model/info", "/v1/model/info", "/key/info", "/global/spend/report"):
        status, body = _get(site.a.url, path, key)
        assert status == 403, (path, body)
        message = body["error"]["message"]
        assert f"route {path} takes the gateway's master key: a tenant key reaches only" in message, message
        assert "http://127.0.0.1" not in json.dumps(body)  # no backend URL in the answer
    assert len(site.a.backends["brno"].served()) == before  # /health called no backend
    status, body = _get(site.a.url, "/v1/models", key)
    assert status == 200 and "qwen3-5@public" in {m["id"] for m in body["data"]}, body


def test_the_master_key_opens_the_admin_routes_and_no_requests(site: Pods, tmp_path: Path) -> None:
    from llm_fabric.gateway.config import build_gateway
    from llm_fabric.gateway.endpoints import LocalRun
    from llm_fabric.gateway.run import start_gateway, write_gateway_files
    from llm_fabric.plan.document import load_plan
    from llm_fabric.site.loader import load_site

    files = build_gateway(
        load_site(site.repo),
        load_plan(site.plan),
        site_id="brno",
        reach=LocalRun(engines={("qwen3-5", None): site.a.backends["brno"].url}),
    )
    write_gateway_files(files, tmp_path)
    proxy = start_gateway(tmp_path, tmp_path / "records", master_key="sk-fabric-test-master")
    try:
        proxy.wait_healthy(120)
        status, body = _get(proxy.base_url, "/model/info", "sk-fabric-test-master")
        assert status == 200 and body["data"], body
        other = Gateway(proxy.base_url, site.keys, tmp_path / "records", site.repo, site.plan, {})
        status, _, body = other.chat(None, "qwen3-5", "hi", key="sk-fabric-test-master")
        assert status == 403, body
        assert body["error"]["message"] == "the master key is for LiteLLM's admin routes: requests take a tenant's key"
    finally:
        proxy.stop()


# F11 --------------------------------------------------------------------------------------------------


def test_a_stream_cut_midway_ends_in_an_error_event_and_is_metered_as_cut(site: Pods) -> None:
    request = urllib.request.Request(
        site.a.url + "/v1/chat/completions",
        data=json.dumps(
            {"model": "qwen3-5", "stream": True, "messages": [{"role": "user", "content": "cut:stream tenant:x"}]}
        ).encode(),
        method="POST",
    )
    request.add_header("Content-Type", "application/json")
    request.add_header("Authorization", f"Bearer {site.keys['open-public']}")
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            call_id = response.headers["x-litellm-call-id"]
            raw = response.read().decode()
    except urllib.error.HTTPError as exc:
        raise AssertionError(f"{exc.code}: {exc.read().decode()}") from exc
    events = [line[6:] for line in raw.splitlines() if line.startswith("data: ")]
    assert "[DONE]" not in events, raw
    assert '"finish_reason": "stop"' not in raw and '"finish_reason":"stop"' not in raw, raw
    error = json.loads(events[-1])["error"]
    assert error["type"] == "stream_cut" and error["code"] == "502"
    assert "the answer broke off after 1 chunks: the engine's stream ended without finishing" in error["message"]
    deadline = time.monotonic() + 10
    while not (rows := [r for r in site.a.rows() if r.get("request_id") == call_id]):
        assert time.monotonic() < deadline, "the cut stream was not metered"
        time.sleep(0.1)
    time.sleep(1)  # a success callback, if one came, would write a second record by now
    rows = [r for r in site.a.rows() if r.get("request_id") == call_id]
    assert [(r["status"], r["completion_tokens"]) for r in rows] == [("cut", 1)], rows


# F1 ---------------------------------------------------------------------------------------------------


@dataclass
class Federation:
    brno: Gateway
    vienna: Gateway
    backends: dict[str, Backend]


@pytest.fixture(scope="module")
def federation(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Federation]:
    """Brno's and Vienna's gateways, relaying to each other, each counting in its own store."""
    require_gateway()
    root = tmp_path_factory.mktemp("attacks-relay")
    with redis_server(root / "redis") as redis:
        repo, plan, keys = counted_site(root)
        backends = {"brno": Backend("brno", True), "vienna": Backend("vienna", True)}
        for backend in backends.values():
            backend.start()
        engines = {"vienna": [f"qwen3-5={backends['vienna'].url}"], "brno": [f"qwen3-5={backends['brno'].url}"]}
        stores = {"vienna": {COUNTERS_URL_ENV: redis.url(2)}, "brno": {COUNTERS_URL_ENV: redis.url(1)}}
        try:
            with relaying_sites(repo, plan, root, engines, stores) as urls:
                yield Federation(
                    Gateway(urls["brno"], keys, root / "brno" / "records", repo, plan, backends),
                    Gateway(urls["vienna"], keys, root / "vienna" / "records", repo, plan, backends),
                    backends,
                )
        finally:
            for backend in backends.values():
                backend.stop()


def _signed(by: str, entry: str, tenant: str, data_class: str, request_id: str) -> dict[str, str]:
    """An assertion signed with site `by`'s relay key (what a gateway holding that key can send)."""
    private, _ = relay_keys()
    key = load_pem_private_key(private[by].read_bytes(), password=None)
    assert isinstance(key, Ed25519PrivateKey)
    assertion = Assertion(entry, "vienna", tenant, data_class, request_id, time.time() + 60)
    return {RELAY_HEADER: sign(key, assertion)}


def test_the_peer_key_alone_no_longer_speaks_for_a_tenant(federation: Federation) -> None:
    """Issue 39 found the peer key with `X-Fabric-Tenant` served past a spent budget, unmetered, and with the
    owner's priority: without its entry site's signature a relay is now refused."""
    vienna = federation.vienna
    while vienna.chat("budgeted", "qwen3-5", hi("budgeted"))[0] == 200:  # spend the budget at vienna
        pass
    for tenant in ("budgeted", "ceitec-structural"):
        headers = {"X-Fabric-Tenant": tenant, "X-Fabric-Entry-Site": "brno", "X-Fabric-Data-Class": "public"}
        status, _, body = vienna.chat(None, "qwen3-5", f"peer-key-{tenant}", key=TEST_PEER_KEY, headers=headers)
        assert status == 401, body
        assert body["error"]["message"] == "a relay must carry its entry site's signed assertion (x-fabric-relay)"
    assert not [r for r in federation.backends["vienna"].served() if "peer-key-" in r["text"]]


def test_a_site_cannot_sign_for_another_nor_replay_a_relay(federation: Federation) -> None:
    vienna = federation.vienna
    forged = _signed("vienna", "brno", "muni-researchers", "public", "forged-1")  # vienna's key, brno's name
    status, _, body = vienna.chat(None, "qwen3-5@public", "forged", key=TEST_PEER_KEY, headers=forged)
    assert status == 401 and body["error"]["message"] == "the relay's assertion is not signed by `brno`'s relay key"
    good = _signed("brno", "brno", "muni-researchers", "public", "relay-once")
    status, _, body = vienna.chat(None, "qwen3-5@public", "once", key=TEST_PEER_KEY, headers=good)
    assert status == 200, body
    status, _, body = vienna.chat(None, "qwen3-5@public", "twice", key=TEST_PEER_KEY, headers=good)
    assert status == 401
    assert body["error"]["message"] == "the relay's assertion for request relay-once was already used"
    # sensitive data may not enter at vienna: brno's key cannot claim it entered there either
    abroad = _signed("brno", "vienna", "fnusa-clinical", "sensitive", "abroad-1")
    status, _, body = vienna.chat(None, "qwen3-5", "abroad", key=TEST_PEER_KEY, headers=abroad)
    assert status == 401 and "not signed by `vienna`'s relay key" in body["error"]["message"]


def test_a_signed_relay_gets_the_tenants_own_budget_and_is_metered_as_a_relay(federation: Federation) -> None:
    vienna = federation.vienna
    while vienna.chat("federated", "qwen3-5", hi("federated"))[0] == 200:  # vienna's share of the budget
        pass
    signed = _signed("brno", "brno", "federated", "public", "over-budget-1")
    status, _, body = vienna.chat(None, "qwen3-5@public", hi("federated"), key=TEST_PEER_KEY, headers=signed)
    assert status == 429 and body["error"]["type"] == "budget_exceeded", body
    assert "tenant `federated` has spent its monthly budget" in body["error"]["message"]
    deadline = time.monotonic() + 10
    while not (rows := [r for r in vienna.rows() if r.get("request_id") == "over-budget-1"]):
        assert time.monotonic() < deadline, "the relay was not metered at the serving site"
        time.sleep(0.1)
    assert [(r["status"], r["relay_from"], r["tenant"]) for r in rows] == [("429", "brno", "federated")]
