"""The canary prober's writes under attack (issue 39, F6), against the real `live.prober.serve`.

A drain notice takes a replica out of the gateway's rotation, so whoever may send one can empty a
deployment: a notice without the prober's write token is refused (401, a body that says what is
missing), a prober without a token takes no writes at all, and no notice, however often renewed,
keeps a replica out past the cap. tests/deploy/test_ingress_render.py checks who may reach the prober.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from llm_fabric.live import prober as prober_module
from tests.gateway.test_drain_prober import TOKEN, Prober, post, rotation
from tests.gateway.test_drain_prober import prober as prober  # the fixture, with its write token

NEEDS_TOKEN = "a write needs the prober's write token: `Authorization: Bearer TOKEN` (the Secret fabric-canary-token)"


def test_a_drain_notice_without_the_write_token_is_refused_and_takes_nothing_out(prober: Prober) -> None:
    url = prober.url + "/replicas/qwen3-5/0/drain"
    assert post(url, b'{"seconds": 3600}', token=None) == (
        401,
        {"error": f"POST /replicas/qwen3-5/0/drain: {NEEDS_TOKEN}"},
    )
    assert post(url, b'{"seconds": 3600}', token="guessed")[0] == 401
    assert post(url, b"", token=TOKEN + "x")[0] == 401
    # refused before the path is looked at: an unauthorised caller learns nothing of the replicas
    assert post(prober.url + "/replicas/nope/0/drain", token=None)[0] == 401
    assert all(r["in_rotation"] for r in rotation(prober).values())
    assert post(url, b'{"seconds": 60}')[0] == 200  # the token's holder (the preStop) is heard
    assert rotation(prober)["qwen3-5/0"]["reasons"] == ["draining"]


def test_a_prober_without_its_token_takes_no_writes(tmp_path: Path, prober: Prober) -> None:
    (tmp_path / "token").unlink()  # the Secret is absent (its volume is optional): nobody may write
    status, body = post(prober.url + "/replicas/qwen3-5/0/drain", token=TOKEN)
    assert status == 401
    assert "this prober takes no writes: its write token" in body["error"] and "cannot be read" in body["error"]
    assert rotation(prober)["qwen3-5/0"]["in_rotation"] is True
    # `fabric canary --serve` without --write-token-file: the same, said so
    assert prober_module.write_refusal(None, f"Bearer {TOKEN}") == (
        "this prober takes no writes: it was started without a write token (--write-token-file)"
    )


def test_renewing_a_drain_mark_cannot_keep_a_replica_out_forever(
    prober: Prober, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(prober_module, "DRAIN_MARK_MAX_S", 2.0)  # the cap, an hour in the cluster, shortened
    url = prober.url + "/replicas/qwen3-5/1/drain"
    started = time.monotonic()
    assert post(url, b'{"seconds": 1.5}')[0] == 200
    time.sleep(1.0)
    status, renewed = post(url, b'{"seconds": 1.5}')  # renewed: up to the cap, 2 s after the first notice
    assert status == 200 and renewed["seconds"] <= 2.0 - (time.monotonic() - started) + 0.05
    time.sleep(0.5)
    status, body = post(url, b'{"seconds": 1.5}')
    assert status == 409, body
    assert body["error"].endswith(
        "is out by drain notices until the cap (2 s after the first notice); it is not renewed"
    )
    while time.monotonic() - started < 2.1:
        time.sleep(0.05)
    assert rotation(prober)["qwen3-5/1"]["in_rotation"] is True  # out no longer than the cap
    status, body = post(url, b'{"seconds": 1.5}')  # and not marked again until it has been back as long
    assert status == 409 and "was out by drain notices for 2 s; it takes none for" in body["error"], body
    assert rotation(prober)["qwen3-5/1"]["in_rotation"] is True
    while time.monotonic() - started < 4.2:
        time.sleep(0.05)
    assert post(url, b'{"seconds": 0.5}')[0] == 200
