"""The gateway's hooks in the real LiteLLM proxy: keys, allowlists, limits, sovereignty, priority, metering."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

from tests.gateway.conftest import Gateway


def test_a_tenant_key_is_served_and_an_unknown_key_is_401(gateway: Gateway) -> None:
    status, _, body = gateway.chat("muni-researchers", "qwen3-5", "hello tenant:muni-researchers")
    assert status == 200, body
    assert body["choices"][0]["message"]["content"] == "ok"
    status, _, body = gateway.chat(None, "qwen3-5", "hello", key="fk-not-a-key")
    assert status == 401, body
    assert "unknown API key" in json.dumps(body)
