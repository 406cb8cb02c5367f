"""Agentic load (`fabric engine burst --sessions`) through the real gateway, in front of recording backends.

The gateway is this module's own (fresh backends), so the session-wide one's per-tenant tallies
stay the other tests'.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from tests.gateway.conftest import Gateway, gateway_with_backends

from llm_fabric.cli.main import main
from llm_fabric.loadtest.burst import nearest_rank
from llm_fabric.loadtest.sessions import MIN_TOOL_CHARS, content_chars, plan_sessions
from llm_fabric.plan.document import load_plan

TENANT = "muni-researchers"
SESSIONS, TURNS = 4, 5  # 20 requests: the planned p50 and p95 are whole ranks


@pytest.fixture(scope="module")
def load_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    with gateway_with_backends(tmp_path_factory.mktemp("load-gateway")) as started:
        yield started


def burst(*args: str) -> tuple[int, dict[str, Any]]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["engine", "burst", *args, "--json"])
    return code, json.loads(out.getvalue()) if code == 0 else {}


def received(gateway: Gateway, system: str) -> list[dict[str, Any]]:
    """What the federation's backends received from the sessions (their system message is the shared prefix)."""
    bodies = [r["body"] for b in gateway.backends.values() for r in b.served() if r["status"] == 200]
    return [b for b in bodies if b["messages"][0]["content"] == system]


def test_sessions_through_the_gateway_share_a_prefix_and_grow_each_turn(load_gateway: Gateway, tmp_path: Path) -> None:
    shape = load_plan(load_gateway.plan).deployments["qwen3-5"]
    records_file = tmp_path / "sessions.jsonl"
    code, totals = burst(
        "--url",
        load_gateway.url,
        "--plan",
        str(load_gateway.plan),
        "--deployment",
        "qwen3-5",
        "--sessions",
        str(SESSIONS),
        "--turns",
        str(TURNS),
        "--max-prompt-tokens",
        "60000",
        "--max-output-tokens",
        "4096",
        "--tenant",
        TENANT,
        "--api-key",
        load_gateway.keys[TENANT],
        "--records",
        str(records_file),
    )
    assert code == 0
    records = [json.loads(line) for line in records_file.read_text().splitlines()]
    assert len(records) == totals["requests"] == SESSIONS * TURNS and totals["refused"] == 0
    # the ledger's schema, with the usage the backend reported (2 cached tokens a request)
    assert {r["status"] for r in records} == {"200"} and {r["tenant"] for r in records} == {TENANT}
    assert {r["model"] for r in records} == {"qwen3-5"} and all(r["cached_prompt_tokens"] == 2 for r in records)
    assert all(isinstance(r["ttft_ms"], float) for r in records)

    planned = plan_sessions(
        SESSIONS,
        TURNS,
        p50=shape.context_p50,
        p95=shape.context_p95,
        tenants=[TENANT],
        prefix_chars=shape.context_p50 // 2,  # the default: half the plan's p50
        max_prompt_tokens=60000,
        max_output_tokens=4096,
    )
    bodies = received(load_gateway, planned[0].system)
    assert len(bodies) == SESSIONS * TURNS  # the key was accepted: nothing refused, everything served
    sessions: dict[str, list[dict[str, Any]]] = {}
    for body in bodies:  # byte-identical system message (the filter); the task tells the sessions apart
        sessions.setdefault(body["messages"][1]["content"], []).append(body)
    assert sorted(sessions) == sorted(p.task for p in planned)
    for session in planned:
        turns = sorted(sessions[session.task], key=lambda b: len(b["messages"]))
        assert [len(b["messages"]) for b in turns] == [2 + 2 * t for t in range(TURNS)]
        for before, after in itertools.pairwise(turns):
            # each turn re-sends the conversation so far, the assistant's reply and a tool result
            assert after["messages"][: len(before["messages"])] == before["messages"]
            assert after["messages"][-2] == {"role": "assistant", "content": "ok"}
            assert after["messages"][-1]["role"] == "user"
        # the planned length, unless the reply and the shortest tool result already take the context past it
        sent, expected = [content_chars(b["messages"]) for b in turns], []
        for turn in session.turns:
            expected.append(max(turn.prompt_chars, expected[-1] + len("ok") + MIN_TOOL_CHARS if expected else 0))
        assert sent == expected and all(a < b for a, b in itertools.pairwise(sent))
        assert [b["max_tokens"] for b in turns] == [t.max_tokens for t in session.turns]
        assert all(b["stream"] is True for b in turns)
        assert all(b.get("ignore_eos") is True for b in turns), turns[0].keys()  # exact output lengths reach the engine
    planned_lengths = [t.prompt_chars for p in planned for t in p.turns]
    # the burst's prompts have the plan's p50 and p95 for the deployment
    assert (nearest_rank(planned_lengths, 50), nearest_rank(planned_lengths, 95)) == (1100, 33958)
    assert (shape.context_p50, shape.context_p95) == (1100, 33958)
    assert sum(planned_lengths) / sum(t.max_tokens for p in planned for t in p.turns) == pytest.approx(17, rel=0.05)

    # the gateway's own meter saw the same requests, for the key's tenant
    metered = load_gateway.rows()
    assert sum(1 for r in metered if r["tenant"] == TENANT and r["status"] == "200") >= SESSIONS * TURNS


