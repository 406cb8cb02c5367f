"""Limits and budgets across gateway pods and sites: real LiteLLM proxies (`fabric gateway run`) sharing a real
redis-server (docs/gateway.md, "Limits across pods" and "Monthly budgets").

Two proxies of the brno gateway (`a`, `b`) count in one Redis: a tenant's requests a minute and in flight
hold across both (the 200s never pass the limit), a budget spent through one is refused by the other,
and a third proxy whose clock is in the next month (FABRIC_GATEWAY_CLOCK_OFFSET_S) admits the same tenant
again, and refuses a key that has expired by then. Stopping the redis-server refuses a restricted
tenant (503) and admits a public one on the pod's own counters. Two sites with a store each enforce
their share of a tenant's budget (`gateway.budget_shares`): together never more than the budget.
"""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from tests.fixtures.gateway_site import Backend, edit_yaml, issue_keys, make_gateway_plan, make_gateway_site
from tests.fixtures.redis_server import RedisServer, redis_server
from tests.gateway.conftest import Gateway, require_gateway, running_gateway

from llm_fabric.cli.main import main
from llm_fabric.gateway.runtime.admission import month_of
from llm_fabric.gateway.runtime.settings import CLOCK_OFFSET_ENV, COUNTERS_URL_ENV

# each request below: "tenant:NAME hi" is 2 words, the backends answer 2 + 5 prompt and 3 completion tokens
TOKENS_A_REQUEST = 10
LIMITED = {
    "paced": {"requests_per_minute": 5},
    "parallel": {"max_concurrent_requests": 2},
    "budgeted": {"tokens_per_month": 25},
    "priced": {"price_per_month": 0.01},
    "rolling": {"tokens_per_month": 15},
    "expiring": {},
    "open-public": {},
    "federated": {"tokens_per_month": 100},
}


@dataclass
class Pods:
    a: Gateway
    b: Gateway
    redis: RedisServer
    root: Path
    repo: Path
    plan: Path
    endpoints: list[str]
    keys: dict[str, str]


