"""The gateway's hooks in the real LiteLLM proxy: keys, allowlists, limits, sovereignty, priority, metering."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from tests.gateway.conftest import TEST_PEER_KEY, Gateway

from llm_fabric.gateway.runtime.frontdoor import PEER_KEY_ENV


def test_a_tenant_key_is_served_and_an_unknown_key_is_401(gateway: Gateway) -> None:
    status, _, body = gateway.chat("muni-researchers", "qwen3-5", "hello tenant:muni-researchers")
    assert status == 200, body
    assert body["choices"][0]["message"]["content"] == "ok"
    status, _, body = gateway.chat(None, "qwen3-5", "hello", key="fk-not-a-key")
    assert status == 401, body
    assert "unknown API key" in json.dumps(body)


def _records(gateway: Gateway) -> list[dict[str, object]]:
    return gateway.rows()


def _wait_records(gateway: Gateway, count: int) -> list[dict[str, object]]:
    """The meter writes a success from LiteLLM's logging task, just after the response: wait for it."""
    import time

    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        got = _records(gateway)
        if len(got) >= count:
            return got
        time.sleep(0.1)
    return _records(gateway)


def test_a_model_outside_the_allowlist_is_refused(gateway: Gateway) -> None:
    # gpt-oss-120b is not in the gateway at all; fnusa-clinical (sensitive) may not declare public data
    status, _, body = gateway.chat("fnusa-clinical", "gpt-oss-120b", "hello")
    assert status == 403, body
    assert "may not use model `gpt-oss-120b`" in body["error"]["message"]
    status, _, body = gateway.chat("fnusa-clinical", "qwen3-5", "hello", headers={"X-Fabric-Data-Class": "public"})
    assert status == 403, body
    assert "not one of the tenant's" in body["error"]["message"]


def test_rate_limit_is_429_with_retry_after(gateway: Gateway) -> None:
    answers = [gateway.chat("throttled", "qwen3-5", f"n{i} tenant:throttled") for i in range(4)]
    assert [a[0] for a in answers] == [200, 200, 200, 429]
    _, headers, body = answers[-1]
    assert 1 <= int(headers["retry-after"]) <= 60
    assert int(headers["retry-after-ms"]) <= 60_000
    assert "requests in the last minute" in body["error"]["message"]


def test_a_full_deployment_is_429_and_the_owner_keeps_its_reserve(gateway: Gateway) -> None:
    # qwen3-5-122b admits 4 at once, 1 held for its owner (ceitec-structural): a pool tenant gets 3
    with ThreadPoolExecutor(max_workers=6) as pool:
        flood = [
            pool.submit(
                gateway.chat,
                "muni-researchers",
                "qwen3-5-122b",
                f"sleep:2 p{i} tenant:muni-researchers",
                headers={"X-Fabric-Data-Class": "internal"},
            )
            for i in range(4)
        ]
        import time

        time.sleep(0.8)  # the pool's requests are in flight
        owner = gateway.chat("ceitec-structural", "qwen3-5-122b", "owner tenant:ceitec-structural")
        statuses = sorted(f.result()[0] for f in flood)
    assert statuses == [200, 200, 200, 429]
    refused = next(f.result() for f in flood if f.result()[0] == 429)
    assert "held for its owner" in refused[2]["error"]["message"]
    assert int(refused[1]["retry-after-ms"]) == 2000  # gateway.retry_after_s of the test site
    assert refused[1]["retry-after"] == "2"
    assert owner[0] == 200, owner


def test_the_engine_receives_the_owners_priority_and_never_the_clients(gateway: Gateway) -> None:
    gateway.chat("ceitec-structural", "qwen3-5-122b", "prio-owner tenant:ceitec-structural", priority=-100)
    gateway.chat(
        "muni-researchers",
        "qwen3-5-122b",
        "prio-pool tenant:muni-researchers",
        priority=-100,
        custom_logit_processor="a pickled callable",
        extra_body={"vllm_xargs": {"loop_guard": False}},
    )
    served = {
        r["text"].split()[0]: r["body"] for r in gateway.backends["brno"].served() if r["text"].startswith("prio-")
    }
    assert served["prio-owner"]["priority"] == 0
    assert served["prio-pool"]["priority"] == 10
    assert "custom_logit_processor" not in served["prio-pool"] and "vllm_xargs" not in served["prio-pool"]
    # qwen3-5 does not run the priority scheduler: vLLM would reject any priority there
    gateway.chat("muni-researchers", "qwen3-5", "noprio tenant:muni-researchers", priority=-100)
    body = next(
        r["body"] for b in ("brno", "vienna") for r in gateway.backends[b].served() if r["text"].startswith("noprio")
    )
    assert "priority" not in body


