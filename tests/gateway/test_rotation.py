"""The gateway's rotation against a served `/rotation` document: which LiteLLM entries it leaves out,
and that it fails open (an unreadable prober, or nothing left to route to, takes nothing out).

The whole path (the real prober, the real proxy, the real engine) is tests/live/test_canary.py's."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest
from tests.fixtures.static_http import static_http

from llm_fabric.gateway.runtime.rotation import Rotation


def _replica(deployment: str, index: int, site: str, inside: bool) -> dict[str, Any]:
    reasons = [] if inside else ["canary: count: no answer: timed out"]
    return {"replica": f"{deployment}/{index}", "deployment": deployment, "index": index, "site": site,
            "in_rotation": inside, "reasons": reasons}  # fmt: skip


DOCUMENT = {
    "replicas": [
        _replica("qwen3-5", 0, "brno", True),
        _replica("qwen3-5", 1, "brno", False),
        _replica("gpt-oss-120b", 0, "brno", False),
        _replica("gpt-oss-120b", 1, "vienna", True),
    ]
}


@pytest.fixture
def prober() -> Iterator[str]:
    with static_http({"/rotation": ("application/json", json.dumps(DOCUMENT))}) as address:
        yield f"http://{address}"


def entry(deployment: str, site: str, index: int | None = None) -> dict[str, Any]:
    info: dict[str, Any] = {"fabric_site": site, "fabric_deployment": deployment}
    if index is not None:
        info["fabric_replica"] = f"{deployment}/{index}"
    return {"model_name": f"{deployment}@public", "model_info": info}


def test_a_replica_entry_goes_out_with_its_replica_and_a_site_entry_with_all_of_its_replicas(prober: str) -> None:
    rotation = Rotation(prober)
    replicas = [entry("qwen3-5", "brno", 0), entry("qwen3-5", "brno", 1)]
    assert asyncio.run(rotation.keep(replicas)) == [replicas[0]]
    # a site's Service: out only where every replica of the deployment at that site is out
    sites = [entry("gpt-oss-120b", "brno"), entry("gpt-oss-120b", "vienna")]
    assert asyncio.run(rotation.keep(sites)) == [sites[1]]
    assert asyncio.run(rotation.keep([entry("qwen3-5", "brno")])) == [entry("qwen3-5", "brno")]


def test_it_fails_open(prober: str) -> None:
    only_out = [entry("qwen3-5", "brno", 1)]
    assert asyncio.run(Rotation(prober).keep(only_out)) == only_out  # nothing left: the list as it was
    unreachable = Rotation("http://127.0.0.1:9")
    both = [entry("qwen3-5", "brno", 0), entry("qwen3-5", "brno", 1)]
    assert asyncio.run(unreachable.keep(both)) == both
    assert asyncio.run(Rotation(None).keep(both)) == both  # no prober configured