def add_tenants(repo: Path) -> None:
    for name, limits in LIMITED.items():
        tenant = {"version": 1, "name": name, "display_name": name, "data_classes": ["public"], "limits": limits}
        (repo / "tenants" / f"{name}.yaml").write_text(json.dumps(tenant))
    subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True, capture_output=True)
    commit = ["git", "-C", str(repo), "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "budget tenants"]
    subprocess.run(commit, check=True, capture_output=True)


def fabric(argv: list[str]) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(argv) == 0, out.getvalue()
    return out.getvalue()


def issue(repo: Path, tenant: str, *extra: str) -> str:
    return str(json.loads(fabric(["tenants", "key", "issue", "-C", str(repo), tenant, "--json", *extra]))["key"])


def counted_site(root: Path, **gateway: Any) -> tuple[Path, Path, dict[str, str]]:
    repo = make_gateway_site(root / "site")
    edit_yaml(repo / "fabric.yaml", lambda d: d["gateway"].update({"counters": {}, **gateway}))
    add_tenants(repo)
    plan = make_gateway_plan(repo, root)
    keys = issue_keys(repo)
    keys.update({name: issue(repo, name) for name in LIMITED if name != "expiring"})
    return repo, plan, keys


@pytest.fixture(scope="module")
def pods(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pods]:
    with two_pods(tmp_path_factory.mktemp("shared-counters")) as started:
        yield started


@contextlib.contextmanager
def two_pods(root: Path) -> Iterator[Pods]:
    """Two pods of brno's gateway counting in one real redis-server, in front of one recording backend."""
    require_gateway()
    with redis_server(root / "redis") as redis:
        # two pods of brno's gateway: the tenants' public data may enter at vienna's too, so brno is given
        # the whole budget (by default the two sites would hold half each)
        repo, plan, keys = counted_site(root, budget_shares={"brno": 1.0})
        # valid for ten minutes: the proxy of next month's clock sees it expired
        keys["expiring"] = issue(
            repo, "expiring", "--expires-at", (datetime.now(UTC) + timedelta(minutes=10)).strftime("%Y-%m-%dT%H:%M:%S")
        )
        backend = Backend("brno", True)
        backend.start()
        endpoints = [f"qwen3-5={backend.url}", f"qwen3-5-122b={backend.url}"]
        env = {COUNTERS_URL_ENV: redis.url()}
        try:
            with (
                running_gateway(repo, plan, root / "a", endpoints, [], env=env) as url_a,
                running_gateway(repo, plan, root / "b", endpoints, [], env=env) as url_b,
            ):
                backends = {"brno": backend}
                yield Pods(
                    Gateway(url_a, keys, root / "a" / "records", repo, plan, backends),
                    Gateway(url_b, keys, root / "b" / "records", repo, plan, backends),
                    redis,
                    root,
                    repo,
                    plan,
                    endpoints,
                    keys,
                )
        finally:
            backend.stop()


def hi(tenant: str) -> str:
    return f"tenant:{tenant} hi"


def settled(tenant: str, count: int, *gateways: Gateway) -> None:
    """Wait until the meters hold `count` records of `tenant`: LiteLLM runs the success hook (which counts a
    request's tokens, then writes its record) after the answer has gone out."""
    deadline = time.monotonic() + 20
    while sum(1 for g in gateways for r in g.rows() if r["tenant"] == tenant) < count:
        assert time.monotonic() < deadline, f"the meters did not record {count} requests of {tenant}"
        time.sleep(0.05)


def test_requests_a_minute_hold_across_both_pods(pods: Pods) -> None:
    statuses = []
    for i in range(10):
        status, headers, body = (pods.a if i % 2 else pods.b).chat("paced", "qwen3-5", hi("paced"))
        statuses.append(status)
        if status == 429:
            assert body["error"]["type"] == "rate_limit_error"
            assert "tenant `paced` sent its limit of 5 requests in the last minute" in body["error"]["message"]
            assert 1 <= int(headers["retry-after"]) <= 60
    assert statuses == [200] * 5 + [429] * 5  # one limit for the two pods, not five requests each


def test_requests_in_flight_hold_across_both_pods(pods: Pods) -> None:
    def send(i: int) -> tuple[int, Any]:
        status, _, body = (pods.a if i % 2 else pods.b).chat("parallel", "qwen3-5", hi("parallel") + " sleep:2")
        return status, body

    with ThreadPoolExecutor(max_workers=6) as pool:
        answers = list(pool.map(send, range(6)))
    ok = [s for s, _ in answers if s == 200]
    refused = [b for s, b in answers if s == 429]
    assert len(ok) == 2 and len(refused) == 4, answers  # the limit is 2 for both pods together
    assert all("tenant `parallel` has its limit of 2 requests in flight" in b["error"]["message"] for b in refused)
    served = [r for r in pods.a.backends["brno"].served() if r.get("tenant") == "parallel"]
    assert len(served) == 2


def test_a_budget_spent_through_one_pod_is_refused_by_the_other(pods: Pods) -> None:
    # 10 tokens each: 30 of 25 once the third is answered; each waits for the one before to settle (until then
    # it holds its reservation, the recipe's max_tokens, against the month)
    for i, gateway in enumerate((pods.a, pods.b, pods.a)):
        assert gateway.chat("budgeted", "qwen3-5", hi("budgeted"))[0] == 200
        settled("budgeted", i + 1, pods.a, pods.b)
    before = time.time()
    for gateway in (pods.b, pods.a):
        status, headers, body = gateway.chat("budgeted", "qwen3-5", hi("budgeted"))
        assert status == 429
        assert body["error"]["type"] == "budget_exceeded"  # not rate_limit_error: don't retry soon
        message = body["error"]["message"]
        assert "tenant `budgeted` has spent its monthly budget (30 of its 25 tokens in " in message
        assert "this is the budget, not a rate limit; do not retry before" in message
        _, next_month = month_of(before)
        assert abs(int(headers["retry-after"]) - (next_month - before)) <= 5  # until the month rolls over
    rows = [r for g in (pods.a, pods.b) for r in g.rows() if r["tenant"] == "budgeted"]
    assert sorted(r["status"] for r in rows) == ["200", "200", "200", "429", "429"]  # the refusals are metered too


def test_the_month_to_date_of_the_ingested_records_is_in_tenants_show(pods: Pods) -> None:
    settled("budgeted", 5, pods.a, pods.b)  # after the budget test: 3 answered, 2 refused
    store = pods.root / "ledger.duckdb"
    fabric(["ledger", "ingest", "-C", str(pods.repo), "--store", str(store), str(pods.a.records), str(pods.b.records)])
    shown = fabric(["tenants", "show", "-C", str(pods.repo), "budgeted", "--store", str(store)])
    month, _ = month_of(time.time())
    assert f"month_to_date: {month}: 5 requests, 30 tokens of 25, 0.00 USD" in shown
    as_json = json.loads(fabric(["tenants", "show", "-C", str(pods.repo), "budgeted", "--store", str(store), "--json"]))
    assert as_json["month_to_date"]["tokens"] == 30 and as_json["month_to_date"]["currency"] == "USD"


def test_a_price_budget_is_spent_at_the_reference_prices(pods: Pods) -> None:
    big = "tenant:priced " + "word " * 9998  # 9,999 words: 10,004 prompt tokens, 2 of them cached
    statuses = []
    for i in range(4):  # one at a time: each reserves more than the budget while it runs
        statuses.append((pods.a if i % 2 else pods.b).chat("priced", "qwen3-5", big)[0])
        settled("priced", i + 1, pods.a, pods.b)
    assert statuses == [200] * 4  # 4 x (10,002 x 0.26 + 2 x 0.052 + 3 x 1.56) / 10^6 = 0.0104 USD
    status, _, body = pods.b.chat("priced", "qwen3-5", big)
    assert status == 429 and body["error"]["type"] == "budget_exceeded"
    assert "tenant `priced` has spent its monthly budget (0.01 of its 0.01 USD in " in body["error"]["message"]


def test_next_month_restores_the_budget_and_an_expired_key_is_refused(pods: Pods) -> None:
    now = time.time()
    _, next_month = month_of(now)
    if next_month - now < 15 * 60:
        pytest.skip("the month ends within 15 minutes: the key's ten minutes would straddle it")
    assert pods.a.chat("rolling", "qwen3-5", hi("rolling"))[0] == 200
    settled("rolling", 1, pods.a, pods.b)
    assert pods.b.chat("rolling", "qwen3-5", hi("rolling"))[0] == 200  # 20 of 15
    settled("rolling", 2, pods.a, pods.b)
    assert pods.a.chat("rolling", "qwen3-5", hi("rolling"))[0] == 429
    assert pods.a.chat("expiring", "qwen3-5", hi("expiring"))[0] == 200  # not expired yet
    offset = {CLOCK_OFFSET_ENV: str(next_month - now + 3600), COUNTERS_URL_ENV: pods.redis.url()}
    with running_gateway(pods.repo, pods.plan, pods.root / "c", pods.endpoints, [], env=offset) as url:
        later = Gateway(url, pods.keys, pods.root / "c" / "records", pods.repo, pods.plan, pods.a.backends)
        assert later.chat("rolling", "qwen3-5", hi("rolling"))[0] == 200  # a new month: the budget is back
        assert pods.b.chat("rolling", "qwen3-5", hi("rolling"))[0] == 429  # this month's is still spent
        status, _, body = later.chat("expiring", "qwen3-5", hi("expiring"))
        assert status == 401 and body["error"]["type"] == "auth_error"
        assert "of tenant `expiring` expired at " in body["error"]["message"]
        assert "ask the federation for a new key" in body["error"]["message"]
    listed = fabric(["tenants", "key", "list", "-C", str(pods.repo), "expiring"])
    assert "  expires 20" in listed


def test_when_redis_is_down_restricted_tenants_are_refused_and_public_ones_served(pods: Pods) -> None:
    assert pods.a.chat("fnusa-clinical", "qwen3-5", "tenant:fnusa-clinical hi")[0] == 200
    pods.redis.stop()
    try:
        status, headers, body = pods.a.chat("fnusa-clinical", "qwen3-5", "tenant:fnusa-clinical hi")
        assert status == 503 and body["error"]["type"] == "service_unavailable"
        message = body["error"]["message"]
        assert "the gateway cannot check tenant `fnusa-clinical`'s limits and budget" in message
        assert "a restricted tenant is refused until the store answers again" in message
        assert "retry-after" in headers
        assert pods.b.chat("open-public", "qwen3-5", hi("open-public"))[0] == 200  # on the pod's own counters
    finally:
        pods.redis.start()
    time.sleep(1.5)  # the pods ask the store again a second after it failed
    assert pods.a.chat("fnusa-clinical", "qwen3-5", "tenant:fnusa-clinical hi")[0] == 200


@pytest.fixture(scope="module")
def two_sites(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Gateway, Gateway]]:
    """The brno and the vienna gateway, each counting in its own store (two databases of one redis-server)."""
    require_gateway()
    root = tmp_path_factory.mktemp("two-sites")
    with redis_server(root / "redis") as redis:
        repo, plan, keys = counted_site(root, budget_shares={"brno": 0.6, "vienna": 0.4})
        backends = {"brno": Backend("brno", True), "vienna": Backend("vienna", True)}
        for backend in backends.values():
            backend.start()
        try:
            with (
                running_gateway(
                    repo, plan, root / "brno", [f"qwen3-5@brno={backends['brno'].url}"], [], site="brno",
                    env={COUNTERS_URL_ENV: redis.url(1)},
                ) as brno,
                running_gateway(
                    repo, plan, root / "vienna", [f"qwen3-5@vienna={backends['vienna'].url}"], [], site="vienna",
                    env={COUNTERS_URL_ENV: redis.url(2)},
                ) as vienna,
            ):  # fmt: skip
                yield (
                    Gateway(brno, keys, root / "brno" / "records", repo, plan, backends),
                    Gateway(vienna, keys, root / "vienna" / "records", repo, plan, backends),
                )
        finally:
            for backend in backends.values():
                backend.stop()