def test_a_restricted_tenant_never_reaches_a_foreign_or_external_backend(gateway: Gateway) -> None:
    for i in range(6):
        status, _, _ = gateway.chat("fnusa-clinical", "qwen3-5", f"fail sens{i} tenant:fnusa-clinical")
        assert status >= 500
        status, _, body = gateway.chat("fnusa-clinical", "qwen3-5", f"ok sens{i} tenant:fnusa-clinical")
        assert status == 200, body
    for name in ("vienna", "cloud"):
        assert not [r for r in gateway.backends[name].served() if "sens" in r["text"]], name
    assert len([r for r in gateway.backends["brno"].served() if "sens" in r["text"]]) == 12


def test_a_public_tenants_request_falls_back_to_the_external_provider(gateway: Gateway) -> None:
    status, _, body = gateway.chat(
        "muni-researchers", "qwen3-5", "fail pub tenant:muni-researchers", headers={"X-Fabric-Data-Class": "public"}
    )
    assert status == 200, body
    got = [r for r in gateway.backends["cloud"].served() if "fail pub" in r["text"]]
    assert len(got) == 1
    assert got[0]["body"]["model"] == "cloud-model"
    assert "priority" not in got[0]["body"]
    # the same tenant's internal data (its default) has no fallback
    status, _, _ = gateway.chat("muni-researchers", "qwen3-5", "fail int tenant:muni-researchers")
    assert status >= 500
    assert not [r for r in gateway.backends["cloud"].served() if "fail int" in r["text"]]


def test_reasoning_content_streamed_and_not(gateway: Gateway) -> None:
    status, _, body = gateway.chat("muni-researchers", "qwen3-5", "think tenant:muni-researchers")
    assert status == 200
    assert body["choices"][0]["message"]["reasoning_content"] == "thinking"
    status, _, events = gateway.chat("muni-researchers", "qwen3-5", "think tenant:muni-researchers", stream=True)
    assert status == 200
    deltas = [e["choices"][0]["delta"] for e in events if e.get("choices")]
    assert "".join(d.get("reasoning_content") or "" for d in deltas) == "thinking"
    assert "".join(d.get("content") or "" for d in deltas) == "ok"


def test_request_defaults_from_the_recipe_cap_the_output(gateway: Gateway) -> None:
    gateway.chat("muni-researchers", "qwen3-5", "capped tenant:muni-researchers", max_tokens=10**7)
    body = next(
        r["body"] for b in ("brno", "vienna") for r in gateway.backends[b].served() if r["text"].startswith("capped")
    )
    settings = json.loads((gateway.records.parent / "run" / "fabric-gateway.json").read_text())
    assert body["max_tokens"] == settings["deployments"]["qwen3-5"]["request_defaults"]["max_tokens"]


def test_a_bounded_overload_loses_no_request(gateway: Gateway) -> None:
    """2x qwen3-5's capacity for a fixed time: every request is answered (200, 429 or an error) and recorded."""
    import time

    workers, duration = 16, 4.0  # capacity 8
    stop_at = time.monotonic() + duration

    def worker(n: int) -> list[tuple[int, str]]:
        seen = []
        while time.monotonic() < stop_at:
            status, headers, _ = gateway.chat("cerit-sc", "qwen3-5", f"sleep:0.3 overload{n} tenant:cerit-sc")
            seen.append((status, headers.get("x-litellm-call-id", "")))
            if status == 429:
                time.sleep(0.2)
        return seen

    with ThreadPoolExecutor(max_workers=workers) as pool:
        answers = [a for f in [pool.submit(worker, n) for n in range(workers)] for a in f.result()]
    statuses = {s for s, _ in answers}
    assert 200 in statuses and 429 in statuses, statuses
    assert all(call_id for _, call_id in answers)
    by_id: dict[str, object] = {}
    import time as clock

    deadline = clock.monotonic() + 10
    while clock.monotonic() < deadline:
        by_id = {str(r["request_id"]): r["status"] for r in _records(gateway)}
        if all(call_id in by_id for _, call_id in answers):
            break
        clock.sleep(0.2)
    missing = [c for _, c in answers if c not in by_id]
    assert not missing, f"{len(missing)} of {len(answers)} requests have no record"
    assert all(by_id[c] == str(s) for s, c in answers)


