"""The prober's drain endpoint (`POST /replicas/DEPLOYMENT/INDEX/drain`), served by the real `live.prober.serve`
with a cycle the test controls: a notice takes the replica out at once (before any cycle too), a repeated
one changes nothing, a mark expires by itself, and a path or body it does not take is refused with a
message. Every write carries the prober's write token (tests/live/test_prober_attacks.py: the writes without it).
tests/gateway/test_drain.py runs the notice from the rendered preStop through the real proxy."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from llm_fabric.engine.process import free_port
from llm_fabric.live.canary import CanaryRun
from llm_fabric.live.prober import DRAIN_MARK_S, RotationEntry, serve

TOKEN = "a-test-write-token"  # the Secret's value in the cluster; a file here
REPLICAS = [
    RotationEntry("qwen3-5", 0, "brno", "dgx-b300-01", "unknown", []),
    RotationEntry("qwen3-5", 1, "brno", "dgx-b300-01", "unknown", []),
]


@dataclass
class Prober:
    url: str
    first_cycle: threading.Event = field(default_factory=threading.Event)  # set: the first cycle may end
    release: threading.Event = field(default_factory=threading.Event)  # set: the prober stops


@pytest.fixture
def prober(tmp_path: Path) -> Iterator[Prober]:
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")  # as a Secret's file may end
    port = free_port()
    started = Prober(f"http://127.0.0.1:{port}")
    cycles = 0

    def cycle() -> tuple[CanaryRun, list[RotationEntry], list[str]]:
        nonlocal cycles
        cycles += 1
        (started.first_cycle if cycles == 1 else started.release).wait(30)
        failing = RotationEntry("qwen3-5", 1, "brno", "dgx-b300-01", "fail", ["canary: count: no answer"])
        return CanaryRun([], []), [REPLICAS[0], failing], []

    thread = threading.Thread(
        target=serve,
        args=(("127.0.0.1", port), cycle, 0.1),
        kwargs={"cycles": 2, "replicas": REPLICAS, "write_token": token},
        daemon=True,
    )
    thread.start()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            get(started.url + "/healthz")
            break
        except OSError:
            time.sleep(0.05)
    yield started
    started.first_cycle.set()
    started.release.set()
    thread.join(10)


def get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.loads(response.read())


def post(url: str, body: bytes = b"", token: str | None = TOKEN) -> tuple[int, Any]:
    headers = {"Content-Type": "application/json"} | ({"Authorization": f"Bearer {token}"} if token else {})
    request = urllib.request.Request(url, data=body, method="POST", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def rotation(prober: Prober) -> dict[str, dict[str, Any]]:
    return {r["replica"]: r for r in get(prober.url + "/rotation")["replicas"]}


def test_a_notice_takes_the_replica_out_at_once_and_again_changes_nothing(prober: Prober) -> None:
    # before the first cycle: the plan's replicas are listed, all in, and a notice is kept
    assert {k: v["in_rotation"] for k, v in rotation(prober).items()} == {"qwen3-5/0": True, "qwen3-5/1": True}
    status, first = post(prober.url + "/replicas/qwen3-5/0/drain", b'{"seconds": 60}')
    assert status == 200
    assert first["replica"] == "qwen3-5/0" and first["draining"] is True and 59 <= first["seconds"] <= 60
    out = rotation(prober)["qwen3-5/0"]
    assert out["in_rotation"] is False and out["reasons"] == ["draining"]
    assert get(prober.url + "/replicas/qwen3-5/0") == {"state": "unknown", "replica": "qwen3-5/0", "in_rotation": False}
    # idempotent: the same mark, the same reason once; a notice without a body holds DRAIN_MARK_S
    status, again = post(prober.url + "/replicas/qwen3-5/0/drain")
    assert status == 200 and again["since"] == first["since"] and DRAIN_MARK_S - 1 <= again["seconds"] <= DRAIN_MARK_S
    assert rotation(prober)["qwen3-5/0"]["reasons"] == ["draining"]
    # the cycle's own findings come with it, and the mark outlives the cycle
    prober.first_cycle.set()
    deadline = time.monotonic() + 10
    while rotation(prober)["qwen3-5/1"]["in_rotation"] and time.monotonic() < deadline:
        time.sleep(0.05)
    post(prober.url + "/replicas/qwen3-5/1/drain")
    found = rotation(prober)
    assert found["qwen3-5/1"]["reasons"] == ["canary: count: no answer", "draining"]
    assert found["qwen3-5/0"]["reasons"] == ["draining"]
    metrics = urllib.request.urlopen(prober.url + "/metrics", timeout=5).read().decode()
    assert 'fabric_canary_in_rotation{deployment="qwen3-5",node="dgx-b300-01",replica="0",site="brno"} 0.0' in metrics


def test_a_mark_expires_by_itself(prober: Prober) -> None:
    status, _ = post(prober.url + "/replicas/qwen3-5/1/drain", b'{"seconds": 0.5}')
    assert status == 200 and rotation(prober)["qwen3-5/1"]["reasons"] == ["draining"]
    time.sleep(0.7)
    back = rotation(prober)["qwen3-5/1"]
    assert back["in_rotation"] is True and back["reasons"] == []


def test_what_it_does_not_take_is_refused_with_a_message(prober: Prober) -> None:
    assert post(prober.url + "/replicas/qwen3-5/drain") == (
        404,
        {"error": "POST /replicas/qwen3-5/drain: only POST /replicas/DEPLOYMENT/INDEX/drain"},
    )
    assert post(prober.url + "/rotation") == (
        404,
        {"error": "POST /rotation: only POST /replicas/DEPLOYMENT/INDEX/drain"},
    )
    assert post(prober.url + "/replicas/nope/0/drain") == (
        404,
        {"error": "POST /replicas/nope/0/drain: no replica nope/0 in the prober's plan"},
    )
    assert post(prober.url + "/replicas/qwen3-5/7/drain")[1]["error"].endswith(
        "no replica qwen3-5/7 in the prober's plan"
    )
    assert post(prober.url + "/replicas/qwen3-5/0/drain", b"soon") == (
        400,
        {"error": 'POST /replicas/qwen3-5/0/drain: the body is not JSON: send {"seconds": S} or nothing'},
    )
    assert post(prober.url + "/replicas/qwen3-5/0/drain", b'{"seconds": -1}') == (
        400,
        {"error": "POST /replicas/qwen3-5/0/drain: `seconds` must be a number in (0, 3600], not -1"},
    )
    # nothing refused took anything out
    assert all(r["in_rotation"] for r in rotation(prober).values())
