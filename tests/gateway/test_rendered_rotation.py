"""Issue 39 F7: in a rendered cluster the canary's rotation takes a replica out of the gateway's routing.

The reference federation (mistral-small-4 with two replicas at brno) rendered by the real commands;
brno's gateway config, read from the rendered ConfigMap, has an entry per replica, each at a direct
Service the render also holds (selecting only that replica's pods); the real prober's rotation document,
with one replica draining, makes the gateway's rotation filter leave that replica's entry out of its
model group and the other replica's in (an Xid alert or a failed canary marks a replica out the same way;
the prober's tests show those marks).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
import yaml
from tests.deploy.rendered_site import Rendered
from tests.fixtures.cli import fabric

from llm_fabric.gateway.runtime.rotation import Rotation, parse_rotation
from llm_fabric.kube import labels as L
from llm_fabric.live.canary import CanaryRun
from llm_fabric.live.prober import ProberState, rotation
from llm_fabric.plan.document import load_plan


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> Rendered:
    root = tmp_path_factory.mktemp("rendered-rotation")
    site, plan, out = root / "site", root / "plan.json", root / "out"
    assert fabric("init", str(site), "--example", "cerit-sc").returncode == 0
    recipe = site / "deployments" / "mistral-small-4.yaml"
    recipe.write_text(recipe.read_text().replace("\nreplicas: 1\n", "\nreplicas: 2\n"))
    for args in (
        ("plan", "-C", str(site), "-o", str(plan)),
        ("render", "-C", str(site), "--all-sites", "--plan", str(plan), "--out", str(out), "--check"),
    ):
        done = fabric(*args)
        assert done.returncode == 0, f"fabric {' '.join(args)}: {done.stderr}{done.stdout}"
    return Rendered(out, plan)


def _objects(rendered: Rendered, site: str) -> list[dict[str, Any]]:
    return [yaml.safe_load(p.read_text()) for p in sorted((rendered.out / site).rglob("*.yaml"))]


def _litellm(rendered: Rendered, site: str) -> dict[str, Any]:
    (config,) = [
        o for o in _objects(rendered, site) if o["kind"] == "ConfigMap" and o["metadata"]["name"] == "fabric-gateway"
    ]
    loaded: dict[str, Any] = yaml.safe_load(config["data"]["litellm-config.yaml"])
    return loaded


def test_each_rendered_replica_is_an_entry_of_its_own_at_its_direct_service(rendered: Rendered) -> None:
    plan = load_plan(rendered.plan)
    services = {o["metadata"]["name"]: o for o in _objects(rendered, "brno") if o["kind"] == "Service"}
    entries = [e for e in _litellm(rendered, "brno")["model_list"] if "fabric_relay" not in e["model_info"]]
    own = {e["model_info"]["fabric_replica"] for e in entries if "fabric_replica" in e["model_info"]}
    assert own == {f"{r.deployment}/{r.index}" for r in plan.replicas if r.site == "brno"}, own
    for e in entries:
        if "fabric_external" in e["model_info"] or e["litellm_params"]["model"].startswith(("openai/", "anthropic/")):
            continue
        host = e["litellm_params"]["api_base"].removeprefix("http://").split(".", 1)[0]
        assert host in services, f"{e['model_info']['id']} routes to {host}, which is not rendered"
        selector = services[host]["spec"]["selector"]
        assert L.REPLICA in selector, f"{host} selects no single replica: {selector}"


def test_a_draining_replica_leaves_the_rendered_rotation_and_its_sibling_stays(rendered: Rendered) -> None:
    plan = load_plan(rendered.plan)
    pair = sorted((r for r in plan.replicas if r.deployment == "mistral-small-4"), key=lambda r: r.index)
    assert [r.site for r in pair] == ["brno", "brno"], pair
    prober = ProberState()
    run = CanaryRun([], [])
    prober.update(run, rotation(plan, run, {}), [])
    prober.drain("mistral-small-4", 0, 60)  # what the replica's preStop tells the prober
    out = parse_rotation(prober.rotation_document())
    assert out.replicas == {"mistral-small-4/0"}, out
    now = time.monotonic()
    gateway = Rotation("http://prober.invalid", out=out, fetched_at=now, tried_at=now)
    model_list = _litellm(rendered, "brno")["model_list"]
    group = [e for e in model_list if e["model_name"] == "mistral-small-4@public"]
    assert {e["model_info"].get("fabric_replica") for e in group} == {"mistral-small-4/0", "mistral-small-4/1"}
    loop = asyncio.new_event_loop()  # not asyncio.run: it leaves no current loop for later tests (Pulumi's)
    try:
        kept = loop.run_until_complete(gateway.keep(group))
    finally:
        loop.close()
    assert [e["model_info"]["fabric_replica"] for e in kept] == ["mistral-small-4/1"], kept