def test_meter_records_give_fabric_report_the_tenants_served_totals(gateway: Gateway, tmp_path) -> None:  # type: ignore[no-untyped-def]
    import contextlib
    import io
    import time
    from datetime import UTC, datetime

    from llm_fabric.cli.main import main

    for tenant in ("muni-researchers", "ceitec-structural", "fnusa-clinical"):
        for i in range(3):
            gateway.chat(tenant, "qwen3-5", f"report{i} " + "word " * (i * 7) + f"tenant:{tenant}")
    served: dict[str, list[int]] = {}

    def backend_totals() -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for backend in gateway.backends.values():
            for r in backend.served():
                if r["status"] == 200:
                    row = out.setdefault(r["tenant"], [0, 0, 0, 0])
                    usage = r["usage"]
                    row[0] += 1
                    row[1] += usage["prompt_tokens"]
                    row[2] += usage["completion_tokens"]
                    row[3] += usage["prompt_tokens_details"]["cached_tokens"]
        return out

    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:  # the meter writes a success just after its response
        served = backend_totals()
        ok = sum(1 for r in _records(gateway) if r["status"] == "200")
        if ok == sum(v[0] for v in served.values()):
            break
        time.sleep(0.2)
    out = io.StringIO()
    month = datetime.now(UTC).strftime("%Y-%m")
    with contextlib.redirect_stdout(out):
        assert (
            main(
                [
                    "report",
                    "-C",
                    str(gateway.site_repo),
                    "--month",
                    month,
                    "--requests",
                    str(gateway.records),
                    "--out",
                    str(tmp_path / "report"),
                    "--json",
                ]
            )
            == 0
        )
    report = json.loads(out.getvalue())
    books = {row["name"]: row for row in report["usage_by_tenant"]}
    for tenant, (requests, prompt, completion, cached) in served.items():
        row = books[tenant]
        assert row["input_tokens"] == prompt, tenant
        assert row["output_tokens"] == completion, tenant
        assert row["cached_input_tokens"] == cached, tenant
        assert row["requests"] - row["failed_requests"] == requests, tenant


def test_prompts_are_recorded_only_where_the_class_allows_it(gateway: Gateway) -> None:
    gateway.chat(
        "muni-researchers",
        "qwen3-5",
        "logged-public tenant:muni-researchers",
        headers={"X-Fabric-Data-Class": "public"},
    )
    gateway.chat("fnusa-clinical", "qwen3-5", "never-logged tenant:fnusa-clinical")
    rows = _wait_records(gateway, 2)
    import time

    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not any("logged-public" in str(r.get("prompt")) for r in rows):
        time.sleep(0.2)
        rows = _records(gateway)
    assert any(r.get("prompt") == "logged-public tenant:muni-researchers" for r in rows)
    assert not [r for r in rows if r["tenant"] == "fnusa-clinical" and "prompt" in r]
    assert "never-logged" not in json.dumps(gateway.rows())


def test_the_model_list_shows_a_tenant_only_its_groups(gateway: Gateway) -> None:
    import urllib.request

    request = urllib.request.Request(gateway.url + "/v1/models")
    request.add_header("Authorization", f"Bearer {gateway.keys['fnusa-clinical']}")
    with urllib.request.urlopen(request, timeout=30) as response:
        listed = {m["id"] for m in json.loads(response.read())["data"]}
    assert listed == {"qwen3-5@sensitive", "qwen3-5-122b@sensitive"}

    # a listed group is a model name the tenant may ask for; another tenant's group is not
    status, _, body = gateway.chat("fnusa-clinical", "qwen3-5@sensitive", "by-group tenant:fnusa-clinical")
    assert status == 200, body
    status, _, body = gateway.chat("fnusa-clinical", "qwen3-5@public", "other-group")
    assert status == 403, body