def test_sites_with_a_store_each_admit_their_share_of_the_budget(two_sites: tuple[Gateway, Gateway]) -> None:
    brno, vienna = two_sites
    at_brno, at_vienna = [], []
    for i in range(8):
        at_brno.append(brno.chat("federated", "qwen3-5", hi("federated"))[0])
        settled("federated", i + 1, brno)
    for i in range(6):
        at_vienna.append(vienna.chat("federated", "qwen3-5", hi("federated"))[0])
        settled("federated", i + 1, vienna)
    assert at_brno == [200] * 6 + [429] * 2  # 60 of 100 tokens at brno
    assert at_vienna == [200] * 4 + [429] * 2  # 40 at vienna
    served = sum(1 for b in brno.backends.values() for r in b.served() if r.get("tenant") == "federated")
    assert served * TOKENS_A_REQUEST == 100  # the federation's budget, not each site's
    status, _, body = vienna.chat("federated", "qwen3-5", hi("federated"))
    spent = "has spent its monthly budget (40 of the 40 tokens that are this site's share of its budget of 100 in "
    assert status == 429 and spent in body["error"]["message"]


def test_without_redis_server_make_test_fails_naming_the_install_step(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import tests.fixtures.redis_server as fixture

    monkeypatch.setattr(fixture, "REDIS_SERVER", str(tmp_path / "no-redis-server"))
    monkeypatch.setenv("FABRIC_REQUIRE_ALL", "1")
    with pytest.raises(pytest.fail.Exception) as failed:
        fixture.require_redis()
    assert "FABRIC_REQUIRE_ALL=1 (make test) but redis-server is missing" in str(failed.value)
    assert "make system-deps (Debian package redis-server)" in str(failed.value)
    monkeypatch.delenv("FABRIC_REQUIRE_ALL")
    with pytest.raises(pytest.skip.Exception, match=r"redis-server is missing \(make system-deps"):
        fixture.require_redis()
