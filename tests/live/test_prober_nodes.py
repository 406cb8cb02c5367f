"""The prober takes replicas out for their node too: a firing node-fatal Xid alert and a cordoned Kubernetes
node (from the real Prometheus, evaluating the fabric's own Xid rules over a test exporter), and a node the
site repo marks cordoned (`fabric nodes cordon`), each before any re-plan lands; and back in when it ends."""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from llm_fabric.cli.main import main
from llm_fabric.distribution import data_path
from llm_fabric.engine.process import free_port
from llm_fabric.kube.options import StackOptions
from llm_fabric.observability.rules import rule_groups
from llm_fabric.plan.document import load_plan
from tests.fixtures.prometheus import PrometheusServer, scrape_job
from tests.fixtures.static_http import static_http
from tests.live.plans import plan_of, planned_site

# dcgm-exporter's Xid series for one GPU of the B300 node, and kube-state-metrics' cordon of the H200 node
EXPOSITION = (
    "# TYPE DCGM_FI_DEV_XID_ERRORS gauge\n"
    'DCGM_FI_DEV_XID_ERRORS{gpu="3",UUID="GPU-30130bfd",Hostname="dgx-b300-01",node="dgx-b300-01"} 79\n'
    "# TYPE kube_node_spec_unschedulable gauge\n"
    'kube_node_spec_unschedulable{node="hgx-h200-ceitec"} 1\n'
    'kube_node_spec_unschedulable{node="dgx-b200-01"} 0\n'
)


@pytest.fixture
def exporter() -> Iterator[str]:
    with static_http({"/metrics": ("text/plain; version=0.0.4", EXPOSITION)}) as address:
        yield address


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.loads(response.read())


def _rotation(url: str) -> dict[str, dict[str, Any]]:
    return {r["replica"]: r for r in _get(url + "/rotation")["replicas"]}


def test_a_node_fatal_xid_a_cordoned_node_and_a_site_repo_cordon_take_their_replicas_out(
    prometheus_factory: Callable[..., PrometheusServer], exporter: str, tmp_path: Path
) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(yaml.safe_dump({"groups": rule_groups(StackOptions(site_repo=data_path("examples")))}))
    prom = prometheus_factory(scrape_configs=[scrape_job("dcgm", [exporter])], rule_files=[rules])
    prom.wait_for('ALERTS{alertname="FabricGpuXidNodeFatal",alertstate="firing"}')
    repo = planned_site(tmp_path / "site")
    plan_file = plan_of(repo, tmp_path / "plan.json")
    plan = load_plan(plan_file)
    on = {
        n: sorted(f"{r.deployment}/{r.index}" for r in plan.replicas if r.node == n)
        for n in {r.node for r in plan.replicas}
    }
    assert on["dgx-b300-01"] and on["hgx-h200-ceitec"] and on["dgx-b200-01"]

    port = free_port()
    argv = [
        str(Path(sys.executable).parent / "fabric"), "canary", "-C", str(repo), "--plan", str(plan_file),
        "--endpoint", "qwen3-5/0=http://127.0.0.1:9", "--prompt", "count", "--timeout", "1",
        "--serve", f"127.0.0.1:{port}", "--every", "1", "--prometheus", prom.url,
    ]  # fmt: skip
    log = tmp_path / "prober.log"
    with log.open("wb") as out:
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        found: dict[str, dict[str, Any]] = {}
        while time.monotonic() < deadline and not found:
            with contextlib.suppress(OSError, ValueError):
                # every replica is listed from the start (in, unknown): wait for the first run's findings
                if _get(url + "/rotation")["checked_at"] is not None:
                    found = _rotation(url)
            time.sleep(0.5)
        assert found, log.read_text()
        for replica in on["dgx-b300-01"]:
            assert found[replica]["in_rotation"] is False
            assert "dgx-b300-01: node-fatal Xid alert FabricGpuXidNodeFatal" in found[replica]["reasons"]
        # the only replica asked fails its canary with no sibling passing and no reference: held in
        # (live/prober.canary_holds), out for its node alone
        assert found["qwen3-5/0"]["state"] == "fail" and found["qwen3-5/0"]["held"].startswith(
            "every replica of qwen3-5 fails its canary"
        )
        assert not any(r.startswith("canary:") for r in found["qwen3-5/0"]["reasons"])
        for replica in on["hgx-h200-ceitec"]:
            assert found[replica]["reasons"] == ["hgx-h200-ceitec: node cordoned (unschedulable)"]
        for replica in on["dgx-b200-01"]:
            assert found[replica]["in_rotation"] is True and found[replica]["state"] == "unknown"

        # the site repo's own cordon: the next run takes the B200 node's replicas out, no re-plan needed
        with contextlib.redirect_stdout(io.StringIO()):
            assert main(["nodes", "cordon", "dgx-b200-01", "--site-repo", str(repo)]) == 0
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and _rotation(url)[on["dgx-b200-01"][0]]["in_rotation"]:
            time.sleep(0.5)
        assert _rotation(url)[on["dgx-b200-01"][0]]["reasons"] == ["dgx-b200-01: node cordoned in the site repo"]
        # uncordoned: back in with the next run, as a replica whose canary passes again is
        with contextlib.redirect_stdout(io.StringIO()):
            assert main(["nodes", "uncordon", "dgx-b200-01", "--site-repo", str(repo)]) == 0
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not _rotation(url)[on["dgx-b200-01"][0]]["in_rotation"]:
            time.sleep(0.5)
        assert _rotation(url)[on["dgx-b200-01"][0]]["reasons"] == []
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=30)