def test_litellms_own_full_deployment_429_gets_a_retry_after(gateway: Gateway) -> None:
    """qwen3-5@sensitive has one entry (brno) with max_parallel_requests 4 while the deployment admits 8:
    LiteLLM refuses the 5th at once, and the failure hook adds the Retry-After its 429 lacks."""
    import time

    # the earlier tests' tenants count as asking for qwen3-5 for 2 x retry_after_s + 1 s (fair shares):
    # once they lapse, the fabric's admission lets all six through and LiteLLM's own limit is what refuses
    time.sleep(2 * 2 + 1)

    with ThreadPoolExecutor(max_workers=6) as pool:
        futures = [
            pool.submit(gateway.chat, "fnusa-clinical", "qwen3-5", f"sleep:2 full{i} tenant:fnusa-clinical")
            for i in range(6)
        ]
        time.sleep(0.1)
        answers = [f.result() for f in futures]
    refused = [a for a in answers if a[0] == 429]
    assert refused, [a[0] for a in answers]
    for _, headers, body in refused:
        assert "held for" not in json.dumps(body) and "is full" not in json.dumps(body)  # not the fabric's own
        assert headers.get("retry-after") == "2", (headers, body)
        assert headers.get("retry-after-ms") == "2000"


def test_the_site_filter_holds_even_when_a_group_lists_a_foreign_replica(gateway: Gateway, tmp_path: Path) -> None:
    """Layer 4 on its own: a config whose sensitive group wrongly holds the vienna replica still never sends
    sensitive requests there, because the hook drops entries outside the group's sites before routing."""
    import copy

    from llm_fabric.gateway.config import build_gateway
    from llm_fabric.gateway.endpoints import LocalRun
    from llm_fabric.gateway.run import start_gateway, write_gateway_files
    from llm_fabric.plan.document import load_plan
    from llm_fabric.site.loader import load_site

    brno, vienna = gateway.backends["brno"], gateway.backends["vienna"]
    files = build_gateway(
        load_site(gateway.site_repo),
        load_plan(gateway.plan),
        site_id="brno",
        reach=LocalRun(engines={("qwen3-5", None): brno.url}, peers={"vienna": vienna.url}),
    )
    foreign = next(
        m
        for m in files.litellm["model_list"]
        if m["model_name"] == "qwen3-5@public~vienna" and m["model_info"]["fabric_site"] == "vienna"
    )
    rogue = copy.deepcopy(foreign)
    rogue["model_name"] = "qwen3-5@sensitive"
    rogue["model_info"]["id"] = "rogue-vienna-entry"
    files.litellm["model_list"].append(rogue)
    write_gateway_files(files, tmp_path)
    proxy = start_gateway(tmp_path, tmp_path / "records")
    try:
        proxy.wait_healthy(120)
        other = Gateway(
            proxy.base_url, gateway.keys, tmp_path / "records", gateway.site_repo, gateway.plan, gateway.backends
        )
        statuses = [other.chat("fnusa-clinical", "qwen3-5", f"rogue{i} tenant:fnusa-clinical")[0] for i in range(8)]
    finally:
        proxy.stop()
    assert statuses == [200] * 8
    assert not [r for r in vienna.served() if "rogue" in r["text"]]
    assert len([r for r in brno.served() if "rogue" in r["text"]]) == 8


TWO = ("fnusa-clinical", "muni-researchers")


