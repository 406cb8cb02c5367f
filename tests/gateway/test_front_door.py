"""A gateway per site: two real LiteLLM proxies (`fabric gateway run --site brno` and `--site vienna`) in front of
each site's recording backend, relaying to each other with the federation's peer key.

Each serves its own site's replicas first; with Brno's engines down, a public tenant's request at Brno is answered
by Vienna (through Vienna's gateway, with Brno's signed assertion) and metered at Brno, saying where it was served,
and at Vienna as a relay under the same request id (the ledger keeps one); a sensitive
tenant's request (CZ only) gets the documented 503 and never leaves Brno; the meters of both sites, ingested with
the real `fabric ledger ingest`, hold every request once.
"""

from __future__ import annotations

import contextlib
import io
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from tests.fixtures.gateway_site import Backend, issue_keys, make_gateway_plan, make_gateway_site
from tests.gateway.conftest import Gateway, relaying_sites, require_gateway

from llm_fabric.cli.main import main


@dataclass
class TwoSites:
    brno: Gateway
    vienna: Gateway
    backends: dict[str, Backend]
    sent: dict[str, list[str]]  # site -> the call ids its gateway's clients got, for every request the tests sent

    def chat(self, at: str, tenant: str, text: str, **kw: Any) -> tuple[int, dict[str, str], Any]:
        answer = (self.brno if at == "brno" else self.vienna).chat(tenant, "qwen3-5", f"{text} tenant:{tenant}", **kw)
        self.sent.setdefault(at, []).append(answer[1]["x-litellm-call-id"])
        return answer


@pytest.fixture(scope="module")
def two_sites(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TwoSites]:
    require_gateway()
    root = tmp_path_factory.mktemp("front-door")
    repo = make_gateway_site(root / "site")
    plan = make_gateway_plan(repo, root)  # qwen3-5: a replica at brno and one at vienna
    keys = issue_keys(repo)
    backends = {"brno": Backend("brno", True), "vienna": Backend("vienna", True)}
    for backend in backends.values():
        backend.start()
    brno_engines = [f"qwen3-5={backends['brno'].url}", f"qwen3-5-122b={backends['brno'].url}"]
    engines = {"vienna": [f"qwen3-5={backends['vienna'].url}"], "brno": brno_engines}
    try:
        with relaying_sites(repo, plan, root, engines) as urls:
            yield TwoSites(
                Gateway(urls["brno"], keys, root / "brno" / "records", repo, plan, backends),
                Gateway(urls["vienna"], keys, root / "vienna" / "records", repo, plan, backends),
                backends,
                {},
            )
    finally:
        for backend in backends.values():
            backend.stop()


def _served(backend: Backend, text: str) -> list[dict[str, Any]]:
    return [r for r in backend.served() if text in r["text"]]


def _record(gateway: Gateway, call_id: str) -> dict[str, Any] | None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:  # the meter writes a success just after its response
        found = [r for r in gateway.rows() if r.get("request_id") == call_id]
        if found:
            assert len(found) == 1, found
            return found[0]
        time.sleep(0.1)
    return None


def test_each_gateway_serves_its_own_sites_replicas_first(two_sites: TwoSites) -> None:
    for at in ("brno", "vienna"):
        for i in range(3):
            status, headers, body = two_sites.chat(at, "muni-researchers", f"own-{at}-{i}")
            assert status == 200, body
            record = _record(two_sites.brno if at == "brno" else two_sites.vienna, headers["x-litellm-call-id"])
            assert record is not None and record["site"] == at and record["status"] == "200"
        other = "vienna" if at == "brno" else "brno"
        assert len(_served(two_sites.backends[at], f"own-{at}-")) == 3
        assert not _served(two_sites.backends[other], f"own-{at}-")


def test_sensitive_data_does_not_enter_at_a_gateway_abroad(two_sites: TwoSites) -> None:
    status, _, body = two_sites.chat("vienna", "fnusa-clinical", "abroad")
    assert status == 403, body
    assert body["error"]["message"] == (
        "`sensitive` data may not enter the gateway at `vienna`: its sovereignty rule does not allow the site; "
        "send it to the gateway at brno"
    )
    assert not _served(two_sites.backends["vienna"], "abroad") and not _served(two_sites.backends["brno"], "abroad")