def test_a_refused_key_ends_each_session_with_a_401_record(load_gateway: Gateway, tmp_path: Path) -> None:
    records_file = tmp_path / "refused.jsonl"
    code, totals = burst(
        "--url",
        load_gateway.url,
        "--model",
        "qwen3-5",
        "--sessions",
        "2",
        "--p50",
        "600",
        "--p95",
        "2000",
        "--api-key",
        "sk-not-a-tenant-key",
        "--records",
        str(records_file),
    )
    assert code == 0 and totals["refused"] == 2
    records = [json.loads(line) for line in records_file.read_text().splitlines()]
    assert [(r["status"], r["prompt_tokens"], r["completion_tokens"]) for r in records] == [("401", None, 0)] * 2


def _cli(args: list[str]) -> Any:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(args) == 0
    return json.loads(out.getvalue())


def test_the_meters_folder_goes_into_the_ledger_store_and_the_report(load_gateway: Gateway, tmp_path: Path) -> None:
    """gateway run -> its records folder -> `fabric ledger ingest FOLDER` (twice) -> `fabric report`."""
    tenant = "ceitec-structural"
    code, _ = burst(
        "--url",
        load_gateway.url,
        "--model",
        "qwen3-5",
        "--sessions",
        "2",
        "--turns",
        "3",
        "--p50",
        "600",
        "--p95",
        "3000",
        "--tenant",
        tenant,
        "--api-key",
        load_gateway.keys[tenant],
        "--records",
        str(tmp_path / "client.jsonl"),
    )
    assert code == 0
    served = [r for b in load_gateway.backends.values() for r in b.served() if r["status"] == 200]
    deadline = time.monotonic() + 10
    while len([r for r in load_gateway.rows() if r["status"] == "200"]) < len(served) and time.monotonic() < deadline:
        time.sleep(0.2)  # the meter writes a success just after its response
    metered = load_gateway.rows()
    assert sorted(p.name for p in load_gateway.records.iterdir()) == [
        f"requests-{datetime.now(UTC):%Y-%m-%d}.jsonl"  # one day file (a run across midnight has two)
    ]
    store = tmp_path / "ledger.duckdb"
    ingest = ["ledger", "ingest", "-C", str(load_gateway.site_repo), "--store", str(store), str(load_gateway.records)]
    first = _cli([*ingest, "--json"])
    assert (first["added"], first["bad"]) == (len(metered), 0)
    again = _cli([*ingest, "--json"])  # the open day again: nothing new, nothing twice
    assert (again["added"], again["duplicates"]) == (0, len(metered))
    month = f"{datetime.now(UTC):%Y-%m}"
    report = _cli(
        [
            "report",
            "-C",
            str(load_gateway.site_repo),
            "--store",
            str(store),
            "--month",
            month,
            "--out",
            str(tmp_path / "r"),
            "--json",
        ]
    )
    books = {row["name"]: row for row in report["usage_by_tenant"]}
    # every tenant's books hold what the backends served it (the meter's usage, ingested once)
    by_tenant: dict[str, list[int]] = {}
    for r in metered:
        if r["status"] == "200":
            row = by_tenant.setdefault(str(r["tenant"]), [0, 0])
            row[0] += int(r["prompt_tokens"])
            row[1] += 1
    assert sum(v[0] for v in by_tenant.values()) == sum(r["usage"]["prompt_tokens"] for r in served)
    for name, (prompt, requests) in by_tenant.items():
        assert (
            books[name]["input_tokens"] == prompt
            and books[name]["requests"] - books[name]["failed_requests"] == requests
        )
    assert by_tenant[tenant][1] == 6