def test_inference_extension_routing_sends_the_deployment_in_the_routes_header(
    gateway: Gateway, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With `routing: inference-extension`, the gateway's own site is the inference Gateway (a recording backend
        stands in for it here): the real proxy names the deployment in the header the HTTPRoutes match; a relay to
        the other site's gateway (vienna's, when brno's engine fails) carries no such header. Each request
    names its tenant as the fairness id and its band's InferenceObjective (flow control's headers)."""
    import shutil

    from tests.fixtures.gateway_site import edit_yaml

    from llm_fabric.gateway.config import build_gateway
    from llm_fabric.gateway.endpoints import LocalRun
    from llm_fabric.gateway.run import start_gateway, write_gateway_files
    from llm_fabric.gateway.runtime.inference import FAIRNESS_HEADER, MODEL_HEADER, OBJECTIVE_HEADER
    from llm_fabric.plan.document import load_plan
    from llm_fabric.site.loader import load_site

    repo = tmp_path / "site"
    shutil.copytree(gateway.site_repo, repo)
    edit_yaml(repo / "fabric.yaml", lambda d: d["gateway"].update(routing="inference-extension"))
    brno, vienna = gateway.backends["brno"], gateway.backends["vienna"]
    files = build_gateway(
        load_site(repo),
        load_plan(gateway.plan),
        site_id="brno",
        reach=LocalRun(engines={("qwen3-5", None): brno.url}, peers={"vienna": vienna.url}),
    )
    write_gateway_files(files, tmp_path / "gw")
    monkeypatch.setenv(PEER_KEY_ENV, TEST_PEER_KEY)
    proxy = start_gateway(tmp_path / "gw", tmp_path / "requests.jsonl")
    try:
        proxy.wait_healthy(120)
        other = Gateway(
            proxy.base_url, gateway.keys, tmp_path / "requests.jsonl", gateway.site_repo, gateway.plan, gateway.backends
        )
        # both tenants' requests are served at brno, the gateway's own site
        statuses = [other.chat(t, "qwen3-5", f"gie{i} tenant:{t}")[0] for t in TWO for i in range(6)]
        # brno's engine fails this one: the internal request goes on to vienna's gateway
        relayed = other.chat("muni-researchers", "qwen3-5", "fail gie-relay tenant:muni-researchers")
    finally:
        proxy.stop()
    assert statuses == [200] * 12
    at_brno = [r for r in brno.served() if "gie" in r["text"]]
    assert len([r for r in at_brno if r["status"] == 200]) == 12
    assert all(
        r["body"] and r.get("headers", {}).get(MODEL_HEADER.lower()) == "qwen3-5" for r in at_brno if r["status"] == 200
    )
    # flow control's fairness id is the tenant, and the objective its band's (qwen3-5 is a pool deployment)
    fairness = sorted({(r["headers"][FAIRNESS_HEADER], r["headers"][OBJECTIVE_HEADER]) for r in at_brno})
    assert fairness == [(t, "qwen3-5-pool") for t in sorted(TWO)]
    at_vienna = [r for r in vienna.served() if "gie-relay" in r["text"]]
    assert relayed[0] == 503 and len(at_vienna) == 1  # the stand-in fails on `fail` too; it was asked once
    assert MODEL_HEADER.lower() not in at_vienna[0]["headers"]
    assert FAIRNESS_HEADER not in at_vienna[0]["headers"]  # the other site's gateway sends its own
    # a relay names the tenant, the class and the entry site, with the federation's peer key
    assert at_vienna[0]["headers"]["x-fabric-tenant"] == "muni-researchers"
    assert at_vienna[0]["headers"]["x-fabric-data-class"] == "internal"
    assert at_vienna[0]["headers"]["x-fabric-entry-site"] == "brno"
    assert at_vienna[0]["headers"]["authorization"] == f"Bearer {TEST_PEER_KEY}"


def test_engine_only_fields_never_reach_an_external_provider(gateway: Gateway) -> None:
    # qwen3-5-122b schedules by priority: its engine gets one, the external provider behind it must not
    status, _, body = gateway.chat(
        "muni-researchers",
        "qwen3-5-122b",
        "fail prio-external tenant:muni-researchers",
        headers={"X-Fabric-Data-Class": "public"},
    )
    assert status == 200, body
    engine = [r["body"] for r in gateway.backends["brno"].served() if "prio-external" in r["text"]]
    external = [r["body"] for r in gateway.backends["cloud"].served() if "prio-external" in r["text"]]
    assert engine and engine[0]["priority"] == 10
    assert len(external) == 1 and "priority" not in external[0]