def test_with_brnos_engines_down_public_traffic_fails_over_to_vienna_and_sensitive_gets_the_503(
    two_sites: TwoSites, tmp_path: Path
) -> None:
    two_sites.backends["brno"].stop()
    public = {"X-Fabric-Data-Class": "public"}
    status, headers, body = two_sites.chat("brno", "muni-researchers", "moved-public", headers=public)
    assert status == 200, body
    assert body["choices"][0]["message"]["content"] == "ok"
    (relayed,) = _served(two_sites.backends["vienna"], "moved-public")
    assert relayed["body"]["model"] == "qwen3-5"  # Vienna's gateway asked its own engine
    record = _record(two_sites.brno, headers["x-litellm-call-id"])
    assert record is not None and (record["site"], record["status"], record["tenant"]) == (
        "vienna",
        "200",
        "muni-researchers",
    )
    assert record["data_class"] == "public" and record["prompt_tokens"] == relayed["usage"]["prompt_tokens"]
    # the gateway that served the relay records it as a relay, under the entry's request id (one request)
    (served,) = [r for r in two_sites.vienna.rows() if r.get("relay_from")]
    assert (served["request_id"], served["relay_from"], served["tenant"]) == (
        headers["x-litellm-call-id"],
        "brno",
        "muni-researchers",
    )
    own = [r["request_id"] for r in two_sites.vienna.rows() if not r.get("relay_from")]
    assert sorted(own) == sorted(two_sites.sent["vienna"])

    # streamed, it fails over too: before the first token, so the client sees one whole answer
    status, headers, events = two_sites.chat("brno", "muni-researchers", "moved-stream", headers=public, stream=True)
    assert status == 200, events
    assert "".join(e["choices"][0]["delta"].get("content") or "" for e in events if e.get("choices")) == "ok"
    assert len(_served(two_sites.backends["vienna"], "moved-stream")) == 1

    # internal data may be processed in Vienna too (EU, a federation member): it fails over the same way
    status, headers, body = two_sites.chat("brno", "muni-researchers", "moved-internal")
    assert status == 200, body
    record = _record(two_sites.brno, headers["x-litellm-call-id"])
    assert record is not None and record["site"] == "vienna"

    # sensitive data may be processed only in CZ: no other site, no provider, a clear 503
    status, headers, body = two_sites.chat("brno", "fnusa-clinical", "moved-sensitive")
    assert status == 503, body
    assert body == {
        "error": {
            "message": "`qwen3-5` has no replica answering for `sensitive` data at brno, and `sensitive` data does not "
            "fail over to another site or provider (its sovereignty rule); retry in 2 s",
            "type": "internal_server_error",  # LiteLLM's name for any 5xx
            "param": None,
            "code": "503",
        }
    }
    assert headers["retry-after"] == "2" and headers["retry-after-ms"] == "2000"
    assert not _served(two_sites.backends["vienna"], "moved-sensitive")
    record = _record(two_sites.brno, headers["x-litellm-call-id"])
    assert record is not None and record["status"] == "503" and "site" not in record

    # both sites' meters, through the real ingest: every request the clients sent, once
    store = tmp_path / "ledger.duckdb"
    folders = [str(two_sites.brno.records), str(two_sites.vienna.records)]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert (
            main(["ledger", "ingest", "-C", str(two_sites.brno.site_repo), "--store", str(store), *folders, "--json"])
            == 0
        )
    ingested = json.loads(out.getvalue())
    rows = two_sites.brno.rows() + two_sites.vienna.rows()
    sent = two_sites.sent["brno"] + two_sites.sent["vienna"]
    relays = [r for r in rows if r.get("relay_from")]
    assert len(relays) == 3 and {r["request_id"] for r in relays} <= set(two_sites.sent["brno"])
    # each relay's two records (the entry's, the server's) are one request: the ledger keeps one
    assert (ingested["added"], ingested["duplicates"], ingested["bad"]) == (len(sent), len(relays), 0)
    assert sorted({r["request_id"] for r in rows}) == sorted(sent)
