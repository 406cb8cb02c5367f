"""`fabric nodes remediate` against a Prometheus that lies (issue 39, F5): the attacker is Prometheus, so
a fake one on 127.0.0.1 answers the HTTP API with the alerts it likes; the site repo, its signed
manifests, git and the CLI are the real ones.

What it must not do: sign a cordon for a GPU no signed manifest lists, let one malformed alert stop the
genuine fault of the same poll, or sign with a key nobody gave it.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.fixtures.cli import fabric, git
from tests.nodes.test_remediate import refs, remediate, uuid_of


class LyingPrometheus:
    """/api/v1/rules with the GPU rule loaded and /api/v1/alerts serving `alerts` as they are."""

    def __init__(self) -> None:
        self.alerts: list[dict[str, Any]] = []
        served = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path.startswith("/api/v1/rules"):
                    rule = {"name": "FabricGpuXidNodeFatal", "type": "alerting"}
                    data: dict[str, Any] = {"groups": [{"name": "gpu", "rules": [rule]}]}
                else:
                    data = {"alerts": served.alerts}
                body = json.dumps({"status": "success", "data": data}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def fire(self, node: str, gpu: int, uuid: str, xid: int = 79) -> None:
        labels = {"alertname": "FabricGpuXidNodeFatal", "node": node, "gpu": str(gpu), "UUID": uuid}
        self.alerts.append(
            {"labels": labels, "state": "firing", "value": f"{xid}e+00", "activeAt": "2026-01-01T00:00:00Z"}
        )


@pytest.fixture
def lying() -> Iterator[LyingPrometheus]:
    served = LyingPrometheus()
    yield served
    served.server.shutdown()
    served.server.server_close()


def nodes_of(site: Path) -> list[str]:
    return sorted(p.stem for p in (site / "nodes").glob("*.yaml"))


def test_alerts_for_gpus_no_signed_manifest_lists_get_no_branch_and_do_not_stop_the_genuine_fault(
    site_repo: Path, lying: LyingPrometheus
) -> None:
    for n, node in enumerate(nodes_of(site_repo)):  # every node, a GPU in no manifest
        lying.fire(node, 0, f"GPU-00000000-0000-4000-8000-{n:012d}")
    # a node label that is no name, though git finds a manifest under it (today's code aborted the run on it)
    lying.fire("../nodes/hgx-h200-ceitec", 0, uuid_of(site_repo, "hgx-h200-ceitec", 0))
    lying.fire("hgx-h200-ceitec", 1, uuid_of(site_repo, "hgx-h200-ceitec", 2))  # a real UUID at the wrong index
    lying.fire("gpu99", 0, uuid_of(site_repo, "dgx-b200-01", 0))  # a real UUID on a node that does not exist
    genuine = uuid_of(site_repo, "hgx-h100-tuwien", 3)
    lying.fire("hgx-h100-tuwien", 3, genuine)  # the genuine fault of the same poll
    branches = refs(site_repo)

    done = remediate(site_repo, "--prometheus", lying.url)

    assert done.returncode == 0, done.stdout + done.stderr
    for n, node in enumerate(nodes_of(site_repo)):
        assert (
            f"skipped alert FabricGpuXidNodeFatal (Xid 79 on {node}, GPU 0 (GPU-00000000-0000-4000-8000-{n:012d})): "
            f"the alert names UUID GPU-00000000-0000-4000-8000-{n:012d}, which the signed manifest of `{node}` "
            "does not list; nothing done"
        ) in done.stdout
    bad_label = "skipped alert FabricGpuXidNodeFatal: its node label `../nodes/hgx-h200-ceitec` is not a valid name"
    assert bad_label in done.stdout
    assert "where the signed manifest of `hgx-h200-ceitec` does not; nothing done" in done.stdout
    assert "`gpu99` is no node of this site repo (nodes/ on main); nothing done" in done.stdout
    # only the genuine fault's branch, signed, cordoning the node whose manifest lists the GPU
    assert f"on hgx-h100-tuwien (GPU 3 ({genuine})): cordoned `hgx-h100-tuwien` on branch" in done.stdout
    made = sorted(set(refs(site_repo).splitlines()) - set(branches.splitlines()))
    assert [line.split()[0] for line in made] == ["refs/heads/remediate/hgx-h100-tuwien-xid79"]
    manifest = yaml.safe_load(git(site_repo, "show", "remediate/hgx-h100-tuwien-xid79:nodes/hgx-h100-tuwien.yaml"))
    assert manifest["status"] == "cordoned"


def test_remediate_signs_only_with_a_key_it_was_given(
    site_repo: Path, lying: LyingPrometheus, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("FABRIC_ENROLLMENT_KEY", raising=False)
    lying.fire("hgx-h100-tuwien", 3, uuid_of(site_repo, "hgx-h100-tuwien", 3))
    assert (site_repo.parent / "site.enrollment.key").is_file()  # the default place holds the key, unasked
    branches = refs(site_repo)

    done = fabric("nodes", "remediate", "-C", str(site_repo), "--prometheus", lying.url)

    assert done.returncode == 2, done.stdout + done.stderr
    assert "`fabric nodes remediate` signs cordons: give the key it signs with (--key PATH or " in done.stderr
    assert "the key beside the site repo is not taken by default here" in done.stderr
    assert refs(site_repo) == branches
